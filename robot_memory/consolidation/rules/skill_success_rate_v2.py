"""skill_success_rate, rules v2.0: how often a skill succeeds on a target in an
environment, conditional on its parameters, in the current regime (key: skill_id +
target_class + environment).

Beside the v1 state, each parameter value counts in a band of a fixed grid (the value
rounded to two significant figures), and each band keeps an event-time timeline of its
outcomes: state["bands"][name][band] -> timeline (rules/timeline.py's layout, columns
successes, failures, safety failures). A CUSUM over each band's timeline finds where its
rate changed (rules/regimes.py); the key's current regime begins at the newest boundary
of any band, and the fact is rendered from the evidence since then: per band n,
successes, decay-weighted rate and Wilson lower bound, and the band with the best lower
bound as the recommendation. docs/consolidation.md#regimes documents it.
"""

from __future__ import annotations

from array import array
from functools import lru_cache
from typing import Any

from robot_memory.consolidation.rules.base import (STATUS_CONTESTED, OneFactPerGroup, Partials,
                                                   RenderedFact, RulesConfig, count_into,
                                                   fact_key, max_support, promoted_status, r6)
from robot_memory.consolidation.rules.outcomes import (FAILURE, SAFETY_FAILURE, SUCCESS,
                                                       note_outcome_row)
from robot_memory.consolidation.rules.regimes import (Elsewhere, Series, counts_between, detect,
                                                      regime_counts, weighted_counts)
from robot_memory.consolidation.rules.skill_success_rate import merge_skill_counts
from robot_memory.consolidation.rules.timeline import COLUMN_BITS, new_timeline, timeline_merge
from robot_memory.consolidation.stats import most_common, shrunk_rate, wilson_interval
from robot_memory.store import OutcomeRow, ValueBatch

# The band of a result that carries no parameter at all, when none of the key's results
# does: the key's whole timeline, under the parameter name "".
NO_PARAMETERS = ""


@lru_cache(maxsize=1 << 12)
def band_of(value_repr: str) -> str:
    """The grid band of an exact parameter value (its repr): the value rounded to two
    significant figures (correctly rounded, ties to even), as repr(float); 0 and -0 are
    one band. 24.7 -> '25.0', 0.473 -> '0.47', 1234.0 -> '1200.0'."""
    return repr(float(f"{float(value_repr):.2g}") + 0.0)


class SkillSuccessRateV2(OneFactPerGroup):
    kind = "skill_success_rate"
    # The pass reads the parameters per event-time bucket for this rule.
    parameter_buckets = True

    def add_outcome(self, row: OutcomeRow, config: RulesConfig, into: Partials) -> None:
        if row.invalid_reason is not None:
            return
        groups = into.groups.setdefault(self.kind, {})
        key = fact_key(row.skill_id, row.target_class, row.environment)
        part = groups.get(key)
        if part is None:
            part = groups[key] = {
                "skill_id": row.skill_id, "target_class": row.target_class,
                "environment": row.environment, "n": 0, "successes": 0,
                "success_parameters": {}, "failure_reasons": {}, "buckets": {}, "bands": {},
                "last_event_id": 0, "last_stamp_ns": 0}
        count = row.count
        part["n"] += count
        if row.success:
            part["successes"] += count
        else:
            count_into(part["failure_reasons"], row.failure_reason or "unspecified", count)
        note_outcome_row(part, row.success, row.failure_reason, row.bucket, count,
                         row.max_event_id, row.max_stamp_ns, config)

    def add_values(self, aggregates: ValueBatch, config: RulesConfig,
                   into: Partials) -> None:
        groups = into.groups.setdefault(self.kind, {})
        safety = config.safety_failure_reasons
        for row in aggregates.bucketed_parameters:
            part = groups[fact_key(row.skill_id, row.target_class, row.environment)]
            count = row.count
            if row.success:
                column = SUCCESS
                bag = part["success_parameters"].setdefault(row.name, {})
                bag[row.value_repr] = bag.get(row.value_repr, 0) + count
            else:
                column = SAFETY_FAILURE if row.failure_reason in safety else FAILURE
            # A parameter's partial: (band id, bucket, count * 4 + column) triples in one
            # flat array of 64-bit ints (a count stays below 2^61), added up when merged:
            # no int object, no dict slot per bucket and no array per band while a pass
            # holds the partials of every key.
            triples = part["bands"].get(row.name)
            if triples is None:
                triples = part["bands"][row.name] = array("q")
            triples.extend((_band_id(row.value_repr), row.bucket, count << 2 | column))
            if count <= 0:  # an amended attempt's outcome taken back
                part["signed"] = True

    def merge(self, state: dict[str, Any], partial: dict[str, Any],
              config: RulesConfig) -> None:
        merge_skill_counts(state, partial, config)  # what v1.0 keeps, then the bands
        state.setdefault("bands", {})
        band_config = config.band_config  # band timelines: buckets of band_bucket_s
        signed = partial.get("signed", False)
        for name, triples in partial["bands"].items():
            stored = state["bands"].setdefault(name, {})
            for band, buckets in _packed(triples).items():
                if band not in stored:
                    stored[band] = new_timeline(buckets, 3, band_config, signed)
                    continue
                holder = {"timeline": stored[band]}
                timeline_merge(holder, buckets, 3, band_config, signed)
                stored[band] = holder["timeline"]
        max_support(state, partial)

    def render(self, key: str, state: dict[str, Any], config: RulesConfig) -> list[RenderedFact]:
        value, status = render_value(state, config)
        # n_observations: every result behind the fact (value["n"] is the recommended
        # band's in the current regime).
        return [RenderedFact(self.kind, key, value, status, value["confidence"], state["n"],
                             state["last_event_id"], state["last_stamp_ns"],
                             {"regime": value["regime"],
                              "change_suspected": value["change_suspected"]},
                             config.rule_version)]


