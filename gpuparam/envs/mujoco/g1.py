"""Unitree G1 velocity tracking on MuJoCo Warp: MuJoCo Playground's
``G1JoystickFlatTerrain`` / ``G1JoystickRoughTerrain`` (``-v1``, as envpool names its
ports), on the legged recipe (``gpuparam.envs.mujoco.legged``) unchanged.

The task is Playground's ``locomotion/g1/joystick.py`` (the definition; envpool 1.2.5's
C++ port is the reference the tests compare with, ``tests/fixtures/g1_envpool_*.npz``):
physics ``load_g1`` (sim dt 0.002 s, 10 substeps per 0.02 s env step, Euler, Newton with 3
iterations), PD position control (the model's kp and joint damping as ``kp``, ``kd``) to
``ctrl = default_pose + action * action_scale`` (0.5; not clipped: the actuators clamp to
the joint ranges); the observation (103), privileged observation (216), 24 reward terms,
termination and gait phase of the config ``G1_JOYSTICK`` (shared terms of
``kernels/legged_terms.py``, G1's own in ``kernels/g1.py``); 1000-step episodes. Reset
(``legged.py``): keyframe ``knees_bent``, ``U(-0.5, 0.5)`` in x and y, yaw ``U(-3.14,
3.14)``, each joint angle times ``U(0.5, 1.5)`` (``reset_joint_scale``; the PD target the
same), base velocities ``U(-0.5, 0.5)``; then (the task) gait frequency ``U(1.25, 1.5)``
Hz, a command, a push interval. Commands: ``U(low, high)`` per component (``command_low`` /
``command_high``: Playground's ``U(-a, a)``, a = 1, 0.5, 1), all zero with probability 0.1
(``command_zero_prob``), redrawn once more than 500 steps (``command_resample_steps``) have
passed since the last; standing, heading and pinned commands (off by default):
``legged_task.command_specs``. Pushes (on, as
Playground's): every ``round(U(5, 10) s / dt)`` steps (drawn per episode) the base's x and
y velocity get ``U(0.1, 2.0)`` m/s in a direction ``U(0, 2 pi)``. Every reward scale,
noise scale and level, command range, PD gain, action scale, push and reset range is a
per-env parameter (``env.params``).

Deviations from Playground (each deliberate): resets are full resets as Playground's
``reset()`` defines them (fresh draws, task state zeroed); random numbers are gpuparam's
counter-based draws, not JAX's (same distributions); ``round`` of the push interval
rounds halves away from zero (JAX: to even); a push due at the first step of an episode
(an interval of 1 step) is not made; each joint's ``actuatorfrcrange`` is the force range
of its actuator (``g1_model``: the same joint torque, but ``actuator_force``, in the
privileged observation and the torque and energy terms, is the clamped force where
Playground reports the unclamped one: they differ only while a joint saturates). Where
envpool's port differs from Playground (its ``joint_deviation_hip`` term is 4 times
Playground's, its joint-angle noise is added after the default pose is subtracted),
this module follows Playground.
"""

from __future__ import annotations

import dataclasses

from gpuparam.envs.mujoco.g1_model import FEET, g1_spec
from gpuparam.envs.mujoco.legged import playground_randomization
from gpuparam.envs.mujoco.legged_task import (
    HEIGHT_SCAN_SPECS,
    JOYSTICK_NOISE,
    TERRAIN_STATE,
    Command,
    LeggedEnv,
    LeggedTaskConfig,
    Obs,
    Reward,
    State,
    command_specs,
    feet_state,
)
from gpuparam.envs.mujoco.robot_env import RobotEnv
from gpuparam.envs.mujoco.terrain_env import TerrainGridEnv
from gpuparam.kernels import g1 as kg1
from gpuparam.kernels import legged_terms as kt
from gpuparam.randomization.terms import On, Term
from gpuparam.spec import ParamSpec

