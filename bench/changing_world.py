"""A changing world: how many grasps fail after what works changes, with and without memory.

    python -m bench.changing_world            # writes bench/results/changing_world.json
    python -m bench.changing_world --quick    # 3 seeds, 10 days of history, 10 after: a
                                              # smoke run (figures mean little)

A robot grasps `glass_cup` ten times a day, day after day. For HISTORY_DAYS (40) days it
grasps at 25 N and 19 of every 20 attempts succeed; then the world changes (a scenario),
and for DAYS_AFTER (30) days a planner chooses the force of each attempt (an arm). Each
attempt of the memory arm is a real execution result, taken by the logger's own intake
(`Ingest.take_received`, the record shape a topic result gets, stamped and received at
the simulated clock) into a real SQLite store; a real `consolidation_pass` runs once a
day, at 22:00; the planner's question goes to a `GroundingIndex` built from the store's
facts, as the grounding server builds it when it loads them, and asked as `ground` asks
it (`GroundingIndex.lookup`). No ROS.

Choices (fixed here, written into the result file):
- The world, per force band: a force below 20 N grips as 15 N does, one of 20 N or more
  as 25 N does (a recommended median between the two is judged by its band). Before a
  change: 25 N succeeds with p = 0.95 and 15 N with p = 0.60 (the cup slips). Changed:
  25 N succeeds with p = 0.05 (the new cups crack) and 15 N with p = 0.95.
- Scenarios (change day = HISTORY_DAYS + 1, counted from 1): `step`, changed from the
  change day on (the issue's case); `burst`, every force at p = 0.05 on the change day
  alone (a bad day: worn pads, wet cups), then as before; `drift`, from the change day
  25 N declines linearly to 0.05 over DRIFT_DAYS (28) days while 15 N works at 0.95;
  `zone_local`, the step in `lab` only, while `kitchen` (ten attempts a day too) stays
  as before; `steady`, the control, where nothing changes in either (what an arm's
  false alarms cost; the kitchen of `zone_local` is held to its kitchen: the same
  draws). Failure reasons: `cracked` for 25 N in a changed world, `slipped` otherwise.
- The force that works (the oracle's) is the band with the highest success probability
  that day, 25 N on a tie (the default).
- History: during the 40 days every arm grasps at 25 N (the issue's history is given,
  not chosen); the arms choose from the change day on. Every attempt draws one uniform
  number from a stream of its seed and environment, and succeeds when it is below the
  chosen force's probability: all arms face the same draws (a paired design), so a
  difference between arms is their choices, never luck.
- Arms. `none`: a robot without memory keeps only its last attempt in each environment:
  it repeats the force of a success and switches force after a failure (25 N -> 15 N,
  15 N -> 25 N), starting from the default 25 N: the issue's "a robot without memory
  would have stopped repeating the failure". `memory:<rule set>`: the README's planner
  on the consolidated facts of that rule set (`RULE_SETS`: `v1` = rules v1.0, `v2` =
  rules v2.0, both at their defaults; a run compares every one of them): it asks for
  the skill on the target in the environment with min_confidence 0.5 and, when the
  answer is OK and holds the skill_success_rate fact of that skill, target and
  environment, uses that fact's recommended force_n (the median
  a SemanticFact carries); otherwise it explores at 15 N. The README's example reads
  `facts[0]`, which is not that fact whenever a more confident fact ranks first (the
  cup's mass, a failure pattern): the harness picks the fact by kind and key, as a
  correct planner does, and counts the answers where `facts[0]` was another fact.
  `sliding_window`: per force, the success rate of its last W (10) attempts, Laplace-
  smoothed ((s + 1) / (n + 2), an untried force 0.5); the best estimate, 25 N on a tie.
  `oracle`: always the force that works.
- Failures after the change: in the changed environment, the DAYS_AFTER days from the
  change day. Avoidable failures: those whose draw the force that works would have
  turned into a success (every failure of the oracle is unavoidable). The issue's goals
  are judged on avoidable failures: its base rate (1 in 20 at the force that works)
  fails about 15 of 300 attempts whatever the memory does. "A change in one environment
  stays there": in `zone_local` the kitchen's avoidable failures at most those of the
  same kitchen in `steady` (the same draws) plus LOCAL_TOLERANCE (1) on average.
- Attempts until the arm first recommends what works, from the change: the memory's
  served force_n (none while it abstains), the window's best estimate, the no-memory
  robot's force, the oracle's; never within the window counts as the window's attempts
  plus one (and is counted apart).
- Status flips: changes of the changed environment's skill_success_rate fact between
  contested and active from one pass to the next, from the change on.
- Passes until served: from the first pass whose store holds contest_min_observations
  successes at the force that works since the change, the passes until the memory serves
  that force (0: that same pass); never: counted apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from bench.stats import mean_ci, write_result
from bench.stores import IDENTITY
from robot_memory.consolidation import consolidation_pass
from robot_memory.consolidation.rules import (RULES_V1, RULES_V2, STATUS_ACTIVE, STATUS_CONTESTED,
                                              RulesConfig)
from robot_memory.grounding.index import GroundingIndex
from robot_memory.grounding.request import OK, GroundingRequest
from robot_memory.intake.admission import Refused
from robot_memory.intake.ingest import Ingest
from robot_memory.store import MemoryStore

SKILL, TARGET = "manipulation.grasp", "glass_cup"
LAB, KITCHEN = "lab", "kitchen"
SOURCE = "execution_results"  # the logger's topic: the source its intake names
DEFAULT_FORCE, EXPLORE_FORCE = 25.0, 15.0
FORCES = (EXPLORE_FORCE, DEFAULT_FORCE)
HIGH_BAND_FROM_N = 20.0  # a force at or above this grips as 25 N does, below as 15 N
MIN_CONFIDENCE = 0.5  # the README planner's
MASS_KG = 0.21  # what the cups weigh (the demo's), measured on each attempt
ATTEMPT_S = 3.0

BEFORE = {DEFAULT_FORCE: 0.95, EXPLORE_FORCE: 0.60}
CHANGED = {DEFAULT_FORCE: 0.05, EXPLORE_FORCE: 0.95}
BAD_DAY = {DEFAULT_FORCE: 0.05, EXPLORE_FORCE: 0.05}
DRIFT_DAYS = 28

HISTORY_DAYS, DAYS_AFTER, ATTEMPTS_PER_DAY = 40, 30, 10
SEEDS = tuple(20260601 + i for i in range(20))
QUICK = {"seeds": 3, "history_days": 10, "days_after": 10, "n_resamples": 2000}
WINDOW = 10  # the sliding window's attempts per force
DAY_NS, HOUR_NS, MINUTE_NS = 86_400 * 10**9, 3600 * 10**9, 60 * 10**9
T0_NS = 1_767_225_600 * 10**9  # 2026-01-01 00:00 UTC: day 1 of the simulated clock
FIRST_ATTEMPT_NS, ATTEMPT_SPACING_NS, PASS_AT_NS = 9 * HOUR_NS, 40 * MINUTE_NS, 22 * HOUR_NS
PROBLEM_EXTRA = 3  # the goal: avoidable failures <= contest_min_observations + 3
TIMES_FEWER = 5.0  # ... and this many times fewer than today's rules, in the same run


def band(force: float) -> float:
    """The force whose behaviour `force` has: 25 N at or above 20 N, else 15 N."""
    return DEFAULT_FORCE if force >= HIGH_BAND_FROM_N else EXPLORE_FORCE


def attempt_ns(day: int, k: int) -> int:
    """Event time of the k-th attempt of day `day` (both from 0) on the simulated clock."""
    return T0_NS + day * DAY_NS + FIRST_ATTEMPT_NS + k * ATTEMPT_SPACING_NS


def pass_ns(day: int) -> int:
    return T0_NS + day * DAY_NS + PASS_AT_NS


# -- Scenarios ------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """What succeeds in a world: `table(day, environment)` gives each force band's
    success probability on that day (from 0), `change_day` the first changed day."""

    name: str
    description: str
    environments: tuple[str, ...]
    changed_environment: str
    change_day: int
    table: Callable[[int, str], dict[float, float]]
    cracked: Callable[[int, float, str], bool]

    def probability(self, day: int, force: float, environment: str) -> float:
        return self.table(day, environment)[band(force)]

    def success(self, day: int, force: float, environment: str,
                rng: np.random.Generator) -> bool:
        """One attempt: a single draw from `rng`, below the force's probability."""
        return bool(rng.random() < self.probability(day, force, environment))

    def failure_reason(self, day: int, force: float, environment: str) -> str:
        return "cracked" if self.cracked(day, band(force), environment) else "slipped"

    def working_force(self, day: int, environment: str) -> float:
        """The band that succeeds most often that day, the default on a tie."""
        table = self.table(day, environment)
        return max(FORCES, key=lambda force: (table[force], force == DEFAULT_FORCE))


