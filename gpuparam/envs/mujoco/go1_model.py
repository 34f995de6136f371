"""Unitree Go1 (MuJoCo Menagerie, BSD-3-Clause) in MuJoCo Playground's feet-only-collision
variant (Apache-2.0), compiled from the files shipped in ``assets/go1/`` (see its NOTICE).

Only what physics needs is shipped: primitive collision geoms (no visual meshes), the flat
scene, and the rough scene with its heightfield image. No network access and no Menagerie
checkout are needed at run time. Only the feet (4 spheres) and the floor collide; the other
collision geoms (group 3) are hidden in renders unless that group is enabled.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "go1"
SCENES = {
    "flat": "scene_mjx_feetonly_flat_terrain.xml",
    "rough": "scene_mjx_feetonly_rough_terrain.xml",
}
# Feet, in Playground's order (``go1_constants.FEET_SITES``): a site and a geom per foot.
FEET = ("FR", "FL", "RR", "RL")
# Set by Playground on the compiled model (``go1/base.py``), not in its XML.
CCD_ITERATIONS = 20


def go1_spec(terrain: str) -> mujoco.MjSpec:
    """The Go1 scene ``terrain`` (``"flat"`` or ``"rough"``) as an editable
    ``mujoco.MjSpec`` (e.g. to replace the floor by a generated terrain), with Playground's
    ``ccd_iterations`` already set."""
    if terrain not in SCENES:
        raise ValueError(f"terrain: expected one of {tuple(SCENES)}, got {terrain!r}")
    return scene_spec(SCENES[terrain])


def scene_spec(file: str) -> mujoco.MjSpec:
    """The Go1 scene file ``file`` (of ``ASSET_DIR``) as an editable ``mujoco.MjSpec``, with
    Playground's ``ccd_iterations``."""
    spec = mujoco.MjSpec.from_file(str(ASSET_DIR / file))
    spec.option.ccd_iterations = CCD_ITERATIONS
    return spec


def load_go1(terrain: str) -> mujoco.MjModel:
    """Compile the Go1 scene ``terrain``: ``"flat"`` (a plane, friction 0.6) or
    ``"rough"`` (Playground's 20 m x 20 m heightfield, friction 1.0), as Playground's
    ``Go1JoystickFlatTerrain`` / ``Go1JoystickRoughTerrain`` simulate it: timestep 0.004 s,
    Euler, 1 solver iteration, 5 line-search iterations, ``ccd_iterations`` 20, position
    actuators with kp 35 and joint damping 0.5 (Playground's Kp, Kd). Keyframe ``"home"``
    is the reset pose."""
    return go1_spec(terrain).compile()
