"""A parallel-jaw gripper over a table with one object, simulated in MuJoCo.

Whether a grasp holds, slips or breaks comes from the physics: the fingers squeeze the
object with the commanded force, a lift joint raises the hand, and friction at the
finger pads (Coulomb, MuJoCo's soft contacts) either carries the object's weight or
lets it slide out. A fragile object cracks when the measured normal force at a pad
exceeds its crack force. No outcome is looked up anywhere.

The objects differ in mass, friction and fragility; each attempt jitters mass and
friction a little (episode seed), as a real object's grip never repeats exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

TIMESTEP_S = 0.002
LIFT_HEIGHT_M = 0.12
HAND_MASS_KG = 0.5
FINGER_MASS_KG = 0.05


@dataclass(frozen=True)
class ObjectSpec:
    """Nominal properties; `crack_force_n` 0 means unbreakable."""

    name: str
    mass_kg: float
    friction: float
    half_width_m: float
    crack_force_n: float = 0.0


# Glass: light but slippery and fragile (a window of forces between slip and crack).
# Mug: heavier, grippier. Unknown: a dense, slick block the gripper cannot carry.
OBJECTS = {
    "glass_cup": ObjectSpec("glass_cup", 0.30, 0.12, 0.035, crack_force_n=34.0),
    "heavy_mug": ObjectSpec("heavy_mug", 0.90, 0.35, 0.045),
    "unknown_object": ObjectSpec("unknown_object", 2.5, 0.10, 0.04),
}
MAX_FORCE_N = 50.0

# Held out of the closed loop (its episode stream draws from OBJECTS only); they appear in
# the transfer experiments (robot_memory/sim/transfer.py) after OBJECTS are learned.
# Three resemble a known object in weight and in the forces that hold them. The crystal
# glass weighs what the glass cup weighs, but grips better and cracks at 18 N: 5-15 N
# hold it, while the forces that hold the cup (15-30 N, the upper ones 20 N and more)
# crack it.
HELD_OUT = {
    "glass_jar": ObjectSpec("glass_jar", 0.34, 0.13, 0.037, crack_force_n=36.0),
    "tea_glass": ObjectSpec("tea_glass", 0.25, 0.11, 0.032, crack_force_n=31.0),
    "stoneware_mug": ObjectSpec("stoneware_mug", 0.82, 0.33, 0.044),
    "crystal_glass": ObjectSpec("crystal_glass", 0.30, 0.35, 0.035, crack_force_n=18.0),
}
ALL_OBJECTS = {**OBJECTS, **HELD_OUT}


@dataclass(frozen=True)
class GraspOutcome:
    success: bool
    failure_reason: str  # "" on success, "slipped" or "cracked"
    grip_force_n: float  # peak normal force measured at the finger pads
    measured_mass_kg: float  # from the lift joint's load while holding (0 if not held)
    lift_m: float  # how far the object rose
    duration_s: float  # simulated time the attempt took


def scene_xml(spec: ObjectSpec, mass_kg: float, friction: float) -> str:
    w = spec.half_width_m
    return f"""
<mujoco model="grasp_{spec.name}">
  <option timestep="{TIMESTEP_S}" gravity="0 0 -9.81" cone="elliptic" impratio="10"/>
  <default>
    <geom solref="0.004 1" solimp="0.95 0.99 0.001"/>
  </default>
  <worldbody>
    <geom name="table" type="box" size="0.4 0.4 0.02" pos="0 0 -0.02" friction="0.5"/>
    <body name="hand" pos="0 0 0.06">
      <joint name="lift" type="slide" axis="0 0 1" damping="50"/>
      <geom type="box" size="0.08 0.02 0.01" pos="0 0 0.07" mass="{HAND_MASS_KG}"/>
      <body name="left_finger" pos="{-w - 0.012} 0 0">
        <joint name="left" type="slide" axis="1 0 0" damping="20" range="-0.02 0.06"/>
        <geom name="left_pad" type="box" size="0.01 0.015 0.03" mass="{FINGER_MASS_KG}"
              friction="0.01"/>
      </body>
      <body name="right_finger" pos="{w + 0.012} 0 0">
        <joint name="right" type="slide" axis="-1 0 0" damping="20" range="-0.02 0.06"/>
        <geom name="right_pad" type="box" size="0.01 0.015 0.03" mass="{FINGER_MASS_KG}"
              friction="0.01"/>
      </body>
    </body>
    <body name="object" pos="0 0 0.04">
      <freejoint/>
      <geom name="object" type="box" size="{w} {w} 0.04" mass="{mass_kg}"
            friction="{friction} 0.005 0.0001"/>
    </body>
  </worldbody>
  <actuator>
    <position name="lift" joint="lift" kp="4000" ctrlrange="0 0.3"/>
    <motor name="left" joint="left" ctrlrange="-{MAX_FORCE_N} {MAX_FORCE_N}"/>
    <motor name="right" joint="right" ctrlrange="-{MAX_FORCE_N} {MAX_FORCE_N}"/>
  </actuator>