def step(change_day: int) -> Scenario:
    def table(day: int, environment: str) -> dict[float, float]:
        return CHANGED if day >= change_day else BEFORE
    return Scenario("step", "from the change day, 25 N cracks the new cups (p 0.05) and "
                    "15 N works (0.95)", (LAB,), LAB, change_day, table,
                    lambda day, force, env: day >= change_day and force == DEFAULT_FORCE)


def burst(change_day: int) -> Scenario:
    def table(day: int, environment: str) -> dict[float, float]:
        return BAD_DAY if day == change_day else BEFORE
    return Scenario("burst", "on the change day alone every force succeeds with p 0.05; "
                    "then as before", (LAB,), LAB, change_day, table,
                    lambda day, force, env: False)


def drift(change_day: int) -> Scenario:
    def table(day: int, environment: str) -> dict[float, float]:
        if day < change_day:
            return BEFORE
        share = min(1.0, (day - change_day + 1) / DRIFT_DAYS)
        high = BEFORE[DEFAULT_FORCE] + share * (CHANGED[DEFAULT_FORCE] - BEFORE[DEFAULT_FORCE])
        return {DEFAULT_FORCE: high, EXPLORE_FORCE: CHANGED[EXPLORE_FORCE]}
    return Scenario("drift", f"from the change day, 25 N declines linearly to 0.05 over "
                    f"{DRIFT_DAYS} days while 15 N works (0.95)", (LAB,), LAB, change_day,
                    table, lambda day, force, env: day >= change_day and force == DEFAULT_FORCE)


