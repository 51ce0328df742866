"""Comments and docstrings say what the code does and why; the figures measured while it
took its shape (milliseconds, megabytes, ratios, shares of a pass) live in
docs/performance.md ("Why the code is shaped this way") and bench/results, where a
reader looks for them and a rerun can correct them. This test finds a measured figure
in any comment or docstring of robot_memory/ and names its file and line.

A number with a unit is not always a measurement: a setting or a limit of the code (a
default timeout, a size a specification sets) says what the code does. Those few are
in ALLOWED, each with why it is not a measurement. TO_CLEAN lists the modules still to
clean, and can only shrink: a listed module that is already clean fails the test too."""

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "robot_memory"

# A number as the docs write one: 7.5, 1,000, 10^6 (not the tail of a name, int64, or of
# a version, v0.1, nor an exponent's digits).
_NUMBER = r"(?<![\w.^])\d+(?:[,.]\d+)*(?:\^\d+)?"
# A number or a range of them: 1.05-1.16, 32 -> 20, 0.4 to 0.6.
_RANGE = _NUMBER + r"(?:\s?(?:-|to|->)\s?" + _NUMBER + r")?"
_SPELLED = r"(?:two|three|four|five|six|seven|eight|nine|ten|twenty|a hundred)"
_FRACTION = r"(?:third|quarter|fifth|sixth|seventh|eighth|ninth|tenth|twentieth)s?"
FIGURE = re.compile("|".join((
    # A time, a size, a share or a CPU load: 0.4 µs, 7.5 s, 8.5 MB, 40%, 0.1 core.
    _RANGE + r"\s?(?:ms|µs|us|ns|s|KB|kB|MB|GB|KiB|MiB|GiB|%|percent|cores?)(?![\w/])",
    # A rate: 5,000/s, 1,000 results/s.
    _NUMBER + r"(?: [a-z]+)?/s\b",
    # A ratio: 3x, 1.05-1.16x (not a product written with spaces, 1.4826 x the median).
    _RANGE + r"x(?!\w)",
    # A ratio in words: four times cheaper, 20 times as fast, twice the cost.
    r"\b(?:" + _SPELLED + r"|\d+(?:\.\d+)?) times (?:faster|slower|cheaper|dearer|as fast"
    r"|as slow|as much|the)\b",
    r"\btwice (?:as (?:fast|slow|much|long|dear)|the (?:cost|speed|time|CPU|memory))\b",
    # A share: a third of the time, three fifths of, a fifth more, half the memory.
    r"\b(?:a|one|" + _SPELLED + r") " + _FRACTION + r" (?:of|more|less)\b",
    r"\bhalf (?:the|of (?:the|its|a|what)) (?:time|CPU|memory|cost|speed|store)\b",
    r"\bhalf of what\b",
    # A duration in words: about a millisecond.
    r"\b(?:a|one|half a) (?:milli|micro|nano)second\b",
)))

# (module, the figure as matched): why it is a setting or a limit, not a measurement.
ALLOWED = {
    ("consolidation/service.py", "4 KB"):
        "SQLite's page size, in the auto-checkpoint size the code sets",
    ("consolidation/stats.py", "95%"):
        "the confidence level of the Wilson interval the code computes",
    ("intake/privacy.py", "1 MB"):
        "the bound of a cache, worked out from its own two limits",
    ("operation/heap.py", "1,000 results/s"):
        "the rate the sidecar is designed for, the load a pass runs under",
    ("report/plots.py", "95%"):
        "the confidence level of the Wilson band the plot draws",
    ("ros/grounding_server.py", "5 ms"):
        "CPython's default switch interval, the setting the node shortens",
    ("store/engine.py", "30 s"):
        "the store's default lock timeout, a setting",
    ("store/size.py", "100 MB"):
        "the store size the consolidation protocol's specification sets",
}

# Modules, or folders of them, whose figures are still to move to docs/performance.md.
TO_CLEAN = (
    "consolidation/rules/",
    "consolidation/stats.py",
    "consolidation/consolidation_pass.py",
    "store/aggregates.py",
    "store/facets.py",
)


def _blocks(source: str):
    """Each comment block (consecutive comment lines, joined) and each docstring-like
    string statement, as (line, text) pairs, so a figure split over two lines is one."""
    block: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        if block and token.start[0] != block[-1][0] + 1:
            yield block
            block = []
        block.append((token.start[0], token.string.lstrip("#").strip()))
    if block:
        yield block
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            yield [(node.value.lineno + i, line.strip())
                   for i, line in enumerate(node.value.value.splitlines())]


def figures(source: str) -> list[tuple[int, str]]:
    """The measured-looking figures of a module's comments and docstrings: (line, figure)."""
    found = []
    for block in _blocks(source):
        text, starts = "", []
        for line, part in block:
            starts.append((len(text), line))
            text += part + " "
        for match in FIGURE.finditer(text):
            line = max(line for start, line in starts if start <= match.start())
            found.append((line, match.group(0)))
    return sorted(found)


def _module(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _to_clean(module: str) -> str | None:
    return next((entry for entry in TO_CLEAN
                 if module == entry or (entry.endswith("/") and module.startswith(entry))),
                None)


def _found() -> dict[str, list[tuple[int, str]]]:
    return {_module(path): figures(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_pattern_finds_figures_and_not_settings_of_the_text():
    for text in ("at 0.4 µs each", "3 of its 7.5 s", "(8.5 MB once", "takes 40% off",
                 "0.1 core", "63-123 of 15,000 at 5,000/s", "at 1,000 results/s",
                 "p99 1.05-1.16x the echo", "3x the CPU", "32 -> 20 MB",
                 "four times cheaper", "twice the cost", "a third of the time",
                 "three fifths of the handler's time", "about a millisecond",
                 "half the memory", "0.2 us, more"):
        assert FIGURE.search(text), text
    for text in ("at 10^4 facts", "SHA-256", "int64s", "a 2048-bit hash", "0x1f",
                 "1.4826 x the median", "half of them or more", "on a second core",
                 "four times as many", "the 2-core machine", "Spec v0.1", "z^2 x present",
                 "SIM_RATE times faster", "32 bytes", "a fifth argument"):
        assert not FIGURE.search(text), text


def test_no_measured_figure_in_a_comment_or_docstring():
    found = _found()
    assert len(found) >= 100  # the whole package, not a few modules
    offenders = [f"robot_memory/{module}:{line}: {figure!r}"
                 for module, hits in found.items() if not _to_clean(module)
                 for line, figure in hits if (module, figure) not in ALLOWED]
    assert not offenders, (
        "measured figures in comments or docstrings: move each to docs/performance.md "
        "(\"Why the code is shaped this way\") and say what and why without it; a setting "
        "or a limit goes in ALLOWED, with its reason:\n" + "\n".join(offenders))


def test_every_allowed_figure_is_still_there():
    found = _found()
    for (module, figure), reason in ALLOWED.items():
        assert reason
        assert any(hit == figure for _, hit in found.get(module, [])), (
            f"{module}: {figure!r} is gone; remove it from ALLOWED")


def test_modules_to_clean_still_hold_figures():
    found = _found()
    for entry in TO_CLEAN:
        modules = [module for module in found if _to_clean(module) == entry]
        assert modules, f"{entry}: no such module; remove it from TO_CLEAN"
        left = [hit for module in modules for hit in found[module]
                if (module, hit[1]) not in ALLOWED]
        assert left, f"{entry} is clean: remove it from TO_CLEAN"