# envpool's config order (its reward_<term> info keys)
REWARDS = (
    Reward("tracking_lin_vel", 1.0, kt.tracking_lin_vel,
           "exp(-|cmd_xy - pelvis local linvel_xy|^2 / sigma)"),
    Reward("tracking_ang_vel", 0.75, kt.tracking_ang_vel,
           "exp(-(cmd_yaw - pelvis gyro_z)^2 / sigma)"),
    Reward("lin_vel_z", 0.0, kg1.g1_lin_vel_z, "pelvis and torso global linvel_z^2"),
    Reward("ang_vel_xy", -0.15, kg1.g1_ang_vel_xy, "|torso global angvel_xy|^2"),
    Reward("orientation", -2.0, kg1.g1_orientation, "|torso upvector - (0.073, 0, 1)|^2"),
    Reward("base_height", 0.0, kt.base_height, "(base z - base_height_target)^2"),
    Reward("torques", 0.0, kt.torques_l1, "sum |tau| (actuator forces)"),
    Reward("action_rate", 0.0, kt.action_rate, "|action - last action|^2"),
    Reward("energy", 0.0, kt.energy, "sum |qvel| |tau|"),
    Reward("dof_acc", 0.0, kt.dof_acc, "|joint qacc|^2"),
    Reward("feet_clearance", 0.0, kt.feet_clearance,
           "sum |foot z - max_foot_height| |foot vel_xy|^(1/2)"),
    Reward("feet_air_time", 2.0, kg1.g1_feet_air_time,
           "sum min(air time - 0.2, 0.3) at first contacts"),
    Reward("feet_slip", -0.25, kg1.g1_feet_slip, "|pelvis linvel_xy| x feet in contact"),
    Reward("feet_height", 0.0, kt.feet_height,
           "sum (swing peak / max_foot_height - 1)^2 at first contacts"),
    Reward("feet_phase", 1.0, kg1.g1_feet_phase,
           "exp(-sum (foot z - gait target)^2 / 0.01), if moving or commanded"),
    Reward("stand_still", -1.0, kg1.g1_stand_still, "sum |q - default| when |cmd| < 0.01"),
    Reward("alive", 0.0, kt.alive, "1"),
    Reward("termination", -100.0, kt.termination, "1 at a termination"),
    Reward("collision", -0.1, kt.undesired_contacts, "1 when a hand touches its thigh"),
    Reward("contact_force", -0.01, kt.contact_force,
           "sum max(|foot force_z| - max_contact_force, 0)"),
    Reward("joint_deviation_knee", -0.1, kg1.g1_knee, "sum |q_knee - default|"),
    Reward("joint_deviation_hip", -0.25, kg1.g1_hip,
           "sum |q_hip roll, yaw - default| (roll free if cmd_y > 0.1)"),
    Reward("dof_pos_limits", -1.0, kt.dof_pos_limits_centred,
           "joint angles beyond the soft limits (summed)"),
    Reward("pose", -0.1, kt.pose_l2, "|q - default|^2"),
)
REWARD_TERMS = tuple(r.name for r in REWARDS)
# a terrain env's height scan (Go1Terrain-v0's values, legged_gym's): before the constants
SCAN_SPECS = (
    ParamSpec("noise_height_scan", 0.1, 0.0, 100.0,
              doc="height scan noise (m, before its scale)"),
    *HEIGHT_SCAN_SPECS,
)
HIP = ("left_hip_roll", "left_hip_yaw", "right_hip_roll", "right_hip_yaw")
KNEE = ("left_knee", "right_knee")
TERMINATING = ("right_foot_left_foot_found", "left_foot_right_shin_found",
               "right_foot_left_shin_found")
COLLISION = ("left_hand_left_thigh_found", "right_hand_right_thigh_found")
# (njmax, nconmax) per world. Playground's (joystick.py): 29 * 2 + 8 * 4 = 90 constraint
# rows (joint friction loss and limits, 4 rows per pyramidal contact) and 8 contacts. MuJoCo
# Warp's box-plane collision keeps up to 8 contacts for the two feet and the foot-foot pair
# can add more: 8 per world overflowed the shared buffer within 60 zero-action steps at
# N = 8 (seen: 66 contacts), 16 did not; the heightfield gets more rows as well.
# On a terrain grid (a heightfield with steps and slopes) more contacts per foot: seen at
# most 126 contacts (8 per world) and 63 rows in 100 steps of 16 envs on 4 rows of every
# terrain type under random actions; sized with a margin.
SIZES = {"flat": (90, 16), "rough": (122, 16), "grid": (122, 24)}

