"""`robot-memory report`: what the robot learned, as one self-contained HTML file.

Inline CSS and inline SVG only: no script, no font, no image, no link to fetch, so the
file opens offline and makes no request. Every number in a figure caption is a
`<data data-field=... value=...>` element whose value is the fact's own number, as
`robot-memory facts --json` prints it.
"""

from __future__ import annotations

import html
import json
import time
from datetime import datetime, timezone
from typing import Any

from robot_memory.consolidation import RulesConfig
from robot_memory.retention.growth import GrowthGuard
from robot_memory.report.data import ReportData, promotion_changes, read_report_data
from robot_memory.report.plots import (
    consultation_figure,
    parameter_figure,
    rate_figure,
    zone_figure,
)
from robot_memory.store import Partition
from robot_memory.store.size import store_size_bytes

MAX_RATE_FIGURES = 12  # the rest of the skill x target x environment facts go in a table
MAX_PARAMETERS_PER_FACT = 2
MAX_ZONES = 30
MAX_CONSULTED = 10

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:60rem;padding:0 1rem;color:#111;line-height:1.4}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #999;margin-top:2rem}
figure{margin:1rem 0;border:1px solid #ddd;padding:.5rem}figure svg{max-width:100%;height:auto}
figcaption{font-size:.9rem}table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}
td.n,th.n{text-align:right}code{font-size:.85rem}.note{color:#444;font-size:.85rem}
"""


def num(field: str, value: Any, shown: str | None = None) -> str:
    """A caption number: shown rounded, its exact value machine-readable."""
    if shown is None:
        shown = f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else \
            str(value)
    return (f'<data data-field="{html.escape(field)}" '
            f'value="{html.escape(json.dumps(value))}">{html.escape(shown)}</data>')


def when(stamp_ns: int) -> str:
    """Event time: a UTC date for wall-clock stamps, seconds for sim time."""
    if stamp_ns > 10**17:
        return datetime.fromtimestamp(stamp_ns / 1e9, timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp_ns / 1e9:g} s"


def _esc(text: Any) -> str:
    return html.escape(str(text))


def _figure(fig_id: str, section: str, svg: str, caption: str, label: str,
            fact: tuple[str, str] | None = None) -> str:
    data = f' data-fact-kind="{_esc(fact[0])}" data-fact-key="{_esc(fact[1])}"' if fact else ""
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{_esc(label)}" ', 1)
    return (f'<figure id="{fig_id}" data-section="{section}"{data}>{svg}'
            f"<figcaption>{caption}</figcaption></figure>")


def _numbers(value: Any, *names: str) -> bool:
    """Does `value` (a fact's value or a band) hold each of these as a number? What a
    rule renders always does; an operator's fact may leave counts out
    (consolidation/fact_schemas.py), and a section then leaves that fact out."""
    return isinstance(value, dict) and all(
        value.get(name).__class__ in (int, float) for name in names)


def _readable(fact, *names: str) -> bool:
    try:
        return _numbers(fact.value, *names)
    except ValueError:  # a stored value that is not JSON
        return False


def _rate_section(data: ReportData, config: RulesConfig) -> str:
    rates = sorted((f for f in data.facts if f.kind == "skill_success_rate"
                    and _readable(f, "n", "successes", "rate")),
                   key=lambda f: (-f.n_observations, f.key))
    parts = ['<section id="rates"><h2>Success rate over event time</h2>',
             '<p class="note">One figure per skill &times; target &times; environment (the '
             f'{MAX_RATE_FIGURES} with most results; the others are in the table below). '
             "Solid line: success rate of all results so far, hatched: its 95% Wilson band, "
             "dashed: the most recent results. Markers above the plot: when the fact became "
             "candidate (&#9675;), active (&#9651;), contested (&#10006;) or invalidated "
             "(&#9633;).</p>"]
    for number, fact in enumerate(rates[:MAX_RATE_FIGURES], start=1):
        series = data.outcomes.get(fact.key)
        if series is None or not series.stamps:
            continue
        changes = sorted(promotion_changes(series, config.promotion_min_observations)
                         + data.changes.get((fact.kind, fact.key), []),
                         key=lambda c: c.stamp_ns)
        value = fact.value
        caption = (f"<b>{_esc(fact.key)}</b>: {num('successes', value['successes'])} of "
                   f"{num('n', value['n'])} attempts succeeded, rate {num('rate', value['rate'])}"
                   f", confidence {num('confidence', fact.confidence)}, status "
                   f"{num('status', fact.status)}.")
        if value.get("most_common_failure"):
            caption += f" Most common failure: {_esc(value['most_common_failure'])}."
        parts.append(_figure(f"rate-{number}", "rates",
                             rate_figure(series, changes, data.first_stamp_ns, fact.key,
                                         f"rate{number}"),
                             caption, f"success rate of {fact.key} over event time",
                             (fact.kind, fact.key)))
    rest = rates[MAX_RATE_FIGURES:]
    if rest:
        parts.append("<table><tr><th>fact</th><th class=n>n</th><th class=n>successes</th>"
                     "<th class=n>rate</th><th class=n>confidence</th><th>status</th></tr>")
        parts += [f"<tr data-fact-key=\"{_esc(f.key)}\"><td>{_esc(f.key)}</td>"
                  f"<td class=n>{num('n', f.value['n'])}</td>"
                  f"<td class=n>{num('successes', f.value['successes'])}</td>"
                  f"<td class=n>{num('rate', f.value['rate'])}</td>"
                  f"<td class=n>{num('confidence', f.confidence)}</td>"
                  f"<td>{num('status', f.status)}</td></tr>" for f in rest]
        parts.append("</table>")
    if not rates:
        parts.append("<p>No skill success rates yet.</p>")
    parts.append("</section>")
    return "".join(parts)


def _parameter_section(data: ReportData) -> str:
    parts = ['<section id="parameters"><h2>Recommended parameters against outcomes</h2>',
             '<p class="note">Attempts per parameter value: successes plain, failures '
             "cross-hatched; dotted band: the recommended interquartile range (from successful "
             "attempts), solid line: the recommended median.</p>"]
    rates = sorted((f for f in data.facts if f.kind == "skill_success_rate"
                    and _readable(f) and isinstance(f.value.get("recommended_parameters"),
                                                    dict) and f.value["recommended_parameters"]),
                   key=lambda f: (-f.n_observations, f.key))[:MAX_RATE_FIGURES]
    count = 0
    for fact in rates:
        series = data.outcomes.get(fact.key)
        if series is None:
            continue
        for name, band in sorted(fact.value["recommended_parameters"].items())[
                :MAX_PARAMETERS_PER_FACT]:
            if not _numbers(band, "median", "q1", "q3", "n"):
                continue
            ok = [p[name] for p, s in zip(series.parameters, series.successes, strict=True)
                  if s and name in p]
            failed = [p[name] for p, s in zip(series.parameters, series.successes, strict=True)
                      if not s and name in p]
            if not ok and not failed:
                continue
            count += 1
            caption = (f"<b>{_esc(fact.key)}</b>, <code>{_esc(name)}</code>: recommended "
                       f"median {num('median', band['median'])} (IQR {num('q1', band['q1'])} to "
                       f"{num('q3', band['q3'])}) from {num('n', band['n'])} successful "
                       f"attempts; {len(failed)} failed attempts with this parameter.")
            figure = _figure(f"param-{count}", "parameters",
                             parameter_figure(ok, failed, band, name, fact.key, f"param{count}"),
                             caption, f"{name} against outcomes for {fact.key}",
                             (fact.kind, fact.key))
            parts.append(figure.replace("<figure ", f'<figure data-parameter="{_esc(name)}" ',
                                        1))
    if not count:
        parts.append("<p>No recommended parameters yet (no successful attempt carried "
                     "parameters).</p>")
    parts.append("</section>")
    return "".join(parts)


def _zone_section(data: ReportData) -> str:
    zones = sorted((f for f in data.facts if f.kind == "zone_risk" and _readable(
                        f, "failure_rate", "safety_incidents", "incidents", "n")
                    and f.value["n"] > 0),
                   key=lambda f: (-f.value["failure_rate"], f.key))[:MAX_ZONES]
    parts = ['<section id="zones"><h2>Zone risk</h2>']
    if not zones:
        parts.append("<p>No zone risk facts yet.</p></section>")
        return "".join(parts)
    rows = [(f.key, f.value["failure_rate"], f.value["safety_incidents"] / f.value["n"],
             f.value["incidents"], f.value["n"]) for f in zones]
    worst = zones[0]
    caption = (f"Failure rate per zone (hatched //) and its safety-relevant part (hatched "
               f"xx), labelled incidents/attempts. Highest: <b>{_esc(worst.key)}</b>, "
               f"{num('incidents', worst.value['incidents'])} incidents in "
               f"{num('n', worst.value['n'])} attempts, failure rate "
               f"{num('failure_rate', worst.value['failure_rate'])}.")
    parts.append(_figure("zones-1", "zones", zone_figure(rows, "zones"), caption,
                         "failure rate per zone", (worst.kind, worst.key)))
    parts.append("<table><tr><th>zone</th><th class=n>attempts</th><th class=n>incidents</th>"
                 "<th class=n>safety incidents</th><th class=n>failure rate</th>"
                 "<th>most common failure</th><th>status</th></tr>")
    parts += [f"<tr data-fact-key=\"{_esc(f.key)}\"><td>{_esc(f.key)}</td>"
              f"<td class=n>{num('n', f.value['n'])}</td>"
              f"<td class=n>{num('incidents', f.value['incidents'])}</td>"
              f"<td class=n>{num('safety_incidents', f.value['safety_incidents'])}</td>"
              f"<td class=n>{num('failure_rate', f.value['failure_rate'])}</td>"
              f"<td>{_esc(f.value.get('most_common_failure') or '-')}</td>"
              f"<td>{num('status', f.status)}</td></tr>" for f in zones]
    parts.append("</table></section>")
    return "".join(parts)


def _consultation_section(data: ReportData) -> str:
    top = sorted(data.consultations.items(), key=lambda item: (-item[1], item[0]))[
        :MAX_CONSULTED]
    parts = ['<section id="consultations"><h2>Most-consulted facts</h2>']
    if not top:
        parts.append("<p>No grounding answer has served a fact yet.</p></section>")
        return "".join(parts)
    (kind, key), count = top[0]
    caption = (f"Grounding answers that served each fact. Most consulted: <b>{_esc(kind)} "
               f"{_esc(key)}</b>, {num('consultations', count)} "
               f"answer{'s' if count != 1 else ''}.")
    parts.append(_figure("consultations-1", "consultations",
                         consultation_figure([(key_, c) for (_k, key_), c in top],
                                             "consult"),
                         caption, "consultations per fact", (kind, key)))
    parts.append("<table><tr><th>fact</th><th class=n>answers</th><th>who asked</th></tr>")
    for (kind, key), count in top:
        who = ", ".join(f"{_esc(name)} ({n})" for name, n in
                        sorted(data.requesters[(kind, key)].items(), key=lambda i: (-i[1], i[0])))
        parts.append(f"<tr><td>{_esc(kind)} {_esc(key)}</td><td class=n>{count}</td>"
                     f"<td>{who}</td></tr>")
    parts.append("</table></section>")
    return "".join(parts)


def _health_section(data: ReportData, size_bytes: int, guard: GrowthGuard) -> str:
    verification = data.last_verification
    run = data.last_run
    rows = [
        ("store size", f"{num('size_bytes', size_bytes, f'{size_bytes / 1048576:.2f} MB')}"),
        ("growth guard", f"{num('growth_state', guard.state(size_bytes))}: "
                         f"{_esc(guard.describe(size_bytes))} (limit {guard.limit_mb:g} MB)"),
        ("last verification",
         f"{_esc(verification.payload.get('state'))} at {when(verification.stamp_ns)} "
         f"(event seq {verification.seq})" if verification else
         "none recorded (the manifest verifier logs one on every verified boot)"),
        ("chain head", f"seq {num('head_seq', data.head[0])}, "
                       f"<code>{num('head_hash', data.head[1])}</code>"),
        ("last consolidation pass",
         f"event seq {run.seq}, read up to seq {run.payload.get('last_seq')}, rules "
         f"{_esc(run.payload.get('rule_version'))}" if run else "none yet"),
        ("events", ", ".join(f"{_esc(kind)} {n}" for kind, n in data.event_counts.items()
                             if n and kind != "all") + f" (total {data.event_counts['all']})"),
    ]
    for event in data.imports:
        bag, counts = event.payload.get("bag", {}), event.payload.get("counts", {})
        rows.append(("bag import", f"{_esc(bag.get('name'))} ({_esc(bag.get('storage'))}, "
                                   f"sha256 <code>{_esc(str(bag.get('sha256'))[:16])}</code>): "
                                   f"{counts.get('imported')} imported, "
                                   f"{counts.get('rejected')} rejected"
                                   + (", damaged" if event.payload.get("damage") else "")))
    body = "".join(f"<tr><th>{_esc(name)}</th><td>{value}</td></tr>" for name, value in rows)
    return f'<section id="health"><h2>Store health</h2><table>{body}</table></section>'


def build_report(partition: Partition, config: RulesConfig = RulesConfig(),
                 guard: GrowthGuard = GrowthGuard(100.0)) -> str:
    started = time.perf_counter()
    data = read_report_data(partition)
    size = store_size_bytes(partition.store)
    sections = [_rate_section(data, config), _parameter_section(data), _zone_section(data),
                _consultation_section(data), _health_section(data, size, guard)]
    kinds = {}
    for fact in data.facts:
        kinds[fact.kind] = kinds.get(fact.kind, 0) + 1
    summary = ", ".join(f"{n} {_esc(kind)}" for kind, n in sorted(kinds.items())) or "no facts"
    took = time.perf_counter() - started
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>robot_memory report {_esc(data.identity_hash[:12])}</title>"
        f"<style>{CSS}</style></head><body>"
        f"<h1>What the robot learned</h1><section id=\"summary\"><p>Identity "
        f"<code>{_esc(data.identity_hash)}</code>: {data.event_counts['all']} events, "
        f"{num('facts', len(data.facts))} facts ({summary}). Report built from the store in "
        f"{took:.1f} s.</p></section>" + "".join(sections) + "</body></html>\n")