def zone_local(change_day: int) -> Scenario:
    def table(day: int, environment: str) -> dict[float, float]:
        return CHANGED if day >= change_day and environment == LAB else BEFORE
    return Scenario("zone_local", "the step in lab only; kitchen stays as before (25 N "
                    "works there)", (LAB, KITCHEN), LAB, change_day, table,
                    lambda day, force, env: day >= change_day and force == DEFAULT_FORCE
                    and env == LAB)


def steady(change_day: int) -> Scenario:
    def table(day: int, environment: str) -> dict[float, float]:
        return BEFORE
    return Scenario("steady", "nothing changes, in lab or kitchen (the control: what "
                    "false alarms cost, and the kitchen zone_local is held to)",
                    (LAB, KITCHEN), LAB, change_day, table, lambda day, force, env: False)


SCENARIOS = {"step": step, "burst": burst, "drift": drift, "zone_local": zone_local,
             "steady": steady}
GOAL_SCENARIOS = ("step", "burst", "drift", "zone_local")  # steady is the control
LOCAL_TOLERANCE = 1.0  # zone_local's kitchen: avoidable failures at most steady's + this


# -- Rule sets ------------------------------------------------------------------------
@dataclass(frozen=True)
class RuleSet:
    """The consolidation a memory arm runs: a rule version's rules and their parameters.
    A new rule version registers itself in RULE_SETS and runs beside today's in the
    same run (`--rule-sets v1,<name>`)."""

    name: str
    description: str
    config: RulesConfig = RulesConfig(rule_version="v1.0")
    rules: tuple = RULES_V1