# G1's laws (``kernels.g1``: command, gait phase, pushes) and what they read, T1's too:
# the observation, privileged observation, state, constants, parameters and ``ctx``
OBS = (Obs("linvel", 3, kt.obs_linvel, "noise_linvel"),
       Obs("gyro", 3, kt.obs_gyro, "noise_gyro"),
       Obs("gravity", 3, kt.obs_gravity, "noise_gravity"),
       Obs("command", 3, kt.obs_command),
       Obs("joint_pos", "nu", kt.obs_joint_pos, "noise_joint_pos", kt.obs_default_pose),
       Obs("joint_vel", "nu", kt.obs_joint_vel, "noise_joint_vel"),
       Obs("last_action", "nu", kt.obs_last_action),
       Obs("phase", "2 * feet", kt.obs_phase))
PRIV = (Obs("gyro", 3, kt.obs_gyro), Obs("accel", 3, kt.obs_accel),
        Obs("gravity", 3, kt.obs_gravity), Obs("linvel", 3, kt.obs_linvel),
        Obs("global_angvel", 3, kt.obs_global_angvel),
        Obs("joint_pos", "nu", kt.obs_joint_pos_rel), Obs("joint_vel", "nu", kt.obs_joint_vel),
        Obs("base_height", 1, kt.obs_base_height),
        Obs("actuator_force", "nu", kt.obs_actuator_force),
        Obs("contact", "feet", kt.obs_contact),
        Obs("feet_vel", "3 * feet", kt.obs_feet_vel), Obs("air_time", "feet", kt.obs_air_time))
STATE = feet_state(State("command", "command", (3,)),
                   State("step", "countdown", (), int32=True),
                   State("phase", "phase", ("feet",)), State("phase_dt", "phase_dt"),
                   State("push_step", "push_step", (), int32=True),
                   State("push_interval", "push_interval", (), int32=True), *TERRAIN_STATE)
SOFT_LIMIT = ParamSpec("soft_joint_limit_factor", 0.95, 0.0, 1.0,
                       doc="soft joint limits: each range shrunk about its centre by the factor")
LAW_CONSTS = (
    ParamSpec("command_zero_prob", 0.1, 0.0, 1.0,
              doc="probability that a drawn command is all zero"),
    ParamSpec("command_resample_steps", 500.0, 0.0, 1e9, unit="steps",
              doc="a new command once more steps than this have passed"),
    ParamSpec("push_enable", 1.0, 0.0, 1.0, doc="1: Playground's velocity pushes"),
)
LAW_BLOCK = ("gait_frequency", "push_interval", "push_velocity")  # TaskParams.extra
CTX = dict(tracking_sigma="tracking_sigma", foot_height="max_foot_height",
           base_height="base_height_target", soft_limit="soft_joint_limit_factor",
           cmd_zero_prob="command_zero_prob", cmd_resample="command_resample_steps",
           push_enable="push_enable")


def term_consts(foot_height: float, base_height: float) -> tuple[ParamSpec, ...]:
    """``tracking_sigma`` (0.25), ``max_foot_height`` and ``base_height_target``: the first
    constants of G1's and T1's configs."""
    return (
        ParamSpec("tracking_sigma", 0.25, 1e-4, 100.0, doc="width of the tracking rewards"),
        ParamSpec("max_foot_height", foot_height, 1e-3, 10.0, unit="m",
                  doc="swing height of the gait target and the foot terms"),
        ParamSpec("base_height_target", base_height, 0.0, 10.0, unit="m",
                  doc="target of the base_height term"),
    )


