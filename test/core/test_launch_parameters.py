"""The rule of what the launch file passes each node, in what order
(robot_memory/operation/launch_parameters.py), without launch_ros. What rcl makes of those
sources, with real node processes: test/ros/test_launch_parameter_order.py."""

import pytest
import yaml

from robot_memory.operation.launch_parameters import (ParamsFileError, argument_values,
                                                      arguments_document, overruled,
                                                      parameter_sources, section_paths)
from robot_memory.operation.parameters import node_names

TYPED = {"manifest_path": "/m.yaml", "certified_hash": "0123456789",
         "certified_hash_file": "", "database_url": "sqlite:////b.db", "use_sim_time": "false"}
USER = {"/**/consolidator": {"ros__parameters": {
            "database_url": "sqlite:////a.db", "period_s": 60.0}},
        "/**": {"ros__parameters": {"use_sim_time": True}},
        "robot_7": {"manifest_verifier": {"ros__parameters": {"certified_hash": "000"}}}}


def test_the_arguments_keep_their_types():
    values = argument_values(TYPED)
    assert values["certified_hash"] == "0123456789"  # digits stay a string
    assert values["use_sim_time"] is False
    with pytest.raises(ValueError, match="use_sim_time"):
        argument_values({"use_sim_time": "yes"})


def test_the_arguments_go_under_every_section_of_the_params_file_and_every_node():
    assert section_paths(USER) == [("/**/consolidator",), ("/**",),
                                   ("robot_7", "manifest_verifier")]
    document = arguments_document(USER, {"database_url": "sqlite:////b.db"})
    assert document["/**/consolidator"]["ros__parameters"] == {
        "database_url": "sqlite:////b.db"}
    assert document["robot_7"]["manifest_verifier"]["ros__parameters"] == {
        "database_url": "sqlite:////b.db"}
    assert document["/**"]["ros__parameters"] == {"database_url": "sqlite:////b.db"}
    assert list(arguments_document({}, {"x": 1})) == ["/**"]


def test_each_node_is_given_defaults_then_the_params_file_then_its_arguments(tmp_path):
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(USER))
    for node in node_names():
        sources = parameter_sources(node, str(params_file), TYPED)
        assert sources.params_file == str(params_file)
        defaults = sources.defaults[f"/**/{node}"]["ros__parameters"]
        assert "database_url" not in defaults  # an argument, not a default
        given = sources.arguments["/**"]["ros__parameters"]
        assert given["database_url"] == "sqlite:////b.db" and given["use_sim_time"] is False
        assert ("certified_hash" in given) == (node == "manifest_verifier")
    one = parameter_sources(None, str(params_file), TYPED)
    assert sorted(one.defaults) == sorted(f"/**/{node}" for node in node_names())
    assert one.arguments["/**"]["ros__parameters"]["certified_hash"] == "0123456789"


def test_what_the_arguments_replace_is_named():
    replaced = {(o.section, o.name) for o in overruled(USER, argument_values(TYPED))}
    assert replaced == {("/**/consolidator", "database_url"), ("/**", "use_sim_time"),
                        ("robot_7/manifest_verifier", "certified_hash")}


@pytest.mark.parametrize("text", ["[1, 2]", "a: [b", "just text"])
def test_a_params_file_that_is_not_one_is_refused_by_name(tmp_path, text):
    params_file = tmp_path / "bad.yaml"
    params_file.write_text(text)
    with pytest.raises(ParamsFileError, match="bad.yaml"):
        parameter_sources("consolidator", str(params_file), TYPED)
