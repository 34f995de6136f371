"""Unitree H1 gait tracking on MuJoCo Warp: MuJoCo Playground's
``H1JoystickGaitTracking`` and ``H1InplaceGaitTracking`` (``-v1``, envpool's names), as
configs of the legged-task framework (``legged_task.py``); every formula, the envpool port
(the tests' reference: ``tests/fixtures/h1_envpool_{gait,inplace}.npz``) and Playground:
``docs/tasks/h1_gait.md``.

Physics ``load_h1`` (sim dt 0.004 s, 5 substeps per 0.02 s step, Euler, Newton with 1
iteration); 19 position actuators whose D part is their ``kv`` (inside the force range).
PD targets clipped to the control range: joystick ``ctrl + action * 0.3``, accumulated
from ctrl 0 at a reset (zero actions hold every joint at 0: H1 falls), inplace ``home +
action * 0.6``. A gait drawn per env at reset (frequency, walk or jump, swing apex
height) drives the feet-phase reward (Playground's ``gait.get_rz``); the observation adds
joint velocity and ``q - target`` histories (1 step joystick, 3 inplace), foot contacts,
the phase and the gait. Joystick reward: 9 terms summed, times dt, clipped at 0; inplace:
``feet_phase * exp(0.2 * (ang_vel + lin_vel + pose)) * dt``. Termination: a joint outside
its range or the torso's upvector z below 0.85. Reward and noise scales, gait ranges,
thresholds, PD gains and the action scale are per-env parameters (``env.params``).

Playground's quirks, kept (envpool copies them): after a step the foot contacts read
``sensordata`` at the six contact sensors' ids (11-16: imu position z, upvector,
forwardvector x, y), not their addresses, so both feet read "in contact" while H1 is
upright (the reset reads the real contacts): ``feet_air_time`` is always 0 (scale 0 by
default) and ``foot_slip`` counts both feet. The action rate is ``|la - lla|^2 + |la - 2
lla + a|^2`` (Playground's argument order). The "gravity" observation is the torso's z
axis in world coordinates. Deviations: counter-based draws (same distributions).
"""
from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from gpuparam.envs.mujoco.h1_model import FEET, h1_spec
from gpuparam.envs.mujoco.legged_task import (
    Command,
    LeggedEnv,
    LeggedTaskConfig,
    Obs,
    Reward,
    State,
)
from gpuparam.kernels import h1 as kh
from gpuparam.kernels import legged_terms as kt
from gpuparam.spec import ParamSpec

NU = 19


def h1_scene(terrain: str) -> mujoco.MjSpec:
    """The flat scene with the reset's ctrl 0 (envpool: ``mj_resetData``, then the
    keyframe's qpos only), the accumulating joystick's start."""
    if terrain != "flat":
        raise ValueError(f"terrain: H1 has the flat scene only, got {terrain!r}")
    spec = h1_spec()
    for key in spec.keys:
        key.ctrl = np.zeros(NU)
    return spec


def _scalar(name: str, default: float, lo: float, hi: float, doc: str, unit: str = ""):
    return ParamSpec(name, default, lo, hi, unit=unit, doc=doc)


