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