def law_params(command_high: tuple[float, float, float], gait_frequency: tuple[float, float],
               push_velocity: tuple[float, float]) -> tuple[ParamSpec, ...]:
    """The parameters G1's laws read: the command block (``command_specs(command_high)``,
    Playground's ``U(-a, a)``: low -a, high a), then ``LAW_BLOCK`` (``gait_frequency``
    and ``push_velocity`` as given, ``push_interval`` (5, 10) s)."""
    return (
        *command_specs(command_high),
        ParamSpec("gait_frequency", gait_frequency, 0.0, 100.0, shape=(2,), ordered=True,
                  unit="Hz", doc="(low, high): gait frequency, drawn per episode"),
        ParamSpec("push_interval", (5.0, 10.0), 0.0, 1e5, shape=(2,), ordered=True, unit="s",
                  doc="(low, high): interval between pushes, drawn per episode"),
        ParamSpec("push_velocity", push_velocity, 0.0, 100.0, shape=(2,), ordered=True,
                  unit="m/s", doc="(low, high): velocity added to the base by a push"),
    )


G1_JOYSTICK = LeggedTaskConfig(
    spec=g1_spec, base_body="pelvis", torso_body="torso_link", keyframe="knees_bent",
    joint_scale=True, feet=FEET, frame_skip=10, sizes=SIZES,
    recipe=dict(action_scale=0.5, reset_xy=0.5, reset_yaw=3.14, reset_velocity=0.5,
                reset_joint_scale=(0.5, 1.5)),
    randomization=dict(frictionloss=(0.5, 2.0)),
    gyro="gyro_pelvis", linvel="local_linvel_pelvis", accel="accelerometer_pelvis",
    upvector="upvector_torso", global_linvel="global_linvel_pelvis",
    global_angvel="global_angvel_pelvis", imu_site="imu_in_pelvis", foot_force="{}_force",
    extra_sensors=("global_linvel_torso", "global_angvel_torso"), index_joints=HIP + KNEE,
    terminating_sensors=TERMINATING, penalized_groups=(COLLISION,),
    noise=JOYSTICK_NOISE, obs=OBS, priv=PRIV, rewards=REWARDS,
    terminations=(kt.upside_down, kt.contact_terminating, kt.nan_state),
    command=Command(kt.no_reset, kt.no_update, range_param=None),  # drawn by G1's laws
    reset=kg1.g1_reset, update=kg1.g1_update, state=STATE, data=("qacc",),
    consts=(*term_consts(0.15, 0.5),
            ParamSpec("max_contact_force", 500.0, 0.0, 1e6, unit="N",
                      doc="foot normal force beyond which contact_force penalizes"),
            *LAW_CONSTS, SOFT_LIMIT),
    params=law_params((1.0, 0.5, 1.0), gait_frequency=(1.25, 1.5), push_velocity=(0.1, 2.0)),
    extra_block=LAW_BLOCK, ctx={**CTX, "max_force": "max_contact_force"},
    defaults=dict(terminate_contact=1.0),
)
"""MuJoCo Playground's ``G1Joystick*Terrain`` as a config (module docstring)."""

# with a height scan (a terrain env's): the scan's parameters before the constants
G1_JOYSTICK_SCAN = dataclasses.replace(
    G1_JOYSTICK, consts=(*SCAN_SPECS, *G1_JOYSTICK.consts),
    ctx={**G1_JOYSTICK.ctx, "scan_noise": "noise_height_scan",
         "scan_offset": "height_scan_offset", "scan_scale": "height_scan_scale"})


def g1_task_specs(height_scan: bool = False) -> tuple[ParamSpec, ...]:
    """The task's parameters (Playground's values): reward scales, noise, reward
    constants, command law, gait, pushes; with ``height_scan`` the scan's (``SCAN_SPECS``)."""
    return (G1_JOYSTICK_SCAN if height_scan else G1_JOYSTICK).param_specs()


