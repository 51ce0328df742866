"""Every way a result comes in admits it alike (intake/admission.py).

Random malformed results, mixed with valid ones, go through every path at once: the
logger's intake without ROS (`Ingest.take_received` on the plain fields, and on the
serialized bytes with the logger's reader; `record_event` on a message object),
`robot-memory ingest` (its function on a JSON-lines file, and once the command in a
process) and `import-bag` (a real rosbag2 bag written with `rosbags`). Each bad result is
written in every form that can carry it (a wrong type has no message form; invalid UTF-8
no plain-data form), and on every path that takes that form:
- every valid result is stored, in order, with the payload the reference validation
  gives it, at its stamp, or at its receipt time when it has none or one too far ahead;
- every bad one is refused with the reason the catalog below gives it, the same on every
  path, and counted by that reason; a privacy refusal leaves its privacy_rejection event
  (field and category), never the value;
- a bad result costs nothing but itself.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rosbags.rosbag2 import StoragePlugin, Writer

from robot_memory.bags.importing import import_bag
from robot_memory.bags.reading import EXECUTION_RESULT_TYPE, make_typestore
from robot_memory.cli.intake import cmd_ingest
from robot_memory.event_kinds import EXECUTION_RESULT, PRIVACY_REJECTION
from robot_memory.intake.ingest import Ingest, Refused
from robot_memory.intake.receipt import RECEIVED, SENT_STAMP
from robot_memory.intake.records import MAX_STAMP_NS, message_fields, validate_record
from robot_memory.wire.execution_result import serialized_result_fields
from robot_memory.store import MemoryStore

A = "a" * 64
S = 10**9
RECEIPT_NS = time.time_ns()  # the Ingest paths' receipt time; the CLI's is its own clock
AHEAD_NS = (2**31 - 1) * S  # years ahead of any receipt, and still a message's int32 sec
TYPESTORE = make_typestore()
TYPES = TYPESTORE.types
ABSENT = object()  # a field left out

DEFAULTS = {"target_class": "", "environment": "", "zone": "", "parameters": {},
            "observations": {}, "failure_reason": "", "duration_s": 0.0, "intent_id": "",
            "notes": ""}


@dataclass(frozen=True)
class Case:
    """One result in each form that can carry it (None, ABSENT: this form cannot).

    fields: the plain data a reader gives (stamp_ns); line: a JSON line (stamp in
    seconds); message: the fields of an ExecutionResult message (parameters as pairs);
    cdr: how its serialized bytes are spoilt (the bag, the logger's topic reader). Plain
    data can be anything, None included: ABSENT is "no plain form".
    reason: None for a valid result; privacy: (field, category) of its refusal."""

    name: str
    fields: Any = ABSENT
    line: bytes | None = None
    message: dict | None = None
    cdr: Any = None
    reason: str | None = None
    privacy: tuple[str, str] | None = None


# -- forms -----------------------------------------------------------------------------
def json_line(fields: dict, stamp: Any = ABSENT) -> bytes:
    """The JSON line of plain fields: the stamp in seconds, exact, as a decimal string."""
    data = {k: v for k, v in fields.items() if k != "stamp_ns"}
    if stamp is ABSENT and "stamp_ns" in fields:
        ns = fields["stamp_ns"]
        stamp = f"{ns // S}.{ns % S:09d}" if type(ns) is int and ns >= 0 else ns
    if stamp is not ABSENT:
        data["stamp"] = stamp
    return json.dumps(data).encode("utf-8") + b"\n"


def message_of(fields: dict) -> dict:
    """The message fields of complete plain fields (defaults filled in)."""
    full = {**DEFAULTS, **fields}
    return {**full, "parameters": list(full["parameters"].items()),
            "observations": list(full["observations"].items())}


def build_message(message: dict):
    stamp_ns = message["stamp_ns"]
    header = TYPES["std_msgs/msg/Header"](stamp=TYPES["builtin_interfaces/msg/Time"](
        sec=stamp_ns // S, nanosec=stamp_ns % S), frame_id="")
    pairs = {kind: [TYPES["robot_memory/msg/KeyValue"](key=k, value=v)
                    for k, v in message[kind]] for kind in ("parameters", "observations")}
    fields = {k: v for k, v in message.items()
              if k not in ("stamp_ns", "parameters", "observations")}
    # A message always has the attempt fields; a result that names no attempt leaves them
    # empty, as a plain result leaves them out.
    fields.setdefault("attempt_id", "")
    fields.setdefault("amends", "")
    return TYPES[EXECUTION_RESULT_TYPE](header=header, **pairs, **fields)


def serialized(case: Case) -> bytes:
    data = bytes(TYPESTORE.serialize_cdr(build_message(case.message), EXECUTION_RESULT_TYPE))
    return case.cdr(data) if case.cdr else data


def everywhere(name: str, fields: dict, reason: str | None = None,
               privacy: tuple[str, str] | None = None, **forms) -> Case:
    """A case whose plain fields are complete enough for every form."""
    return Case(name, fields, forms.get("line", json_line(fields)), message_of(fields),
                reason=reason, privacy=privacy)


def plain_and_json(name: str, fields: Any, reason: str, line: bytes | None = None) -> Case:
    return Case(name, fields, line if line is not None else json_line(fields), reason=reason)


# -- the catalog -----------------------------------------------------------------------
TEXT = st.text(alphabet="abcdefghij _-.é", max_size=30)
NAME = st.sampled_from(["force_n", "speed", "width_m", "grip.mode", "arm/joint_2"])
VALUE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@st.composite
def valid_fields(draw) -> dict:
    success = draw(st.booleans())
    return {"stamp_ns": draw(st.integers(1, 1_700_000_000 * S)),
            "skill_id": draw(st.sampled_from(["manipulation.grasp", "nav.go_to", "pick-2"])),
            "target_class": draw(TEXT), "environment": draw(TEXT), "zone": draw(TEXT),
            "parameters": draw(st.dictionaries(NAME, VALUE, max_size=3)),
            "observations": draw(st.dictionaries(NAME, VALUE, max_size=2)),
            "success": success, "failure_reason": "" if success else draw(TEXT),
            "duration_s": draw(st.floats(0.0, 1e6)), "intent_id": draw(TEXT),
            "notes": draw(TEXT)}


def _replace_bytes(old: bytes, new: bytes, data: bytes) -> bytes:
    assert data.count(old) == 1
    return data.replace(old, new)


def cases_of(f: dict) -> list[Case]:
    """Every valid and malformed variant of one valid result `f`."""
    fields = partial(dict, f)
    without = {k: v for k, v in f.items() if k not in ("zone", "notes", "observations")}
    stamp = partial(Case, line=None, message=None)
    return [
        # valid: complete (the fast path), with defaults left out (pydantic), unstamped,
        # stamped years ahead of its receipt (stored at its receipt, the stamp kept)
        everywhere("valid", fields()),
        Case("defaults", without, json_line(without), message_of(without)),
        everywhere("unstamped", fields(stamp_ns=0)),
        everywhere("ahead", fields(stamp_ns=AHEAD_NS)),
        # what any form carries
        everywhere("empty skill", fields(skill_id=""), "empty_skill_id"),
        everywhere("skill not a name", fields(skill_id="grasp it"), "invalid_value"),
        everywhere("key not a name", fields(parameters={"force n": 1.0}), "invalid_value"),
        everywhere("nan parameter", fields(parameters={"force_n": float("nan")}),
                   "non_finite_value"),
        everywhere("inf observation", fields(observations={"m": float("-inf")}),
                   "non_finite_value"),
        everywhere("nan duration", fields(duration_s=float("nan")), "non_finite_value"),
        everywhere("negative duration", fields(duration_s=-1.0), "invalid_value"),
        everywhere("long notes", fields(notes="n" * 3000), "oversized"),
        everywhere("long target", fields(target_class="t" * 257), "oversized"),
        everywhere("65 parameters", fields(parameters={f"p{i}": 1.0 for i in range(65)}),
                   "oversized"),
        everywhere("contradictory", fields(success=True, failure_reason="slipped"),
                   "contradictory_result"),
        everywhere("negative stamp", fields(stamp_ns=-S), "invalid_value"),
        everywhere("password", fields(notes="login password=hunter2"), "privacy_password",
                   ("notes", "password")),
        everywhere("email", fields(target_class="cup of jane.doe@example.org"),
                   "privacy_email", ("target_class", "email")),
        everywhere("key a secret", fields(parameters={"sk-" + "a" * 30: 1.0}),
                   "privacy_api_key", ("parameters key", "api_key")),
        # a message over the largest valid one: refused unread (a line: its notes)
        everywhere("huge notes", fields(notes="h" * 60_000), "oversized"),
        # plain data and JSON only: types, presence, stamps no message holds
        plain_and_json("skill a number", fields(skill_id=5), "wrong_type"),
        plain_and_json("success a text", fields(success="yes"), "wrong_type"),
        plain_and_json("duration a bool", fields(duration_s=True), "wrong_type"),
        plain_and_json("parameter a text", fields(parameters={"force_n": "high"}),
                       "wrong_type"),
        plain_and_json("nested junk", fields(parameters={"a": {"b": [1, {"c": None}]}}),
                       "wrong_type"),
        plain_and_json("notes a list", fields(notes=[{"x": 1}]), "wrong_type"),
        plain_and_json("no skill", {k: v for k, v in f.items() if k != "skill_id"},
                       "missing_field"),
        plain_and_json("no success", {k: v for k, v in f.items() if k != "success"},
                       "missing_field"),
        plain_and_json("no stamp", {k: v for k, v in f.items() if k != "stamp_ns"},
                       "missing_field"),
        plain_and_json("unknown field", fields(colour="red"), "unknown_field"),
        plain_and_json("a list", [1, 2], "wrong_type", b"[1, 2]\n"),
        plain_and_json("a text", "result", "wrong_type", b'"result"\n'),
        plain_and_json("null", None, "wrong_type", b"null\n"),
        plain_and_json("stamp past int64", fields(stamp_ns=MAX_STAMP_NS + 1), "invalid_value"),
        plain_and_json("stamp overflowing", fields(stamp_ns=10**30), "invalid_value",
                       json_line(f, "1e999999999999")),
        plain_and_json("stamp a huge number", fields(stamp_ns=10**40), "invalid_value",
                       json_line(f, 1e300)),
        plain_and_json("stamp nan", fields(stamp_ns=float("nan")), "non_finite_value"),
        plain_and_json("stamp inf", fields(stamp_ns=float("inf")), "non_finite_value"),
        plain_and_json("stamp a text", fields(stamp_ns="soon"), "wrong_type"),
        plain_and_json("stamp a bool", fields(stamp_ns=True), "wrong_type"),
        # JSON only: what a file holds that no reader of messages gives
        stamp("not utf-8", reason="malformed",
              line=json_line(fields(notes="QQQ")).replace(b"QQQ", b"QQ\xff")),
        stamp("not json", reason="malformed", line=b'{"skill_id": "a", \n'),
        stamp("nested deep", reason="malformed", line=b"[" * 100_000 + b"]" * 100_000),
        stamp("lone surrogate", reason="invalid_value",
              line=json_line(fields(notes="caf\udcff"))),
        stamp("line over 1 MiB", reason="oversized",
              line=json_line(fields(notes="x" * (1 << 20)))),
        # messages only: duplicate keys; and bytes spoilt
        Case("duplicate key", message={**message_of(f), "parameters": [("k", 1.0)] * 2},
             reason="duplicate_key"),
        Case("cut bytes", message=message_of(f), cdr=lambda data: data[:len(data) // 2],
             reason="malformed"),
        Case("notes not utf-8", message=message_of(fields(notes="QQé")),
             cdr=partial(_replace_bytes, "QQé".encode(), b"QQ\xff\xa9"),
             reason="malformed"),
    ]


CATALOG_SIZE = len(cases_of({"stamp_ns": 1, "skill_id": "a", "success": False}))


@st.composite
def streams(draw) -> list[Case]:
    """A few results, valid and malformed, in random order."""
    picks = draw(st.lists(st.tuples(valid_fields(), st.integers(0, CATALOG_SIZE - 1),
                                    st.booleans()), min_size=1, max_size=10))
    # Half of them valid as drawn, the others one variant of the catalog each.
    return [cases_of(f)[index] if bad else everywhere("valid", f)
            for f, index, bad in picks]


# -- the paths -------------------------------------------------------------------------
@dataclass
class Outcome:
    """What one path did with the cases it could take, in their order."""

    refused: list[tuple[str, str]]  # (case name, reason), in order
    counted: dict[str, int]  # the path's count of refusals by reason
    stored: list  # StoredEvent of the execution results, in log order
    privacy: list[tuple[str, str]]  # (field, category) of the privacy_rejection events


def stored_in(url: str) -> tuple[list, list]:
    store = MemoryStore(url)
    try:
        part = store.partition(A)
        return (list(part.events([EXECUTION_RESULT])),
                [(e.payload["field"], e.payload["category"])
                 for e in part.events([PRIVACY_REJECTION])])
    finally:
        store.close()


def through_ingest(cases: list[Case], url: str, form: str) -> Outcome:
    """The logger's intake without ROS: topic results (plain fields, or serialized bytes
    read as the logger reads them, rosbags decoding what it leaves) queued a round at a
    time, or record_event writes of message objects, each acknowledged at its commit."""
    store = MemoryStore(url)
    ingest = Ingest(store.partition(A), flush_period_s=3600.0)
    refused, acks = [], []
    decode = partial(TYPESTORE.deserialize_cdr, typename=EXECUTION_RESULT_TYPE)
    try:
        events = []
        for case in cases:
            if form == "fields":
                taken = ingest.take_received(lambda given: given, _copy(case.fields),
                                             "execution_results", RECEIPT_NS)
            elif form == "cdr":
                taken = ingest.take_received(partial(serialized_result_fields, decode),
                                             serialized(case), "execution_results",
                                             RECEIPT_NS)
            else:
                taken = ingest.take_received(message_fields, build_message(case.message),
                                             "record_event", RECEIPT_NS)
            if isinstance(taken, Refused):
                refused.append((case.name, taken.reason))
            elif form == "record_event":
                acks.append(ingest.record_event(taken))
            else:
                events.append(taken)
        assert ingest.submit_events(events) == 0
        assert ingest.flush(60.0), ingest.last_error
        assert all(ack.result(60.0).seq for ack in acks)
        counted = dict(ingest.rejected)
    finally:
        ingest.close()
        store.close()
    return Outcome(refused, counted, *stored_in(url))


def _copy(value):
    """Plain data as a reader makes it anew (the admission may keep it as the payload)."""
    return json.loads(json.dumps(value)) if isinstance(value, (dict, list)) else value


REJECTED = re.compile(r"^(?P<path>.*):(?P<line>\d+): rejected: .* \(reason (?P<reason>\w+)\)$")


def through_cli(cases: list[Case], tmp: Path) -> Outcome:
    """`robot-memory ingest`'s function on a JSON-lines file, into a real SQLite file."""
    path, url = tmp / "results.jsonl", f"sqlite:///{tmp}/cli.db"
    path.write_bytes(b"".join(case.line if case.line.endswith(b"\n") else case.line + b"\n"
                              for case in cases))
    args = argparse.Namespace(jsonl=str(path), db=url, identity=A, manifest=None,
                              max_clock_ahead_s=60.0)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cmd_ingest(args)
    refusals = [REJECTED.match(line) for line in err.getvalue().splitlines()
                if ": rejected: " in line]
    assert all(refusals), err.getvalue()
    refused = [(cases[int(m["line"]) - 1].name, m["reason"]) for m in refusals]
    assert code == (1 if refused else 0)
    summary = re.search(r"rejected by reason: ([^;\n]*)", out.getvalue())
    counted = {reason: int(n) for reason, n in
               (item.rsplit(" ", 1) for item in summary[1].split(", "))} if summary else {}
    assert f"rejected {len(refused)} lines" in out.getvalue()
    return Outcome(refused, counted, *stored_in(url))


