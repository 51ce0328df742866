"""`robot-memory mcp`: the robot's memory as read-only MCP tools, on the official SDK.

Six tools, each a thin call into a Backend (ros/mcp_tools.py asks the running stack):
`ground`, `explain_fact`, `explain_action`, `facts`, `consolidate_preview`,
`replay_facts`. Every field of every tool is described in its JSON schema (pydantic
Field descriptions), and every tool is annotated read-only: none writes, overrides or
applies, and there is no tool that could. The answers are text whose first line says what
they are (answers.py).
"""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import Field

from robot_memory.planners.answers import refused

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations
except ImportError as exc:  # optional: only `robot-memory mcp` needs it
    MCPServer = ToolAnnotations = None
    MISSING_SDK = str(exc)
else:
    MISSING_SDK = ""

SERVER_NAME = "robot_memory"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOOL_NAMES = ("ground", "explain_fact", "explain_action", "facts", "consolidate_preview",
              "replay_facts")

INSTRUCTIONS = (
    "The memory of one robot: facts it consolidated from its own skill attempts. Every "
    "tool is read-only. The first line of every answer says what it is: OK (facts of this "
    "robot), ABSTAIN (memory will not answer: plan without it), ANALOGY (facts of OTHER "
    "targets), PRIOR (facts of OTHER robots), REFUSED or UNAVAILABLE (memory could not be "
    "asked: no knowledge, not a negative answer). Never present an ANALOGY or a PRIOR as "
    "this robot's knowledge. `ground` is the answer to plan on; it is audited.")


class Backend(Protocol):
    """What the tools call: each method returns the answer's text."""

    def ground(self, skill_id: str, target_class: str, environment: str, zone: str,
               fact_kinds: list[str], min_confidence: float, max_results: int,
               intent_id: str, allow_analogies: bool, target_properties: dict[str, float],
               allow_priors: bool) -> str: ...

    def explain_fact(self, fact_id: int, kind: str, key: str) -> str: ...

    def explain_action(self, intent_id: str) -> str: ...

    def facts(self, kind: str) -> str: ...

    def consolidate_preview(self) -> str: ...

    def replay_facts(self, until_event_id: int, until_time_s: float) -> str: ...


def _text(description: str):
    return Field(description=description)


def build_server(backend: Backend):
    """An MCPServer whose six tools ask `backend`."""
    if MCPServer is None:
        raise RuntimeError(f"the MCP SDK is not installed ({MISSING_SDK}): pip install the "
                           "`mcp` line of requirements/python.txt (docs/planners.md)")
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                idempotent_hint=False, open_world_hint=False)

    def ground(
        skill_id: Annotated[str, _text("Dotted skill name, e.g. manipulation.grasp.")],
        target_class: Annotated[str, _text("Object class, e.g. glass_cup; empty = any "
                                           "target.")] = "",
        environment: Annotated[str, _text("Environment, e.g. sim_relaxed; empty = every "
                                          "environment, one fact each.")] = "",
        zone: Annotated[str, _text("Zone, e.g. shelf_b: adds its zone_risk fact; empty = "
                                   "none.")] = "",
        fact_kinds: Annotated[list[str], _text(
            "Fact kinds to return (skill_success_rate, interaction_pattern, "
            "object_property, zone_risk); empty = all.")] = [],  # noqa: B006 (schema default)
        min_confidence: Annotated[float, Field(ge=0.0, le=1.0, description=(
            "Facts below this confidence are not served."))] = 0.0,
        max_results: Annotated[int, Field(ge=0, description=(
            "At most this many facts; 0 = the server's default."))] = 0,
        intent_id: Annotated[str, _text("Your plan step's id, recorded in the consultation "
                                        "audit (explain_action finds it by this id).")] = "",
        allow_analogies: Annotated[bool, _text(
            "When this robot has no fact about the target, answer with facts of similar "
            "OTHER targets (ANALOGY) instead of ABSTAIN.")] = False,
        target_properties: Annotated[dict[str, float], _text(
            "Properties measured on the target, e.g. {\"mass_kg\": 0.31}, compared with "
            "known targets for analogies.")] = {},  # noqa: B006 (schema default)
        allow_priors: Annotated[bool, _text(
            "Add the facts of OTHER robots of the same embodiment (PRIOR).")] = False,
    ) -> str:
        return backend.ground(skill_id, target_class, environment, zone, list(fact_kinds),
                              min_confidence, max_results, intent_id, allow_analogies,
                              dict(target_properties), allow_priors)

    def explain_fact(
        fact_id: Annotated[int, Field(ge=0, description=(
            "The fact's id (fact_id in an answer); 0 = name it by kind and key."))] = 0,
        kind: Annotated[str, _text("The fact's kind, with key, when fact_id is 0.")] = "",
        key: Annotated[str, _text("The fact's key, e.g. 'manipulation.grasp + glass_cup + "
                                  "sim_relaxed', with kind, when fact_id is 0.")] = "",
    ) -> str:
        if not fact_id and not (kind and key):
            return refused("explain_fact", "name the fact by fact_id, or by kind and key")
        return backend.explain_fact(fact_id, kind, key)

    def explain_action(
        intent_id: Annotated[str, Field(min_length=1, description=(
            "The intent_id a plan step gave to ground and its skill results."))],
    ) -> str:
        return backend.explain_action(intent_id)

    def facts(
        kind: Annotated[str, _text("Only facts of this kind; empty = every kind.")] = "",
    ) -> str:
        return backend.facts(kind)

    def consolidate_preview() -> str:
        return backend.consolidate_preview()

    def replay_facts(
        until_event_id: Annotated[int, Field(ge=0, description=(
            "The facts as they were after this event id of the log; 0 = use "
            "until_time_s."))] = 0,
        until_time_s: Annotated[float, Field(ge=0.0, description=(
            "The facts as they were at this event time, in seconds (the stamps' clock); "
            "0 = use until_event_id."))] = 0.0,
    ) -> str:
        if bool(until_event_id) == bool(until_time_s):
            return refused("replay_facts", "give exactly one of until_event_id and "
                           "until_time_s")
        return backend.replay_facts(until_event_id, until_time_s)

    descriptions = {
        "ground": "Ask what this robot knows about a skill on a target, to plan on. Audited "
                  "as a consultation. The first line says OK, ABSTAIN, ANALOGY or PRIOR.",
        "explain_fact": "Why does the robot think this? The events, passes and "
                        "consultations behind one fact.",
        "explain_action": "The lineage of one plan step (intent_id): the consultations made "
                          "for it, the results and amendments it produced, the facts they "
                          "moved.",
        "facts": "Every fact of this robot, as the last consolidation pass left them.",
        "consolidate_preview": "What a consolidation pass would change now, as a diff. A dry "
                               "run: nothing is applied; only an operator can apply it.",
        "replay_facts": "The facts as they were at a point of the log (an event id or an "
                        "event time), rebuilt from the log; the live facts are not touched.",
    }
    for tool in (ground, explain_fact, explain_action, facts, consolidate_preview,
                 replay_facts):
        server.add_tool(tool, name=tool.__name__, description=descriptions[tool.__name__],
                        annotations=read_only, structured_output=False)
    return server


def serve(backend: Backend, transport: str = "stdio", host: str = DEFAULT_HOST,
          port: int = DEFAULT_PORT) -> None:
    """Serve until the client goes away (stdio) or the process is stopped (http)."""
    server = build_server(backend)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)