RULE_SETS = {"v1": RuleSet("v1", "today's rules (rules v1, default parameters)"),
             "v2": RuleSet("v2", "rules v2.0: parameter bands and regimes (default "
                                 "parameters)", RulesConfig(rule_version="v2.0"), RULES_V2)}
BASELINE_RULE_SET = "v1"


# -- Arms -----------------------------------------------------------------------------
class Arm:
    """A planner: `choose` gives (force to use, force it recommends or None)."""

    name = ""

    def choose(self, day: int, environment: str) -> tuple[float, float | None]:
        raise NotImplementedError

    def observe(self, day: int, k: int, environment: str, force: float, success: bool,
                reason: str) -> None:
        """The outcome of an attempt (every attempt, the history's too)."""

    def end_day(self, day: int) -> None:
        """The day's last attempt is done."""

    def close(self) -> None:
        pass


class NoMemory(Arm):
    """Win-stay, lose-shift on its last attempt in each environment."""

    name = "none"

    def __init__(self):
        self.last: dict[str, tuple[float, bool]] = {}

    def choose(self, day, environment):
        force, success = self.last.get(environment, (DEFAULT_FORCE, True))
        if not success:
            force = EXPLORE_FORCE if band(force) == DEFAULT_FORCE else DEFAULT_FORCE
        return force, force

    def observe(self, day, k, environment, force, success, reason):
        self.last[environment] = (force, success)


class SlidingWindow(Arm):
    """The best Laplace-smoothed success rate over each force's last WINDOW attempts."""

    name = "sliding_window"

    def __init__(self, window: int = WINDOW):
        self.window = window
        self.outcomes: dict[tuple[str, float], deque] = {}

    def estimate(self, environment: str, force: float) -> float:
        seen = self.outcomes.get((environment, force), ())
        return (sum(seen) + 1) / (len(seen) + 2)

    def choose(self, day, environment):
        best = max(FORCES, key=lambda f: (self.estimate(environment, f), f == DEFAULT_FORCE))
        return best, best

    def observe(self, day, k, environment, force, success, reason):
        self.outcomes.setdefault((environment, band(force)),
                                 deque(maxlen=self.window)).append(success)


class Oracle(Arm):
    name = "oracle"

    def __init__(self, scenario: Scenario):
        self.scenario = scenario

    def choose(self, day, environment):
        force = self.scenario.working_force(day, environment)
        return force, force


class Memory(Arm):
    """The README's planner over a real store: results through the logger's intake, a
    pass a day, the grounding index built from the store's facts."""

    def __init__(self, rule_set: RuleSet, url: str, environments: Sequence[str]):
        self.rule_set = rule_set
        self.name = f"memory:{rule_set.name}"
        self.store = MemoryStore(url)
        self.partition = self.store.partition(IDENTITY)
        self.ingest = Ingest(self.partition)
        self.events: list = []
        self.index = GroundingIndex(IDENTITY, ())
        self.environments = tuple(environments)
        # Per pass (day): each environment's skill fact (status, served force or None).
        self.after_pass: list[dict[str, tuple[str, float | None]]] = []
        self.facts0_other = 0  # OK answers whose facts[0] is not the skill fact
        self.ok_answers = 0

    def served_force(self, environment: str) -> float | None:
        """The force_n the README's planner reads from memory, or None (it explores)."""
        answer = self.index.lookup(GroundingRequest(SKILL, TARGET, environment,
                                                    min_confidence=MIN_CONFIDENCE))
        if answer.status != OK:
            return None
        fact = next((f for f in answer.facts if f.kind == "skill_success_rate"
                     and f.value.get("target_class") == TARGET
                     and f.value.get("environment") == environment), None)
        self.ok_answers += 1
        self.facts0_other += answer.facts[0] is not fact
        if fact is None:
            return None
        force = fact.value.get("recommended_parameters", {}).get("force_n")
        return None if force is None else float(force["median"])

    def choose(self, day, environment):
        force = self.served_force(environment)
        return (EXPLORE_FORCE, None) if force is None else (force, force)

    def observe(self, day, k, environment, force, success, reason):
        stamp = attempt_ns(day, k)
        fields = {"stamp_ns": stamp, "skill_id": SKILL, "target_class": TARGET,
                  "environment": environment, "zone": "", "parameters": {"force_n": force},
                  "observations": {"mass_kg": MASS_KG}, "success": success,
                  "failure_reason": "" if success else reason, "duration_s": ATTEMPT_S,
                  "intent_id": "", "notes": ""}
        event = self.ingest.take_received(dict, fields, SOURCE, stamp)
        if isinstance(event, Refused):
            raise RuntimeError(f"the intake refused a simulated result: {event.detail}")
        self.events.append(event)

    def end_day(self, day):
        if self.ingest.submit_events(self.events):
            raise RuntimeError("the intake's queue was full")
        self.events = []
        if not self.ingest.flush(120.0):
            raise RuntimeError(f"the intake did not write: {self.ingest.last_error}")
        consolidation_pass(self.partition, self.rule_set.config, stamp_ns=pass_ns(day),
                           rules=self.rule_set.rules)
        facts = self.partition.facts()
        self.index = GroundingIndex(IDENTITY, facts)
        state = {}
        for environment in self.environments:
            fact = next((f for f in facts if f.kind == "skill_success_rate"
                         and f.value.get("environment") == environment
                         and f.value.get("target_class") == TARGET), None)
            state[environment] = (fact.status if fact else "none",
                                  self.served_force(environment))
        self.after_pass.append(state)

    def close(self):
        self.ingest.close()
        self.store.close()


