"""Every verb, given something wrong, fails with one line on stderr, no traceback and the
exit code `robot-memory --help` documents for that kind of failure.

The table is the test: a row is (verb arguments, exit code, words the line must hold).
`{db}`, `{manifest}`, ... in the arguments are filled from the fixtures below. A new verb
adds its rows to VERB_BASES (and SPECIFIC_ROWS for its own failures);
`test_every_verb_has_rows` fails until it does.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from robot_memory.cli import build_parser, main
from robot_memory.errors import (EXIT_CODES, ConsolidationError, InputError, StoreFailure,
                                 StoreIntegrityError, StoreLocked, UsageError)

USAGE, INPUT, STORE = UsageError.exit_code, InputError.exit_code, StoreFailure.exit_code
LOCKED, CORRUPT = StoreLocked.exit_code, StoreIntegrityError.exit_code
CONSOLIDATION = ConsolidationError.exit_code

STORE_ARGS = ["--db", "{db}", "--manifest", "{manifest}"]
WHO = ["--operator", "ops", "--reason", "test"]

# A valid invocation of each verb (the failure rows below change one thing in it), and
# whether it opens the store in the command's own process.
VERB_BASES: dict[str, tuple[list[str], bool]] = {
    "hash": (["hash", "--manifest", "{manifest}"], False),
    "ingest": (["ingest", *STORE_ARGS, "--jsonl", "{jsonl}"], True),
    "consolidate": (["consolidate", "--dry-run", *STORE_ARGS], True),
    "replay": (["replay", "--until-event", "1", *STORE_ARGS], True),
    "explain": (["explain", "1", *STORE_ARGS], True),
    "facts": (["facts", *STORE_ARGS], True),
    "override fact": (["override", "fact", *STORE_ARGS, *WHO, "--kind", "object_property",
                       "--key", "cup + mass_kg", "--value",
                       '{"target_class": "cup", "property": "mass_kg", "band": {"median": 1}}'],
                      True),
    "override invalidate": (["override", "invalidate", "1", *STORE_ARGS, *WHO], True),
    "override freeze": (["override", "freeze", *STORE_ARGS, *WHO], True),
    "override unfreeze": (["override", "unfreeze", *STORE_ARGS, *WHO], True),
    "override reset": (["override", "reset", *STORE_ARGS, *WHO], True),
    "verify": (["verify", *STORE_ARGS], True),
    "bringup": (["bringup", "--manifest", "{manifest}", "--db", "{db}"], False),
    "demo": (["demo", "--db", "{db}"], False),
    "keygen": (["keygen", "--out", "{missing}"], False),
    "sign override": (["sign", "override", "--key", "{operator_key}", "--action", "freeze",
                       "--reason", "test"], False),
    "sign consolidate": (["sign", "consolidate", "--key", "{operator_key}"], False),
    "sign manage-nodes": (["sign", "manage-nodes", "--key", "{operator_key}", "--command",
                           "PAUSE"], False),
    "checkpoint": (["checkpoint", *STORE_ARGS, "--key", "{key}", "--witness", "{witness}"],
                   True),
    "db": (["db", "init", "--print-sql", "--db", "postgresql+psycopg://127.0.0.1:1/x"], False),
    "import-bag": (["import-bag", "{missing}", *STORE_ARGS], False),
    "export": (["export", *STORE_ARGS, "--out", "{missing}"], True),
    "verify-bundle": (["verify-bundle", "{missing}"], False),
    "import-bundle": (["import-bundle", "{missing}", "--db", "{db}"], False),
    "report": (["report", *STORE_ARGS, "--out", "{missing}"], True),
    "migrate": (["migrate", "--db", "{db}"], True),
    "compact": (["compact", *STORE_ARGS, "--archive-dir", "{missing}"], True),
    "forget-segment": (["forget-segment", "x.segment.jsonl", *STORE_ARGS, *WHO], True),
    "mcp": (["mcp", "--db", "{db}"], False),
}
TAKES_PARAM = {"consolidate", "replay", "bringup", "export", "report"}
TAKES_MANIFEST = {verb for verb, (args, _) in VERB_BASES.items() if "{manifest}" in args}


@dataclass(frozen=True)
class Row:
    name: str
    argv: list[str]
    exit_code: int
    words: tuple[str, ...]  # each must appear in the one stderr line


def _swap(argv: list[str], old: str, new: str) -> list[str]:
    return [new if arg == old else arg for arg in argv]


def _generic_rows() -> list[Row]:
    rows = []
    for verb, (argv, opens_store) in VERB_BASES.items():
        rows.append(Row(f"{verb}: unknown option", [*argv, "--no-such-option"], USAGE,
                        ("unrecognized arguments", "--no-such-option")))
        if "{db}" in argv:
            rows.append(Row(f"{verb}: wrong URL", _swap(argv, "{db}", "nosuch://x"), STORE,
                            ("--db nosuch://x", "not a usable database URL")))
        if verb in TAKES_MANIFEST:
            rows.append(Row(f"{verb}: missing manifest", _swap(argv, "{manifest}", "{missing}"),
                            INPUT, ("missing.yaml",)))
        if opens_store:
            rows.append(Row(f"{verb}: locked database", _swap(argv, "{db}", "{locked_db}"),
                            LOCKED, ("locked", "retry later")))
            if verb != "verify":  # verify reports a corrupt store as its verdict (below)
                rows.append(Row(f"{verb}: corrupt store", _swap(argv, "{db}", "{corrupt_db}"),
                                CORRUPT, ("not a database", "corrupt.db")))
        if verb in TAKES_PARAM:
            rows.append(Row(f"{verb}: unknown --param", [*argv, "--param", "no_such_param=1"],
                            USAGE, ("--param", "no_such_param")))
            rows.append(Row(f"{verb}: bad --param value", [*argv, "--param", "period_s=-1"],
                            USAGE, ("period_s", "below its minimum")))
    return rows


SPECIFIC_ROWS = [
    Row("forget-segment: no compaction wrote it", ["forget-segment", "x.segment.jsonl",
                                                   *STORE_ARGS, *WHO], STORE,
        ("x.segment.jsonl", "no compaction")),
    Row("hash: manifest not YAML", ["hash", "--manifest", "{not_yaml}"], INPUT,
        ("not_yaml.yaml",)),
    Row("hash: manifest with a missing field", ["hash", "--manifest", "{short_manifest}"],
        INPUT, ("manifest",)),
    Row("facts: identity not a hash", ["facts", "--db", "{db}", "--identity", "xyz"], INPUT,
        ("--identity",)),
    Row("facts: no identity", ["facts", "--db", "{db}"], USAGE, ("--manifest", "--identity")),
    Row("facts: unknown schema version", ["facts", "--db", "{future_db}",
                                          "--manifest", "{manifest}"], STORE,
        ("schema version 99",)),
    Row("facts: folder does not exist", ["facts", "--db", "sqlite:////nonexistent/dir/x.db",
                                         "--manifest", "{manifest}"], STORE,
        ("unable to open",)),
    Row("ingest: missing JSON lines file", ["ingest", *STORE_ARGS, "--jsonl", "{missing}"],
        INPUT, ("missing.yaml", "no such file")),
    Row("consolidate: time_bucket_s differs from the store's",
        ["consolidate", "--apply", "--db", "{grown_db}", "--manifest", "{manifest}",
         "--param", "time_bucket_s=60"], CONSOLIDATION, ("time_bucket_s",)),
    Row("consolidate: --param without =", ["consolidate", "--dry-run", *STORE_ARGS,
                                           "--param", "period_s"], USAGE, ("NAME=VALUE",)),
    Row("consolidate: neither --dry-run nor --apply", ["consolidate", *STORE_ARGS], USAGE,
        ("--dry-run", "--apply")),
    Row("replay: no such event", ["replay", "--until-event", "999", *STORE_ARGS], INPUT,
        ("--until-event", "no event 999")),
    Row("replay: event not a number", ["replay", "--until-event", "x", *STORE_ARGS], USAGE,
        ("--until-event", "invalid int value")),
    Row("replay: time not a time", ["replay", "--until-time", "soon", *STORE_ARGS], USAGE,
        ("--until-time", "soon")),
    Row("replay: two bounds", ["replay", "--until-event", "1", "--until-time", "2",
                               *STORE_ARGS], USAGE, ("not allowed with",)),
    Row("explain: no such fact", ["explain", "999", *STORE_ARGS], INPUT, ("999",)),
    Row("explain: FACT neither id nor KIND|KEY", ["explain", "grasp", *STORE_ARGS], USAGE,
        ("KIND|KEY",)),
    Row("explain: FACT and --intent", ["explain", "1", "--intent", "pick-1", *STORE_ARGS],
        USAGE, ("FACT", "--intent")),
    Row("explain: neither FACT nor --intent", ["explain", *STORE_ARGS], USAGE,
        ("FACT", "--intent")),
    Row("explain: no such intent", ["explain", "--intent", "pick-404", *STORE_ARGS], INPUT,
        ("pick-404",)),
    Row("override fact: value not JSON", ["override", "fact", *STORE_ARGS, *WHO, "--kind",
                                          "object_property", "--key", "k", "--value", "{x"],
        USAGE, ("--value", "not JSON")),
    Row("override fact: unknown kind", ["override", "fact", *STORE_ARGS, *WHO, "--kind",
                                        "no_such_kind", "--key", "k", "--value", "{}"],
        INPUT, ("kind", "no_such_kind")),
    Row("override fact: value not of its kind's shape (the reported one)",
        ["override", "fact", *STORE_ARGS, *WHO, "--kind", "skill_success_rate", "--key",
         "manipulation.grasp + glass_cup + sim", "--value",
         '{"skill_id": "manipulation.grasp", "target_class": "glass_cup", "environment": '
         '"sim", "recommended_parameters": {"force_n": 25}}'], INPUT,
        ("value.recommended_parameters.force_n", "valid dictionary")),
    Row("override fact: a required field missing",
        ["override", "fact", *STORE_ARGS, *WHO, "--kind", "zone_risk", "--key", "zone + dock",
         "--value", '{"scope": "zone", "failure_rate": 0.2}'], INPUT, ("value.zone",)),
    Row("override fact: confidence not a number",
        ["override", "fact", *STORE_ARGS, *WHO, "--kind", "object_property", "--key", "k",
         "--value", "{}", "--confidence", "high"], USAGE, ("--confidence", "high")),
    Row("override freeze: empty reason", ["override", "freeze", *STORE_ARGS, "--operator",
                                          "ops", "--reason", ""], INPUT, ("reason",)),
    Row("override: no action", ["override"], USAGE, ("ACTION",)),
    Row("bringup: certified hash not a hash", ["bringup", "--manifest", "{manifest}",
                                               "--certified-hash", "xyz"], INPUT,
        ("--certified-hash",)),
    Row("bringup: missing certified hash file",
        ["bringup", "--manifest", "{manifest}", "--certified-hash-file", "{missing}"], INPUT,
        ("missing.yaml",)),
    Row("demo: period not a number", ["demo", "--period", "often"], USAGE,
        ("--period", "often")),
    Row("keygen: folder does not exist", ["keygen", "--out", "/nonexistent/dir/key"], INPUT,
        ("/nonexistent/dir/key",)),
    Row("keygen: operator name with a space", ["keygen", "--out", "{missing}", "--operator",
                                               "two words"], INPUT, ("operator", "two words")),
    Row("sign override: missing key file", ["sign", "override", "--key", "{missing}",
                                            "--action", "freeze", "--reason", "r"], INPUT,
        ("missing.yaml", "key")),
    Row("sign override: key readable by others", ["sign", "override", "--key",
                                                  "{open_key}", "--action", "freeze",
                                                  "--reason", "r"], INPUT,
        ("open_key", "chmod 600")),
    Row("sign override: unknown action", ["sign", "override", "--key", "{operator_key}",
                                          "--action", "forget", "--reason", "r"], USAGE,
        ("--action", "forget")),
    Row("sign override: value not JSON", ["sign", "override", "--key", "{operator_key}",
                                          "--action", "operator_fact", "--reason", "r",
                                          "--value", "{x"], USAGE, ("--value", "not JSON")),
    Row("sign manage-nodes: unknown command", ["sign", "manage-nodes", "--key",
                                               "{operator_key}", "--command", "REBOOT"],
        USAGE, ("--command", "REBOOT")),
    Row("sign: no request", ["sign"], USAGE, ("REQUEST",)),
    Row("checkpoint: missing key file", ["checkpoint", *STORE_ARGS, "--key", "{missing}",
                                         "--witness", "{witness}"], INPUT,
        ("missing.yaml", "key")),
    Row("db init: no server", ["db", "init", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/x"],
        STORE, ("127.0.0.1", "connection")),
    Row("db add-robot: identity not a hash", ["db", "add-robot", "--db", "{db}", "--role", "r1",
                                              "--identity", "abc"], INPUT, ("--identity",)),
    Row("import-bag: no such bag", ["import-bag", "{missing}", *STORE_ARGS], INPUT,
        ("missing.yaml",)),
    Row("verify-bundle: no such bundle", ["verify-bundle", "{missing}"], INPUT,
        ("missing.yaml",)),
    Row("import-bundle: no such bundle", ["import-bundle", "{missing}", "--db", "{db}"], INPUT,
        ("missing.yaml",)),
    Row("verify: --fleet neither PostgreSQL nor a folder",
        ["verify", *STORE_ARGS, "--fleet", "mysql://r:hunter2@db/x"], STORE,
        ("--fleet", "mysql://r@db/x", "or a folder is needed")),
    Row("mcp: unknown transport", ["mcp", "--transport", "sse"], USAGE,
        ("--transport", "sse")),
    Row("mcp: timeout not positive", ["mcp", "--timeout-s", "0"], USAGE, ("--timeout-s", "> 0")),
    Row("mcp: port out of range", ["mcp", "--port", "70000"], USAGE, ("--port", "70000")),
    Row("no verb", [], USAGE, ("verb",)),
    Row("unknown verb", ["no-such-verb"], USAGE, ("no-such-verb",)),
]

ROWS = _generic_rows() + SPECIFIC_ROWS


def _cli(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """Real files: a store with events and facts, a corrupt one, a locked one (a second
    process holds SQLite's write lock), one from a future schema version."""
    root = tmp_path_factory.mktemp("cli_errors")
    manifest = root / "manifest.yaml"
    manifest.write_text((__import__("pathlib").Path(__file__).resolve().parents[2]
                         / "robot_memory" / "config" / "example_manifest.yaml").read_text())
    jsonl = root / "results.jsonl"
    jsonl.write_text("".join(json.dumps(
        {"stamp": 100 + i, "skill_id": "manipulation.grasp", "target_class": "cup",
         "environment": "sim", "parameters": {"force_n": 25}, "observations": {"mass_kg": 0.2},
         "success": True}) + "\n" for i in range(6)))
    db, grown, future = (root / name for name in ("memory.db", "grown.db", "future.db"))
    for path in (db, grown, future):
        url = f"sqlite:///{path}"
        assert _cli("ingest", "--db", url, "--manifest", str(manifest), "--jsonl",
                    str(jsonl)) == 0
        assert _cli("consolidate", "--apply", "--db", url, "--manifest", str(manifest)) == 0
    # grown: new results since the last pass, so a pass must fold into the stored buckets.
    later = root / "later.jsonl"
    later.write_text(jsonl.read_text().replace('"stamp": 1', '"stamp": 9'))
    assert _cli("ingest", "--db", f"sqlite:///{grown}", "--manifest", str(manifest),
                "--jsonl", str(later)) == 0
    with sqlite3.connect(future) as conn:
        conn.execute("UPDATE store_info SET value = '99' WHERE key = 'schema_version'")
    corrupt = root / "corrupt.db"
    corrupt.write_bytes(b"this is no database, " * 512)
    not_yaml = root / "not_yaml.yaml"
    not_yaml.write_text("agent_id: [unclosed\n")
    short = root / "short.yaml"
    short.write_text("agent_id: robot-1\n")
    locked = root / "locked.db"
    locked.write_bytes(db.read_bytes())
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sqlite3, sys
            conn = sqlite3.connect({str(locked)!r}, isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")
            print("holding", flush=True)
            sys.stdin.read()  # hold the lock until the test closes our stdin
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    from robot_memory.evidence.witness import generate_key_pair
    key, _public = generate_key_pair(root / "checkpoint_key")
    operator_key, _public = generate_key_pair(root / "operator_key")
    open_key, _public = generate_key_pair(root / "open_key")
    open_key.chmod(0o644)
    yield {"db": f"sqlite:///{db}", "manifest": str(manifest), "jsonl": str(jsonl),
           "key": str(key), "operator_key": str(operator_key), "open_key": str(open_key),
           "witness": str(root / "witness.jsonl"),
           "missing": str(root / "missing.yaml"), "corrupt_db": f"sqlite:///{corrupt}",
           "locked_db": f"sqlite:///{locked}?timeout=0.2", "future_db": f"sqlite:///{future}",
           "grown_db": f"sqlite:///{grown}", "not_yaml": str(not_yaml),
           "short_manifest": str(short)}
    holder.stdin.close()
    holder.wait(timeout=10)


def _fill(argv: list[str], places: dict[str, str]) -> list[str]:
    return [arg.format(**places) if arg.startswith("{") and arg.endswith("}") and
            arg[1:-1] in places else arg for arg in argv]


def _assert_one_line(row: Row, code: int, err: str) -> None:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{row.name}: expected one line on stderr, got:\n{err}"
    assert ": error: " in lines[0], lines[0]
    for word in row.words:
        assert word in lines[0], f"{row.name}: {word!r} not in {lines[0]!r}"
    assert code == row.exit_code, f"{row.name}: exit {code} != {row.exit_code}: {lines[0]}"


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_failure_is_one_line_with_the_documented_exit_code(row, places, capsys):
    code = main(_fill(row.argv, places))
    _assert_one_line(row, code, capsys.readouterr().err)


# The same through the installed entry point, as an operator's shell runs it.
PROCESS_ROWS = [row for row in ROWS if row.name in (
    "facts: wrong URL", "facts: locked database", "consolidate: unknown --param",
    "verify: locked database", "consolidate: time_bucket_s differs from the store's",
    "ingest: corrupt store")]


@pytest.mark.parametrize("row", PROCESS_ROWS, ids=[row.name for row in PROCESS_ROWS])
def test_failure_in_a_real_process(row, places):
    done = subprocess.run([sys.executable, "-m", "robot_memory.cli", *_fill(row.argv, places)],
                          capture_output=True, text=True, timeout=120)
    _assert_one_line(row, done.returncode, done.stderr)


def test_verify_reports_a_corrupt_store_as_its_verdict(places, capsys):
    assert main(["verify", "--db", places["corrupt_db"]]) == 1
    out, err = capsys.readouterr()
    assert "STORE CORRUPTED" in out and "not a SQLite database" in out and err == ""


def test_every_verb_has_rows():
    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices
    covered = {name.split()[0] for name in VERB_BASES}
    missing = sorted(set(verbs) - covered)
    assert not missing, f"add {missing} to VERB_BASES in {__file__}"
    for grouped in ("override", "sign"):
        actions = verbs[grouped]._subparsers._group_actions[0].choices
        assert {f"{grouped} {action}" for action in actions} <= set(VERB_BASES)


def test_help_documents_every_exit_code(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for code in EXIT_CODES:
        assert f"\n  {code}  " in out
    for row in ROWS:
        assert row.exit_code in EXIT_CODES


def test_old_until_says_which_bound_it_took(places, capsys):
    base = ["--db", places["db"], "--manifest", places["manifest"]]
    assert main(["replay", "--until", "3", *base]) == 0
    assert "--until 3 read as an event id" in capsys.readouterr().err
    assert main(["replay", "--until", "102.5", *base]) == 0
    assert "--until 102.5 read as an event time" in capsys.readouterr().err
    assert main(["replay", "--until-time", "102.5", *base]) == 0
    by_time = capsys.readouterr()
    assert by_time.err == ""
    assert main(["replay", "--until-event", "3", *base]) == 0
    by_event = capsys.readouterr()
    # events 1..3 are stamped 100..102 s: both bounds cut the log at the same place
    assert by_event.err == "" and by_event.out == by_time.out
    assert main(["replay", "--until-time", "101.5", *base]) == 0
    assert capsys.readouterr().out != by_time.out
