"""Booster T1 velocity tracking on MuJoCo Warp: MuJoCo Playground's
``T1JoystickFlatTerrain`` / ``T1JoystickRoughTerrain`` (``-v1``, as envpool names its
ports) as a :class:`~gpuparam.envs.mujoco.legged_task.LeggedTaskConfig`.

The task is Playground's ``locomotion/t1/joystick.py`` (envpool 1.2.5's C++ port is the
reference the tests compare with; every formula: ``docs/tasks/t1_joystick.md``): physics
``load_t1`` (0.002 s, 10 substeps per 0.02 s env step, Newton with 3 iterations), PD
position control to ``default_pose + action * action_scale`` (1.0); observation 85,
privileged observation 180, 25 reward terms, the reward ``clip(dt sum, 0, 1e4)``;
termination only upside down or NaN; a foot touches the ground when any of its 4 contact
spheres does. Reset, commands (``U(-a, a)`` with a = 1, 0.8, 1 as ``command_low`` /
``command_high``; all zero with probability 0.1; redrawn after 500 steps; the command
modes of ``legged_task.command_specs``) and pushes (``push_velocity`` 0.1 to 1 m/s) are
G1's laws (``kernels.g1``), with gait frequency ``U(1.25, 1.75)`` Hz; the gait phase is
held at pi while ``|command| <= 0.01``.

Deviations from Playground: G1's (full resets, counter-based draws, ``round`` halves away
from zero, no push at an episode's first step); each joint's ``actuatorfrcrange`` is its
actuator's force range (``t1_model``): ``actuator_force`` (privileged observation, torque
and energy terms) is then the clamped force where Playground reports the unclamped one.
"""

from __future__ import annotations

from gpuparam.envs.mujoco import g1
from gpuparam.envs.mujoco.legged_task import (
    JOYSTICK_NOISE,
    Command,
    LeggedEnv,
    LeggedTaskConfig,
    Reward,
)
from gpuparam.envs.mujoco.t1_model import FEET, t1_spec
from gpuparam.kernels import g1 as kg1
from gpuparam.kernels import legged_terms as kt
from gpuparam.kernels import t1 as kt1
from gpuparam.randomization.terms import On, Term, Uniform

# envpool's config order (its reward_<term> info keys)
REWARDS = (
    Reward("tracking_lin_vel", 1.0, kt.tracking_lin_vel,
           "exp(-|cmd_xy - local linvel_xy|^2 / sigma)"),
    Reward("tracking_ang_vel", 0.5, kt.tracking_ang_vel, "exp(-(cmd_yaw - gyro_z)^2 / sigma)"),
    Reward("lin_vel_z", 0.0, kt1.lin_vel_z_local, "local linvel_z^2"),
    Reward("ang_vel_xy", -0.15, kt1.ang_vel_xy_gyro, "gyro_x^2 + gyro_y^2"),
    Reward("orientation", -1.0, kt.orientation, "|upvector_xy|^2"),
    Reward("base_height", 0.0, kt.base_height, "(base z - base_height_target)^2"),
    Reward("torques", 0.0, kt.torques_l1, "sum |tau| (actuator forces)"),
    Reward("action_rate", 0.0, kt.action_rate, "|action - last action|^2"),
    Reward("energy", 0.0, kt.energy, "sum |qvel| |tau|"),
    Reward("dof_acc", 0.0, kt.dof_acc, "|joint qacc|^2"),
    Reward("dof_vel", 0.0, kt1.dof_vel, "|joint qvel|^2"),
    Reward("feet_clearance", 0.0, kt.feet_clearance,
           "sum |foot z - max_foot_height| |foot vel_xy|^(1/2)"),
    Reward("feet_air_time", 2.0, kt1.feet_air_time,
           "sum min(air time - 0.2, 0.3) at first contacts, if |cmd| > 0.1"),
    Reward("feet_slip", -0.25, kg1.g1_feet_slip, "|imu global linvel_xy| x feet in contact"),
    Reward("feet_height", 0.0, kt.feet_height,
           "sum (swing peak / max_foot_height - 1)^2 at first contacts"),
    Reward("feet_phase", 1.0, kt1.feet_phase, "exp(-sum (foot z - gait target)^2 / 0.01)"),
    Reward("stand_still", 0.0, kt1.stand_still, "sum |q - default| when |cmd| < 0.1"),
    Reward("alive", 0.25, kt.alive, "1"),
    Reward("termination", 0.0, kt.termination, "1 at a termination"),
    Reward("collision", -1.0, kt.undesired_contacts, "1 when the two foot boxes touch"),
    Reward("joint_deviation_knee", -0.1, kg1.g1_knee, "sum |q_knee - default|"),
    Reward("joint_deviation_hip", -0.1, kt1.joint_deviation_hip,
           "sum |q_hip roll, yaw - default| if |cmd_y| > 0.1"),
    Reward("dof_pos_limits", -1.0, kt.dof_pos_limits_centred,
           "joint angles beyond the soft limits (summed)"),
    Reward("pose", -1.0, kt.pose_weighted, "sum w (q - default)^2"),
    Reward("feet_distance", -1.0, kt1.feet_distance,
           "clip(0.2 - lateral foot distance in the base yaw frame, 0, 0.1)"),
)
REWARD_TERMS = tuple(r.name for r in REWARDS)
# Playground's pose weights per joint: head 2; each arm (shoulder pitch, roll, elbow pitch,
# yaw); waist; each leg (hip pitch, roll, yaw, knee, ankle pitch, roll)
POSE_WEIGHT = (1.0, 1.0, *(0.1, 1.0, 1.0, 1.0) * 2, 1.0, *(0.01, 1.0, 1.0, 0.01, 1.0, 1.0) * 2)
# (njmax, nconmax) per world. Playground's: 80 rows, 8 contacts (its 8 * 8192 for all
# worlds); the 8 foot spheres and the foot boxes' contacts (up to 8 more) on flat ground
SIZES = {"flat": (80, 16), "rough": (120, 24)}
ANKLES = ("Left_Ankle_Pitch", "Left_Ankle_Roll", "Right_Ankle_Pitch", "Right_Ankle_Roll")

