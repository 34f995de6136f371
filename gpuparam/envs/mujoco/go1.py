"""Unitree Go1 velocity tracking on MuJoCo Warp: MuJoCo Playground's
``Go1JoystickFlatTerrain`` / ``Go1JoystickRoughTerrain`` (``-v1``, as envpool names its ports)
and ``Go1Terrain-v0``, the flat task's rewards on a legged_gym-style terrain grid with a
height scan and a terrain curriculum.

The task is Playground's ``locomotion/go1/joystick.py`` (the definition; envpool 1.2.5's
C++ port is the reference the tests compare with, ``tests/fixtures/go1_envpool_*.npz``):
physics ``load_go1`` (sim dt 0.004 s, 5 substeps per 0.02 s env step, Euler, Newton with 1
iteration), PD position control (kp 35, kd 0.5; ``gpuparam.envs.mujoco.legged``) to ``ctrl
= default_pose + action * action_scale`` (0.5; actions nominally in [-1, 1], not clipped);
the observations, 16 reward terms and termination (base upside down) of the config
``GO1_JOYSTICK`` (terms of ``kernels/legged_terms.py``); 1000-step episodes. Commands: at
a reset ``U(low, high)`` per component
(``command_low`` / ``command_high``, Playground's ``U(-a, a)`` by default: -a and a);
after a countdown of ``round(Exponential(1) * command_resample_time / dt)`` steps each
component is kept with probability ``command_keep_prob``, else replaced by ``U(low_k,
high_k)`` with probability ``b_k`` (``command_nonzero_prob``) or by 0; the countdown is
redrawn then and at a termination. Standing envs, heading commands and pinned commands
(``rel_standing_envs``, ``rel_heading_envs``, ``command_fixed``; off by default):
``legged_task.command_specs`` and ``docs/legged.md``. Kicks (``kick_*``, off by default),
the reset (home pose, ``U(-0.5, 0.5)`` in x and y, yaw ``U(-3.14, 3.14)``, base velocities ``U(-0.5,
0.5)``) and action latency (``action_delay``, 0 by default): ``legged.py``. Every reward
scale, noise scale and level, command range, PD gain, action scale, kick range and reset
range is a per-env parameter (``env.params``).

Deviations from Playground (each deliberate): resets are full resets as Playground's
``reset()`` defines them (fresh draws, task state zeroed), not its training wrapper's
cached first state; random numbers are gpuparam's counter-based draws, not JAX's (same
distributions); ``round`` of the countdown rounds halves away from zero (JAX: to even);
commands are resampled at Playground's exponential countdown, not at ``gp.Interval``\\ s;
a kick's force uses the base subtree's mass of the env's world
(randomized masses included; Playground: the nominal model's); with kicks off the base's
applied wrench is written 0 at every step (Playground leaves it 0); ``"reward_terms"`` has a
17th term, the undesired-contact penalty (0 on Playground's scenes). On ``Go1Terrain-v0``
foot heights (swing peak, foot clearance) are heights above the terrain under the foot
(world z in Playground, whose terrains are near-flat), and the trunk, thighs and calves
collide with the ground (see ``Go1TerrainEnv``).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco

from gpuparam.envs.mujoco.go1_model import FEET, go1_spec
from gpuparam.envs.mujoco.legged_task import (
    HEIGHT_SCAN_SPECS,
    JOYSTICK_NOISE,
    Command,
    LeggedEnv,
    LeggedTaskConfig,
    Obs,
    Reward,
    State,
    build_model,
    check_bodies,
    command_specs,
    feet_state,
)
from gpuparam.envs.mujoco.terrain import TerrainGrid
from gpuparam.envs.mujoco.terrain_env import TerrainGridEnv
from gpuparam.kernels import legged_terms as kt
from gpuparam.randomization.terms import On, Term
from gpuparam.spec import ParamSpec

# envpool's config order (its reward_<term> info keys), then gpuparam's undesired contacts
REWARDS = (
    Reward("tracking_lin_vel", 1.0, kt.tracking_lin_vel,
           "exp(-|cmd_xy - local linvel_xy|^2 / sigma)"),
    Reward("tracking_ang_vel", 0.5, kt.tracking_ang_vel, "exp(-(cmd_yaw - gyro_z)^2 / sigma)"),
    Reward("lin_vel_z", -0.5, kt.lin_vel_z, "global linvel_z^2"),
    Reward("ang_vel_xy", -0.05, kt.ang_vel_xy, "|global angvel_xy|^2"),
    Reward("orientation", -5.0, kt.orientation, "|upvector_xy|^2"),
    Reward("dof_pos_limits", -1.0, kt.dof_pos_limits,
           "joint angles beyond the soft limits (summed)"),
    Reward("pose", 0.5, kt.pose_exp, "exp(-sum w (q - default)^2), w = (1, 1, 0.1) per leg"),
    Reward("termination", -1.0, kt.termination, "1 at a termination"),
    Reward("stand_still", -1.0, kt.stand_still, "sum |q - default| when |cmd| < 0.01"),
    Reward("torques", -0.0002, kt.torques_l2_l1, "|tau| + sum |tau| (actuator forces)"),
    Reward("action_rate", -0.01, kt.action_rate, "|action - last action|^2"),
    Reward("energy", -0.001, kt.energy, "sum |qvel| |tau|"),
    Reward("feet_clearance", -2.0, kt.feet_clearance,
           "sum |foot height - max_foot_height| |foot vel_xy|^(1/2)"),
    Reward("feet_height", -0.2, kt.feet_height_moving,
           "sum (swing peak / max_foot_height - 1)^2 at first contacts, if moving"),
    Reward("feet_slip", -0.1, kt.feet_slip_moving, "sum |foot vel_xy|^2 in contact, if moving"),
    Reward("feet_air_time", 0.1, kt.feet_air_time_moving,
           "sum (air time - 0.1) at first contacts, if moving"),
    Reward("undesired_contacts", 0.0, kt.undesired_contacts,
           "number of penalized bodies touching the ground"),
)
REWARD_TERMS = tuple(r.name for r in REWARDS)
NOISE = (*JOYSTICK_NOISE, ("noise_height_scan", 0.1, "height scan noise (m, before its scale)"))
# (njmax, nconmax) per world. Playground's MJX buffers (joystick.py): flat 40 constraint
# rows and 4 contacts; rough 60 and 8. On the rough heightfield MuJoCo Warp keeps up to 4
# contacts per foot (16, i.e. 12 + 16 * 4 = 76 rows): sized for that, so nothing is ever
# dropped. On the grid the trunk, thighs and calves collide too: a robot lying on its side
# makes about 25 contacts and 110 rows (the contact buffer is shared by all worlds, and
# most robots stand on 4 feet).
SIZES = {"flat": (40, 4), "rough": (76, 16), "grid": (200, 64)}

GO1_JOYSTICK = LeggedTaskConfig(
    spec=go1_spec, base_body="trunk", feet=FEET, frame_skip=5, sizes=SIZES,
    recipe=dict(action_scale=0.5, reset_xy=0.5, reset_yaw=3.14, reset_velocity=0.5),
    randomization=dict(frictionloss=(0.9, 1.1), floor_geom="floor", com_jitter=0.05),
    noise=NOISE,
    obs=(Obs("linvel", 3, kt.obs_linvel, "noise_linvel"),
         Obs("gyro", 3, kt.obs_gyro, "noise_gyro"),
         Obs("gravity", 3, kt.obs_gravity, "noise_gravity"),
         Obs("joint_pos", "nu", kt.obs_joint_pos, "noise_joint_pos", kt.obs_default_pose),
         Obs("joint_vel", "nu", kt.obs_joint_vel, "noise_joint_vel"),
         Obs("last_action", "nu", kt.obs_last_action),
         Obs("command", 3, kt.obs_command)),
    priv=(Obs("gyro", 3, kt.obs_gyro), Obs("accel", 3, kt.obs_accel),
          Obs("gravity", 3, kt.obs_gravity), Obs("linvel", 3, kt.obs_linvel),
          Obs("global_angvel", 3, kt.obs_global_angvel),
          Obs("joint_pos", "nu", kt.obs_joint_pos_rel), Obs("joint_vel", "nu", kt.obs_joint_vel),
          Obs("actuator_force", "nu", kt.obs_actuator_force),
          Obs("last_contact", "feet", kt.obs_last_contact),
          Obs("feet_vel", "3 * feet", kt.obs_feet_vel), Obs("air_time", "feet", kt.obs_air_time),
          Obs("kick", 4, kt.obs_kick)),
    rewards=REWARDS, reward_clip=True,
    terminations=(kt.upside_down, kt.contact_terminating),
    command=Command(kt.command_countdown_reset, kt.command_countdown_update,
                    range_param=None, prob_param="command_nonzero_prob"),
    state=feet_state(State("command", "command", (3,)),
                     State("countdown", "countdown", (), int32=True),
                     State("start_xy", "start_xy", (2,)), State("cmd_distance", "cmd_distance"),
                     State("metric", "metric")),
    progress_always=True, pose_weight=(1.0, 1.0, 0.1), data=("xfrc_applied", "kick_i"),
    consts=(
        ParamSpec("tracking_sigma", 0.25, 1e-4, 100.0, doc="width of the tracking rewards"),
        ParamSpec("max_foot_height", 0.1, 1e-3, 10.0, unit="m",
                  doc="target swing height of a foot"),
        ParamSpec("soft_joint_limit_factor", 0.95, 0.0, 1.0,
                  doc="soft joint limits = hard limits x factor (each bound)"),
        ParamSpec("command_keep_prob", 0.5, 0.0, 1.0,
                  doc="at a resample, probability of keeping each command component"),
        ParamSpec("command_resample_time", 5.0, 0.0, 1e5, unit="s",
                  doc="mean of the exponential time between command resamples"),
        *HEIGHT_SCAN_SPECS,
        ParamSpec("terminate_on_contact", 1.0, 0.0, 1.0,
                  doc="1: a terminating body touching the ground ends the episode"),
    ),
    params=(
        *command_specs((1.5, 0.8, 1.2)),  # Playground's U(-a, a): low -a, high a
        ParamSpec("command_nonzero_prob", (0.9, 0.25, 0.5), 0.0, 1.0, shape=(3,),
                  doc="b: at a resample, probability of a non-zero new component"),
    ),
    ctx=dict(tracking_sigma="tracking_sigma", foot_height="max_foot_height",
             soft_limit="soft_joint_limit_factor", cmd_keep="command_keep_prob",
             cmd_resample="command_resample_time", scan_offset="height_scan_offset",
             scan_scale="height_scan_scale", scan_noise="noise_height_scan",
             terminate_contact="terminate_on_contact"),
)
"""MuJoCo Playground's ``Go1Joystick*Terrain`` as a config (module docstring)."""


