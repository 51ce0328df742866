"""The behaviour-tree leaf's contract, without py_trees or ROS: its blackboard keys and
which answers are a success.

ros/bt_ground.py's GroundBehaviour writes, under its `key_prefix` (default
/robot_memory/ground), after every answer or failure to get one:

- `status`: OK, ABSTAIN, ANALOGY, PRIOR, IDENTITY_UNVERIFIED, INVALID_REQUEST,
  UNAVAILABLE or TIMEOUT;
- `reason_code`: the answer's reason code (no_fact, ..., service_unavailable, timeout);
  empty with OK;
- `reason`: the same in words;
- `recommended_parameters`: the skill fact's recommended parameters by name, e.g.
  {"force_n": 25.0}; {} when there is none;
- `consultation_id`: the audit record of the answer; empty when the stack did not answer.

Only OK is a success by default: ANALOGY and PRIOR are successes only for a leaf built
to accept them, since they are not this robot's own knowledge of the target.
"""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_KEY_PREFIX = "/robot_memory/ground"
KEYS = ("status", "reason_code", "reason", "recommended_parameters", "consultation_id")
LENT_STATUSES = frozenset({"ANALOGY", "PRIOR"})


def success_statuses(accept: Iterable[str] = ()) -> frozenset[str]:
    """OK, and whichever of ANALOGY and PRIOR `accept` names; ValueError for any other
    name (only those two may be accepted)."""
    accept = frozenset(accept)
    unknown = accept - LENT_STATUSES
    if unknown:
        raise ValueError(f"accept: {sorted(unknown)} cannot be accepted; only "
                         f"{sorted(LENT_STATUSES)} can (OK always is)")
    return frozenset({"OK"}) | accept


def blackboard_key(prefix: str, name: str) -> str:
    """The full key of one of KEYS under `prefix`."""
    if name not in KEYS:
        raise ValueError(f"{name!r} is no key of the leaf; its keys are {KEYS}")
    return prefix.rstrip("/") + "/" + name
