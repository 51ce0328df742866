"""Builders shared by tests."""

from robot_memory.records import validate_record
from robot_memory.store import NewEvent


def result_event(t_s: float, success: bool = True, force: float = 25.0, reason: str = "",
                 skill: str = "manipulation.grasp", target: str = "glass_cup",
                 env: str = "sim_relaxed", zone: str = "", observations=None) -> NewEvent:
    record = validate_record({"stamp_ns": int(t_s * 1e9), "skill_id": skill,
                              "target_class": target, "environment": env, "zone": zone,
                              "parameters": {"force_n": force}, "success": success,
                              "failure_reason": "" if success else (reason or "slipped"),
                              "observations": observations or {}})
    return NewEvent("execution_result", record.payload(), record.stamp_ns)


def varied_events(n: int) -> list[NewEvent]:
    """n results over 40 targets, 7 zones, 6 forces and 13 masses, ~70% successes,
    deterministic: big enough that a pass takes a while."""
    import random
    return [result_event(i * 0.5, success=random.Random(i).random() < 0.7,
                         force=float(5 * (i % 6)), target=f"object_{i % 40}",
                         zone=f"zone_{i % 7}", observations={"mass_kg": (i % 13) / 10})
            for i in range(n)]
