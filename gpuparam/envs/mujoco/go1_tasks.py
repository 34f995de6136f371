"""Unitree Go1 Getup and Handstand on MuJoCo Warp: MuJoCo Playground's ``Go1Getup``,
``Go1Handstand`` (``-v1``, envpool's names; envpool 1.2.5's ports are the tests' reference)
and ``Go1Footstand-v1`` (not recorded). Every term: ``docs/tasks/go1_getup_handstand.md``.

- Getup (full collisions): targets ``q + 0.5 a`` (``q`` at the step's start); a reset drops
  the robot with probability ``drop_from_height_prob`` from 0.5 m in a random pose (else
  home), base velocities ``U(-0.5, 0.5)``, then settles 125 physics steps; 300 steps.
- Handstand (every geom vs the floor): targets ``ctrl + 0.3 a`` (cumulative); the legged
  reset; ends when the upvector's z < -0.25 or a front calf, thigh or hip touches the
  floor; 500 steps.

Both read the sensors after a final ``mj_forward``, as envpool (Playground: one physics
step stale). Deviations from envpool: counter-based draws (same distributions); no
``init_from_crouch`` reset for Handstand (0 by default); energy threshold "off" is 1e30.
"""

from __future__ import annotations

import dataclasses

import mujoco
import warp as wp

from gpuparam._launch import BoundLaunch
from gpuparam.backend import BindContext
from gpuparam.envs.mujoco.go1 import GO1_JOYSTICK
from gpuparam.envs.mujoco.go1_model import FEET
from gpuparam.envs.mujoco.go1_tasks_model import HANDSTAND_UNWANTED_CONTACTS, go1_task_spec
from gpuparam.envs.mujoco.legged import LeggedBackend
from gpuparam.envs.mujoco.legged_task import (
    JOYSTICK_NOISE,
    TERRAIN_STATE,
    LeggedEnv,
    LeggedTaskConfig,
    Obs,
    Reward,
    State,
)
from gpuparam.kernels import go1_tasks as kg
from gpuparam.kernels import legged_terms as kt
from gpuparam.spec import ParamSpec


def getup_spec(terrain: str) -> mujoco.MjSpec:
    """Getup's scene (``terrain``: ``"flat"``)."""
    return go1_task_spec("getup" if terrain == "flat" else terrain)


def handstand_spec(terrain: str) -> mujoco.MjSpec:
    """Handstand's scene (``terrain``: ``"flat"``)."""
    return go1_task_spec("handstand" if terrain == "flat" else terrain)


def _noise(joint_pos: float, linvel: bool) -> tuple:
    """Playground's joystick noise with ``noise_joint_pos`` ``joint_pos`` (no
    ``noise_linvel`` unless ``linvel``)."""
    return tuple((name, joint_pos if name == "noise_joint_pos" else v, doc)
                 for name, v, doc in JOYSTICK_NOISE if linvel or name != "noise_linvel")


def _consts(soft: float, height: float, forward_z: float = -1.0) -> tuple[ParamSpec, ...]:
    # kernels/go1_tasks.py reads rows 2 (ROW_ENERGY), 3 (ROW_FORWARD_Z), 4 (ROW_UP_MIN)
    return (ParamSpec("soft_joint_pos_limit_factor", soft, 0.0, 1.0,
                      doc="soft limits: each joint range's centre -+ factor x half its width"),
            ParamSpec("desired_height", height, 0.0, 10.0, unit="m",
                      doc="z_des: the imu height the height terms reward"),
            ParamSpec("energy_termination_threshold", 1e30, 0.0, 1e30, unit="W",
                      doc="the episode ends when sum |tau qvel| exceeds it (1e30: never)"),
            ParamSpec("forward_z", forward_z, -1.0, 1.0,
                      doc="desired world z of the imu x-axis (orientation term)"),
            ParamSpec("upvector_min", -0.25, -2.0, 2.0,
                      doc="the episode ends when the upvector's z is below it (Handstand)"))


_STATE = (*(State(k, k, ("feet",)) for k in ("air_time", "swing_peak", "last_contact")),
          *TERRAIN_STATE)