T1_JOYSTICK = LeggedTaskConfig(
    spec=t1_spec, base_body="Trunk", feet=FEET, frame_skip=10, sizes=SIZES, joint_scale=True,
    recipe=dict(action_scale=1.0, reset_xy=0.5, reset_yaw=3.14, reset_velocity=0.5,
                reset_joint_scale=(0.5, 1.5)),
    randomization=dict(frictionloss=(0.9, 1.1), floor_geom="floor", floor_friction=(0.2, 0.6),
                       body_mass=(0.98, 1.02)),
    foot_found=tuple(f"{{}}_{k}_floor_found" for k in range(1, 5)),
    # G1's laws (kernels.g1) with what they read: observations, state, constants, ctx
    noise=JOYSTICK_NOISE, obs=g1.OBS, priv=g1.PRIV, rewards=REWARDS, reward_clip=True,
    terminations=(kt.upside_down, kt.nan_state),
    command=Command(kt.no_reset, kt.no_update, range_param=None),  # drawn by G1's laws
    reset=kg1.g1_reset, update=kt1.t1_update, state=g1.STATE,
    index_joints=("Left_Hip_Roll", "Left_Hip_Yaw", "Right_Hip_Roll", "Right_Hip_Yaw",
                  "Left_Knee_Pitch", "Right_Knee_Pitch"),
    pose_weight=POSE_WEIGHT, penalized_groups=(("left_foot_right_foot_found",),),
    data=("qacc",), consts=(*g1.term_consts(0.12, 0.665), g1.SOFT_LIMIT, *g1.LAW_CONSTS),
    params=g1.law_params((1.0, 0.8, 1.0), gait_frequency=(1.25, 1.75),
                         push_velocity=(0.1, 1.0)),
    extra_block=g1.LAW_BLOCK, ctx=g1.CTX,
)
"""MuJoCo Playground's ``T1Joystick*Terrain`` as a config (module docstring)."""


class T1Env(LeggedEnv):
    """MuJoCo Playground's ``T1JoystickFlatTerrain`` on MuJoCo Warp (module docstring;
    ``LeggedEnv`` for the arguments).

    Outputs (beyond ``VecEnv``'s; ``"observation"`` is float32 ``[N, 85]``):
    ``"privileged_observation"`` float32 ``[N, 180]`` (after the auto-reset, as
    ``"observation"``; also returned by ``reset``), ``"reward_terms"`` float32 ``[N, 25]``
    (``scale_k * term_k`` of this step, names in ``REWARD_TERMS``, before the sum, ``dt``
    and the clip).
    """

    name = "T1JoystickFlatTerrain-v1"
    config = T1_JOYSTICK
    robot = "T1"

    def playground_randomization(self, on: On = "startup") -> tuple[Term, ...]:
        """MuJoCo Playground's ``locomotion/t1/randomize.py`` as terms, for
        ``env.randomize(*env.playground_randomization())``: floor friction ``U(0.2, 0.6)``
        (``geom_friction`` of ``"floor"``), joint frictionloss ``x U(0.9, 1.1)``, armature
        ``x U(1.0, 1.05)``, every body mass ``x U(0.98, 1.02)``, the trunk ``+ U(-1, 1)``
        kg (``added_mass``), joint offsets ``U(-0.05, 0.05)`` rad (``joint_offset``), ``kp``
        ``x U(0.9, 1.1)``, the ankles' ``kd`` ``x U(0.5, 2.0)``. ``on``: ``"startup"``
        (Playground's) or another trigger; details: ``legged.playground_randomization``."""
        terms = super().playground_randomization(on)
        jnt = list(self.mjm.actuator_trnid[:, 0])
        ankle = [jnt.index(self.mjm.joint(a).id) for a in ANKLES]
        lo = [0.5 if j in ankle else 1.0 for j in range(self.mjm.nu)]
        hi = [2.0 if j in ankle else 1.0 for j in range(self.mjm.nu)]
        return (*terms, Uniform("kp", 0.9, 1.1, op="scale", on=on, name=f"playground kp on={on}"),
                Uniform("kd", lo, hi, op="scale", on=on, name=f"playground kd on={on}"))


class T1RoughEnv(T1Env):
    """MuJoCo Playground's ``T1JoystickRoughTerrain``: the same task on its 20 m x 20 m
    heightfield (5 cm high), from the ``home`` keyframe's 0.72 m."""

    name = "T1JoystickRoughTerrain-v1"
    terrain = "rough"


T1_ENVS = (T1Env, T1RoughEnv)