def go1_task_specs(undesired_contacts: float = 0.0) -> tuple[ParamSpec, ...]:
    """The task's parameters (Playground's values): reward scales, noise, command law,
    reward constants, height-scan shaping, contact termination."""
    return GO1_JOYSTICK.param_specs({"undesired_contacts": undesired_contacts})


def go1_bodies() -> tuple[str, ...]:
    """The bodies of the Go1 model, in its order (the world excluded)."""
    return Go1Env.bodies()


def check_contact_bodies(what: str, bodies: object) -> tuple[str, ...]:
    """``bodies`` (a list or tuple of Go1 body names) as a tuple, or a ``ValueError``
    naming the argument ``what``, the valid names and what was got (a lone str included)."""
    return check_bodies(what, bodies, go1_bodies(), "Go1")


def go1_model(terrain: str | TerrainGrid, penalized: Sequence[str] = (),
              terminating: Sequence[str] = (), cone: str | None = None) -> mujoco.MjModel:
    """The Go1 scene: ``"flat"``, ``"rough"`` (Playground's), or a generated terrain grid
    replacing the flat floor (a heightfield geom named ``"floor"``, so the foot contact
    sensors keep working). For each body in ``penalized`` and ``terminating`` its collision
    geoms are made to collide with the floor (only the feet do in Playground's model) and
    each gets a floor-contact sensor ``<body>_<k>_floor_found``. ``cone``: ``None`` (the
    model's pyramidal friction cone, Playground's), ``"pyramidal"`` or ``"elliptic"``."""
    return build_model(GO1_JOYSTICK, terrain, check_contact_bodies("penalized", penalized),
                       check_contact_bodies("terminating", terminating), cone)


