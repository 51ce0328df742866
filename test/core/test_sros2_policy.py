"""The shipped SROS2 policy (robot_memory/config/sros2_policy.xml) has the shape sros2's
policy schema 0.2.0 gives it: well-formed, enclaves of profiles of topics and services
granted with ALLOW; one enclave per node and one for the one process, which grants
exactly the union of the four; the example clients ask only for what the nodes offer.
That each node's grants are what it really uses: test/ros/test_sros2_policy_graph.py."""

import xml.etree.ElementTree as ElementTree

from sros2_policy import POLICY, enclaves, grants

from robot_memory.operation.parameters import node_names

# Elements and their attributes in sros2's policy schema (version 0.2.0).
SHAPE = {"policy": {"version"}, "enclaves": set(), "enclave": {"path"}, "profiles": set(),
         "profile": {"ns", "node"}, "topics": {"publish", "subscribe"}, "topic": set(),
         "services": {"reply", "request"}, "service": set()}
CHILDREN = {"policy": {"enclaves"}, "enclaves": {"enclave"}, "enclave": {"profiles"},
            "profiles": {"profile"}, "profile": {"topics", "services"}, "topics": {"topic"},
            "services": {"service"}, "topic": set(), "service": set()}
NODES = [f"/robot_memory/{node}" for node in node_names()]


def test_the_policy_has_the_schemas_shape():
    root = ElementTree.parse(POLICY).getroot()
    assert root.tag == "policy" and root.get("version") == "0.2.0"
    for element in root.iter():
        assert element.tag in SHAPE, element.tag
        assert set(element.attrib) <= SHAPE[element.tag], (element.tag, element.attrib)
        assert {child.tag for child in element} <= CHILDREN[element.tag], element.tag
        if element.tag in ("topics", "services"):
            assert element.attrib and set(element.attrib.values()) == {"ALLOW"}
            assert len(element), "an empty grant"
        if element.tag in ("topic", "service"):
            assert element.text and element.text.strip() == element.text
            assert " " not in element.text and "//" not in element.text


def test_one_enclave_per_node_and_one_for_the_one_process():
    found = enclaves()
    assert set(NODES) <= set(found)
    for path in NODES:
        (profile,) = found[path]
        assert (profile.get("ns"), profile.get("node")) == ("/", path.rsplit("/", 1)[1])
    union = set().union(*(grants(found[path][0]) for path in NODES))
    assert set().union(*map(grants, found["/robot_memory/robot_memory_all"])) == union
    assert all(grants(found[path][0]) for path in NODES)


def test_the_example_clients_ask_only_for_what_the_nodes_offer():
    found = enclaves()
    offered = set().union(*(grants(found[path][0]) for path in NODES))
    published = {name for _, kind, name in offered if kind == "publish"}
    subscribed = {name for _, kind, name in offered if kind == "subscribe"}
    served = {name for _, kind, name in offered if kind == "reply"}
    clients = [path for path in found if path.startswith("/robot_memory/clients/")]
    assert len(clients) == 3
    for path in clients:
        for _, kind, name in grants(found[path][0]):
            if kind == "publish":
                assert name in subscribed, (path, name)
            if kind == "subscribe":
                assert name in published, (path, name)
            if kind == "request":
                assert name in served, (path, name)
    operator = {name for _, kind, name in grants(found["/robot_memory/clients/operator"][0])
                if kind == "request"}
    assert {"/override", "/consolidate", "/manifest_verifier/manage_nodes"} <= operator
    planner = {name for _, kind, name in grants(found["/robot_memory/clients/planner"][0])}
    assert "/override" not in planner and "/consolidate" not in planner
