"""Bytes that crash rclpy's deserializer never reach it. The logger's results and the
grounding server's facts deltas go to rclpy only once their fields are found within
their bytes (robot_memory/wire/cdr.structure_problem); the others are refused as
malformed, and whatever passes that check rclpy reads without crashing. Each check runs
in a child process, so that a regression fails its test instead of ending pytest."""

import json
import random
import struct
import subprocess
import sys

from rclpy.serialization import serialize_message

from robot_memory.bags.reading import make_typestore
from robot_memory.msg import ExecutionResult, KeyValue, SemanticFact, SemanticFactArray
from robot_memory.wire.execution_result import structure_problem

# Fast CDR (under rmw_fastrtps) takes the padding an encapsulation header's options
# declare (the low 2 bits of the 4th byte) off the end of the bytes; with no body after
# the header, the end moves before the start and every read after it runs past the
# buffer. Each of these ended a fresh Python process in rclpy's
# deserialize_message(data, ExecutionResult) (SIGSEGV; Kilted's wheels, Fast CDR 2.3.3);
# where the reads go depends on the heap, so in a process that has run for a while one
# may instead read back an earlier sample's bytes as a message. Sent to a plain rclpy
# subscription, the first one ends that process too.
CRASHING = {
    "little-endian header alone, 2 bytes of padding declared": bytes.fromhex("00010002"),
    "little-endian header alone, 3 bytes of padding declared": bytes.fromhex("00010003"),
    "little-endian header alone, 1 byte of padding declared": bytes.fromhex("00010001"),
    "big-endian header alone, 2 bytes of padding declared": bytes.fromhex("00000002"),
    "big-endian header alone, 1 byte of padding declared": bytes.fromhex("00000001"),
    "options 0xfffe (2 bytes of padding) alone": bytes.fromhex("0001fffe"),
    "XCDR2 little-endian header alone, 3 bytes of padding": bytes.fromhex("00070003"),
    "parameter-list header alone, 1 byte of padding": bytes.fromhex("00030001"),
}

_REFUSE = """
import json, sys
from robot_memory.intake.records import InvalidRecord
from robot_memory.ros.conversions import fact_array_from_serialized, serialized_result_fields
for line in sys.stdin:
    data = bytes.fromhex(line)
    try:
        serialized_result_fields(data)
        result = "read"
    except InvalidRecord as refusal:
        result = [refusal.reason, refusal.detail]
    try:
        fact_array_from_serialized(data)
        delta = "read"
    except Exception as refusal:
        delta = [type(refusal).__name__, str(refusal)]
    print(json.dumps([result, delta]), flush=True)
"""


def _in_child(script: str, lines: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=300)


def test_bytes_that_crash_rclpy_are_refused_as_malformed_unread():
    child = _in_child(_REFUSE, [data.hex() for data in CRASHING.values()])
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    outcomes = [json.loads(line) for line in child.stdout.splitlines()]
    assert len(outcomes) == len(CRASHING)
    for (name, data), (result, delta) in zip(CRASHING.items(), outcomes):
        assert result[0] == "malformed", (name, result)
        assert delta[0] == "ValueError" and delta[1].startswith("no SemanticFactArray: "), \
            (name, delta)
        unsupported = data[1] > 1
        for detail in (result[1], delta[1]):
            assert (f"unsupported encapsulation 0x{data[:2].hex()}" in detail) == unsupported
            assert unsupported or "header.stamp.sec: its int32 at byte 4, past the end (4)" \
                in detail, (name, detail)


_RESULT = ExecutionResult(skill_id="manipulation.grasp", target_class="cup", environment="lab",
                          zone="z", success=True, duration_s=1.5, intent_id="i", notes="n")
_RESULT.header.frame_id = "base"
_RESULT.parameters = [KeyValue(key="force_n", value=20.0)]
_RESULT.observations = [KeyValue(key="mass_kg", value=0.2)]
_VALID = serialize_message(_RESULT)
_DELTA = serialize_message(SemanticFactArray(identity_hash="ab" * 32, run_event_id=7, facts=[
    SemanticFact(fact_id=i, kind="skill_success_rate", key=f"grasp + cup{i} + lab",
                 status="active", has_success_rate=True, success_rate=0.75,
                 recommended_parameters=[KeyValue(key="force_n", value=25.0)] * i,
                 value_json='{"rate":0.75}', rule_version="v1.0") for i in range(3)]))


