"""Grounding lookups: which facts answer a planner's question, or why none do.

The index is an immutable snapshot built once per consolidation pass; a lookup touches
only memory, never the database, so it fits inside a planner's control loop. Holders
swap a whole new index in with one reference assignment, which never tears an answer.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from operator import itemgetter
from typing import Iterable, NamedTuple

from robot_memory.grounding.analogies import (PROPERTY_KIND, QUERY_SOURCE_FACT,
                                              QUERY_SOURCE_REQUEST, Analogy, AnalogySettings,
                                              KnownProperties)
from robot_memory.consolidation.fact_schemas import stored_fact_problem
from robot_memory.consolidation.override_plan import OPERATOR_RULE_VERSION
from robot_memory.consolidation.rules import STATUS_ACTIVE, STATUS_CANDIDATE, STATUS_CONTESTED
from robot_memory.grounding.request import (ABSTAIN, ANALOGY, OK, PRIOR, REASON_BELOW_CONFIDENCE,
                                            REASON_CONTESTED, REASON_NO_CLOSE_CASE, REASON_NO_FACT,
                                            REASON_ONLY_CANDIDATES, REASON_STALE, GroundingAnswer,
                                            GroundingRequest, validate_request)
from robot_memory.grounding.priors import EMPTY_PRIORS, PRIOR_KIND, PriorIndex, blend
from robot_memory.store import FactRow

# Kinds whose facts are about a skill; the others (object_property, zone_risk) are context.
SKILL_FACT_KINDS = frozenset({"skill_success_rate", "interaction_pattern"})
RATE_KIND = "skill_success_rate"

# A served confidence this much or more below the stored one is named in the answer's
# reason (stale-decayed); a smaller drop shows in the fact's confidence alone.
STALE_NOTE_MIN_DROP = 0.001
_NS_PER_DAY = 86_400 * 10**9

DEFAULT_MAX_RESULTS = 10
DEFAULT_ANALOGY_SETTINGS = AnalogySettings()  # the parameter table's defaults


class _Facets(NamedTuple):
    """What a lookup reads of a fact's value, taken out once: the index holds these,
    not 10^4 parsed values. None: the value does not name it (matches any request)."""

    skill_id: str | None
    target_class: str | None
    environment: str | None
    index_keys: tuple[tuple[str, str, str], ...]


def _facets(kind: str, value: dict, before: _Facets | None = None) -> _Facets:
    """The facets of a fact of `kind` with `value`: `before` (its facets in the index
    being changed) when they are the same, as they are for a fact about a skill whose
    value changed in its counts alone (a pass's delta is mostly such facts)."""
    get = value.get
    skill, target, environment = get("skill_id"), get("target_class"), get("environment")
    if before is not None and skill and target is not None and skill == before.skill_id \
            and target == before.target_class and environment == before.environment:
        return before
    skill, target, environment = _interned(skill), _interned(target), _interned(environment)
    return _Facets(skill, target, environment, _index_keys(kind, value, skill, target))


def _interned(text: str | None) -> str | None:
    # A few hundred names shared by 10^4 facts: one copy each. A name that is neither
    # text nor absent raises: the fact is left out of the index (see _loaded).
    if text.__class__ is str:
        return sys.intern(text)
    if text is None:
        return None
    raise TypeError(f"a name is {type(text).__name__}, not a string")


def _loaded(fact: FactRow, before: _Facets | None = None) -> _Facets:
    """The facets of a fact to index; raises (the fact is left out, and only it) for
    one from outside not of its kind's shape (fact_schemas.stored_fact_problem) or one
    whose value the index cannot read."""
    problem = stored_fact_problem(fact.kind, fact.rule_version, fact.peek_value)
    if problem is not None:
        raise ValueError(str(problem))
    return _facets(fact.kind, fact.peek_value(), before)


def _why(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _is_evidence(fact: FactRow) -> bool:
    """A fact the robot's own results made (an operator's fact is a person's word, its
    stamp the override's, perhaps on another clock): only these date the robot's
    evidence, and only these go stale."""
    return fact.rule_version != OPERATOR_RULE_VERSION


def _newest_evidence_ns(facts: Iterable[FactRow]) -> int:
    return max((f.last_updated_ns for f in facts if _is_evidence(f)), default=0)


def _days(age_ns: int) -> str:
    return f"{age_ns / _NS_PER_DAY:.1f} days"


def _contested_reason(what: str, contested: list[FactRow], about_skill: list[FactRow]) -> str:
    keys = ", ".join(f"[{f.key}]" for f in contested)
    active = Counter(f.kind for f in about_skill if f.status == STATUS_ACTIVE)
    held = "; held back with it: " + ", ".join(
        f"{n} active {kind}" for kind, n in sorted(active.items())) if active else ""
    return f"evidence about {what} is contested: its success rate {keys} disagrees with " \
           f"itself{held}"


def _asks_for_skill_facts(req: GroundingRequest) -> bool:
    return not req.fact_kinds or bool(set(req.fact_kinds) & SKILL_FACT_KINDS)


def _rank(fact: FactRow) -> tuple:
    return (-fact.confidence, fact.kind, fact.key)


# Lists longer than this (a skill's: thousands of facts) keep their facts' ranks too, as
# (*rank, fact) in the same order, so that a delta's changes are merged into them by one
# sort that compares tuples alone: no rank is computed for the thousands of facts a delta
# leaves as they are, at the cost of the ranks' memory (docs/performance.md, "Why the
# code is shaped this way"). No two facts of an index share a rank ((kind, key) is
# unique): facts are never compared.
_RANKED_LENGTH = 64
_fact_of = itemgetter(3)


def _ranked(fact: FactRow) -> tuple:
    return (-fact.confidence, fact.kind, fact.key, fact)


def _ranked_with_changes(ranked: list[tuple], gone: list[FactRow],
                         new: list[FactRow]) -> list[tuple]:
    """`ranked` (sorted) without the facts `gone` (each in it) and with `new`, sorted.
    Filtered by identity: cheaper than finding a delta's hundreds of changes in it by
    bisection, as ranks tie often (confidences repeat) and ties compare keys."""
    gone_ids = {id(fact) for fact in gone}
    kept = [entry for entry in ranked if id(entry[3]) not in gone_ids]
    kept += map(_ranked, new)
    kept.sort()  # two sorted runs: a merge
    return kept


def _index_keys(kind: str, value: dict, skill: str | None, target: str | None
                ) -> tuple[tuple[str, str, str], ...]:
    """The index lists a fact of `kind` with `value` belongs to, its names interned
    (`skill` and `target` are value's skill_id and target_class, interned already)."""
    if skill:
        return (("skill", skill, ""),
                ("skill_target", skill, target if "target_class" in value else ""))
    if kind == "object_property":
        return (("target_class", _interned(value["target_class"]), ""),)
    if kind == "zone_risk":
        scope = value["scope"]
        return ((_interned(scope), _interned(value[scope]), ""),)
    return ()


class GroundingIndex:
    """Facts of one identity, pre-sorted by rank and indexed by skill, by skill + target,
    and (for facts about objects and places) by target, zone and environment, so a lookup
    touches only the few facts it could return. Immutable: changes make a new index."""

    def __init__(self, identity_hash: str, facts: Iterable[FactRow], *,
                 stale_half_life_s: float = 0.0):
        self.identity_hash = identity_hash
        # Staleness, at serve time (the stored facts stay as the log made them): a fact's
        # served confidence halves with every stale_half_life_s its newest evidence lies
        # behind the robot's newest evidence (0: no decay). See served().
        self.stale_half_life_s = float(stale_half_life_s)
        self._served_rows: dict[int, FactRow] = {}
        # Facts whose value the index cannot take, by (kind, key): why. Each costs
        # itself only; the holder logs and counts them.
        self.left_out: dict[tuple[str, str], str] = {}
        self._facets = {}
        self.facts: dict[tuple[str, str], FactRow] = {}
        for fact in facts:
            key = (fact.kind, fact.key)
            try:
                self._facets[key] = _loaded(fact)
            except Exception as exc:
                self.left_out[key] = _why(exc)
                self._facets.pop(key, None)
                self.facts.pop(key, None)
                continue
            self.facts[key] = fact
            self.left_out.pop(key, None)
        self.size = len(self.facts)
        # The event time of the robot's newest evidence, over every fact the index holds
        # (whatever its status): a function of the tier, so the same on every replay.
        self.newest_evidence_ns = _newest_evidence_ns(self.facts.values())
        self._lists: dict[tuple[str, str, str], list[FactRow]] = {}
        for key, fact in self.facts.items():
            for index_key in self._facets[key].index_keys:
                self._lists.setdefault(index_key, []).append(fact)
        for facts_of_key in self._lists.values():
            facts_of_key.sort(key=_rank)
        self._ranked: dict[tuple[str, str, str], list[tuple]] = {
            index_key: [_ranked(f) for f in facts_of_key]
            for index_key, facts_of_key in self._lists.items()
            if len(facts_of_key) > _RANKED_LENGTH}
        self._known: KnownProperties | None = None  # built by the first analogy request

    def known_properties(self) -> KnownProperties:
        """The measured properties of the known targets, for analogies. Built once, on
        first use (a server that serves analogies calls it when it loads an index), then
        patched by `with_changes`: an index that never serves an analogy never pays for
        it. Two threads may both build it; either result is the same."""
        if self._known is None:
            self._known = KnownProperties(self.facts.values())
        return self._known

    def with_changes(self, changed: Iterable[FactRow]) -> "GroundingIndex":
        """A new index with these facts added or replaced; only the lists they are in are
        rebuilt, and this index is left as it is (readers holding it are unaffected)."""
        # A pass's delta (1,500 facts) runs through here while `ground` requests wait
        # for the interpreter: each changed value is parsed once, and the work is per
        # changed fact and per list it is in, not per fact of those lists.
        changed = {(f.kind, f.key): f for f in changed}
        new = object.__new__(GroundingIndex)
        new.identity_hash = self.identity_hash
        new.stale_half_life_s = self.stale_half_life_s
        new._served_rows = {}
        new.facts = {**self.facts, **changed}
        new.left_out = left_out = dict(self.left_out)
        new._facets = facets = dict(self._facets)
        # By list: (the old versions of the changed facts in it, their new versions).
        in_lists: dict[tuple[str, str, str], tuple[list[FactRow], list[FactRow]]] = {}
        properties = []
        rebuild_properties = False
        for key, fact in changed.items():
            before = facets.get(key)
            old = self.facts[key] if before is not None else None
            try:
                facets[key] = after = _loaded(fact, before)
            except Exception as exc:  # left out: its old version goes too (it is stale)
                left_out[key] = _why(exc)
                del new.facts[key]
                if before is not None:
                    del facets[key]
                    for index_key in before.index_keys:
                        in_lists.setdefault(index_key, ([], []))[0].append(old)
                rebuild_properties |= fact.kind == PROPERTY_KIND
                continue
            if left_out:
                left_out.pop(key, None)
            if before is not None and before is not after:
                for index_key in before.index_keys:
                    if index_key not in in_lists:
                        in_lists[index_key] = ([], [])
                    in_lists[index_key][0].append(old)
            for index_key in after.index_keys:
                in_list = in_lists.get(index_key)
                if in_list is None:
                    in_lists[index_key] = in_list = ([], [])
                if after is before:  # the old version is in the same lists
                    in_list[0].append(old)
                in_list[1].append(fact)
            if fact.kind == PROPERTY_KIND:
                properties.append(fact)
        new._lists, new._ranked = lists, ranked_lists = dict(self._lists), dict(self._ranked)
        for index_key, (old_facts, new_facts) in in_lists.items():
            ranked = ranked_lists.get(index_key)
            if ranked is not None:
                ranked = _ranked_with_changes(ranked, old_facts, new_facts)
                facts_of_key = list(map(_fact_of, ranked))
            else:  # a short list: filtered (its order kept), the changes sorted in
                facts_of_key = lists.get(index_key, ())
                if len(old_facts) == len(facts_of_key):  # every fact of it changed
                    facts_of_key = new_facts
                else:
                    old_ids = {id(fact) for fact in old_facts}
                    facts_of_key = [f for f in facts_of_key if id(f) not in old_ids]
                    facts_of_key += new_facts
                if len(facts_of_key) > 1:
                    facts_of_key.sort(key=_rank)
            if not facts_of_key:
                del lists[index_key]
            else:
                lists[index_key] = facts_of_key
            if len(facts_of_key) <= _RANKED_LENGTH:
                ranked_lists.pop(index_key, None)
            elif ranked is None:
                ranked_lists[index_key] = list(map(_ranked, facts_of_key))
            else:
                ranked_lists[index_key] = ranked
        new.size = len(new.facts)
        new.newest_evidence_ns = self._newest_after(changed, new.facts)
        # Properties change only with object_property facts. A table built already is
        # patched here, off the request path (built again when a property fact went).
        if self._known is None or not (properties or rebuild_properties):
            new._known = self._known
        elif rebuild_properties:
            new._known = KnownProperties(new.facts.values())
        else:
            new._known = self._known.with_changes(properties)
        return new

    def _newest_after(self, changed: dict[tuple[str, str], FactRow],
                      facts: dict[tuple[str, str], FactRow]) -> int:
        """newest_evidence_ns of an index of `facts`, this index with `changed`: one
        comparison per changed fact, unless a fact that held the newest time went or
        moved back (then a walk over all)."""
        newest = self.newest_evidence_ns
        moved_back = False
        for key, fact in changed.items():
            old = self.facts.get(key)
            if old is not None and old.last_updated_ns == newest and _is_evidence(old):
                kept = facts.get(key)
                moved_back |= kept is None or not _is_evidence(kept) or \
                    kept.last_updated_ns < newest
        if moved_back:
            return _newest_evidence_ns(facts.values())
        for key in changed:
            fact = facts.get(key)
            if fact is not None and fact.last_updated_ns > newest and _is_evidence(fact):
                newest = fact.last_updated_ns
        return newest

    def age_ns(self, fact: FactRow) -> int:
        """How far the newest evidence of `fact` lies behind the robot's newest evidence
        (0 for the freshest, and for an operator's fact)."""
        if not _is_evidence(fact):
            return 0
        age = self.newest_evidence_ns - fact.last_updated_ns
        return age if age > 0 else 0

    def served(self, fact: FactRow) -> FactRow:
        """`fact` as served: its confidence x 2^(-age / stale_half_life_s), age as age_ns
        says; `fact` itself when nothing decays. Made once per fact and index (the served
        row is what a server's message cache keys on)."""
        if not self.stale_half_life_s:
            return fact
        age = self.age_ns(fact)
        if not age:
            return fact
        made = self._served_rows.get(id(fact))
        if made is None:
            factor = 2.0 ** (-(age / 1e9) / self.stale_half_life_s)
            made = replace(fact, confidence=fact.confidence * factor)
            self._served_rows[id(fact)] = made  # the fact is held: its id is not reused
        return made

    def _candidates(self, req: GroundingRequest) -> list[FactRow]:
        lists = [self._lists.get(("skill_target", req.skill_id, req.target_class), ())
                 if req.target_class else self._lists.get(("skill", req.skill_id, ""), ())]
        for context in ("target_class", "zone", "environment"):
            value = getattr(req, context)
            if value:
                lists.append(self._lists.get((context, value, ""), ()))
        lists = [found for found in lists if found]
        if len(lists) == 1:
            return lists[0]
        return sorted((f for found in lists for f in found), key=_rank)

    def lookup(self, req: GroundingRequest,
               analogies: AnalogySettings = DEFAULT_ANALOGY_SETTINGS,
               priors: PriorIndex = EMPTY_PRIORS) -> GroundingAnswer:
        """Answer from the index alone (no I/O): the request's problems as
        INVALID_REQUEST, else OK with ranked active facts or ABSTAIN with why; for a
        request that allows priors, the fleet's evidence of the same target rides along
        an OK and turns ABSTAIN no_fact or only_candidates into PRIOR; for a request that
        allows analogies, ABSTAIN no_fact about a target becomes ANALOGY or ABSTAIN
        no_close_case, and ABSTAIN only_candidates (the robot's own attempts, still too
        few to serve) becomes ANALOGY or stays as it is. Never raises for a request: bad
        input is an answer."""
        problem = validate_request(req)
        if problem is not None:
            return problem
        answer = self._own_answer(req)
        if req.allow_priors and priors.size and _asks_for_skill_facts(req) and \
                (not req.fact_kinds or PRIOR_KIND in req.fact_kinds):
            with_priors = self._with_priors(req, answer, priors)
            if with_priors is not None:
                return with_priors
        if req.allow_analogies and answer.status == ABSTAIN and \
                answer.reason_code in (REASON_NO_FACT, REASON_ONLY_CANDIDATES) and \
                req.target_class and _asks_for_skill_facts(req):
            return self._analogy_answer(req, answer, analogies)
        return answer

    def _own_answer(self, req: GroundingRequest) -> GroundingAnswer:
        """The answer from this robot's facts alone (the request is valid), with each
        fact's served confidence (served())."""
        matching = [f for f in self._candidates(req) if self._matches(f, req)]
        what = f"{req.skill_id} on {req.target_class or 'any target'} in " \
               f"{req.environment or 'any environment'}"
        # The answer is about the skill: context facts (what the target is like, how risky
        # the place is) never make an OK on their own, or a planner that branches on OK
        # would believe it knows a skill it never tried. A request for context kinds only
        # asked for exactly those, so they are its answer.
        if _asks_for_skill_facts(req):
            about_skill = [f for f in matching if self._is_skill_fact(f)]
            context = [f for f in self._served_ranked(
                f for f in matching if not self._is_skill_fact(f) and f.status == STATUS_ACTIVE)
                if f.confidence >= req.min_confidence]
        else:
            about_skill, context = matching, []
        limit = req.max_results or DEFAULT_MAX_RESULTS

        def abstain(reason_code: str, reason: str) -> GroundingAnswer:
            return GroundingAnswer(ABSTAIN, reason_code, reason, tuple(context[:limit]))

        if not about_skill:
            return abstain(REASON_NO_FACT, f"no fact about {what}")
        # A contested success rate is never left out of an answer that goes on as OK on
        # the skill's other facts: the planner would use them as if nothing had changed.
        contested = [f for f in about_skill
                     if f.kind == RATE_KIND and f.status == STATUS_CONTESTED]
        if contested:
            return abstain(REASON_CONTESTED, _contested_reason(what, contested, about_skill))
        stored = [f for f in about_skill if f.status == STATUS_ACTIVE]
        if not stored:
            if any(f.status == STATUS_CONTESTED for f in about_skill):
                return abstain(REASON_CONTESTED, f"evidence about {what} is contested")
            if any(f.status == STATUS_CANDIDATE for f in about_skill):
                n = max(f.n_observations for f in about_skill)
                return abstain(REASON_ONLY_CANDIDATES,
                               f"only candidate facts about {what} "
                               f"(at most {n} observations, below promotion)")
            return abstain(REASON_NO_FACT, f"no servable fact about {what}")
        served = self._served_ranked(stored)
        confident = [f for f in served if f.confidence >= req.min_confidence]
        if not confident:
            # Confident enough as stored, below only once decayed: stale, not unsure.
            was_confident = [f for f in stored if f.confidence >= req.min_confidence]
            if was_confident:
                freshest = min(was_confident, key=lambda f: (self.age_ns(f), _rank(f)))
                return abstain(REASON_STALE, f"no fresh evidence about {what} for "
                               f"{_days(self.age_ns(freshest))} while the robot kept working: "
                               f"confidence {freshest.confidence:.3f} stale-decayed to "
                               f"{self.served(freshest).confidence:.3f}, below the requested "
                               f"{req.min_confidence:.3f}")
            best = max(f.confidence for f in served)
            return abstain(REASON_BELOW_CONFIDENCE,
                           f"best confidence about {what} is {best:.3f}, "
                           f"below the requested {req.min_confidence:.3f}")
        held_back = Counter(f.status for f in matching if f.status != STATUS_ACTIVE)
        notes = ["not served: " + ", ".join(f"{n} {status}" for status, n
                                            in sorted(held_back.items()))] if held_back else []
        facts = sorted(confident + context, key=_rank) if context else confident
        facts = facts[:limit]
        decayed = self._stale_note(facts)
        if decayed:
            notes.append(decayed)
        return GroundingAnswer(OK, reason="; ".join(notes), facts=tuple(facts))

    def _served_ranked(self, facts: Iterable[FactRow]) -> list[FactRow]:
        """`facts` (in rank order) as served, in the rank order of their served
        confidences."""
        if not self.stale_half_life_s:
            return facts if isinstance(facts, list) else list(facts)
        changed = False
        rows = []
        for fact in facts:
            row = self.served(fact)
            changed |= row is not fact
            rows.append(row)
        if changed:
            rows.sort(key=_rank)
        return rows

    def _stale_note(self, facts: Iterable[FactRow]) -> str:
        """What an OK answer's reason says of its facts (as served) whose confidence fell
        by STALE_NOTE_MIN_DROP or more for want of fresh evidence; "" if none did."""
        if not self.stale_half_life_s:
            return ""
        entries = []
        for fact in facts:
            age = self.age_ns(fact)
            if not age:
                continue
            factor = 2.0 ** (-(age / 1e9) / self.stale_half_life_s)
            if fact.confidence / factor - fact.confidence >= STALE_NOTE_MIN_DROP:
                entries.append(f"{fact.kind} [{fact.key}] x{factor:.3f} (no fresh evidence "
                               f"for {_days(age)})")
        return "stale-decayed: " + ", ".join(entries) if entries else ""

    def _with_priors(self, req: GroundingRequest, own: GroundingAnswer,
                     priors: PriorIndex) -> GroundingAnswer | None:
        """`own` with the priors matching the request, or None when none match or the
        robot's own evidence rules them out (contested, stale, or below the asked
        confidence: its own word, not a gap a prior may fill)."""
        if own.status != OK and own.reason_code not in (REASON_NO_FACT, REASON_ONLY_CANDIDATES):
            return None
        keys = priors.keys_for(req.skill_id, req.target_class, req.environment)
        if not keys:
            return None
        limit = req.max_results or DEFAULT_MAX_RESULTS
        served = tuple(blend(key, priors.sources(key), self._own_rate_fact(key),
                             priors.settings) for key in keys[:limit])
        if own.status == OK:
            return replace(own, priors=served)
        robots = len({s.identity_hash for prior in served for s in prior.sources})
        return GroundingAnswer(PRIOR, own.reason_code,
                               f"{own.reason}; priors from {robots} robot(s) of the same "
                               "embodiment (not this robot's evidence)", own.facts,
                               priors=served)

    def _own_rate_fact(self, key: tuple[str, str, str]) -> FactRow | None:
        """This robot's skill_success_rate fact of (skill, target, environment), whatever
        its status."""
        skill, target, environment = key
        for fact in self._lists.get(("skill_target", skill, target), ()):
            facets = self._facets[(fact.kind, fact.key)]
            if fact.kind == PRIOR_KIND and facets.target_class == target and \
                    (facets.environment or "") == environment:
                return fact
        return None

    def _analogy_answer(self, req: GroundingRequest, own: GroundingAnswer,
                        settings: AnalogySettings) -> GroundingAnswer:
        """ANALOGY with the facts of the nearest known targets that have facts of the
        skill, or ABSTAIN no_close_case (`own` itself, its reason extended, when `own` is
        only_candidates: the robot's own word stands). `own` (ABSTAIN no_fact or
        only_candidates) keeps its context facts about the asked target: they are the
        robot's own, and so is its reason_code."""
        if not settings.enabled:
            return replace(own, reason=f"{own.reason}; analogies are off on this server")
        known = self.known_properties()
        query = {name: (value, QUERY_SOURCE_FACT)
                 for name, (value, _) in known.properties_of(req.target_class).items()}
        # The planner's measurement is of this very object, now: it comes first.
        query.update((name, (value, QUERY_SOURCE_REQUEST))
                     for name, value in req.target_properties)

        def no_close_case(why: str) -> GroundingAnswer:
            if own.reason_code == REASON_ONLY_CANDIDATES:
                return replace(own, reason=f"{own.reason}; no analogy: {why}")
            return GroundingAnswer(ABSTAIN, REASON_NO_CLOSE_CASE, f"{own.reason}, and {why}",
                                   own.facts)

        compared = known.comparable(query)
        if not compared:
            measured = ", ".join(sorted(query)) or "none"
            return no_close_case(f"no property of {req.target_class} (measured: {measured}) "
                                 "was measured on a known target")
        wanted = req.max_analogies or settings.k
        found: list[Analogy] = []
        for case in known.nearest(query, settings.max_distance, exclude=req.target_class):
            if ("skill_target", req.skill_id, case.target_class) not in self._lists:
                continue  # measured, but the skill was never tried on it
            lent = self._lent_facts(req, case.target_class)
            if lent:
                found.append(Analogy(case.target_class, case.distance, case.properties, lent))
                if len(found) == wanted:
                    break
        if not found:
            return no_close_case(f"no known target with a servable fact of {req.skill_id} "
                                 f"is within distance {settings.max_distance:g} of "
                                 f"{req.target_class} (on {', '.join(compared)})")
        nearest = ", ".join(f"{a.target_class} at {a.distance:g}" for a in found)
        return GroundingAnswer(ANALOGY, own.reason_code,
                               f"{own.reason}; analogies (not this robot's knowledge of "
                               f"{req.target_class}): {nearest}", own.facts, tuple(found))

    def _lent_facts(self, req: GroundingRequest, case_target: str) -> tuple[FactRow, ...]:
        """The facts of the skill a request about `case_target` would be served (by the
        same rules: status, confidence, environment, kinds), or () if it would abstain.
        Its context facts stay out (the compared properties name them): only kinds of
        the skill are asked for, so max_results counts facts of the skill alone."""
        skill_kinds = tuple(sorted(SKILL_FACT_KINDS.intersection(req.fact_kinds)
                                   if req.fact_kinds else SKILL_FACT_KINDS))
        answer = self._own_answer(replace(req, target_class=case_target, zone="",
                                          fact_kinds=skill_kinds, allow_analogies=False))
        return answer.facts if answer.status == OK else ()

    def _is_skill_fact(self, fact: FactRow) -> bool:
        """Facts about a skill's outcomes (success rate, failure patterns), as opposed to
        context facts about objects and places."""
        return self._facets[(fact.kind, fact.key)].skill_id is not None

    def _matches(self, fact: FactRow, req: GroundingRequest) -> bool:
        if req.fact_kinds and fact.kind not in req.fact_kinds:
            return False
        facets = self._facets[(fact.kind, fact.key)]
        if req.target_class and facets.target_class not in (None, req.target_class):
            return False
        if req.environment and facets.environment not in (None, req.environment):
            return False
        return True
