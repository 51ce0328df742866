"""Reading robot_memory/config/sros2_policy.xml as SROS2 does: each enclave's grants,
names resolved against a profile's namespace and node (absolute `/x` as it is, private
`~/x` under the node, relative `x` under the namespace)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

POLICY = Path(__file__).resolve().parents[1] / "robot_memory" / "config" / "sros2_policy.xml"
# What each grant lets a participant do, by the element and attribute that grant it.
KINDS = {("topics", "publish"): "publish", ("topics", "subscribe"): "subscribe",
         ("services", "reply"): "reply", ("services", "request"): "request"}


def resolve(name: str, namespace: str, node: str) -> str:
    namespace = namespace.rstrip("/")
    if name.startswith("/"):
        return name
    if name.startswith("~/"):
        return f"{namespace}/{node}{name[1:]}"
    return f"{namespace}/{name}"


def enclaves(path: Path = POLICY) -> dict[str, list]:
    """enclave path -> its profile elements."""
    root = ElementTree.parse(path).getroot()
    return {enclave.get("path"): enclave.findall("profiles/profile")
            for enclave in root.findall("enclaves/enclave")}


def grants(profile, namespace: str | None = None) -> set[tuple[str, str, str]]:
    """(node, kind, resolved name) for every ALLOW of a profile; `namespace` replaces the
    profile's ns (the policy is written for the root namespace)."""
    node = profile.get("node")
    ns = profile.get("ns") if namespace is None else namespace
    found = set()
    for group in profile:
        for (tag, attribute), kind in KINDS.items():
            if group.tag == tag and group.get(attribute) == "ALLOW":
                found |= {(node, kind, resolve(item.text.strip(), ns, node)) for item in group}
    return found
