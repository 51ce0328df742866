"""Readable diff of what a consolidation pass does (for `consolidate --dry-run`)."""

from __future__ import annotations

from robot_memory.consolidation.consolidation_pass import PassReport

_SHOWN = ("n", "successes", "rate", "shrunk_rate", "confidence", "most_common_failure")


def _flat(value: dict) -> dict:
    try:
        out = {k: value[k] for k in _SHOWN if k in value}
        for name, band in value.get("recommended_parameters", {}).items():
            out[f"recommended.{name}"] = band["median"]
    except Exception:  # a stored value of another shape: shown as nothing, not raised
        return {}
    return out


def _stored_value(row) -> dict:
    """A stored row's value; {} for one that is not JSON (a hand-edited row)."""
    try:
        return row.value
    except ValueError:
        return {}


def format_diff(report: PassReport) -> str:
    lines = [f"{report.summary()} [{report.outcome()}]"]
    new = [c for c in report.changes if c.old is None]
    changed = [c for c in report.changes if c.old is not None]
    status_changes = [c for c in changed if c.old.status != c.new.status]
    lines.append(f"{len(new)} new, {len(changed)} changed "
                 f"({len(status_changes)} status changes)")
    for change in new:
        fields = ", ".join(f"{k}={v}" for k, v in _flat(change.new_value).items())
        lines.append(f"+ {change.kind} [{change.key}] {change.new.status}: {fields}")
    for change in changed:
        old, new_ = _flat(_stored_value(change.old)), _flat(change.new_value)
        parts = [f"{k} {old.get(k)} -> {new_.get(k)}" for k in sorted(set(old) | set(new_))
                 if old.get(k) != new_.get(k)]
        if change.old.status != change.new.status:
            parts.insert(0, f"status {change.old.status} -> {change.new.status}")
        lines.append(f"~ {change.kind} [{change.key}]: " + ", ".join(parts))
    lines += [f"! ill-shaped operator fact skipped: {s.describe()}" for s in report.ill_shaped]
    lines += [f"! {kind} [{key}] not made by this pass: {why}"
              for kind, key, why in report.fact_faults]
    return "\n".join(lines)