</mujoco>
"""


class GraspWorld:
    """One attempt = build the scene for this object (jittered by the episode seed), close
    the fingers with the commanded force, lift, hold, and read the outcome off the state."""

    def __init__(self):
        self.sim_time_s = 0.0  # total simulated time over all attempts
        self._models: dict[str, mujoco.MjModel] = {}

    def _model(self, spec: ObjectSpec, mass: float, friction: float) -> mujoco.MjModel:
        """The object's compiled scene (once), with this episode's mass and friction."""
        if spec.name not in self._models:
            self._models[spec.name] = mujoco.MjModel.from_xml_string(
                scene_xml(spec, spec.mass_kg, spec.friction))
        model = self._models[spec.name]
        body, geom = model.body("object").id, model.geom("object").id
        model.body_inertia[body] *= mass / model.body_mass[body]  # same shape, new mass
        model.body_mass[body] = mass
        model.geom_friction[geom][0] = friction
        return model

    @staticmethod
    def _episode(target: str, episode_seed: int) -> tuple[ObjectSpec, float, float]:
        """The object and this episode's mass and friction."""
        spec = ALL_OBJECTS[target]
        rng = np.random.default_rng(episode_seed)
        mass = spec.mass_kg * rng.uniform(0.9, 1.1)
        friction = spec.friction * rng.uniform(0.8, 1.2)
        return spec, mass, friction

    def weigh(self, target: str, episode_seed: int) -> float:
        """What a scale in the table reads for this episode's object before the grasp: the
        table's normal contact force on the resting object over g, in kg (3 decimals)."""
        spec, mass, friction = self._episode(target, episode_seed)
        model = self._model(spec, mass, friction)
        data = mujoco.MjData(model)
        table, obj = model.geom("table").id, model.geom("object").id
        force_vec = np.zeros(6)
        readings = []
        for k in range(int(round(0.2 / TIMESTEP_S))):
            mujoco.mj_step(model, data)
            if k * TIMESTEP_S >= 0.1:  # settled
                normal = 0.0
                for i in range(data.ncon):
                    if {data.contact[i].geom1, data.contact[i].geom2} == {table, obj}:
                        mujoco.mj_contactForce(model, data, i, force_vec)
                        normal += float(force_vec[0])
                readings.append(normal)
        return round(float(np.mean(readings)) / 9.81, 3)

    def attempt(self, target: str, force_n: float, episode_seed: int) -> GraspOutcome:
        spec, mass, friction = self._episode(target, episode_seed)
        model = self._model(spec, mass, friction)
        data = mujoco.MjData(model)
        force = float(np.clip(force_n, 0.0, MAX_FORCE_N))
        lift_id = model.joint("lift").id
        obj = model.body("object").id
        pads = {model.geom("left_pad").id, model.geom("right_pad").id}
        obj_geom = model.geom("object").id
        peak = 0.0
        load = []
        start_z = float(data.xpos[obj][2]) if mujoco.mj_forward(model, data) is None else 0.0
        force_vec = np.zeros(6)

        def step(seconds: float, lift_from: float, lift_to: float, squeeze_from: float = 1.0,
                 record_load: bool = False) -> None:
            """Ramp the lift target and the squeeze (no jerks), measuring pad forces."""
            nonlocal peak
            steps = int(round(seconds / TIMESTEP_S))
            for k in range(steps):
                ramp = (k + 1) / steps
                squeeze = force * min(1.0, squeeze_from + (1.0 - squeeze_from) * ramp)
                data.ctrl[:] = [lift_from + (lift_to - lift_from) * ramp, squeeze, squeeze]
                mujoco.mj_step(model, data)
                per_pad = dict.fromkeys(pads, 0.0)
                for i in range(data.ncon):
                    contact = data.contact[i]
                    pair = (contact.geom1, contact.geom2)
                    if obj_geom in pair and (pad := (pads & set(pair))):
                        mujoco.mj_contactForce(model, data, i, force_vec)
                        per_pad[pad.pop()] += float(force_vec[0])
                peak = max(peak, *per_pad.values())
                if record_load:
                    load.append(float(data.qfrc_actuator[model.jnt_dofadr[lift_id]]))

        step(0.3, 0.0, 0.0, squeeze_from=0.0)  # close gently
        step(0.1, 0.0, 0.0)  # settle
        if spec.crack_force_n and peak > spec.crack_force_n:
            return self._done(model, data, False, "cracked", peak, 0.0, 0.0)
        step(0.6, 0.0, LIFT_HEIGHT_M)  # lift
        step(0.5, LIFT_HEIGHT_M, LIFT_HEIGHT_M, record_load=True)  # hold
        lift = float(data.xpos[obj][2]) - start_z
        if spec.crack_force_n and peak > spec.crack_force_n:
            return self._done(model, data, False, "cracked", peak, 0.0, lift)
        held = lift > 0.8 * LIFT_HEIGHT_M
        measured = 0.0
        if held:  # the lift joint carries hand, fingers and object: subtract the hand
            carried = float(np.mean(load[len(load) // 2:])) / 9.81
            measured = round(carried - HAND_MASS_KG - 2 * FINGER_MASS_KG, 3)
        return self._done(model, data, held, "" if held else "slipped", peak, measured, lift)

    def _done(self, model, data, success, reason, peak, mass, lift) -> GraspOutcome:
        self.sim_time_s += data.time
        return GraspOutcome(success, reason, round(peak, 2), mass, round(lift, 4),
                            round(float(data.time), 3))
