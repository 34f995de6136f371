"""Unitree G1 (MuJoCo Menagerie, BSD-3-Clause) in MuJoCo Playground's feet-only-collision
variant (Apache-2.0), compiled from the files shipped in ``assets/g1/`` (see its NOTICE).

Only what physics needs is shipped: primitive collision geoms (no visual meshes), the flat
scene, and the rough scene with its heightfield image. Contacts are Playground's five
explicit pairs (each foot with the floor, each hand with its thigh, foot with foot); no
other geom collides.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from gpuparam.envs.mujoco.legged import force_range_on_actuators

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "g1"
SCENES = {
    "flat": "scene_mjx_feetonly_flat_terrain.xml",
    "rough": "scene_mjx_feetonly_rough_terrain.xml",
}
# Feet, in Playground's order (``g1_constants.FEET_SITES``): a site and a geom per foot.
FEET = ("left_foot", "right_foot")


def g1_spec(terrain: str) -> mujoco.MjSpec:
    """The G1 scene ``terrain`` (``"flat"`` or ``"rough"``) as an editable
    ``mujoco.MjSpec``, each joint's ``actuatorfrcrange`` moved onto its position actuator
    (``forcerange``, so that the legged recipe's ``torque_limit`` writes it per env; with
    one actuator of gear 1 per joint the joint torque is the same)."""
    if terrain not in SCENES:
        raise ValueError(f"terrain: expected one of {tuple(SCENES)}, got {terrain!r}")
    spec = mujoco.MjSpec.from_file(str(ASSET_DIR / SCENES[terrain]))
    force_range_on_actuators(spec)
    return spec


def load_g1(terrain: str) -> mujoco.MjModel:
    """Compile the G1 scene ``terrain``: ``"flat"`` (a plane; feet friction 0.6 from their
    contact pairs) or ``"rough"`` (Playground's 20 m x 20 m heightfield, 5 cm high), as
    Playground's ``G1JoystickFlatTerrain`` / ``G1JoystickRoughTerrain`` simulate it:
    timestep 0.002 s, Euler without implicit damping, 3 solver iterations, 5 line-search
    iterations, position actuators (kp 75; ankles 20 and 2, wrists 2) and joint damping 2
    (ankles 1 and 0.2, wrists 0.2). Keyframe ``"knees_bent"`` is the reset and default
    pose."""
    return g1_spec(terrain).compile()
