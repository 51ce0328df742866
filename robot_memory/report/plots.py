"""The report's figures: matplotlib drawn to inline SVG, readable without colour (every
series has its own marker, line style or hatching, and a direct label)."""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")  # no display, no GUI toolkit
import matplotlib.pyplot as plt  # noqa: E402

from robot_memory.consolidation.stats import wilson_interval  # noqa: E402
from robot_memory.report.data import Outcomes, StatusChange  # noqa: E402

# Okabe-Ito: distinguishable with the common colour-vision deficiencies; never the only cue.
BLUE, ORANGE, GREEN, VERMILION, PURPLE, GREY = ("#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                "#CC79A7", "#555555")
STATUS_STYLE = {  # marker, colour; the status is also written next to the marker
    "candidate": ("o", GREY), "active": ("^", GREEN), "contested": ("X", VERMILION),
    "invalidated": ("s", PURPLE)}
MAX_POINTS = 300

STYLE = {"font.size": 9, "axes.titlesize": 9, "axes.spines.top": False,
         "axes.spines.right": False, "svg.fonttype": "none", "figure.dpi": 100}


def svg(figure, salt: str) -> str:
    """The figure as an <svg> element for inline use: no XML prolog, no DOCTYPE (it
    names an external DTD), no metadata block, and every id prefixed with `salt` (the
    inline figures of one page share one id space)."""
    with plt.rc_context({**STYLE, "svg.hashsalt": salt}):
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None,
                                                       "Format": None, "Type": None})
    plt.close(figure)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{salt}-\1"', text)
    return re.sub(r'(url\(#|href="#)([^")]+)', rf"\1{salt}-\2", text)


def _time_unit(first_ns: int, last_ns: int) -> tuple[str, float]:
    span_s = (last_ns - first_ns) / 1e9
    return ("days", 86400.0) if span_s > 3 * 86400 else \
        ("hours", 3600.0) if span_s > 3 * 3600 else ("seconds", 1.0)


def _thin(indices: int) -> list[int]:
    """At most MAX_POINTS evenly spaced positions, always the last."""
    if indices <= MAX_POINTS:
        return list(range(indices))
    step = indices / MAX_POINTS
    picked = sorted({int(i * step) for i in range(MAX_POINTS)} | {indices - 1})
    return picked


def rate_figure(series: Outcomes, changes: list[StatusChange], first_ns: int, title: str,
                salt: str) -> str:
    """Cumulative success rate over event time, its 95% Wilson band, a rolling window,
    and the status changes of the fact."""
    order = sorted(range(len(series.stamps)), key=lambda i: series.stamps[i])
    stamps = [series.stamps[i] for i in order]
    wins = [series.successes[i] for i in order]
    cumulative, low, high, rolling = [], [], [], []
    window = max(10, len(wins) // 10)
    total = 0
    for n, won in enumerate(wins, start=1):
        total += won
        lo, hi = wilson_interval(total, n)
        cumulative.append(total / n)
        low.append(lo)
        high.append(hi)
        recent = wins[max(0, n - window):n]
        rolling.append(sum(recent) / len(recent))
    keep = _thin(len(stamps))
    unit, scale = _time_unit(first_ns, max([stamps[-1]] + [c.stamp_ns for c in changes]))
    x = [(stamps[i] - first_ns) / 1e9 / scale for i in keep]
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(6.4, 2.6))
        figure.subplots_adjust(left=0.09, right=0.98, top=0.84, bottom=0.17)
        axes.fill_between(x, [low[i] for i in keep], [high[i] for i in keep], color=BLUE,
                          alpha=0.18, hatch="///", edgecolor=BLUE, linewidth=0,
                          label="95% Wilson band")
        axes.plot(x, [cumulative[i] for i in keep], color=BLUE, linewidth=1.6,
                  label="success rate (all results so far)")
        axes.plot(x, [rolling[i] for i in keep], color=ORANGE, linewidth=1.0, linestyle="--",
                  label=f"last {window} results")
        for number, change in enumerate(changes):
            marker, colour = STATUS_STYLE.get(change.status, ("D", GREY))
            cx = (change.stamp_ns - first_ns) / 1e9 / scale
            axes.axvline(cx, color=colour, linewidth=0.8, linestyle=":")
            axes.plot([cx], [1.04], marker=marker, color=colour, markersize=7, clip_on=False,
                      linestyle="none")
            axes.annotate(change.status, (cx, 1.04), xytext=(4, 2 + 8 * (number % 2)),
                          textcoords="offset points",
                          fontsize=7, color="#222222", annotation_clip=False)
        axes.set_ylim(0, 1.1)
        low, high = axes.get_xlim()
        axes.set_xlim(low, high + 0.08 * (high - low))  # room for the last status label
        axes.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
        axes.set_ylabel("success rate")
        axes.set_xlabel(f"event time since the first result ({unit})")
        axes.set_title(title, loc="left")
        axes.legend(loc="lower left", fontsize=7, frameon=False, ncol=3)
    return svg(figure, salt)


