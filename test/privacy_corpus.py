"""Benign strings a robot really writes (skill names, object classes, zones, numeric
ids, versions, times, coordinates, hashes, topics), generated deterministically. The
privacy detector must refuse none of them; bench/privacy_false_positives.py reports
the rate and test/core/test_privacy_fuzz.py holds it at zero."""

from __future__ import annotations

import hashlib
import random
import uuid

DOMAINS = ["manipulation", "navigation", "perception", "inspection", "docking", "handover",
           "locomotion", "charging"]
VERBS = ["grasp", "place", "push", "pour", "open_drawer", "dock", "undock", "follow_path",
         "detect", "scan", "pick", "stack", "wipe", "handover", "turn_valve"]
OBJECTS = ["glass_cup", "mug", "box_small", "box_large", "bottle", "tray", "drawer",
           "door_handle", "pallet", "tote", "valve", "screwdriver", "apple", "bowl", "cable"]
ENVIRONMENTS = ["sim_relaxed", "sim_strict", "lab", "warehouse_b", "kitchen", "ward_3"]
REASONS = ["slipped", "collision", "timeout", "dropped", "no_path", "occluded", "estop",
           "overforce", "localization_lost", "gripper_fault"]


def benign_robot_strings(count: int = 5000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    makers = [
        lambda: f"{rng.choice(DOMAINS)}.{rng.choice(VERBS)}",
        lambda: f"{rng.choice(DOMAINS)}.{rng.choice(VERBS)}_v{rng.randint(1, 9)}",
        lambda: f"{rng.choice(OBJECTS)}_{rng.randint(0, 9999):04d}",
        lambda: rng.choice(OBJECTS),
        lambda: f"{rng.choice(ENVIRONMENTS)}/zone_{rng.randint(1, 40)}",
        lambda: str(rng.randint(0, 10 ** rng.randint(1, 12))),
        lambda: f"id {rng.randint(1, 999999)}",
        lambda: f"cup id {rng.randint(1, 9999)} on tray {rng.randint(1, 20)}",
        lambda: f"run {rng.randint(2020, 2030)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
                f"-{rng.randint(0, 23):02d}{rng.randint(0, 59):02d}",
        lambda: f"{rng.randint(2020, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
        lambda: f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}",
        lambda: f"{rng.choice(REASONS)} after {rng.randint(1, 9)} tries",
        lambda: f"force {rng.uniform(0, 80):.2f} N, width {rng.uniform(0, 0.2):.3f} m",
        lambda: f"x={rng.uniform(-10, 10):.3f} y={rng.uniform(-10, 10):.3f} "
                f"yaw={rng.uniform(-3.2, 3.2):.4f}",
        lambda: " ".join(f"{rng.uniform(-2, 2):.4f}" for _ in range(rng.randint(3, 7))),
        lambda: f"joint_{rng.randint(1, 7)} {rng.uniform(-3.1416, 3.1416):.4f} rad",
        lambda: hashlib.sha256(str(rng.random()).encode()).hexdigest(),
        lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        lambda: f"/robot_{rng.randint(1, 20)}/{rng.choice(['cmd_vel', 'odom', 'scan', 'tf'])}",
        lambda: f"{rng.randint(10, 192)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}."
                f"{rng.randint(1, 254)}",
        lambda: f"0x{rng.getrandbits(32):08X}",
        lambda: f"frame {rng.randint(0, 999999):06d}, stamp {rng.randint(0, 10**9)}."
                f"{rng.randint(0, 10**9 - 1):09d}",
        lambda: f"retry {rng.randint(1, 5)} of {rng.randint(5, 10)}, "
                f"{rng.choice(REASONS)} at {rng.uniform(0, 60):.1f} s",
        lambda: f"SN-{rng.randint(2020, 2030)}-{rng.randint(0, 99999):05d}",
        lambda: f"battery {rng.randint(0, 100)}%, {rng.uniform(20, 30):.2f} V",
        lambda: f"{rng.choice(OBJECTS)}: mass {rng.uniform(0, 5):.3f} kg",
        lambda: "samples " + " ".join(str(rng.randint(0, 9999))
                                      for _ in range(rng.randint(2, 8))),
        lambda: f"grid cell {rng.randint(0, 999)}-{rng.randint(0, 999)}, "
                f"pose {rng.randint(0, 99)}",
    ]
    return [rng.choice(makers)() for _ in range(count)]