def through_bag(cases: list[Case], tmp: Path) -> Outcome:
    """`import-bag` of a real MCAP bag whose messages are the cases' bytes, received one
    microsecond apart after RECEIPT_NS."""
    url = f"sqlite:///{tmp}/bag.db"
    with Writer(tmp / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/results", EXECUTION_RESULT_TYPE, typestore=TYPESTORE)
        for i, case in enumerate(cases):
            writer.write(conn, RECEIPT_NS + i * 1000, serialized(case))
    store = MemoryStore(url)
    try:
        report = import_bag(store.partition(A), tmp / "bag", progress=False)
    finally:
        store.close()
    times = {RECEIPT_NS + i * 1000: case.name for i, case in enumerate(cases)}
    refused = [(times[r.log_time_ns], r.reason) for r in report.rejections]
    assert report.read == len(cases) and report.imported == len(cases) - len(refused)
    return Outcome(refused, report.rejected_by_reason, *stored_in(url))


# -- what every path must have done --------------------------------------------------
def check(path: str, cases: list[Case], outcome: Outcome, form: str) -> None:
    bad = [case for case in cases if case.reason]
    assert outcome.refused == [(case.name, case.reason) for case in bad], path
    assert outcome.counted == dict(Counter(case.reason for case in bad)), path
    assert outcome.privacy == [case.privacy for case in bad if case.privacy], path
    good = [case for case in cases if not case.reason]
    assert len(outcome.stored) == len(good), path
    for case, event in zip(good, outcome.stored):
        reference = validate_record(_copy(case.fields if form in ("fields", "line")
                                          else {**case.message,
                                                **{k: dict(case.message[k]) for k in
                                                   ("parameters", "observations")}}))
        payload = dict(event.payload)
        received = payload.pop(RECEIVED)
        sent = payload.pop(SENT_STAMP, None)
        assert payload == reference.payload(), (path, case.name)
        if reference.stamp_ns == 0:  # not stamped: its receipt
            assert (event.stamp_ns, sent) == (received, None), (path, case.name)
        elif reference.stamp_ns > received + 60 * S:  # too far ahead: its receipt
            assert (event.stamp_ns, sent) == (received, reference.stamp_ns), (path, case.name)
        else:
            assert (event.stamp_ns, sent) == (reference.stamp_ns, None), (path, case.name)
        assert received >= RECEIPT_NS, path  # the command's: this machine's clock, later


def run_every_path(cases: list[Case], tmp: Path) -> None:
    as_fields = [case for case in cases if case.fields is not ABSENT]
    as_lines = [case for case in cases if case.line is not None]
    as_messages = [case for case in cases if case.message is not None]
    as_objects = [case for case in as_messages if case.cdr is None]
    if as_fields:
        check("fields", as_fields, through_ingest(as_fields, f"sqlite:///{tmp}/f.db",
                                                  "fields"), "fields")
    if as_messages:
        check("cdr", as_messages, through_ingest(as_messages, f"sqlite:///{tmp}/c.db",
                                                 "cdr"), "message")
        check("bag", as_messages, through_bag(as_messages, tmp), "message")
    if as_objects:
        check("record_event", as_objects,
              through_ingest(as_objects, f"sqlite:///{tmp}/r.db", "record_event"), "message")
    if as_lines:
        check("ingest", as_lines, through_cli(as_lines, tmp), "line")


def test_the_whole_catalog_through_every_path(tmp_path):
    """Each variant once, in one stream, on every path that takes its form."""
    seed = {"stamp_ns": 1_600_000_000 * S + 5, "skill_id": "manipulation.grasp",
            "target_class": "glass_cup", "environment": "lab", "zone": "shelf_a",
            "parameters": {"force_n": 25.0}, "observations": {"mass_kg": 0.2},
            "success": False, "failure_reason": "slipped", "duration_s": 1.5,
            "intent_id": "r1", "notes": "ok"}
    cases = cases_of(seed)
    assert len({case.name for case in cases}) == len(cases) == CATALOG_SIZE
    run_every_path(cases, tmp_path)


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases=streams())
def test_random_mixes_are_admitted_alike_on_every_path(tmp_path_factory, cases):
    run_every_path(cases, tmp_path_factory.mktemp("mix"))