# -- One run --------------------------------------------------------------------------
@dataclass
class Attempt:
    day: int
    environment: str
    force: float
    recommended: float | None
    success: bool
    avoidable: bool  # failed, and the force that works would have succeeded on its draw
    working: float


def simulate(scenario: Scenario, arm: Arm, seed: int, days: int) -> list[Attempt]:
    """Every attempt of `days` days; the arm chooses from the scenario's change day."""
    streams = {env: np.random.default_rng([seed, i])
               for i, env in enumerate(scenario.environments)}
    attempts = []
    for day in range(days):
        for k in range(ATTEMPTS_PER_DAY):
            for environment in scenario.environments:
                if day < scenario.change_day:
                    force, recommended = DEFAULT_FORCE, None
                else:
                    force, recommended = arm.choose(day, environment)
                draw = streams[environment].random()
                p = scenario.probability(day, force, environment)
                working = scenario.working_force(day, environment)
                success = bool(draw < p)
                p_working = scenario.probability(day, working, environment)
                avoidable = not success and draw < p_working
                arm.observe(day, k, environment, force, success,
                            scenario.failure_reason(day, force, environment))
                attempts.append(Attempt(day, environment, force, recommended, success,
                                        avoidable, working))
        arm.end_day(day)
    return attempts


def measure(scenario: Scenario, arm: Arm, attempts: list[Attempt], days_after: int,
            config: RulesConfig) -> dict:
    """The figures of one run (one seed, one arm)."""
    window = range(scenario.change_day, scenario.change_day + days_after)
    out = {}
    for label, environment in [("changed", scenario.changed_environment)] + [
            ("unchanged", env) for env in scenario.environments
            if env != scenario.changed_environment]:
        mine = [a for a in attempts if a.environment == environment and a.day in window]
        first = next((i for i, a in enumerate(mine, 1)
                      if a.recommended is not None and band(a.recommended) == a.working), None)
        out[label] = {
            "environment": environment, "attempts": len(mine),
            "failed": sum(not a.success for a in mine),
            "avoidable_failures": sum(a.avoidable for a in mine),
            "attempts_until_recommends_working": first,
            "recommends_working_share": round(sum(
                a.recommended is not None and band(a.recommended) == a.working
                for a in mine) / len(mine), 4) if mine else None}
    if isinstance(arm, Memory):
        environment = scenario.changed_environment
        states = arm.after_pass[scenario.change_day:scenario.change_day + days_after]
        statuses = [s[environment][0] for s in states]
        out["changed"]["status_flips"] = sum(
            {a, b} == {STATUS_ACTIVE, STATUS_CONTESTED} for a, b in zip(statuses, statuses[1:]))
        out["changed"]["days_contested"] = statuses.count(STATUS_CONTESTED)
        out["changed"]["passes_until_working_served"] = passes_until_served(
            scenario, attempts, states, config.contest_min_observations, days_after)
        out["readme_facts0_not_the_skill_fact"] = arm.facts0_other
        out["ok_answers"] = arm.ok_answers
        for label in out:
            if isinstance(out[label], dict) and "environment" in out[label]:
                env = out[label]["environment"]
                out[label]["days_serving_working"] = sum(
                    s[env][1] is not None and band(s[env][1])
                    == scenario.working_force(scenario.change_day + i + 1, env)
                    for i, s in enumerate(states))
    return out