_PRIV = (Obs("gyro", 3, kt.obs_gyro), Obs("accel", 3, kt.obs_accel),
         Obs("linvel", 3, kt.obs_linvel), Obs("global_angvel", 3, kt.obs_global_angvel),
         Obs("joint_pos", "nu", kt.obs_joint_pos), Obs("joint_vel", "nu", kt.obs_joint_vel),
         Obs("actuator_force", "nu", kt.obs_actuator_force),
         Obs("imu_height", 1, kt.obs_imu_height))
_OBS = (Obs("gyro", 3, kt.obs_gyro, "noise_gyro"),
        Obs("gravity", 3, kt.obs_gravity, "noise_gravity"),
        Obs("joint_pos", "nu", kt.obs_joint_pos, "noise_joint_pos", kt.obs_default_pose),
        Obs("joint_vel", "nu", kt.obs_joint_vel, "noise_joint_vel"),
        Obs("last_action", "nu", kt.obs_last_action))
# (njmax, nconmax) per world: Playground's njmax (250, 200); up to ~30 contacts lying down
GETUP = LeggedTaskConfig(
    spec=getup_spec, base_body="trunk", feet=FEET, frame_skip=5, max_episode_steps=300,
    sizes={"flat": (250, 32)}, randomization=GO1_JOYSTICK.randomization,
    recipe=dict(action_scale=0.5, reset_xy=0.0, reset_yaw=0.0, reset_velocity=0.5),
    noise=_noise(0.03, linvel=False), obs=_OBS, priv=_PRIV,
    rewards=(
        Reward("orientation", 1.0, kg.upright_exp, "exp(-2 |g - (0, 0, -1)|^2)"),
        Reward("torso_height", 1.0, kg.torso_height, "exp(min(h, z_des)) - 1"),
        Reward("posture", 1.0, kg.posture, "upright * exp(-0.5 |q - home|^2)"),
        Reward("stand_still", 1.0, kg.stand_still_action, "upright, at height: exp(-0.5 |a|^2)"),
        Reward("action_rate", -0.001, kt.action_rate2, "|a - a1|^2 + |a - 2 a1 + a2|^2"),
        Reward("dof_pos_limits", -0.1, kt.dof_pos_limits_centred, "beyond the soft limits"),
        Reward("torques", -1e-5, kt.torques_l2_l1, "|tau| + sum |tau|"),
        Reward("dof_acc", -2.5e-7, kt.dof_acc, "|joint qacc|^2"),
        Reward("dof_vel", -0.1, kt.dof_vel_excess, "sum max(|qvel| - 2 pi, 0)^2"),
    ),
    reward_clip=True, terminations=(kg.energy_above,),
    state=(State("last_act", "last_act", ("nu",)),
           State("last_last_act", "last_last_act", ("nu",)), *_STATE),
    consts=_consts(0.95, 0.275)[:3],
    params=(ParamSpec("drop_from_height_prob", 0.6, 0.0, 1.0,
                      doc="reset: probability of a drop from a random pose (else home)"),),
    ctx=dict(soft_limit="soft_joint_pos_limit_factor", base_height="desired_height"),
    data=("qacc",), action_mode="current", forward_after_step=True, settle_steps=125,
)
"""MuJoCo Playground's ``Go1Getup`` as a config (module docstring)."""

