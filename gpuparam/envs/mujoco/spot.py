"""Boston Dynamics Spot on MuJoCo Warp: MuJoCo Playground's ``SpotFlatTerrainJoystick`` and
``SpotJoystickGaitTracking`` (``-v1``, envpool's ids) as legged-task configs.

Every term, law and difference: ``docs/tasks/spot.md``; envpool 1.2.5's port is the
reference of ``tests/envs/robots/test_spot_parity.py``. Physics ``spot_model`` (feet-only
scene, PD to ``default + action * action_scale`` with the actuators' kv 20 kept), reset to
the home pose at rest, commands ``U(-a, a)`` (all 0 with probability 0.1) resampled after
200 steps, termination at upvector z < 0.85. As envpool (unlike Playground): noise
``noise_level * scale * U(-1, 1)`` per value, full resets, no kicks (``kick_enable`` off).
Playground has no Spot randomizer: ``playground_randomization`` gives the recipe's terms
with Go1's values. The actuators' force range is +-1e4 N m (``torque_limit``; none
upstream, never reached)."""

from __future__ import annotations

import dataclasses
import functools

import mujoco

from gpuparam.envs.mujoco.go1 import GO1_JOYSTICK
from gpuparam.envs.mujoco.legged_task import (
    TERRAIN_STATE,
    Command,
    LeggedEnv,
    LeggedTaskConfig,
    Obs,
    Reward,
    State,
    feet_state,
)
from gpuparam.envs.mujoco.spot_model import FEET, spot_spec
from gpuparam.kernels import legged_terms as kt
from gpuparam.kernels import spot as ks
from gpuparam.spec import ParamSpec

TORQUE_LIMIT = 1e4


def _spec(task: str, terrain: str = "flat") -> mujoco.MjSpec:
    """The scene of ``task`` (flat only) with the recipe's force range, keyframe ctrl 0."""
    spec = spot_spec(task)
    for act in spec.actuators:  # the recipe's torque_limit: a symmetric force range
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-TORQUE_LIMIT, TORQUE_LIMIT]
    for key in spec.keys:  # a reset's forward runs with ctrl 0, as envpool's and Playground's
        key.ctrl = [0.0] * len(spec.actuators)
    return spec


NOISE = (("noise_level", 1.0, "scale of every observation noise (0: none, bit for bit)"),
         ("noise_gyro", 0.1, "gyro noise (rad/s)"),
         ("noise_gravity", 0.03, "upvector noise"),
         ("noise_joint_pos", 0.05, "joint angle noise (rad)"),
         ("noise_feet_pos_x", 0.01, "feet position noise, x (m)"),
         ("noise_feet_pos_y", 0.005, "feet position noise, y (m)"),
         ("noise_feet_pos_z", 0.02, "feet position noise, z (m)"))
# the constants, each read through ``ctx`` (the tilt termination ``kt.tilted``: TILT_CTX)
TILT_CTX = dict(up_min="termination_upvector_z", early_termination="early_termination")
CONSTS = (
    ParamSpec("termination_upvector_z", 0.85, -1.0, 1.0,
              doc="the episode ends when the upvector's z falls below this"),
    ParamSpec("early_termination", 1.0, 0.0, 1.0, doc="1: the tilt ends the episode"),
    ParamSpec("command_zero_prob", 0.1, 0.0, 1.0,
              doc="probability that a drawn command is all zero"),
    ParamSpec("command_resample_steps", 200.0, 0.0, 1e9,
              doc="a new command once more steps than this have passed"),
    ParamSpec("tracking_sigma", 0.25, 1e-4, 100.0, doc="width of the tracking rewards"),
)
GAIT = {"gait_frequency_min": (0.5, "gait frequency low (Hz)"),
        "gait_frequency_max": (4.0, "gait frequency high (Hz)"),
        "foot_height_min": (0.08, "swing height low (m)"),
        "foot_height_max": (0.4, "swing height high (m)"),
        "feet_phase_sigma": (0.1, "width of feet_phase")}  # kt.gait_reset's extra rows
