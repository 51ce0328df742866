"""The argument parser: every verb, its options and its help."""

from __future__ import annotations

import argparse

from robot_memory.cli.common import DEFAULT_DB, TRACEBACK_ENV, Parser
from robot_memory.cli.evidence import cmd_export, cmd_import_bundle, cmd_report, cmd_verify_bundle
from robot_memory.cli.intake import cmd_import_bag, cmd_ingest
from robot_memory.cli.integrity import (cmd_checkpoint, cmd_compact, cmd_forget_segment,
                                        cmd_keygen, cmd_verify)
from robot_memory.cli.knowledge import (cmd_consolidate, cmd_explain, cmd_facts, cmd_override,
                                        cmd_replay)
from robot_memory.cli.operator import cmd_sign
from robot_memory.cli.planners import TRANSPORTS, cmd_mcp
from robot_memory.cli.running import cmd_bringup, cmd_db, cmd_demo, cmd_hash, cmd_migrate
from robot_memory.errors import EXIT_CODES


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="robot-memory", description=__doc__.split(".")[0], epilog=_epilog(),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)

    def with_store(p, identity=True):
        p.add_argument("--db", default=DEFAULT_DB, help=f"SQLAlchemy URL (default {DEFAULT_DB})")
        if identity:
            group = p.add_mutually_exclusive_group()
            group.add_argument("--manifest", help="identity manifest YAML (identity = its hash)")
            group.add_argument("--identity", help="identity hash (64 hex digits)")
        return p

    def with_archive_dir(p, what: str):
        p.add_argument("--archive-dir", metavar="DIR",
                       help=f"archive segments: {what} (default: beside a SQLite database, "
                            "DB.segments)")

    def with_fleet(p, what: str):
        p.add_argument("--fleet", metavar="URL",
                       help=f"the fleet store segments were shipped to (the consolidator's "
                            f"fleet_store_url: postgresql+psycopg://ROLE@HOST/DB, password "
                            f"from ~/.pgpass or PGPASSWORD, or a folder): {what}")

    def with_rule_params(p):
        p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="a consolidator parameter, e.g. half_life_s=3600 (repeatable)")

    p = verbs.add_parser("hash", help="print a manifest's identity hash")
    p.add_argument("--manifest", required=True)
    p.set_defaults(func=cmd_hash)

    p = with_store(verbs.add_parser("ingest", help="append execution results from JSON lines"))
    p.add_argument("--jsonl", required=True)
    p.add_argument("--max-clock-ahead-s", type=float, default=60.0, metavar="S",
                   help="a stamp more than S seconds ahead of this machine's clock is "
                        "stored at the time it is read, the stamp kept as sent_stamp_ns "
                        "(clock_skew; default 60)")
    p.set_defaults(func=cmd_ingest)

    p = with_store(verbs.add_parser("consolidate", help="run a consolidation pass"))
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", dest="apply", action="store_false",
                      help="print what a pass would change, write nothing")
    mode.add_argument("--apply", dest="apply", action="store_true", help="run the pass")
    with_rule_params(p)
    p.set_defaults(func=cmd_consolidate)

    p = with_store(verbs.add_parser("replay", help="facts as they were at a point of the log "
                                                   "(the live store is not touched)"))
    until = p.add_mutually_exclusive_group(required=True)
    until.add_argument("--until-event", type=int, metavar="N",
                       help="the facts as they were after event id N (events.id)")
    until.add_argument("--until-time", metavar="T",
                       help="the facts as they were at event time T: seconds of event time "
                            "(stamps; sim time under use_sim_time) or an ISO 8601 date")
    until.add_argument("--until", metavar="EVENT_ID|TIME",
                       help="deprecated: an integer is an event id, anything else a time "
                            "(says on stderr which it took)")
    p.add_argument("--out", help="write the snapshot here instead of stdout")
    with_rule_params(p)
    with_archive_dir(p, "history that compactions moved there is read from them")
    with_fleet(p, "segments not in the archive folder are read from there")
    p.set_defaults(func=cmd_replay)

    p = with_store(verbs.add_parser(
        "explain", help="why does the robot think this? (a fact, or the lineage of an action)"))
    p.add_argument("fact", metavar="FACT", nargs="?", help="fact id, or KIND|KEY")
    p.add_argument("--intent", metavar="ID",
                   help="instead of a fact: the lineage of this planner intent (the "
                        "consultations made for it, the results carrying it, the "
                        "consolidation runs that folded them and the facts they moved)")
    with_archive_dir(p, "compacted history, read when all are there")
    with_fleet(p, "segments not in the archive folder are read from there")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_explain)

    p = with_store(verbs.add_parser("facts", help="list an identity's facts"))
    p.add_argument("--json", action="store_true", help="stable, sorted JSON snapshot")
    p.set_defaults(func=cmd_facts)

    p = verbs.add_parser("override", help="a human correction, logged as an override event "
                                          "(replay reproduces it)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def override(name: str, help_text: str):
        q = with_store(actions.add_parser(name, help=help_text))
        q.add_argument("--operator", required=True, help="who takes responsibility")
        q.add_argument("--reason", required=True, help="why (kept in the log)")
        q.set_defaults(func=cmd_override)
        return q

    q = override("fact", "append an operator fact (served as active, marked operator/1)")
    q.add_argument("--kind", required=True)
    q.add_argument("--key", required=True)
    q.add_argument("--value", required=True,
                   help="the fact value, a JSON object of its kind's shape (required fields: "
                        "docs/consolidation.md); refused naming the field otherwise")
    q.add_argument("--confidence", type=float, default=1.0)
    q = override("invalidate", "mark a fact invalid: kept, never served")
    q.add_argument("fact", metavar="FACT", help="fact id, or KIND|KEY")
    override("freeze", "stop folding new results until unfreeze (overrides still apply)")
    override("unfreeze", "resume; the next pass catches up")
    q = override("reset", "archive the semantic tier to a file (hash logged) and start over")
    q.add_argument("--archive", help="archive file (default: next to the database)")

    p = with_store(verbs.add_parser("verify", help="check the store and hash chain(s); "
                                                   "non-zero with a diagnosis if broken"))
    p.add_argument("--full", action="store_true",
                   help="SQLite integrity_check, a re-hash of every event, and the semantic "
                        "tier re-derived from the log and compared row by row (default: the "
                        "verifier's fast boot check)")
    p.add_argument("--witness", metavar="FILE",
                   help="witness file of signed checkpoints: the chain must extend the newest")
    p.add_argument("--public-key", metavar="KEY",
                   help="public key the checkpoints are signed with")
    p.add_argument("--archives", metavar="DIR",
                   help="also re-hash the history compactions moved to the segments in DIR "
                        "(with --full, the semantic tier is re-derived from it too)")
    with_fleet(p, "the segments not in --archives DIR (default: beside a SQLite database) "
                  "are fetched from there and re-hashed too")
    with_rule_params(p)
    p.set_defaults(func=cmd_verify)

    p = with_store(verbs.add_parser(
        "compact", help="move consolidated history into a sealed archive segment; the live "
                        "store keeps a compaction event naming it"))
    before = p.add_mutually_exclusive_group()
    before.add_argument("--before", type=int, metavar="EVENT_ID",
                        help="compact the events before this event id (default: all that "
                             "consolidation has folded)")
    before.add_argument("--before-time", metavar="T",
                        help="compact the events before event time T (seconds or ISO 8601)")
    with_archive_dir(p, "where the new segment goes")
    p.set_defaults(func=cmd_compact)

    p = with_store(verbs.add_parser(
        "forget-segment", help="delete an archive segment on purpose, logged as an event "
                               "(verify --archives then skips it)"))
    p.add_argument("segment", metavar="NAME", help="the segment's file name")
    p.add_argument("--operator", required=True)
    p.add_argument("--reason", required=True)
    with_archive_dir(p, "where the segment is")
    p.set_defaults(func=cmd_forget_segment)

    p = verbs.add_parser("keygen", help="create an Ed25519 key pair for signed checkpoints "
                                        "or an operator's credentials")
    p.add_argument("--out", required=True, metavar="PREFIX",
                   help="writes PREFIX (private, mode 0600) and PREFIX.pub")
    p.add_argument("--operator", metavar="NAME",
                   help="an operator's key: also print its line for the operator_keys "
                        "parameter or operator_keys_file (NAME is the operator the nodes "
                        "record)")
    p.set_defaults(func=cmd_keygen)

    p = verbs.add_parser("sign", help="an operator's credential for a request to the running "
                                      "stack: prints the request with it, for ros2 service "
                                      "call")
    requests = p.add_subparsers(dest="request", required=True, metavar="REQUEST")

    def signed(name: str, help_text: str, service: str):
        q = requests.add_parser(name, help=help_text)
        q.add_argument("--key", required=True, metavar="FILE",
                       help="the operator's private key (robot-memory keygen --operator; "
                            "mode 0600)")
        q.add_argument("--namespace", default="", help="the stack's namespace (default none)")
        q.add_argument("--service", default="", metavar="NAME",
                       help=f"the service's full name (default /NAMESPACE/{service})")
        q.add_argument("--credential-only", action="store_true",
                       help="print the credential alone (the request sent must have exactly "
                            "the fields signed, defaults included)")
        q.set_defaults(func=cmd_sign)
        return q

    q = signed("override", "an Override request (every action)", "override")
    q.add_argument("--action", required=True,
                   choices=["operator_fact", "invalidate", "freeze", "unfreeze",
                            "reset_semantic"])
    q.add_argument("--reason", required=True, help="why (kept in the log)")
    q.add_argument("--operator-name", default="",
                   help="operator_name field: empty (the default) or the key's operator")
    q.add_argument("--fact-id", type=int, default=0, help="invalidate: the fact's id")
    q.add_argument("--kind", default="", help="invalidate, operator_fact: the fact's kind")
    q.add_argument("--fact-key", default="", help="invalidate, operator_fact: the fact's key")
    q.add_argument("--value", help="operator_fact: the fact value, a JSON object")
    q.add_argument("--confidence", type=float, default=0.0,
                   help="operator_fact: its confidence in [0, 1] (default 0.0, the field's)")
    q.add_argument("--archive", default="",
                   help="reset_semantic: archive file inside the consolidator's archive_dir")
    signed("consolidate", "a Consolidate request that applies the pass (dry_run false; a "
                          "dry run needs no credential)", "consolidate")
    q = signed("manage-nodes", "a ManageNodes request (STARTUP, PAUSE, RESUME)",
               "manifest_verifier/manage_nodes")
    q.add_argument("--command", required=True, help="STARTUP, PAUSE or RESUME (or 0, 1, 2)")
    q.add_argument("--node", action="append", default=[], metavar="NAME",
                   help="a managed node (repeatable; default: all)")

    p = with_store(verbs.add_parser("checkpoint", help="sign the chain head and append it to "
                                                       "a witness file"))
    p.add_argument("--key", required=True, help="private key file (mode 0600)")
    p.add_argument("--witness", required=True, metavar="FILE", help="witness file (JSON lines)")
    p.set_defaults(func=cmd_checkpoint)

    p = verbs.add_parser("db", help="PostgreSQL fleet store: roles, GRANTs, row-level security")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = actions.add_parser("init", help="as the owner: schema, triggers, roles and policies")
    q.add_argument("--db", required=True, help="URL connecting as the owner role")
    q.add_argument("--print-sql", action="store_true",
                   help="print the GRANTs and policies instead of applying them")
    q = with_store(actions.add_parser("add-robot", help="a login role for one robot, mapped "
                                                        "to its identity"))
    q.add_argument("--role", required=True)
    q.add_argument("--password-file", help="file holding the role's password")
    q = with_store(actions.add_parser("add-priors-reader", help="a login role reading, as "
                                      "priors, the facts of the robots of the same embodiment "
                                      "(docs/priors.md)"))
    q.add_argument("--role", required=True)
    q.add_argument("--password-file", help="file holding the role's password")
    q = actions.add_parser("add-analyst", help="a login role reading every robot's rows")
    q.add_argument("--db", required=True, help="URL connecting as the owner role")
    q.add_argument("--role", required=True)
    q.add_argument("--password-file", help="file holding the role's password")
    for q in actions.choices.values():
        q.set_defaults(func=cmd_db)

    p = with_store(verbs.add_parser("import-bag", help="import execution results from a "
                                                       "rosbag2 bag (MCAP or SQLite3)"))
    p.add_argument("path", metavar="PATH", help="bag directory, or a .mcap or .db3 file")
    p.add_argument("--topic", action="append", default=[], metavar="T",
                   help="import only this topic (repeatable; default: every topic of an "
                        "importable type)")
    p.add_argument("--since", metavar="TIME", help="only messages received at or after TIME "
                                                   "(bag receive time: seconds or ISO 8601)")
    p.add_argument("--until", metavar="TIME", help="only messages received before TIME")
    p.add_argument("--map", metavar="FILE", help="mapping file: other message types onto "
                                                 "ExecutionResult")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import_bag)

    p = with_store(verbs.add_parser("export", help="write an evidence bundle: events, facts, "
                                                   "runs, consultations, SHA256SUMS"))
    p.add_argument("--out", required=True, metavar="DIR", help="a new or empty directory")
    with_rule_params(p)
    p.set_defaults(func=cmd_export)

    p = verbs.add_parser("verify-bundle", help="check a bundle offline: checksums, hash "
                                               "chain, facts rebuilt byte-equal")
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(func=cmd_verify_bundle)

    p = with_store(verbs.add_parser("import-bundle", help="load a bundle into a fresh store "
                                                          "(same chain, same facts)"),
                   identity=False)
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(func=cmd_import_bundle)

    p = with_store(verbs.add_parser("report", help="what the robot learned, as one "
                                                   "self-contained HTML file with plots"))
    p.add_argument("--out", required=True, metavar="FILE", help="e.g. report.html")
    with_rule_params(p)
    p.set_defaults(func=cmd_report)

    p = with_store(verbs.add_parser("migrate", help="upgrade an older store's schema (also "
                                                    "done when a node opens it)"),
                   identity=False)
    p.set_defaults(func=cmd_migrate)

    p = verbs.add_parser("bringup", help="start the four nodes (what the launch file starts)")
    p.add_argument("--manifest", required=True)
    p.add_argument("--certified-hash", default="")
    p.add_argument("--certified-hash-file", default="")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--use-sim-time", action="store_true")
    p.add_argument("--namespace", default="")
    p.add_argument("--log-level", default="info")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a parameter of every node that declares it (repeatable)")
    p.add_argument("--one-process", action="store_true",
                   help="run the four nodes in one process (robot_memory_all)")
    p.set_defaults(func=cmd_bringup)

    p = verbs.add_parser("mcp", help="the memory as read-only tools for an LLM planner (an MCP "
                                     "server, asking the running stack)")
    p.add_argument("--transport", choices=TRANSPORTS, default="stdio",
                   help="stdio (the host starts this command) or http (streamable HTTP; "
                        "default stdio)")
    p.add_argument("--host", default="127.0.0.1",
                   help="with --transport http: the address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765,
                   help="with --transport http: the port (default 8765)")
    p.add_argument("--namespace", default="", help="the stack's namespace (default: root)")
    p.add_argument("--timeout-s", type=float, default=5.0, metavar="S",
                   help="how long a tool waits for the stack to be found, and again for its "
                        "answer (default 5)")
    p.add_argument("--db", default=DEFAULT_DB,
                   help="the stack's store, read by replay_facts only, and only when it is "
                        f"the store the running stack verified (default {DEFAULT_DB})")
    p.set_defaults(func=cmd_mcp)

    p = verbs.add_parser("demo", help="the glass_cup grasp example, end to end")
    p.add_argument("--db", default="", help="store URL (default: a temporary SQLite file)")
    p.add_argument("--period", type=float, default=2.0, help="consolidation period, sim seconds")
    p.add_argument("--keep", action="store_true", help="keep the temporary files")
    p.add_argument("--sim", action="store_true",
                   help="instead: the closed loop in a physics simulator (MuJoCo), the same "
                        "episodes with and without memory; writes a plot")
    p.add_argument("--out", default=".", help="with --sim: where the JSON and plot go")
    p.set_defaults(func=cmd_demo)
    return parser


def _epilog() -> str:
    import textwrap
    lines = ["exit codes:"]
    lines += [textwrap.fill(meaning, 88, initial_indent=f"  {code}  ", subsequent_indent="     ")
              for code, meaning in sorted(EXIT_CODES.items())]
    lines += [textwrap.fill("Errors print one line, PROGRAM VERB: error: WHAT: WHY "
                            f"({TRACEBACK_ENV}=1 shows the traceback of an unexpected one).",
                            88)]
    return "\n".join(lines)