def passes_until_served(scenario: Scenario, attempts: list[Attempt], states: list[dict],
                        enough: int, days_after: int) -> dict:
    """From the first pass whose store holds `enough` successes at the force that works
    (since the change), how many more passes until the memory serves that force."""
    environment = scenario.changed_environment
    successes, ready = 0, None
    for i in range(days_after):
        day = scenario.change_day + i
        successes += sum(a.success and band(a.force) == a.working for a in attempts
                         if a.day == day and a.environment == environment)
        if successes >= enough:
            ready = i
            break
    if ready is None:
        return {"enough_successes_at_pass": None, "passes": None}
    served = next((j - ready for j in range(ready, len(states))
                   if states[j][environment][1] is not None
                   and band(states[j][environment][1])
                   == scenario.working_force(scenario.change_day + j + 1, environment)), None)
    return {"enough_successes_at_pass": ready + 1, "passes": served}


def run_one(scenario_name: str, arm_name: str, seed: int, history_days: int, days_after: int,
            workdir: Path) -> dict:
    scenario = SCENARIOS[scenario_name](history_days)
    rule_set = RULE_SETS[arm_name.split(":", 1)[1]] if arm_name.startswith("memory:") else None
    if rule_set is not None:
        path = workdir / f"{scenario_name}_{seed}_{rule_set.name}.db"
        arm: Arm = Memory(rule_set, f"sqlite:///{path}", scenario.environments)
    elif arm_name == "none":
        arm = NoMemory()
    elif arm_name == "sliding_window":
        arm = SlidingWindow()
    elif arm_name == "oracle":
        arm = Oracle(scenario)
    else:
        raise ValueError(f"unknown arm {arm_name!r}")
    try:
        attempts = simulate(scenario, arm, seed, history_days + days_after)
        config = rule_set.config if rule_set else RulesConfig()
        result = measure(scenario, arm, attempts, days_after, config)
        if isinstance(arm, Memory):
            result["timeline"] = timeline(scenario, arm, attempts, days_after)
        return result
    finally:
        arm.close()


def timeline(scenario: Scenario, arm: Memory, attempts: list[Attempt], days_after: int
             ) -> list[list]:
    """Per day from two days before the change: [day from 1, skill fact status after the
    night's pass, the force it serves next day (None: abstains), failures that day]."""
    env = scenario.changed_environment
    rows = []
    for day in range(max(0, scenario.change_day - 2), scenario.change_day + days_after):
        status, served = arm.after_pass[day][env]
        failed = sum(not a.success for a in attempts if a.day == day and a.environment == env)
        rows.append([day + 1, status, served, failed])
    return rows


# -- All runs -------------------------------------------------------------------------
def summary(values: list, n_resamples: int, never: int | None = None) -> dict:
    low, high, note = mean_ci(values, n_resamples)
    out = {"mean": round(statistics.fmean(values), 4), "ci95": [round(low, 4), round(high, 4)],
           "per_seed": values}
    if note:
        out["ci_note"] = note
    if never is not None:
        out["never_in_window"] = never
    return out