CONSTS = (
    _scalar("tracking_sigma", 0.5, 1e-4, 100.0, "width of the tracking rewards"),
    _scalar("feet_phase_sigma", 0.01, 1e-6, 100.0, "feet_phase: exp(-err / sigma)"),
    _scalar("gait_frequency_min", 0.5, 0.0, 100.0, "gait frequency drawn U(min, max)", "Hz"),
    _scalar("gait_frequency_max", 2.0, 0.0, 100.0, "gait frequency drawn U(min, max)", "Hz"),
    ParamSpec("gait_count", 1.0, 1.0, 2.0, integer=True,
              doc="gaits drawn from (1: walk; 2: walk or jump)"),
    _scalar("foot_height_min", 0.08, 0.0, 10.0, "swing apex drawn U(min, max)", "m"),
    _scalar("foot_height_max", 0.4, 0.0, 10.0, "swing apex drawn U(min, max)", "m"),
    _scalar("early_termination", 1.0, 0.0, 1.0, "1: a fall (upvector z) ends the episode"),
    _scalar("fall_upvector_z", 0.85, -1.0, 1.0, "fall: the torso's upvector z below this"),
)
COMMAND_CONSTS = (
    _scalar("lin_vel_threshold", 0.1, 0.0, 100.0, "|vx|, |vy| commands below it are 0", "m/s"),
    _scalar("ang_vel_threshold", 0.1, 0.0, 100.0, "|yaw| commands below it are 0", "rad/s"),
    _scalar("command_resample_steps", 500.0, 0.0, 1e9, "a new command after this many steps"),
)
assert tuple(s.name for s in CONSTS + COMMAND_CONSTS) == kh.CONST_ROWS  # kernels/h1.py's rows
NOISE = (("noise_level", 0.6, "scale of every observation noise (0: none, bit for bit)"),
         ("noise_gyro", 0.2, "gyro noise (rad/s)"),
         ("noise_gravity", 0.05, "upvector noise"),
         ("noise_joint_pos", 0.01, "joint angle noise (rad)"),
         ("noise_joint_vel", 1.5, "joint velocity noise (rad/s)"))


def observations(history: int, command: bool) -> tuple[Obs, ...]:
    """The observation terms (113 values joystick, 186 inplace)."""
    return (Obs("gyro", 3, kt.obs_gyro, "noise_gyro"),
            Obs("gravity", 3, kt.obs_upvector, "noise_gravity"),
            Obs("joint_pos", "nu", kt.obs_joint_pos, "noise_joint_pos", kt.obs_default_pose),
            Obs("joint_vel", "nu", kt.obs_joint_vel, "noise_joint_vel"),
            Obs("last_action", "nu", kt.obs_last_action),
            *((Obs("command", 3, kt.obs_command),) if command else ()),
            Obs("qvel_history", f"{history} * nu", kt.obs_qvel_history),
            Obs("qpos_error_history", f"{history} * nu", kt.obs_qpos_error_history),
            Obs("contact", "feet", kt.obs_contact),
            Obs("phase", "2 * feet", kt.obs_phase),
            Obs("gait", 3, kt.obs_gait))


def task_state(history: int, *extra: State) -> tuple[State, ...]:
    """The task state (``task.state[key]``, checkpointed)."""
    return (*extra, State("last_act", "last_act", ("nu",)),
            State("last_last_act", "last_last_act", ("nu",)),
            State("air_time", "air_time", ("feet",)),
            State("swing_peak", "swing_peak", ("feet",)),
            State("last_contact", "last_contact", ("feet",)),
            State("qvel_history", "qvel_history", (history * NU,)),
            State("qpos_error_history", "qpos_error_history", (history * NU,)),
            State("phase", "phase", ("feet",)), State("phase_dt", "phase_dt"),
            State("gait_freq", "gait_freq"), State("gait", "gait", (), int32=True),
            State("foot_height", "foot_height"))