# The bands a process has met, numbered in the order met (only within a pass's partials:
# merge names them again). The grid is fixed, so they stay few.
_BAND_IDS: dict[str, int] = {}
_BANDS: list[str] = []


@lru_cache(maxsize=1 << 12)
def _band_id(value_repr: str) -> int:
    band = band_of(value_repr)
    number = _BAND_IDS.get(band)
    if number is None:
        number = _BAND_IDS[band] = len(_BANDS)
        _BANDS.append(band)
    return number


def _packed(triples: array) -> dict[str, dict[int, int]]:
    """A parameter's partial as timeline_merge takes it: band -> bucket -> packed row."""
    by_band: dict[str, dict[int, int]] = {}
    for band_id, bucket, tagged in zip(triples[::3], triples[1::3], triples[2::3]):
        buckets = by_band.get(_BANDS[band_id])
        if buckets is None:
            buckets = by_band[_BANDS[band_id]] = {}
        buckets[bucket] = buckets.get(bucket, 0) + ((tagged >> 2) << (COLUMN_BITS * (tagged & 3)))
    return by_band


def _wilson(successes: float, n: float) -> tuple[float, float]:
    """The 95% Wilson interval of decay-weighted counts; (0, 1) when the weight is nil or
    too small to square (evidence far older than the key's newest: its weight underflows)."""
    if n * n == 0.0:
        return 0.0, 1.0
    return wilson_interval(successes, n)


def _bands_of(state: dict[str, Any], k_series: Series) -> dict[str, dict[str, Series]]:
    """name -> band -> Series; a key whose results carry no parameters is one band '' (its
    timeline in band buckets: k_series)."""
    bands = state.get("bands") or {}
    if not bands:
        return {NO_PARAMETERS: {NO_PARAMETERS: k_series}}
    return {name: {band: Series.of(timeline) for band, timeline in by_band.items()}
            for name, by_band in bands.items()}


@lru_cache(maxsize=1 << 12)
def _band_order(band: str) -> tuple[float, str]:
    return (float(band) if band else float("-inf"), band)


def _in_order(bands: dict[str, Series]) -> list[tuple[str, Series]]:
    """A parameter's bands, by value."""
    return [(band, bands[band]) for band in sorted(bands, key=_band_order)]