class Go1Env(LeggedEnv):
    """MuJoCo Playground's ``Go1JoystickFlatTerrain`` on MuJoCo Warp (see the module
    docstring for the task; ``LeggedEnv`` for the arguments).

    Outputs (beyond ``VecEnv``'s; ``"observation"`` is float32 ``[N, 48 (+ P)]``, P the
    height-scan points): ``"privileged_observation"`` float32 ``[N, 123 (+ P)]``
    (after the auto-reset, as ``"observation"``; also returned by ``reset``),
    ``"reward_terms"`` float32 ``[N, 17]`` (``scale_k * term_k`` of this step, names in
    ``REWARD_TERMS``, before the sum, ``dt`` and the clip at 0).
    """

    name = "Go1JoystickFlatTerrain-v1"
    config = GO1_JOYSTICK
    robot = "Go1"

    def playground_randomization(self, on: On = "startup") -> tuple[Term, ...]:
        """MuJoCo Playground's ``locomotion/go1/randomize.py`` as terms, for
        ``env.randomize(*env.playground_randomization())``: floor friction ``U(0.4, 1.0)``
        (``geom_friction`` of ``"floor"``), joint frictionloss ``x U(0.9, 1.1)``, armature
        ``x U(1.0, 1.05)``, the trunk's centre of mass ``+ U(-0.05, 0.05)`` per axis
        (``body_ipos``), every body mass ``x U(0.9, 1.1)``, the trunk ``+ U(-1, 1)`` kg
        (``added_mass``), joint offsets ``U(-0.05, 0.05)`` rad (``joint_offset``: Playground's
        ``qpos0`` jitter). ``on``: ``"startup"`` (Playground's: once per env), ``"reset"``
        or another trigger. Details and the deviations: ``legged.playground_randomization``;
        ``set_const`` follows the mass and centre-of-mass writes (Playground's MJX does not
        recompute the model's derived quantities)."""
        return super().playground_randomization(on)


