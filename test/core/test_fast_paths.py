"""A hand-written codec passed over for rclpy's is said once in the node's log and kept
as a key of its /diagnostics status, with how many times (robot_memory/wire/fast_paths.py,
which ros/diagnostics.py holds per node)."""

from robot_memory.wire.fast_paths import FastPaths


def test_said_once_in_the_log_and_kept_as_a_key_with_its_count():
    lines = []
    paths = FastPaths(lines.append)
    assert paths.diagnostic_values() == {}
    paths.off("ExecutionResult", "encapsulation header 00 00 00 00")
    paths.off("ExecutionResult", "a string with a NUL")
    paths.off("ExecutionResult", "encapsulation header 00 00 00 00")
    paths.off("SemanticFactArray", "the framed array differs")
    assert len(lines) == 2
    assert lines[0].startswith("ExecutionResult: the hand-written CDR codec")
    assert "encapsulation header 00 00 00 00" in lines[0]
    assert "fast_path_off.ExecutionResult" in lines[0]
    assert paths.diagnostic_values() == {
        "fast_path_off.ExecutionResult": "encapsulation header 00 00 00 00 (3 times)",
        "fast_path_off.SemanticFactArray": "the framed array differs"}