def _changed(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def test_well_formed_bytes_this_reader_leaves_to_rclpy_are_read_by_it():
    """Within bounds, but not read here (wire/cdr.py): rclpy gets them, and reads or
    refuses them without crashing."""
    skill_at = _VALID.index(b"manipulation.grasp")
    bool_at = _VALID.index(struct.pack("<d", 0.2)) + 8
    store, name = make_typestore(), "robot_memory/msg/ExecutionResult"
    cases = {
        "a NUL inside a string": _changed(_VALID, skill_at + 3, b"\x00"),
        "no NUL at a string's end": _changed(_VALID, skill_at + 18, b"x"),
        "not UTF-8": _changed(_VALID, skill_at, b"\xff"),
        "a bool of 2": _changed(_VALID, bool_at, b"\x02"),
        # The last field, amends, empty ("\x01\x00\x00\x00\x00"), given length 0.
        "a last string of length 0 (no NUL)": _VALID[:-5] + bytes(4),
        "big-endian": bytes(store.serialize_cdr(store.deserialize_cdr(_VALID, name), name,
                                                little_endian=False)),
    }
    for case, data in cases.items():
        assert structure_problem(data) is None, case
    child = _in_child(_REFUSE, [data.hex() for data in cases.values()])
    assert child.returncode == 0, (child.returncode, child.stderr[-2000:])
    results = dict(zip(cases, (json.loads(line)[0] for line in child.stdout.splitlines())))
    assert results["big-endian"] == results["a bool of 2"] == "read"
    assert results["a NUL inside a string"] == "read"  # rclpy keeps what is before it


_FUZZ = """
import random, struct, sys
from rclpy.serialization import deserialize_message
from robot_memory.msg import ExecutionResult, SemanticFactArray
from robot_memory.wire import execution_result, semantic_fact
rng = random.Random(int(sys.argv[1]))
checked = {ExecutionResult: execution_result.structure_problem,
           SemanticFactArray: semantic_fact.structure_problem}
passed = 0
for line in sys.stdin:
    valid = bytes.fromhex(line)
    for _ in range(int(sys.argv[2])):
        how = rng.randrange(5)
        if how == 0:  # an encapsulation header alone, any options
            data = bytes([0, rng.randrange(12), rng.randrange(256), rng.randrange(256)])
        elif how == 1:
            data = valid[:rng.randrange(len(valid))]
        elif how == 2:
            data = bytes(valid[:3]) + bytes([rng.randrange(256)]) + valid[4:]
        elif how == 3:
            flipped = bytearray(valid)
            for _ in range(rng.randint(1, 8)):
                at = rng.randrange(len(flipped) * 8)
                flipped[at // 8] ^= 1 << at % 8
            data = bytes(flipped)
        else:  # a length or count (4-aligned) set to one near an edge
            at = rng.randrange(4, len(valid) - 3) & ~3
            value = rng.choice([0, 1, 2**31, 2**32 - 1, len(valid), len(valid) - at,
                                len(valid) - at - 4, rng.getrandbits(32)])
            data = valid[:at] + struct.pack("<I", value) + valid[at + 4:]
            data = data[:rng.randint(at, len(data))]
        for message_type, problem in checked.items():
            if problem(data) is None:
                passed += 1
                print(message_type.__name__, data.hex(), flush=True)
                try:
                    deserialize_message(data, message_type)
                except Exception:
                    pass
print("passed", passed, flush=True)
"""


def test_whatever_passes_the_check_rclpy_reads_without_crashing():
    """Cut, flipped and edited results and deltas, and headers with every option: those
    whose fields lie within their bytes go to rclpy's deserializer, in a child that
    names the bytes it was given last if it crashes."""
    seed = random.randrange(2**32)
    child = subprocess.run([sys.executable, "-c", _FUZZ, str(seed), "1500"],
                           input=f"{_VALID.hex()}\n{_DELTA.hex()}\n", capture_output=True,
                           text=True, timeout=300)
    lines = child.stdout.splitlines()
    assert child.returncode == 0, (f"seed {seed}: rclpy's deserializer ended the process "
                                   f"({child.returncode}) on {lines[-1] if lines else ''}")
    assert int(lines[-1].split()[1]) > 100  # the check lets well-formed bytes through
