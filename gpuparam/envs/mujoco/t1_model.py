"""Booster T1 (MuJoCo Menagerie, Apache-2.0) in MuJoCo Playground's feet-only-collision
variant (Apache-2.0), compiled from the files shipped in ``assets/t1/`` (see its NOTICE).

Only what physics needs is shipped: primitive geoms (no visual meshes), the flat scene,
and the rough scene with its heightfield image. Contacts come from contype/conaffinity
bits, no explicit pairs: the 4 spheres under each foot collide with the floor and the
two foot boxes with each other; no other geom collides.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from gpuparam.envs.mujoco.legged import force_range_on_actuators

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "t1"
SCENES = {
    "flat": "scene_mjx_feetonly_flat_terrain.xml",
    "rough": "scene_mjx_feetonly_rough_terrain.xml",
}
# Feet, in Playground's order (``t1_constants.FEET_SITES``): a site and a box geom per
# foot (the boxes touch only each other).
FEET = ("left_foot", "right_foot")
# The 4 contact spheres of each foot (``t1_constants.LEFT_FEET_GEOMS`` / ``RIGHT_...``);
# sensor ``f"{geom}_floor_found"`` is > 0 while that sphere touches the floor.
FOOT_SPHERES = (
    tuple(f"left_foot_{i}" for i in range(1, 5)),
    tuple(f"right_foot_{i}" for i in range(1, 5)),
)
# Sensor > 0 while the two foot boxes touch (the ``collision`` cost).
FEET_COLLISION_SENSOR = "left_foot_right_foot_found"
IMU_SITE = "imu"  # on the root body "Trunk"
ROOT_BODY = "Trunk"
# Frame sensors of the imu site used by the task: gyro (local angvel), local_linvel
# (velocimeter), accelerometer, upvector (frame z axis), global_linvel, global_angvel;
# per foot f"{foot}_global_linvel".
SENSORS = ("gyro", "local_linvel", "accelerometer", "upvector", "global_linvel",
           "global_angvel")
HOME_KEY = "home"  # reset and default pose (qpos[7:] = ctrl)
# Playground's and envpool's override of the xml option (``t1/base.py``).
CCD_ITERATIONS = 10


def t1_spec(terrain: str) -> mujoco.MjSpec:
    """The T1 scene ``terrain`` (``"flat"`` or ``"rough"``) as an editable
    ``mujoco.MjSpec``, with Playground's ``ccd_iterations = 10`` and each joint's
    ``actuatorfrcrange`` moved onto its position actuator (``forcerange``, so that the
    legged recipe's ``torque_limit`` writes it per env; with one actuator of gear 1 per
    joint the joint torque is the same, but ``actuator_force`` is then the clamped force,
    where upstream reports the unclamped one)."""
    if terrain not in SCENES:
        raise ValueError(f"terrain: expected one of {tuple(SCENES)}, got {terrain!r}")
    spec = mujoco.MjSpec.from_file(str(ASSET_DIR / SCENES[terrain]))
    spec.option.ccd_iterations = CCD_ITERATIONS
    force_range_on_actuators(spec)
    return spec


def load_t1(terrain: str) -> mujoco.MjModel:
    """Compile the T1 scene ``terrain``: ``"flat"`` (a plane, friction 0.6) or
    ``"rough"`` (Playground's 20 m x 20 m heightfield, 5 cm high, friction 0.6), as
    Playground's ``T1JoystickFlatTerrain`` / ``T1JoystickRoughTerrain`` simulate it:
    timestep 0.002 s, Euler without implicit damping, 3 solver iterations, 5 line-search
    iterations, 10 CCD iterations; 23 position actuators (kp: head 20, arms 20, waist 50,
    hips and knees 30, ankles 10) with joint damping (head, arms 2; waist, legs 3),
    frictionloss 0.1 and armature 0.005. Keyframe ``"home"`` is the reset and default
    pose (root height 0.665 m flat, 0.72 m rough)."""
    return t1_spec(terrain).compile()