H1_JOYSTICK_GAIT = LeggedTaskConfig(
    spec=h1_scene, base_body="pelvis", torso_body="torso_link", feet=FEET,
    foot_found=tuple(f"{{}}{k}_floor_found" for k in (1, 2, 3)), contact_by_id=True,
    sizes={"flat": (80, 12)}, action_mode="cumulative", clip_ctrl=True, data=("ctrl",),
    recipe=dict(action_scale=0.3, reset_xy=0.0, reset_yaw=0.0, reset_velocity=0.0),
    # playground_randomization: Playground's G1 recipe (it has none for H1), the floor's
    # friction (the contact takes the larger of it and the feet's 1.0)
    randomization=dict(frictionloss=(0.5, 2.0), floor_geom="floor"),
    noise=NOISE, obs=observations(1, True), priv=(),
    rewards=(
        Reward("tracking_lin_vel", 3.5, kt.tracking_lin_vel,
               "exp(-|cmd_xy - local linvel_xy|^2 / sigma)"),
        Reward("tracking_ang_vel", 0.75, kt.tracking_ang_vel,
               "exp(-(cmd_yaw - gyro_z)^2 / sigma)"),
        Reward("feet_phase", 5.0, kh.feet_phase, "exp(-|foot z - rz(phase)|^2 / sigma)"),
        Reward("feet_air_time", 0.0, kh.feet_air_time,
               "sum (air time - 0.1) at first contacts, if |cmd_xy| > 0.05"),
        Reward("ang_vel_xy", 0.0, kt.ang_vel_xy, "|global angvel_xy|^2"),
        Reward("lin_vel_z", 0.0, kh.lin_vel_z_jump, "global linvel_z^2 under the jump gait"),
        Reward("pose", -2.5, kt.pose_weighted, "sum w (q - default)^2"),
        Reward("foot_slip", 0.0, kt.feet_slip, "sum |foot vel_xy|^2 in contact"),
        Reward("action_rate", -0.01, kh.action_rate_h1, "|la - lla|^2 + |la - 2 lla + a|^2")),
    reward_clip=True, terminations=(kt.joint_out_of_range, kt.tilted),
    command=Command(kh.command_reset, kh.command_update, "command_range"),
    reset=kh.gait_reset, update=kt.gait_update,
    state=task_state(1, State("command", "command", (3,)),
                     State("step", "countdown", (), int32=True)),
    # hip yaw, hip roll, ankle 5 each; hip pitch and knee 0; torso 2; arms 1
    pose_weight=(5.0, 5.0, 0.0, 0.0, 5.0) * 2 + (2.0,) + (1.0,) * 8,
    consts=CONSTS + COMMAND_CONSTS,
    params=(ParamSpec("command_range", (1.5, 0.5, 1.0), 0.0, 100.0, shape=(3,),
                      unit="m/s, m/s, rad/s", doc="a: commands drawn from U(-a, a)"),),
    ctx=dict(tracking_sigma="tracking_sigma", up_min="fall_upvector_z",
             early_termination="early_termination"),
)
"""Playground's ``H1JoystickGaitTracking`` as a config (module docstring)."""


H1_INPLACE_GAIT = dataclasses.replace(
    H1_JOYSTICK_GAIT, action_mode="default", obs=observations(3, False), command=None,
    recipe={**H1_JOYSTICK_GAIT.recipe, "action_scale": 0.6},
    noise=(("noise_level", 1.0, NOISE[0][2]), *NOISE[1:]),
    rewards=(Reward("feet_phase", 2.0, kh.feet_phase, "exp(-|foot z - rz(phase)|^2 / sigma)"),
             Reward("ang_vel", -0.5, kt.ang_vel_l2, "|global angvel|^2"),
             Reward("lin_vel", -0.5, kt.lin_vel_xy, "|global linvel_xy|^2"),
             Reward("pose", -0.5, kt.pose_weighted, "sum w (q - default)^2")),
    reward_clip=False, reward_exp=(0.2, ("ang_vel", "lin_vel", "pose")),
    state=task_state(3), params=(), consts=tuple(dataclasses.replace(s, default={
        "feet_phase_sigma": 0.1, "gait_frequency_max": 4.0, "gait_count": 2.0}.get(
            s.name, s.default)) for s in CONSTS),
)
"""Playground's ``H1InplaceGaitTracking`` as a config (module docstring)."""


class H1JoystickGaitEnv(LeggedEnv):
    """Playground's ``H1JoystickGaitTracking`` on MuJoCo Warp (module docstring;
    ``LeggedEnv`` for the arguments). Outputs: ``"observation"`` float32 ``[N, 113]``
    (the privileged observation is the same), ``"reward_terms"`` float32 ``[N, 9]``."""

    name = "H1JoystickGaitTracking-v1"
    config = H1_JOYSTICK_GAIT
    robot = "H1"


class H1InplaceGaitEnv(H1JoystickGaitEnv):
    """Playground's ``H1InplaceGaitTracking`` (module docstring). Outputs:
    ``"observation"`` float32 ``[N, 186]``, ``"reward_terms"`` float32 ``[N, 4]``."""

    name = "H1InplaceGaitTracking-v1"
    config = H1_INPLACE_GAIT


H1_ENVS = (H1JoystickGaitEnv, H1InplaceGaitEnv)