class Go1RoughEnv(Go1Env):
    """MuJoCo Playground's ``Go1JoystickRoughTerrain``: the same task on its 20 m x 20 m
    heightfield (5 cm high, friction 1.0), dropped from z 0.35."""

    name = "Go1JoystickRoughTerrain-v1"
    terrain = "rough"


class Go1TerrainEnv(TerrainGridEnv, Go1Env):
    """The flat task's rewards on a legged_gym-style terrain grid (``terrain.py``: rows =
    difficulty, columns = flat, rough, slopes up/down, stairs up/down, obstacles), generated
    at build time from ``terrain_seed`` (default: the env's seed).

    Env ``i`` starts on column ``(env_offset + i) % cols`` of row ``terrain_level`` (a
    per-env parameter, read at every reset), 0.07 m above the tile's centre (the rough
    scene's drop height). The observation adds the height scan (legged_gym's 17 x 11
    points over [-0.8, 0.8] x [-0.5, 0.5] m in the base's yaw frame: ``clip(base_z -
    height_scan_offset - h, -1, 1) * height_scan_scale``, noisy) and the privileged
    observation its noise-free values; foot heights are above the terrain under the foot.
    Thighs and calves touching the ground are penalized (``reward_undesired_contacts``
    -1), the trunk touching it terminates (legged_gym's defaults). The terrain curriculum:
    :meth:`terrain_curriculum`.

    Args (beyond ``Go1Env``'s): ``terrain_rows`` (10), ``terrain_cols`` (one per type),
    ``terrain_types``, ``tile_size`` (8 m), ``terrain_seed`` (an int32 as ``seed``, its
    default; a negative one is taken modulo 2**32, as NumPy's generator takes only seeds
    >= 0); ``height_scan`` (True; False: blind, the observations without the scan, 48 and
    123 values). Each is checked (``generate_terrain``'s rules, named as here) before the
    terrain is generated.
    """

    name = "Go1Terrain-v0"
    spawn_height = 0.07
    default_penalized = tuple(f"{f}_{p}" for f in FEET for p in ("thigh", "calf"))
    default_terminating = ("trunk",)
    reward_defaults = {"undesired_contacts": -1.0}


GO1_ENVS = (Go1Env, Go1RoughEnv, Go1TerrainEnv)