SIZES = {"flat": (48, 8)}  # 12 frictionloss + 4 feet x 4 pyramidal rows + 12 joint limits
HEAD = (Obs("gyro", 3, kt.obs_gyro, "noise_gyro"),
        Obs("upvector", 3, kt.obs_upvector, "noise_gravity"))
STATE = (State("command", "command", (3,)), State("step", "countdown", (), int32=True),
         State("last_last_act", "last_last_act", ("nu",)),
         State("error_history", "qpos_error_history", (36,)), *TERRAIN_STATE)
TRACKING = (Reward("tracking_lin_vel", 1.5, kt.tracking_lin_vel,
                   "exp(-|cmd_xy - local linvel_xy|^2 / sigma)"),
            Reward("tracking_ang_vel", 0.8, kt.tracking_ang_vel,
                   "exp(-(cmd_yaw - gyro_z)^2 / sigma)"))

SPOT_JOYSTICK = LeggedTaskConfig(
    spec=functools.partial(_spec, "joystick"), base_body="body", feet=FEET, sizes=SIZES,
    recipe=dict(action_scale=0.3, reset_xy=0.0, reset_yaw=0.0, reset_velocity=0.0),
    randomization=GO1_JOYSTICK.randomization,  # Playground has none for Spot: Go1's
    noise=NOISE, extra_sensors=tuple(f"{f}_pos" for f in FEET),
    obs=(*HEAD, Obs("joint_pos", "nu", ks.obs_noisy_q, None, kt.obs_default_pose),
         Obs("error_history", "3 * nu", ks.obs_history),
         Obs("feet_pos", "3 * feet", ks.obs_feet_pos),
         Obs("last_action", "nu", kt.obs_last_action), Obs("command", 3, kt.obs_command)),
    priv=(Obs("gyro", 3, kt.obs_gyro), Obs("accel", 3, kt.obs_accel),
          Obs("upvector", 3, kt.obs_upvector), Obs("linvel", 3, kt.obs_linvel),
          Obs("global_angvel", 3, kt.obs_global_angvel),
          Obs("joint_pos", "nu", kt.obs_joint_pos_rel),
          Obs("feet_pos", "3 * feet", ks.obs_feet_pos_clean),
          Obs("joint_vel", "nu", kt.obs_joint_vel),
          Obs("actuator_force", "nu", kt.obs_actuator_force),
          Obs("last_contact", "feet", kt.obs_last_contact),
          Obs("feet_vel", "3 * feet", kt.obs_feet_vel), Obs("air_time", "feet", kt.obs_air_time),
          Obs("kick", 3, kt.obs_kick)),
    rewards=(*TRACKING,
             Reward("lin_vel_z", -2.0, kt.lin_vel_z, "global linvel_z^2"),
             Reward("ang_vel_xy", -0.05, kt.ang_vel_xy, "|global angvel_xy|^2"),
             Reward("orientation", -5.0, kt.orientation, "|upvector_xy|^2"),
             Reward("termination", -1.0, kt.termination, "1 at a termination"),
             Reward("posture", 1.0, ks.posture,
                    "exp(w |q - default|^2), w = -10 if |cmd| < 0.01 else 0"),
             Reward("torques", -0.0002, kt.torques_l2_l1, "|tau| + sum |tau|"),
             Reward("action_rate", -0.01, kt.action_rate2,
                    "|a - last a|^2 + |a - 2 last a + last last a|^2"),
             Reward("energy", -0.001, kt.energy, "sum |qvel| |tau|"),
             Reward("feet_slip", -0.1, kt.feet_slip, "sum |foot vel_xy|^2 in contact"),
             Reward("feet_clearance", -2.0, kt.feet_clearance,
                    "sum |foot z - max_foot_height| |foot vel_xy|^(1/2)"),
             Reward("feet_height", -0.1, kt.feet_height_moving,
                    "sum (swing peak / max_foot_height - 1)^2 at first contacts, if moving"),
             Reward("feet_air_time", 0.1, kt.feet_air_time_moving,
                    "sum (air time - 0.1) at first contacts, if moving")),
    reward_clip=True, terminations=(kt.tilted,),
    command=Command(kt.command_interval_reset, kt.command_interval_update, "command_range"),
    state=feet_state(*STATE),
    data=("ctrl", "xfrc_applied"),
    consts=(*CONSTS, ParamSpec("max_foot_height", 0.12, 1e-3, 10.0, unit="m",
                               doc="target swing height of a foot")),
    params=(ParamSpec("command_range", (1.0, 0.8, 1.0), 0.0, 100.0, shape=(3,),
                      unit="m/s, m/s, rad/s", doc="a: commands drawn from U(-a, a)"),),
    ctx=dict(tracking_sigma="tracking_sigma", foot_height="max_foot_height",
             cmd_zero_prob="command_zero_prob", cmd_resample="command_resample_steps",
             **TILT_CTX),
)
"""MuJoCo Playground's ``SpotFlatTerrainJoystick`` as a config (module docstring)."""