def test_the_command_refuses_each_bad_line_and_stores_the_rest(tmp_path, manifest_file):
    """The real command in a process, on the catalog's JSON lines: the exit code, no
    internal error, the count of each reason in its summary."""
    from robot_memory.manifest import load_manifest
    seed = {"stamp_ns": 1_600_000_000 * S, "skill_id": "manipulation.grasp",
            "success": True}
    cases = [case for case in cases_of(seed) if case.line is not None]
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(case.line if case.line.endswith(b"\n") else case.line + b"\n"
                              for case in cases))
    db = f"sqlite:///{tmp_path}/cmd.db"
    result = subprocess.run([sys.executable, "-m", "robot_memory.cli", "ingest", "--db", db,
                             "--manifest", str(manifest_file), "--jsonl", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "internal error" not in result.stderr, result.stderr
    bad = Counter(case.reason for case in cases if case.reason)
    assert f"ingested {len(cases) - sum(bad.values())} execution results, " \
           f"rejected {sum(bad.values())} lines" in result.stdout
    assert "rejected by reason: " + ", ".join(
        f"{reason} {n}" for reason, n in sorted(bad.items())) in result.stdout
    assert "hunter2" not in result.stderr and "jane.doe" not in result.stderr
    store = MemoryStore(db)
    part = store.partition(load_manifest(manifest_file).identity_hash())
    assert part.count_events(EXECUTION_RESULT) == len(cases) - sum(bad.values())
    store.close()