def render_value(state: dict[str, Any], config: RulesConfig) -> tuple[dict[str, Any], str]:
    """(value, status) of a v2 skill fact. Everything is worked out in band buckets
    (band_bucket_s): the key's own timeline is added up into them."""
    fine = Series.of(state["timeline"])
    elsewhere = Elsewhere(fine, config.band_ratio)
    k_series = fine.coarsened(config.band_ratio)
    config = config.band_config
    newest = k_series.keys[-1] if k_series.keys and k_series.keys[-1] is not None else 0
    bands = {name: _in_order(by_band)
             for name, by_band in sorted(_bands_of(state, k_series).items())}
    least = config.contest_min_observations
    h = config.change_threshold
    boundaries: list[tuple[int, str, str, dict[str, Any]]] = []
    suspects = []
    for name, in_order in bands.items():
        for band, series in in_order:
            found = detect(series, config, None if name == NO_PARAMETERS else elsewhere)
            boundaries += [(bucket, name, band, test) for bucket, test in found.boundaries]
            # Suspected: half the threshold, and the band's newest bucket still adds to it.
            if found.statistic >= h / 2 and found.growing and found.newest is not None:
                # Lapsed once the key has succeeded this often after its newest failure
                # in the band's newest bucket (the skill works again, with other
                # parameters; read from the key's own finer timeline).
                if elsewhere.after_failures(found.newest) < least:
                    suspects.append((-found.statistic, name, band, found))
    boundaries.sort(key=lambda b: (b[0], b[1], _band_order(b[2])))
    since = boundaries[-1][0] if boundaries else None
    previous_since = None
    for bucket, *_ in reversed(boundaries):
        if bucket < since:
            previous_since = bucket
            break
    # The band whose fall opened the regime is not recommended in it: its evidence there
    # is the fall (a rise of it would open another regime).
    fallen = (boundaries[-1][1], boundaries[-1][2]) \
        if boundaries and boundaries[-1][3]["direction"] == "down" else None
    evidence: dict[str, list[dict[str, Any]]] = {}
    recommended: dict[str, dict[str, Any]] = {}
    for name, in_order in bands.items():
        rows, best = [], None
        for band, series in in_order:
            s, f, sf = regime_counts(series, since)
            if s + f + sf == 0:
                continue
            w_n, w_s = weighted_counts(series, since, newest, config)
            lcb = _wilson(w_s, w_n)[0]
            row = {"band": band, "n": s + f + sf, "successes": s, "weighted_n": r6(w_n),
                   "weighted_successes": r6(w_s), "rate": r6(w_s / w_n) if w_n else 0.0,
                   "lcb": r6(lcb)}
            rows.append(row)
            # Ahead: the higher lcb, then the larger n, then (bands come by value) the
            # smaller value.
            if band != NO_PARAMETERS and s > 0 and (name, band) != fallen and (
                    best is None or row["lcb"] > best[0]["lcb"]
                    or (row["lcb"] == best[0]["lcb"] and row["n"] > best[0]["n"])):
                best = (row, w_n, w_s)
        evidence[name] = rows
        if best is not None:
            recommended[name] = best
    top = _top(recommended, evidence, k_series, since, newest, config)
    n, successes, w_n, w_s = top
    low, high = _wilson(w_s, w_n)
    confidence = r6(1.0 - (high - low))
    suspected = None
    if suspects:
        _, name, band, found = min(suspects, key=lambda s: (s[0], s[1], _band_order(s[2])))
        suspected = {"name": name, "band": band, "direction": found.direction,
                     "statistic": r6(found.statistic), "threshold": h}
    bucket_ns = int(config.time_bucket_s * 1e9)
    regime = {"since_ns": None if since is None else since * bucket_ns,
              "boundary_bucket": since, "changes": len(boundaries), "test": None,
              "previous": None}
    if since is not None:
        _, name, band, test = boundaries[-1]
        regime["test"] = {**test, "name": name, "band": band}
        regime["previous"] = _previous(bands, previous_since, since, bucket_ns)
    value = {
        "skill_id": state["skill_id"], "target_class": state["target_class"],
        "environment": state["environment"], "n": n, "successes": successes,
        "failures": n - successes, "rate": r6(w_s / w_n) if w_n else 0.0,
        "weighted": {"n": r6(w_n), "successes": r6(w_s),
                     "rate": r6(w_s / w_n) if w_n else 0.0},
        "shrunk_rate": shrunk_rate(w_s, w_n, config.prior_mean, config.prior_weight),
        "confidence": confidence,
        "recommended_parameters": {
            name: {"median": float(row["band"]), "q1": float(row["band"]),
                   "q3": float(row["band"]), "min": float(row["band"]),
                   "max": float(row["band"]), "n": row["n"], "successes": row["successes"],
                   "rate": row["rate"], "lcb": row["lcb"]}
            for name, (row, _, _) in sorted(recommended.items())},
        "parameter_evidence": evidence,
        "regime": regime,
        "change_suspected": suspected,
        "failure_reasons": dict(sorted(state["failure_reasons"].items())),
        "most_common_failure": most_common(state["failure_reasons"]),
        "rule_version": config.rule_version,
    }
    if suspected is not None:
        status = STATUS_CONTESTED
    elif since is not None and (not recommended or n < config.promotion_min_observations):
        status = STATUS_CONTESTED  # after a change, until what works now is known
    else:  # the usual promotion, on every observation of the current regime
        status = promoted_status(sum(regime_counts(k_series, since)), config)
    return value, status


def _top(recommended: dict[str, tuple[dict[str, Any], float, float]],
         evidence: dict[str, list[dict[str, Any]]], k_series: Series, since: int | None,
         newest: int, config: RulesConfig) -> tuple[int, int, float, float]:
    """(n, successes, weighted n, weighted successes) the fact's top-level fields give:
    the recommended band of the first parameter name that has one, else the key's whole
    evidence in the current regime."""
    for name in sorted(recommended):
        row, w_n, w_s = recommended[name]
        return row["n"], row["successes"], w_n, w_s
    s, f, sf = regime_counts(k_series, since)
    w_n, w_s = weighted_counts(k_series, since, newest, config)
    return s + f + sf, s, w_n, w_s


def _previous(bands: dict[str, list[tuple[str, Series]]], since: int | None, until: int,
              bucket_ns: int) -> dict[str, Any]:
    """The regime before the current one: its start (None: the first evidence) and the
    raw counts of each band in it (bands: by name, then by value)."""
    evidence: dict[str, list[dict[str, Any]]] = {}
    for name, in_order in bands.items():
        rows = []
        for band, series in in_order:
            n, s = counts_between(series, since, until)
            if n:
                rows.append({"band": band, "n": n, "successes": s})
        if rows:
            evidence[name] = rows
    return {"since_ns": None if since is None else since * bucket_ns,
            "until_ns": until * bucket_ns, "parameter_evidence": evidence}