SPOT_GAIT = dataclasses.replace(
    SPOT_JOYSTICK, spec=functools.partial(_spec, "gait"), noise=NOISE[:4], priv=(),
    extra_sensors=(),
    recipe=dict(action_scale=0.6, reset_xy=0.0, reset_yaw=0.0, reset_velocity=0.0),
    obs=(*HEAD, Obs("joint_pos", "nu", ks.obs_noisy_q),
         Obs("error_history", "3 * nu", ks.obs_history),
         Obs("contact", "feet", kt.obs_contact), Obs("phase", "2 * feet", kt.obs_phase),
         Obs("gait", 3, kt.obs_gait)),
    rewards=(*(dataclasses.replace(r, scale=0.5) for r in TRACKING),
             Reward("feet_phase", 2.0, kt.feet_phase,
                    "exp(-sum (foot z - rz(phase))^2 / feet_phase_sigma)"),
             Reward("ang_vel_xy", -0.5, kt.ang_vel_xy, "|global angvel_xy|^2"),
             Reward("lin_vel_z", -0.5, ks.lin_vel_z_bound_pronk,
                    "global linvel_z^2 in the bound and pronk gaits"),
             Reward("hip_splay", -0.5, ks.hip_splay, "sum over hx joints (q - default)^2")),
    reward_clip=False, reward_exp=(0.2, ("ang_vel_xy", "lin_vel_z", "hip_splay")),
    pose_weight=(1.0, 0.0, 0.0),
    reset=kt.gait_reset, update=kt.gait_update,
    state=feet_state(*STATE, State("phase", "phase", ("feet",)), State("phase_dt", "phase_dt"),
                     State("gait_freq", "gait_freq"), State("gait", "gait", (), int32=True),
                     State("foot_height", "foot_height")),
    data=("ctrl",),
    consts=CONSTS, extra_block=tuple(GAIT),
    params=(*(ParamSpec(k, v, 1e-4, 100.0, doc=doc) for k, (v, doc) in GAIT.items()),
            ParamSpec("command_range", (1.0, 0.5, 1.0), 0.0, 100.0, shape=(3,),
                      unit="m/s, m/s, rad/s", doc="a: commands drawn from U(-a, a)")),
    ctx=dict(tracking_sigma="tracking_sigma", cmd_zero_prob="command_zero_prob",
             cmd_resample="command_resample_steps", **TILT_CTX),
)
"""MuJoCo Playground's ``SpotJoystickGaitTracking`` as a config (module docstring)."""


class SpotEnv(LeggedEnv):
    """Playground's ``SpotFlatTerrainJoystick`` on MuJoCo Warp (module docstring;
    ``LeggedEnv`` for the arguments). ``"observation"`` float32 ``[N, 81]``,
    ``"privileged_observation"`` ``[N, 167]``, ``"reward_terms"`` ``[N, 14]``."""

    name = "SpotFlatTerrainJoystick-v1"
    config = SPOT_JOYSTICK
    robot = "Spot"


class SpotGaitEnv(SpotEnv):
    """Playground's ``SpotJoystickGaitTracking``: ``"observation"`` float32 ``[N, 69]``
    (no privileged terms: ``"privileged_observation"`` the same), ``"reward_terms"``
    ``[N, 6]``."""

    name = "SpotJoystickGaitTracking-v1"
    config = SPOT_GAIT


SPOT_ENVS = (SpotEnv, SpotGaitEnv)
