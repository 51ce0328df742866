"""Shared fixtures. Each test session gets its own ROS domain on loopback, so nodes
left over from another run can never answer this run's tests."""

import os
from pathlib import Path

import pytest

# RM_TEST_ROS_DOMAIN_ID pins the domain when several checkouts test on one machine at once.
os.environ["ROS_DOMAIN_ID"] = os.environ.get("RM_TEST_ROS_DOMAIN_ID") or str(1 + os.getpid() % 100)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

EXAMPLE_MANIFEST = Path(__file__).resolve().parent.parent / "robot_memory" / "config" / \
    "example_manifest.yaml"


@pytest.fixture(autouse=True, scope="session")
def ros_home(tmp_path_factory):
    """A ROS home of the session's: a command run without --db (its store defaults to
    $ROS_HOME/robot_memory/) and the nodes' logs stay out of the user's ~/.ros."""
    path = tmp_path_factory.mktemp("ros_home")
    os.environ["ROS_HOME"] = str(path)
    return path


@pytest.fixture
def manifest_file(tmp_path):
    path = tmp_path / "manifest.yaml"
    path.write_text(EXAMPLE_MANIFEST.read_text())
    return path


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite:///{tmp_path / 'memory.db'}"


# A real PostgreSQL server, started once per session when a test asks for it.
from postgres_server import own_pg_server, pg_server, pg_url  # noqa: E402,F401
