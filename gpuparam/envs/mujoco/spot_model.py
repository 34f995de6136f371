"""Boston Dynamics Spot (MuJoCo Menagerie, BSD-3-Clause) in MuJoCo Playground's two task
variants (Apache-2.0), compiled from the files shipped in ``assets/spot/`` (see its NOTICE).

Only what physics needs is shipped: primitive collision geoms (no visual meshes) and the flat
scene. Two scenes, as Playground's Spot tasks load them:

- ``"feetonly"`` (``SpotFlatTerrainJoystick``, ``SpotJoystickGaitTracking``): only the feet
  (4 spheres) and the floor collide.
- ``"full"`` (``SpotGetup``): the body (two cylinders), upper and lower legs (capsules) and
  feet collide with the floor (not with each other); the feet's ``solimp`` width is 0.023
  (0.036 in ``"feetonly"``).

In both, the floor's ``priority 1`` makes every contact take its friction 0.6 and condim 3.

Both: timestep 0.004 s, Euler without implicit damping (``eulerdamp`` off), 1 solver
iteration, 5 line-search iterations, no ``ccd_iterations`` change (Playground's Spot base
sets none). Position actuators' ``kp`` and the leg joints' damping are per task (Playground's
``Kp``, ``Kd``, set on the compiled model by ``SpotEnv``): ``TASK_GAINS``. The feet-only XML's
position actuators also carry ``kv`` 20 (an actuator velocity term, ``biasprm[2] = -20``),
which Playground does not change: a joystick or gait task's legs are damped by ``Kd`` (joint)
plus 20 (actuator). Joint ``actuatorfrcrange`` is +-1000 N m on the joints, as upstream (not
moved onto the actuators: ``actuator_force``, which the tasks read, is not clamped by it).
Keyframe ``"home"`` (body 0.46 m high, legs 0, 1.04, -1.8) is the default pose.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "spot"
SCENES = {
    "feetonly": "scene_mjx_feetonly_flat_terrain.xml",
    "full": "scene_mjx_flat_terrain.xml",
}
# Feet, in Playground's order (``spot_constants.FEET_SITES``): a site and a geom per foot.
FEET = ("FL", "FR", "HL", "HR")
# Per task: (scene, kp, joint damping) as envpool's registration and Playground's
# ``default_config()`` set them (Playground's ``Kp``, ``Kd``).
TASK_GAINS = {
    "joystick": ("feetonly", 300.0, 1.0),
    "gait": ("feetonly", 400.0, 10.0),
    "getup": ("full", 400.0, 20.0),
}


def spot_spec(task: str) -> mujoco.MjSpec:
    """The Spot scene of ``task`` (``"joystick"``, ``"gait"`` or ``"getup"``, see
    ``TASK_GAINS``) as an editable ``mujoco.MjSpec``, with the task's position-actuator
    ``kp`` (``gainprm[0]``, ``biasprm[1] = -kp``) and leg-joint damping already set, as
    Playground's ``SpotEnv`` sets them on the compiled model."""
    if task not in TASK_GAINS:
        raise ValueError(f"task: expected one of {tuple(TASK_GAINS)}, got {task!r}")
    scene, kp, kd = TASK_GAINS[task]
    spec = mujoco.MjSpec.from_file(str(ASSET_DIR / SCENES[scene]))
    for act in spec.actuators:
        act.gainprm[0] = kp
        act.biasprm[1] = -kp
    for joint in spec.joints:
        if joint.type != mujoco.mjtJoint.mjJNT_FREE:
            # MuJoCo 3.x: a float; 4.x: polynomial coefficients, the first the linear one.
            damping = np.array(joint.damping, dtype=np.float64, ndmin=1)
            damping[0] = kd
            joint.damping = kd if damping.size == 1 else damping
    return spec


def load_spot(task: str) -> mujoco.MjModel:
    """Compile the Spot scene of ``task`` (``"joystick"``, ``"gait"`` or ``"getup"``) as
    envpool's and Playground's Spot task of that name simulates it (see the module doc and
    ``TASK_GAINS``). Sensors: ``gyro``, ``local_linvel``, ``accelerometer``, ``upvector``,
    ``global_linvel``, ``global_angvel`` at site ``imu``; ``<foot>_global_linvel`` and
    (``"feetonly"`` only) ``<foot>_pos`` (relative to ``imu``) per foot site; contact
    sensors ``<foot>_floor_found``."""
    return spot_spec(task).compile()