HANDSTAND = LeggedTaskConfig(
    spec=handstand_spec, base_body="trunk", feet=FEET, frame_skip=5, max_episode_steps=500,
    sizes={"flat": (200, 32)}, randomization=GO1_JOYSTICK.randomization,
    recipe=dict(action_scale=0.3, reset_xy=0.5, reset_yaw=3.14, reset_velocity=0.5),
    noise=_noise(0.01, linvel=True),
    obs=(Obs("linvel", 3, kt.obs_linvel, "noise_linvel"), *_OBS), priv=_PRIV,
    rewards=(
        Reward("height", 1.0, kg.height_exp, "exp(-(z_des - min(h, z_des)))"),
        Reward("orientation", 1.0, kg.forward_orientation, "(0.5 fwd_z forward_z + 0.5)^2"),
        Reward("contact", -0.1, kt.any_foot_contact, "1 if a foot touches the floor"),
        Reward("action_rate", 0.0, kt.action_rate, "|a - a1|^2"),
        Reward("termination", 0.0, kt.termination, "1 at a termination"),
        Reward("dof_pos_limits", -0.5, kt.dof_pos_limits_centred, "beyond the soft limits"),
        Reward("torques", 0.0, kt.torques_l2sq, "sum tau^2"),
        Reward("pose", -0.1, kt.pose_subset, "sum (q - home)^2 over the rear legs"),
        Reward("stay_still", 0.0, kg.stay_still, "qvel_x^2 + qvel_y^2 + yaw rate^2"),
        Reward("energy", 0.0, kt.energy, "sum |qvel| |tau|"),
        Reward("dof_acc", 0.0, kt.dof_acc, "|joint qacc|^2"),
    ),
    reward_clip=True,
    terminations=(kg.upvector_below, kt.contact_terminating, kg.energy_above),
    terminating_sensors=tuple(f"{g}_floor_found" for g in HANDSTAND_UNWANTED_CONTACTS),
    index_joints=tuple(f"{leg}_{j}" for leg in ("RR", "RL") for j in ("hip", "thigh", "calf")),
    state=(State("last_act", "last_act", ("nu",)), *_STATE),
    consts=_consts(0.9, 0.55), defaults={"terminate_contact": 1.0},
    ctx=dict(soft_limit="soft_joint_pos_limit_factor", base_height="desired_height"),
    data=("qacc",), action_mode="cumulative", forward_after_step=True,
)
"""MuJoCo Playground's ``Go1Handstand`` as a config (module docstring)."""

FOOTSTAND = dataclasses.replace(
    HANDSTAND, consts=_consts(0.9, 0.53, forward_z=1.0),
    index_joints=tuple(f"{leg}_{j}" for leg in ("FR", "FL") for j in ("hip", "thigh", "calf")))
"""Playground's ``Go1Footstand``: front legs' pose, imu x-axis up, z_des 0.53 (v0.2.0)."""


class GetupBackend(LeggedBackend):
    """The legged backend, then Getup's dropped pose (``kernels.go1_tasks.drop_pose``)."""

    def bind(self, b: BindContext) -> None:
        super().bind(b)
        jnt = self.mjm.actuator_trnid[:, 0]
        with wp.ScopedDevice(self._device):
            lo, hi = (wp.array(self.mjm.jnt_range[jnt, k], dtype=float) for k in (0, 1))
            adr = wp.array(self.actuator_qposadr)
        self._drop = [wp.from_torch(b.param_rows("drop_from_height_prob")), lo, hi, adr]

    def reset_state(self, ctx, mask) -> None:
        super().reset_state(ctx, mask)
        self.mask_launch("drop_pose", mask, lambda w: BoundLaunch(
            kg.drop_pose, ctx.num_envs, inputs=[*self._drop, w, self._reset_keys],
            outputs=[self.d.qpos, self.d.ctrl], device=ctx.device)).launch()


class _Go1TaskEnv(LeggedEnv):
    robot, config = "Go1", HANDSTAND


class Go1GetupEnv(_Go1TaskEnv):
    """Playground's ``Go1Getup`` (module docstring; ``LeggedEnv``'s arguments; ``gating``
    ``"graph"`` by default: the settling only at steps with a reset): outputs
    ``"observation"`` float32 ``[N, 42]``, ``"privileged_observation"`` ``[N, 91]``,
    ``"reward_terms"`` ``[N, 9]``."""

    name, config = "Go1Getup-v1", GETUP
    backend_class = GetupBackend

    def __init__(self, *args, gating: str = "graph", **kwargs):  # settle at resets only
        super().__init__(*args, gating=gating, **kwargs)


class Go1HandstandEnv(_Go1TaskEnv):
    """MuJoCo Playground's ``Go1Handstand`` (module docstring). ``"observation"`` float32
    ``[N, 45]``, ``"privileged_observation"`` ``[N, 94]``, ``"reward_terms"`` ``[N, 11]``."""

    name, config = "Go1Handstand-v1", HANDSTAND


class Go1FootstandEnv(Go1HandstandEnv):
    """Playground's ``Go1Footstand`` (``FOOTSTAND``; not compared with envpool)."""

    name, config = "Go1Footstand-v1", FOOTSTAND


GO1_TASK_ENVS = (Go1GetupEnv, Go1HandstandEnv, Go1FootstandEnv)
