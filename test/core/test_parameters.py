import pytest
import yaml

from robot_memory.operation.bringup import params_document
from robot_memory.operation.parameters import (node_defaults, node_names, node_parameters,
                                               node_settings)


def test_every_node_declares_the_database_url_with_a_description():
    assert node_names() == ["manifest_verifier", "episodic_logger", "consolidator",
                            "grounding_server"]
    for node in node_names():
        specs = node_parameters(node)
        assert "database_url" in specs
        assert all(spec.description for spec in specs.values())
        for spec in specs.values():
            assert spec.check(spec.default) is None, spec.name


def test_overrides_go_only_to_nodes_that_declare_them():
    settings = node_settings("consolidator", {"period_s": 2.0, "manifest_path": "/m.yaml"})
    assert settings["period_s"] == 2.0 and "manifest_path" not in settings


@pytest.mark.parametrize("name, value, message", [
    ("period_s", -1.0, "below its minimum"),
    ("period_s", "fast", "must be double"),
    ("promotion_min_observations", 2.5, "must be int"),
])
def test_bad_values_are_refused_with_the_reason(name, value, message):
    with pytest.raises(ValueError, match=message):
        node_settings("consolidator", {name: value})


def test_params_file_has_a_section_per_node_and_no_empty_lists():
    document = params_document({"database_url": "sqlite:///x.db"}, use_sim_time=True)
    assert set(document) == {f"/**/{n}" for n in node_names()}
    logger = document["/**/episodic_logger"]["ros__parameters"]
    assert logger["use_sim_time"] is True and "result_topics" not in logger
    assert logger["database_url"] == "sqlite:///x.db"
    assert yaml.safe_load(yaml.safe_dump(document)) == document
    assert node_defaults("episodic_logger")["result_topics"] == []


def test_rules_defaults_match_the_parameter_table():
    from robot_memory.consolidation import RulesConfig
    assert RulesConfig.from_settings(node_defaults("consolidator")) == RulesConfig()


def test_the_default_store_lives_under_ros_home(tmp_path, monkeypatch):
    from robot_memory.operation.parameters import resolve_database_url
    default = node_defaults("consolidator")["database_url"]
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    store = tmp_path / "ros_home" / "robot_memory" / "robot_memory.db"
    assert resolve_database_url(default) == f"sqlite:///{store}"
    assert store.parent.is_dir()  # created as needed
    document = params_document({}, use_sim_time=False)
    assert {section["ros__parameters"]["database_url"] for section in document.values()} \
        == {f"sqlite:///{store}"}
    monkeypatch.delenv("ROS_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_database_url(default) == \
        f"sqlite:///{tmp_path / 'home' / '.ros' / 'robot_memory' / 'robot_memory.db'}"
    # an explicit value is used as it is
    assert resolve_database_url("sqlite:///relative.db") == "sqlite:///relative.db"
    assert resolve_database_url("postgresql+psycopg://h/db") == "postgresql+psycopg://h/db"


def test_the_command_line_uses_the_same_default_store(tmp_path, manifest_file):
    import json
    import os
    import subprocess
    import sys
    lines = tmp_path / "results.jsonl"
    lines.write_text(json.dumps({"stamp": 1.0, "skill_id": "manipulation.grasp",
                                 "success": True}) + "\n")
    env = {**os.environ, "ROS_HOME": str(tmp_path / "ros_home")}
    done = subprocess.run([sys.executable, "-m", "robot_memory.cli", "ingest", "--manifest",
                           str(manifest_file), "--jsonl", str(lines)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ros_home" / "robot_memory" / "robot_memory.db").is_file()
    assert not (tmp_path / "robot_memory.db").exists()