class G1Env(LeggedEnv):
    """MuJoCo Playground's ``G1JoystickFlatTerrain`` on MuJoCo Warp (see the module
    docstring for the task; ``LeggedEnv`` for the arguments).

    Outputs (beyond ``VecEnv``'s; ``"observation"`` is float32 ``[N, 103]``):
    ``"privileged_observation"`` float32 ``[N, 216]`` (after the auto-reset, as
    ``"observation"``; also returned by ``reset``), ``"reward_terms"`` float32 ``[N, 24]``
    (``scale_k * term_k`` of this step, names in ``REWARD_TERMS``, before the sum and
    ``dt``).
    """

    name = "G1JoystickFlatTerrain-v1"
    config = G1_JOYSTICK
    scan_config = G1_JOYSTICK_SCAN
    robot = "G1"

    def model_config(self) -> dict[str, object]:
        """``RobotEnv``'s and ``max_action_delay``."""
        return {**RobotEnv.model_config(self), "max_action_delay": self.max_action_delay}

    def playground_randomization(self, on: On = "startup") -> tuple[Term, ...]:
        """MuJoCo Playground's ``locomotion/g1/randomize.py`` as terms, for
        ``env.randomize(*env.playground_randomization())``: the feet-floor friction ``U(0.4,
        1.0)`` (``pair_friction`` of the pairs with the floor, 0 and 1, each its own draw:
        Playground draws one for both), joint frictionloss ``x U(0.5, 2.0)``, armature ``x
        U(1.0, 1.05)``, every body mass ``x U(0.9, 1.1)``, ``torso_link`` ``+ U(-1, 1)`` kg
        (``added_mass``), joint offsets ``U(-0.05, 0.05)`` rad (``joint_offset``:
        Playground's ``qpos0`` jitter). ``on``: ``"startup"`` (Playground's: once per env),
        ``"reset"`` or another trigger. Details: ``legged.playground_randomization``."""
        floor = self.mjm.geom("floor").id
        pairs = tuple(i for i in range(self.mjm.npair)  # Playground's 0:2, the feet's
                      if floor in (self.mjm.pair_geom1[i], self.mjm.pair_geom2[i]))
        return playground_randomization(self, on, floor_pairs=pairs,
                                        **self.task_config.randomization)


class G1RoughEnv(G1Env):
    """MuJoCo Playground's ``G1JoystickRoughTerrain``: the same task on its 20 m x 20 m
    heightfield (5 cm high), dropped from z 0.8."""

    name = "G1JoystickRoughTerrain-v1"
    terrain = "rough"


class G1TerrainEnv(TerrainGridEnv, G1Env):
    """The flat task on a legged_gym-style terrain grid (``terrain.py``: rows = difficulty,
    columns = flat, rough, slopes up/down, stairs up/down, obstacles), generated at build
    time from ``terrain_seed`` (default: the env's seed): the grid of ``Go1Terrain-v0``
    with G1's task.

    Env ``i`` starts on column ``(env_offset + i) % cols`` of row ``terrain_level`` (a
    per-env parameter, read at every reset), 0.05 m above the tile's centre (as the rough
    scene's keyframe). The observation adds the height scan (legged_gym's 17 x 11 points
    over [-0.8, 0.8] x [-0.5, 0.5] m in the pelvis's yaw frame: ``clip(base_z -
    height_scan_offset - h, -1, 1) * height_scan_scale``, noisy; IsaacLab's G1 rough task
    scans the same pattern) and the privileged observation its noise-free values: ``[N,
    103 + 187]`` and ``[N, 216 + 187]``. Foot heights (swing peak, clearance, gait phase
    terms) are above the terrain under the foot. The terrain curriculum:
    :meth:`terrain_curriculum`. Only Playground's contact pairs collide (feet with the
    terrain, hands with thighs, foot with foot): a fallen G1's torso does not touch the
    terrain; the upside-down termination ends such an episode.

    Args (beyond ``G1Env``'s): ``terrain_rows`` (10), ``terrain_cols`` (one per type),
    ``terrain_types``, ``tile_size`` (8 m), ``terrain_seed`` (an int32 as ``seed``, its
    default; a negative one is taken modulo 2**32); ``height_scan`` (True; False: blind,
    the observations without the scan, 103 and 216 values). Each is checked before the
    terrain is generated.
    """

    name = "G1Terrain-v0"
    spawn_height = 0.05


G1_ENVS = (G1Env, G1RoughEnv, G1TerrainEnv)
