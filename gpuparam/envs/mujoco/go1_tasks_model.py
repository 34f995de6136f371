"""Unitree Go1 (MuJoCo Menagerie, BSD-3-Clause) in the two full-collision variants of MuJoCo
Playground (Apache-2.0) that its Go1 Getup and Handstand tasks simulate, compiled from the
files shipped in ``assets/go1/`` (see its NOTICE).

- ``"getup"``: ``scene_mjx_fullcollisions_flat_terrain.xml`` (``go1_mjx_fullcollisions.xml``):
  every collision geom (trunk, hip, thigh and calf capsules/cylinders, feet) collides with
  the floor and with the robot's other geoms (MuJoCo still excludes parent-child pairs).
- ``"handstand"``: ``scene_mjx_flat_terrain.xml`` (``go1_mjx.xml``): every collision geom
  collides with the floor, none with another robot geom (robot geoms: contype 0,
  conaffinity 1; floor: contype 1, conaffinity 0).

Both scenes are the flat plane (friction 0.6) with ``sensor_feet.xml`` (the feet's
``{FR,FL,RR,RL}_floor_found`` contact sensors) and ``sensor_fullcollision.xml`` (the
``{fl,fr}_{calf1,calf2,thigh1,thigh2,thigh3,hip}_floor_found`` contact sensors that
Handstand terminates on), and keyframes ``home``, ``home_higher``, ``pre_recovery``,
``footstand``, ``handstand``. Only what physics needs is shipped (no visual meshes). See
``docs/tasks/go1_getup_handstand.md`` for the tasks.
"""

from __future__ import annotations

import mujoco

from gpuparam.envs.mujoco.go1_model import scene_spec

SCENES = {
    "getup": "scene_mjx_fullcollisions_flat_terrain.xml",
    "handstand": "scene_mjx_flat_terrain.xml",
}
# Handstand's unwanted floor contacts, in Playground's order (``handstand.py``): each has a
# contact sensor ``<geom>_floor_found``; any of them touching the floor ends the episode.
HANDSTAND_UNWANTED_CONTACTS = (
    "fl_calf1", "fl_calf2", "fr_calf1", "fr_calf2", "fl_thigh1", "fl_thigh2", "fl_thigh3",
    "fr_thigh1", "fr_thigh2", "fr_thigh3", "fl_hip", "fr_hip")


def go1_task_spec(task: str) -> mujoco.MjSpec:
    """The Go1 scene of Playground's task ``task`` (``"getup"`` or ``"handstand"``) as an
    editable ``mujoco.MjSpec``, with Playground's ``ccd_iterations`` already set."""
    if task not in SCENES:
        raise ValueError(f"task: expected one of {tuple(SCENES)}, got {task!r}")
    return scene_spec(SCENES[task])


def load_go1_task(task: str) -> mujoco.MjModel:
    """Compile the Go1 scene of Playground's ``Go1Getup`` (``task="getup"``) or
    ``Go1Handstand`` (``task="handstand"``) as Playground simulates it: timestep 0.004 s,
    Euler (``eulerdamp`` off), 1 solver iteration, 5 line-search iterations,
    ``ccd_iterations`` 20, position actuators with kp 35 and joint damping 0.5 (both tasks'
    Kp, Kd). The reset poses are keyframes ``"home"`` (both) and ``"pre_recovery"``
    (Handstand's crouch)."""
    return go1_task_spec(task).compile()
