"""robot_memory.errors: the tree drawn in its docstring is the real one, every exception
class of the core is in it, and foreign errors convert to the right family."""

import errno
import importlib
import inspect
import pkgutil
import re
import sqlite3

import pytest
import yaml
from sqlalchemy import create_engine, exc as sa_exc, text

import robot_memory
from robot_memory import errors
from robot_memory.errors import (InputError, RobotMemoryError, StoreFailure,
                                 StoreIntegrityError, StoreLocked, from_foreign)

from test_ros_boundary import ROS_PACKAGES as ROS_MODULES  # noqa: E402


def _core_modules():
    for info in pkgutil.walk_packages(robot_memory.__path__, "robot_memory."):
        if not info.name.startswith(ROS_MODULES):
            yield importlib.import_module(info.name)


def test_every_exception_class_of_the_core_derives_from_the_base():
    found = []
    for module in _core_modules():
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and \
                    cls.__module__ == module.__name__:
                found.append(cls)
                assert issubclass(cls, RobotMemoryError), (
                    f"{module.__name__}.{name}: make it subclass a family of "
                    f"robot_memory.errors (see the tree in its docstring)")
    assert len(found) >= 12


def test_the_drawn_tree_is_the_real_one():
    lines = [line for line in errors.__doc__.splitlines() if re.search(r"[├└]── |^    \w", line)]
    parents: dict[int, type] = {}
    for line in lines:
        match = re.match(r"^(\s*(?:[│ ]   )*)(?:[├└]── )?([\w.]+)", line)
        depth = len(line) - len(line.lstrip(" │├└─"))
        name = match.group(2)
        module, _, attr = name.rpartition(".")
        if module.startswith("ros"):
            continue  # a node's class: checked in test/ros, the core never imports rclpy
        if module:
            module = f"robot_memory.{module}"
            cls = getattr(importlib.import_module(module), attr)
        else:
            cls = getattr(errors, attr)
        code = re.search(r"exit (\d)", line)
        if code:
            assert cls.exit_code == int(code.group(1)), name
        parent = max((d for d in parents if d < depth), default=None)
        if parent is not None:
            assert issubclass(cls, parents[parent]), f"{name} is not a {parents[parent]}"
        parents = {d: c for d, c in parents.items() if d < depth}
        parents[depth] = cls
    assert len(lines) >= 18


def test_structured_and_plain_forms():
    error = InputError("--jsonl", "missing_file", "no such file")
    assert (str(error), error.field, error.reason, error.detail) == (
        "--jsonl: no such file", "--jsonl", "missing_file", "no such file")
    plain = StoreFailure("store x has schema version 9")
    assert (str(plain), plain.field, plain.reason) == (
        "store x has schema version 9", "", "store_unavailable")


def test_sqlalchemy_errors_convert_by_cause(tmp_path):
    with pytest.raises(sa_exc.NoSuchModuleError) as bad_url:
        create_engine("nosuch://x")
    assert type(from_foreign(bad_url.value, "--db nosuch://x")) is StoreFailure

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"garbage" * 1000)
    with pytest.raises(sa_exc.DatabaseError) as not_db:
        with create_engine(f"sqlite:///{corrupt}").connect() as conn:
            conn.execute(text("SELECT * FROM sqlite_master"))
    assert isinstance(from_foreign(not_db.value, "--db x"), StoreIntegrityError)

    locked = tmp_path / "locked.db"
    holder = sqlite3.connect(locked, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sa_exc.OperationalError) as busy:
            with create_engine(f"sqlite:///{locked}",
                               connect_args={"timeout": 0.05}).connect() as conn:
                conn.execute(text("SELECT * FROM t"))
    finally:
        holder.close()
    converted = from_foreign(busy.value, "--db y")
    assert isinstance(converted, StoreLocked) and converted.exit_code == 5


def test_yaml_and_os_errors_convert_to_input_errors(tmp_path):
    with pytest.raises(yaml.YAMLError) as not_yaml:
        yaml.safe_load("a: [b")
    converted = from_foreign(not_yaml.value, "params.yaml")
    assert isinstance(converted, InputError) and "line 1 column 6" in str(converted)
    assert "\n" not in str(converted)
    missing = from_foreign(FileNotFoundError(errno.ENOENT, "No such file", "/x/y.jsonl"))
    assert (missing.field, missing.reason, missing.exit_code) == (
        "/x/y.jsonl", "missing_file", 3)
    full = from_foreign(OSError(errno.ENOSPC, "No space left on device", "/var/db"))
    assert isinstance(full, StoreFailure) and full.reason == "disk_full"
    assert from_foreign(KeyError("x")) is None