def summarise(runs: list[dict], days_after: int, n_resamples: int) -> dict:
    out = {}
    for label in ("changed", "unchanged"):
        if label not in runs[0]:
            continue
        block = {"environment": runs[0][label]["environment"],
                 "attempts": runs[0][label]["attempts"]}
        for metric in ("failed", "avoidable_failures", "recommends_working_share",
                       "status_flips", "days_contested", "days_serving_working"):
            if metric in runs[0][label]:
                block[metric] = summary([r[label][metric] for r in runs], n_resamples)
        censored = block["attempts"] + 1
        firsts = [r[label]["attempts_until_recommends_working"] for r in runs]
        block["attempts_until_recommends_working"] = summary(
            [censored if f is None else f for f in firsts], n_resamples,
            never=sum(f is None for f in firsts))
        if "passes_until_working_served" in runs[0][label]:
            passes = [r[label]["passes_until_working_served"]["passes"] for r in runs]
            ready = [r[label]["passes_until_working_served"]["enough_successes_at_pass"]
                     for r in runs]
            block["passes_until_working_served"] = {
                "per_seed": passes, "enough_successes_at_pass_per_seed": ready,
                "never_served": sum(p is None for p in passes),
                "max": max((p for p in passes if p is not None), default=None)}
        out[label] = block
    if "readme_facts0_not_the_skill_fact" in runs[0]:
        out["readme_facts0_not_the_skill_fact"] = {
            "per_seed": [r["readme_facts0_not_the_skill_fact"] for r in runs],
            "ok_answers_per_seed": [r["ok_answers"] for r in runs]}
        out["timeline_first_seed"] = runs[0]["timeline"]
    return out


def goals(results: dict, rule_sets: list[str]) -> dict:
    """The issue's goals per memory rule set and scenario (today's rules are expected to
    miss them: their figures are the baseline)."""
    out = {}
    baseline = f"memory:{BASELINE_RULE_SET}"
    for name in rule_sets:
        arm = f"memory:{name}"
        bound = RULE_SETS[name].config.contest_min_observations + PROBLEM_EXTRA
        per = {}
        for scenario, arms in results.items():
            if scenario not in GOAL_SCENARIOS:
                continue
            changed = arms[arm]["changed"]
            avoidable = changed["avoidable_failures"]["mean"]
            passes = changed["passes_until_working_served"]
            served_in_one = passes["never_served"] == 0 and all(
                p is not None and p <= 1 for p in passes["per_seed"])
            today = arms[baseline]["changed"]["avoidable_failures"]["mean"] \
                if baseline in arms else None
            ratio = None if today is None else (
                float("inf") if avoidable == 0 else round(today / avoidable, 3))
            row = {"avoidable_failures_mean": avoidable, "bound": bound,
                   "failures_at_most_contest_min_plus_3": avoidable <= bound,
                   "working_served_within_one_pass": served_in_one,
                   "times_fewer_than_today": ratio,
                   f"at_least_{TIMES_FEWER:g}x_fewer_than_today":
                   ratio is not None and ratio >= TIMES_FEWER}
            if "unchanged" in arms[arm]:
                kitchen = arms[arm]["unchanged"]["avoidable_failures"]["mean"]
                control = results.get("steady", {}).get(arm, {}).get("unchanged")
                row["unchanged_avoidable_failures_mean"] = kitchen
                row["steady_world_same_environment_mean"] = \
                    None if control is None else control["avoidable_failures"]["mean"]
                row["change_stays_local"] = control is not None and \
                    kitchen <= control["avoidable_failures"]["mean"] + LOCAL_TOLERANCE
            row["all_met"] = all(v for k, v in row.items() if isinstance(v, bool))
            per[scenario] = row
        out[arm] = per
    return out


