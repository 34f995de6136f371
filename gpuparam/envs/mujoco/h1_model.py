"""Unitree H1 (MuJoCo Menagerie, BSD-3-Clause) in MuJoCo Playground's feet-only-collision
variant (Apache-2.0), compiled from the files shipped in ``assets/h1/`` (see its NOTICE).

Only what physics needs is shipped: the primitive collision geoms (no visual meshes) and
the flat scene. Only the six foot capsules (three per foot, ``contype 0, conaffinity 1``)
and the floor (``contype 1, conaffinity 0``) can collide: the other collision geoms have
``contype = conaffinity = 0`` and no mass, so there are only foot-floor contacts.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "h1"
SCENE = "scene_mjx_feetonly.xml"
# Feet, in Playground's order (``h1_constants.FEET_SITES``): a site per foot, three
# capsule geoms per foot (``LEFT_FEET_GEOMS`` / ``RIGHT_FEET_GEOMS``) and three contact
# sensors ``{foot}{k}_floor_found`` (data "found", one value each).
FEET = ("left_foot", "right_foot")
FOOT_GEOMS = {foot: tuple(f"{foot}{k}" for k in (1, 2, 3)) for foot in FEET}
FOOT_FLOOR_SENSORS = {foot: tuple(f"{g}_floor_found" for g in geoms)
                      for foot, geoms in FOOT_GEOMS.items()}
# The IMU site (in torso_link) and Playground's sensor names (``h1_constants``): gyro,
# local_linvel (velocimeter), accelerometer, upvector (framezaxis, world frame: what the
# task calls "gravity"), global_linvel, global_angvel, and each foot's
# ``{foot}_global_linvel``.
IMU_SITE = "imu"
KEYFRAME = "home"
NUM_ACTUATORS = 19


# The actuators' kv (N m s/rad, actuator order) that MuJoCo 3.6 (envpool's, Playground's)
# derives from the model's ``dampratio="1"``: MuJoCo 4 derives other values from the same
# dampratio (20.97 for the hip yaw instead of 25.40), so they are set explicitly.
KV = (25.39807, 59.44468, 57.79198, 27.59756, 18.34125) * 2 + (
    30.78294, 21.28285, 20.69702, 14.30667, 14.0344, 21.28285, 20.69702, 14.30667, 14.0344)


def h1_spec() -> mujoco.MjSpec:
    """The H1 flat scene as an editable ``mujoco.MjSpec`` (the torque limits are already
    actuator ``forcerange``s: hips and torso 200 N m, knees 300, ankles and shoulder
    pitch/roll 40, shoulder yaw and elbows 18), its actuators' damping the ``KV`` of
    MuJoCo 3.6's ``dampratio 1``."""
    spec = mujoco.MjSpec.from_file(str(ASSET_DIR / SCENE))
    for act, kv in zip(spec.actuators, KV, strict=True):
        act.biasprm[2] = -kv  # negative: a kv, not a dampratio
    return spec


def load_h1() -> mujoco.MjModel:
    """Compile the H1 flat scene as Playground's ``H1JoystickGaitTracking`` /
    ``H1InplaceGaitTracking`` simulate it: timestep 0.004 s (``sim_dt``; 5 substeps per
    0.02 s control step), Euler without implicit damping (``eulerdamp`` disabled),
    Newton solver, 1 solver iteration, 5 line-search iterations, pyramidal cone;
    19 position actuators (kp 800 on the legs, 400 on torso and arms, ``dampratio 1`` as
    MuJoCo 3.6 compiles it,
    ``ctrlrange`` = the joint range, ``inheritrange``), joint damping 1 and armature 0.1.
    Keyframe ``"home"`` (pelvis at 0.97 m, knees bent 0.8) is the reset and default
    pose."""
    return h1_spec().compile()