def parameter_figure(values_ok: list[float], values_failed: list[float], band: dict,
                     name: str, title: str, salt: str) -> str:
    """Outcomes per value of one parameter (successes and failures, hatched differently),
    with the recommended median and IQR band."""
    everything = values_ok + values_failed
    low, high = min(everything), max(everything)
    distinct = sorted(set(everything))
    if len(distinct) <= 25:
        edges = _edges(distinct)
    else:
        width = (high - low) / 20 or 1.0
        edges = [low + i * width for i in range(21)]
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(6.4, 2.4))
        figure.subplots_adjust(left=0.09, right=0.8, top=0.88, bottom=0.19)
        # Drawn over the bars (hatched, translucent) so the band shows at every height.
        axes.axvspan(band["q1"], band["q3"], facecolor=GREEN, alpha=0.3, hatch="..",
                     edgecolor="#222222", linewidth=0.8, zorder=3, label="recommended IQR")
        axes.hist([values_ok, values_failed], bins=edges, stacked=True,
                  color=[BLUE, VERMILION], edgecolor="#222222", linewidth=0.5,
                  hatch=None, label=["successes", "failures"])
        for patch in axes.patches[-(len(edges) - 1):]:  # failures: cross-hatched
            patch.set_hatch("xx")
        axes.axvline(band["median"], color="#222222", linewidth=1.4, linestyle="-")
        axes.annotate(f"median {band['median']:g}", (band["median"], 1), xycoords=(
            "data", "axes fraction"), xytext=(4, -10), textcoords="offset points", fontsize=7)
        axes.set_xlabel(name)
        axes.set_ylabel("attempts")
        axes.set_title(title, loc="left")
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    return svg(figure, salt)


def _edges(distinct: list[float]) -> list[float]:
    if len(distinct) == 1:
        return [distinct[0] - 0.5, distinct[0] + 0.5]
    neighbours = list(zip(distinct, distinct[1:], strict=False))
    half = min(b - a for a, b in neighbours) / 2
    return [distinct[0] - half] + [(a + b) / 2 for a, b in neighbours] + [distinct[-1] + half]


def zone_figure(rows: list[tuple[str, float, float, int, int]], salt: str) -> str:
    """rows: (label, failure rate, safety share of attempts, incidents, n)."""
    height = 0.6 + 0.32 * len(rows)
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(figsize=(6.4, height))
        figure.subplots_adjust(left=_label_margin(r[0] for r in rows), right=0.98,
                               top=1 - 0.1 / height, bottom=0.45 / height)
        labels = [r[0] for r in rows]
        positions = list(range(len(rows)))[::-1]
        axes.barh(positions, [r[1] for r in rows], color=ORANGE, edgecolor="#222222",
                  hatch="//", linewidth=0.5, label="failure rate")
        axes.barh(positions, [r[2] for r in rows], color=VERMILION, edgecolor="#222222",
                  hatch="xx", linewidth=0.5, label="safety-relevant failures")
        for y, row in zip(positions, rows, strict=True):
            axes.annotate(f"{row[3]}/{row[4]}", (row[1], y), xytext=(3, -3),
                          textcoords="offset points", fontsize=7)
        axes.set_yticks(positions, labels)
        axes.set_xlim(0, 1.15)
        axes.set_xlabel("share of attempts")
        axes.legend(loc="lower right", fontsize=7, frameon=False)
    return svg(figure, salt)


def consultation_figure(rows: list[tuple[str, int]], salt: str) -> str:
    with plt.rc_context(STYLE):
        height = 0.6 + 0.32 * len(rows)
        figure, axes = plt.subplots(figsize=(6.4, height))
        figure.subplots_adjust(left=_label_margin(r[0] for r in rows), right=0.95,
                               top=1 - 0.1 / height, bottom=0.45 / height)
        positions = list(range(len(rows)))[::-1]
        axes.barh(positions, [r[1] for r in rows], color=BLUE, edgecolor="#222222",
                  hatch="..", linewidth=0.5)
        for y, row in zip(positions, rows, strict=True):
            axes.annotate(str(row[1]), (row[1], y), xytext=(3, -3),
                          textcoords="offset points", fontsize=7)
        axes.set_yticks(positions, [r[0] for r in rows])
        axes.set_xlim(0, max(r[1] for r in rows) * 1.15)
        axes.set_xlabel("grounding answers that served the fact")
    return svg(figure, salt)


def _label_margin(labels) -> float:
    """Left margin that fits the longest bar label (9 pt text is about 0.07 inch a
    character on a 6.4 inch figure)."""
    return min(0.7, 0.04 + 0.011 * max((len(label) for label in labels), default=10))