def run(seeds: Sequence[int], history_days: int, days_after: int, scenarios: Sequence[str],
        arms: Sequence[str], n_resamples: int, say=print) -> dict:
    started = time.perf_counter()
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_changing_world_") as scratch:
        for scenario in scenarios:
            results[scenario] = {}
            for arm in arms:
                runs = [run_one(scenario, arm, seed, history_days, days_after, Path(scratch))
                        for seed in seeds]
                results[scenario][arm] = summarise(runs, days_after, n_resamples)
                changed = results[scenario][arm]["changed"]
                say(f"[changing_world] {scenario:10s} {arm:14s} failed after the change "
                    f"{changed['failed']['mean']:6.1f} (avoidable "
                    f"{changed['avoidable_failures']['mean']:6.1f}, 95% CI "
                    f"{changed['avoidable_failures']['ci95']}) of {changed['attempts']}")
    rule_sets = [a.split(":", 1)[1] for a in arms if a.startswith("memory:")]
    scenario_tables = {}
    for name in scenarios:
        scenario = SCENARIOS[name](history_days)
        scenario_tables[name] = {
            "description": scenario.description,
            "changed_environment": scenario.changed_environment,
            "environments": list(scenario.environments),
            "success_probability_by_day": {
                env: {str(day + 1): {f"{force:g}": round(scenario.probability(day, force, env), 4)
                                     for force in FORCES}
                      for day in sorted({history_days - 1, history_days, history_days + 1,
                                         history_days + days_after // 2,
                                         history_days + days_after - 1})}
                for env in scenario.environments}}
    return {"settings": {"seeds": list(seeds), "history_days": history_days,
                         "days_after": days_after, "change_day": history_days + 1,
                         "attempts_per_day_per_environment": ATTEMPTS_PER_DAY,
                         "forces_n": list(FORCES), "default_force_n": DEFAULT_FORCE,
                         "explore_force_n": EXPLORE_FORCE, "min_confidence": MIN_CONFIDENCE,
                         "sliding_window_attempts": WINDOW, "drift_days": DRIFT_DAYS,
                         "bootstrap": {"method": "BCa", "confidence_level": 0.95,
                                       "n_resamples": n_resamples},
                         "rule_sets": {name: {"description": RULE_SETS[name].description,
                                              "config": asdict(RULE_SETS[name].config)}
                                       for name in rule_sets}},
            "scenarios": scenario_tables,
            "arms": list(arms),
            "results": results,
            "goals": goals(results, rule_sets),
            "choices": CHOICES,
            "runtime_s": round(time.perf_counter() - started, 1)}


CHOICES = [" ".join(line.split()) for line in
           __doc__.split("Choices (fixed here, written into the result file):")[1]
           .split("\n- ")[1:]]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.changing_world",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK['seeds']} seeds, {QUICK['history_days']} days of "
                        f"history and {QUICK['days_after']} after; written only with --out")
    parser.add_argument("--seeds", type=int, default=None, help=f"(default {len(SEEDS)})")
    parser.add_argument("--history-days", type=int, default=None,
                        help=f"(default {HISTORY_DAYS})")
    parser.add_argument("--days-after", type=int, default=None, help=f"(default {DAYS_AFTER})")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--rule-sets", default=",".join(RULE_SETS),
                        help=f"memory arms, one per rule set (known: {', '.join(RULE_SETS)})")
    parser.add_argument("--n-resamples", type=int, default=None, help="bootstrap (10000)")
    parser.add_argument("--out", default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    preset = QUICK if args.quick else {"seeds": len(SEEDS), "history_days": HISTORY_DAYS,
                                       "days_after": DAYS_AFTER, "n_resamples": 10000}
    n_seeds = args.seeds or preset["seeds"]
    if n_seeds > len(SEEDS):
        raise SystemExit(f"at most {len(SEEDS)} seeds")
    rule_sets = [name for name in args.rule_sets.split(",") if name]
    unknown = [name for name in rule_sets if name not in RULE_SETS] + [
        name for name in args.scenarios.split(",") if name not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown rule set or scenario: {', '.join(unknown)}")
    arms = ["none", *(f"memory:{name}" for name in rule_sets), "sliding_window", "oracle"]
    result = run(SEEDS[:n_seeds], args.history_days or preset["history_days"],
                 args.days_after or preset["days_after"], args.scenarios.split(","), arms,
                 args.n_resamples or preset["n_resamples"])
    result["quick"] = args.quick
    if args.out or not args.quick:
        path = write_result("changing_world", result, args.out)
        print(f"[changing_world] wrote {path} in {result['runtime_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
