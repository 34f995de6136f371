"""A legged task's kernel, generated from its config: the shared terms as named
``@wp.func``\\ s and :func:`make_task_kernel`, which composes a task's observation,
privileged observation, reward and termination terms and its state laws at code generation
(``wp.static``, as ``kernels.randomize`` composes its draws).

One kernel per task config, one thread per env, run in three modes (``MODE_STEP`` after a
step for every env; ``MODE_RESET`` after a reset for the masked envs: the task state's reset
then the observations; ``MODE_OBSERVE``: the observations only). One step of it:

1. the step's context :class:`Ctx` (``i``, the keys, the named constants ``k[K_*]`` read
   from the parameter table, the imu's local linear velocity, gyro, gravity, the global
   velocities, upvector, the command); at a reset the task's ``reset`` law first;
2. the feet: height above the ground under the foot, contact (any of its sensors), first
   contact, air time
   ``+= dt`` and swing peak (a step only);
3. the observation terms in order (a term with a noise row draws one value per component,
   in order, from the step's observation-noise bits; ``noisy(value) - bias``), copied into
   the privileged observation, then the privileged terms, then the height scan (both);
4. (a step only) termination: the OR of the termination terms; the reward terms, each times
   its scale (``terms`` out), summed (with exponent terms ``E``: ``sum_{k not in E} s_k *
   exp(coef * sum_{k in E} s_k)``, Playground's Spot and H1 gait tracking), times ``dt``
   (clipped to ``[0, 1e4]`` if the config says so, NaN stays NaN); NaN actions make every
   output NaN;
5. the state laws: feet (air time and swing peak cleared on contact, last contact), last
   action, then the task's ``update`` law (commands, gait phase, pushes, ...).

Term signatures (every argument a struct of this module; ``act`` float32 ``[N, nu]``):

- observation / privileged term, component ``j``:
  ``f(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
  act: wp.array2d(dtype=float), j: int) -> float`` (a noisy term's ``bias`` the same);
- reward term: ``f(c, m, sn, p, d, st, act) -> float`` (unscaled);
- termination term: ``f(c, m, sn, p, d, st) -> bool``;
- laws: ``reset(c, m, p, d, st, h: wp.uint32)`` (draws from the task-reset bits ``h``),
  ``update(c, m, p, d, st)`` (``c.done`` is this step's termination).
"""

from __future__ import annotations

from functools import cache

import warp as wp
from gpuparam.kernels.actions import action_or_zero, has_nan, nan_row
from gpuparam.kernels.episode import StepKeys
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.legged import (
    RESET_STEP,
    STREAM_COMMAND,
    STREAM_OBS_NOISE,
    STREAM_TASK_RESET,
    Terrain,
    exponential_steps,
    ground,
    noisy,
    reset_command,
    step_bits,
    terrain_progress,
    terrain_start,
    write_height_scan,
)
from gpuparam.kernels.locomotion import copy_row
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, rng_key, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

MODE_STEP = wp.constant(0)
MODE_RESET = wp.constant(1)
MODE_OBSERVE = wp.constant(2)

# the named constants of ``Ctx.k`` (a config maps each to a parameter, or leaves its default)
CTX_CONSTS = ("tracking_sigma", "foot_height", "soft_limit", "cmd_keep", "cmd_resample",
              "scan_offset", "scan_scale", "scan_noise", "terminate_contact", "base_height",
              "max_force", "cmd_zero_prob", "push_enable", "up_min", "early_termination")
K_SIGMA = wp.constant(0)
K_FOOT_HEIGHT = wp.constant(1)
K_SOFT_LIMIT = wp.constant(2)
K_CMD_KEEP = wp.constant(3)
K_CMD_RESAMPLE = wp.constant(4)
K_SCAN_OFFSET = wp.constant(5)
K_SCAN_SCALE = wp.constant(6)
K_SCAN_NOISE = wp.constant(7)
K_TERMINATE_CONTACT = wp.constant(8)
K_BASE_HEIGHT = wp.constant(9)
K_MAX_FORCE = wp.constant(10)
K_CMD_ZERO_PROB = wp.constant(11)
K_PUSH = wp.constant(12)
K_UP_MIN = wp.constant(13)
K_EARLY_TERMINATION = wp.constant(14)
vec16 = wp.types.vector(length=16, dtype=float)
MAX_FEET = 4

# the command block ``TaskParams.cmd``: rows of ``legged_task.COMMAND_PARAMS`` in order
CMD_LOW = wp.constant(0)  # command_low (vx, vy, yaw rate): 3 rows
CMD_HIGH = wp.constant(3)  # command_high: 3 rows
CMD_STANDING = wp.constant(6)  # rel_standing_envs
CMD_HEADING_ENVS = wp.constant(7)  # rel_heading_envs
CMD_STIFFNESS = wp.constant(8)  # heading_stiffness
CMD_HEADING = wp.constant(9)  # heading_range (low, high): 2 rows
CMD_FIXED = wp.constant(11)  # command_fixed
CMD_VALUE = wp.constant(12)  # command_value: 3 rows
CMD_ROWS = 15
# the standing and heading draws of a command (a stream of their own: the command laws'
# draws are unchanged by them)
STREAM_COMMAND_MODE = wp.constant(STREAM_TERM0 + (1 << 20) + 64)


@wp.struct
class Sensors:
    """Where the task reads MuJoCo Warp's data: ``sensordata`` addresses of the imu
    (gyro, local linear velocity, accelerometer, global linear and angular velocity), of
    the upvector; the imu site, the base body; per foot (``[F]``) its site, floor-contact
    sensors (``found_per_foot`` each, foot-major ``[F * found_per_foot]``: the foot touches
    when any does), global linear velocity and force sensor (empty without one); contact
    groups:
    ``n_penalized`` groups, group ``b``'s sensors ``penalized[penalized_start[b] :
    penalized_start[b + 1]]``, ``n_terminating`` sensors ``terminating``; ``extra``: a
    task's own sensor addresses (its terms index them). After a step the contact sensors
    are read at ``foot_found_step`` (``foot_found`` but for Playground's H1, which indexes
    ``sensordata`` by the sensors' ids there). Arrays of size >= 1."""

    gyro: int
    linvel: int
    accel: int
    upvector: int
    global_linvel: int
    global_angvel: int
    imu_site: int
    base_body: int
    foot_site: wp.array(dtype=int)
    found_per_foot: int
    foot_found: wp.array(dtype=int)
    foot_found_step: wp.array(dtype=int)
    foot_vel: wp.array(dtype=int)
    foot_force: wp.array(dtype=int)
    n_penalized: int
    penalized: wp.array(dtype=int)
    penalized_start: wp.array(dtype=int)
    n_terminating: int
    terminating: wp.array(dtype=int)
    extra: wp.array(dtype=int)


@wp.struct
class TaskModel:
    """Constants of the model: seconds per env step; per actuated joint (``[nu]``) the
    default pose, the joint range (low, high) and the pose reward's weight; ``index``: a
    task's own actuator indices (its terms index them; empty if none)."""

    dt: float
    default_pose: wp.array(dtype=float)
    joint_low: wp.array(dtype=float)
    joint_high: wp.array(dtype=float)
    pose_weight: wp.array(dtype=float)
    index: wp.array(dtype=int)


@wp.struct
class TaskParams:
    """The parameter rows the task reads (views of the effective table ``[rows, N]``):
    reward scales (one row per reward term), the ``noise`` block (row 0 the level, then
    the noisy terms' scales), the ``consts`` block, ``cmd_range`` ``[3, N]`` (a symmetric
    command law's half-widths, ``Command.range_param``), ``cmd_prob`` ``[3, N]`` (a command
    law's probabilities), ``cmd`` ``[CMD_ROWS, N]`` (the command block: ranges, standing and
    heading shares, pinned commands; rows ``CMD_*``) and ``extra`` (a task's own block); a
    block the task lacks is empty."""

    scales: wp.array2d(dtype=float)
    noise: wp.array2d(dtype=float)
    consts: wp.array2d(dtype=float)
    cmd_range: wp.array2d(dtype=float)
    cmd_prob: wp.array2d(dtype=float)
    cmd: wp.array2d(dtype=float)
    extra: wp.array2d(dtype=float)


@wp.struct
class TaskData:
    """What the task reads of MuJoCo Warp's data (``[N, ...]``; a field the task does not
    read is empty; ``ctrl``: this step's PD targets), and the kick state ``[N, 4]``
    (``kernels.legged.pre_step``); ``qvel`` may be written (a push)."""

    qpos: wp.array2d(dtype=float)
    qvel: wp.array2d(dtype=float)
    qacc: wp.array2d(dtype=float)
    sensordata: wp.array2d(dtype=float)
    site_xpos: wp.array2d(dtype=wp.vec3)
    site_xmat: wp.array2d(dtype=wp.mat33)
    actuator_force: wp.array2d(dtype=float)
    ctrl: wp.array2d(dtype=float)
    xfrc_applied: wp.array2d(dtype=wp.spatial_vector)
    kick_i: wp.array2d(dtype=wp.int32)


@wp.struct
class TaskState:
    """The task's per-env state (``[N, ...]``; a field the task does not keep is empty):
    command (vx, vy, yaw rate), ``countdown`` (a command law's step counter), the previous
    action, per foot air time, swing peak and last contact (0/1), gait phase per foot and
    its advance per step, push step and interval; for the terrain curriculum the episode's
    start xy, the commanded distance so far and the metric (+1 promote, -1 demote); the
    action before the previous one (zeroed at a reset; the previous action before that is
    updated); the joint angle minus PD target and joint velocity histories (newest
    first); per-env gait draws (frequency Hz, gait index, swing apex height m);
    ``heading`` ``[N, 2]``: (1 for a heading env else 0, its heading target in rad)."""

    command: wp.array2d(dtype=float)
    countdown: wp.array(dtype=wp.int32)
    last_act: wp.array2d(dtype=float)
    last_last_act: wp.array2d(dtype=float)
    air_time: wp.array2d(dtype=float)
    swing_peak: wp.array2d(dtype=float)
    last_contact: wp.array2d(dtype=float)
    phase: wp.array2d(dtype=float)
    phase_dt: wp.array(dtype=float)
    push_step: wp.array(dtype=wp.int32)
    push_interval: wp.array(dtype=wp.int32)
    start_xy: wp.array2d(dtype=float)
    cmd_distance: wp.array(dtype=float)
    metric: wp.array(dtype=float)
    qpos_error_history: wp.array2d(dtype=float)
    qvel_history: wp.array2d(dtype=float)
    gait_freq: wp.array(dtype=float)
    gait: wp.array(dtype=wp.int32)
    foot_height: wp.array(dtype=float)
    heading: wp.array2d(dtype=float)


@wp.struct
class TaskOutputs:
    """The step's outputs: observation ``[N, O]`` (its copy as the final observation),
    privileged observation ``[N, Q]``, scaled reward terms ``[N, R]``, reward and
    terminated ``[N]``."""

    obs: wp.array2d(dtype=float)
    final_obs: wp.array2d(dtype=float)
    priv: wp.array2d(dtype=float)
    terms: wp.array2d(dtype=float)
    reward: wp.array(dtype=float)
    terminated: wp.array(dtype=wp.bool)


@wp.struct
class Ctx:
    """Env ``i``'s step context, computed once by the task kernel: the keys of its draws
    (``seed``, global id ``gid``, episode index, step of the episode), ``dt``, the named
    constants ``k`` (``K_*``), the noise level, the imu's local linear velocity ``lin``,
    ``gyro``, gravity in the imu frame ``grav``, accelerometer, global angular and linear
    velocity, upvector, the command and its norm; per foot (``[F]``, F <= 4) contact, first
    contact, height above the ground; this step's termination ``done``; the kernel's
    ``mode`` (``MODE_*``)."""

    i: int
    seed: int
    gid: int
    episode: int
    step: int
    dt: float
    k: vec16
    lvl: float
    lin: wp.vec3
    gyro: wp.vec3
    grav: wp.vec3
    accel: wp.vec3
    gang: wp.vec3
    glin: wp.vec3
    up: wp.vec3
    cmd: wp.vec3
    cmd_norm: float
    contact: wp.vec4
    first: wp.vec4
    foot_z: wp.vec4
    done: bool
    mode: int


@wp.func
def sensor3(sd: wp.array2d(dtype=float), i: int, adr: int) -> wp.vec3:
    """Three sensor values of env ``i`` from address ``adr``."""
    return wp.vec3(sd[i, adr], sd[i, adr + 1], sd[i, adr + 2])


@wp.func
def block_value(p: TaskParams, block: int, row: int, i: int, default: float) -> float:
    """Row ``row`` of block ``block`` (0: ``consts``, 1: ``noise``, 2: ``extra``; -1: the
    ``default``) for env ``i``."""
    if block == 0:
        return p.consts[row, i]
    if block == 1:
        return p.noise[row, i]
    if block == 2:
        return p.extra[row, i]
    return default


# ----------------------------------------------------------------- observation terms
@wp.func
def obs_linvel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float), j: int) -> float:
    """The imu's local linear velocity (3)."""
    return c.lin[j]


@wp.func
def obs_gyro(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
             act: wp.array2d(dtype=float), j: int) -> float:
    """The gyro (3)."""
    return c.gyro[j]


@wp.func
def obs_gravity(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Gravity in the imu frame (3)."""
    return c.grav[j]


@wp.func
def obs_accel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
              act: wp.array2d(dtype=float), j: int) -> float:
    """The accelerometer (3)."""
    return c.accel[j]


@wp.func
def obs_global_angvel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                      st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The imu's global angular velocity (3)."""
    return c.gang[j]


@wp.func
def obs_joint_pos(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Joint angle (nu), before the default pose is subtracted (the bias
    :func:`obs_default_pose`: a noisy term's noise is added first)."""
    return d.qpos[c.i, 7 + j]


@wp.func
def obs_default_pose(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The default pose (nu): the bias of :func:`obs_joint_pos`."""
    return m.default_pose[j]


@wp.func
def obs_joint_pos_rel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                      st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Joint angle minus the default pose (nu)."""
    return d.qpos[c.i, 7 + j] - m.default_pose[j]


@wp.func
def obs_joint_vel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Joint velocity (nu)."""
    return d.qvel[c.i, 6 + j]


@wp.func
def obs_actuator_force(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                       st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Actuator force (nu)."""
    return d.actuator_force[c.i, j]


@wp.func
def obs_last_action(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                    st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The previous action (nu)."""
    return st.last_act[c.i, j]


@wp.func
def obs_command(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The command (3)."""
    return c.cmd[j]


@wp.func
def obs_base_height(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                    st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The base's world z (1)."""
    return d.qpos[c.i, 2]


@wp.func
def obs_imu_height(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The imu site's world z (1)."""
    return d.site_xpos[c.i, sn.imu_site][2]


@wp.func
def obs_last_contact(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Per foot, its contact at the previous step (F)."""
    return st.last_contact[c.i, j]


@wp.func
def obs_contact(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Per foot, its contact at this step (F)."""
    return c.contact[j]


@wp.func
def obs_feet_vel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Per foot its global linear velocity (3 F: foot-major)."""
    return d.sensordata[c.i, sn.foot_vel[j // 3] + j % 3]


@wp.func
def obs_air_time(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Per foot its air time (F)."""
    return st.air_time[c.i, j]


@wp.func
def obs_kick(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
             act: wp.array2d(dtype=float), j: int) -> float:
    """The kick force on the base (3), then 1 while kicking (1): 4 values."""
    if j < 3:
        return d.xfrc_applied[c.i, sn.base_body][j]
    return wp.where(d.kick_i[c.i, 0] >= d.kick_i[c.i, 1], 1.0, 0.0)


@wp.func
def obs_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
              act: wp.array2d(dtype=float), j: int) -> float:
    """cos of each foot's gait phase, then sin of each (2 F)."""
    nf = st.phase.shape[1]
    if j < nf:
        return wp.cos(st.phase[c.i, j])
    return wp.sin(st.phase[c.i, j - nf])


@wp.func
def obs_upvector(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The upvector sensor (3: the imu's z axis in world coordinates, Playground's Spot
    ``get_gravity``)."""
    return c.up[j]


@wp.func
def _roll(c: Ctx, nu: int, hist: wp.array2d(dtype=float), j: int, new: float) -> float:
    """Component ``j`` of a history shown with its new block (``new``: component ``j <
    nu``) in front; once its last component is read (a step, a reset) the history is
    rolled by nu (the caller writes the front block); observe-only shows it as is."""
    if c.mode == MODE_OBSERVE:
        return hist[c.i, j]
    v = wp.where(j < nu, new, hist[c.i, wp.max(j - nu, 0)])
    if j == hist.shape[1] - 1:
        for k in range(hist.shape[1] - 1, nu - 1, -1):
            hist[c.i, k] = hist[c.i, k - nu]
    return v


@wp.func
def obs_qvel_history(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Joint velocities, now then the previous steps' (nu x history), rolled."""
    nu = m.default_pose.shape[0]
    v = _roll(c, nu, st.qvel_history, j, d.qvel[c.i, 6 + j % nu])
    if c.mode != MODE_OBSERVE and j == st.qvel_history.shape[1] - 1:
        for k in range(nu):
            st.qvel_history[c.i, k] = d.qvel[c.i, 6 + k]
    return v


@wp.func
def obs_qpos_error_history(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                           st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Joint angle minus PD target (``ctrl``), now then the previous steps', rolled."""
    nu = m.default_pose.shape[0]
    k = j % nu
    v = _roll(c, nu, st.qpos_error_history, j, d.qpos[c.i, 7 + k] - d.ctrl[c.i, k])
    if c.mode != MODE_OBSERVE and j == st.qpos_error_history.shape[1] - 1:
        for q in range(nu):
            st.qpos_error_history[c.i, q] = d.qpos[c.i, 7 + q] - d.ctrl[c.i, q]
    return v


# ----------------------------------------------------------------- reward terms
@wp.func
def tracking_lin_vel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``exp(-|cmd_xy - local linvel_xy|^2 / sigma)``."""
    e0 = c.cmd[0] - c.lin[0]
    e1 = c.cmd[1] - c.lin[1]
    return wp.exp(-(e0 * e0 + e1 * e1) / c.k[K_SIGMA])


@wp.func
def tracking_ang_vel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``exp(-(cmd_yaw - gyro_z)^2 / sigma)``."""
    ea = c.cmd[2] - c.gyro[2]
    return wp.exp(-(ea * ea) / c.k[K_SIGMA])


@wp.func
def lin_vel_z(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
              act: wp.array2d(dtype=float)) -> float:
    """``global linvel_z^2``."""
    return c.glin[2] * c.glin[2]


@wp.func
def ang_vel_xy(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``|global angvel_xy|^2``."""
    return c.gang[0] * c.gang[0] + c.gang[1] * c.gang[1]


@wp.func
def orientation(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
                act: wp.array2d(dtype=float)) -> float:
    """``|upvector_xy|^2``."""
    return c.up[0] * c.up[0] + c.up[1] * c.up[1]


@wp.func
def dof_pos_limits(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """Joint angles beyond the soft limits (each bound times ``soft_limit``), summed."""
    soft = c.k[K_SOFT_LIMIT]
    limits = float(0.0)
    for j in range(m.default_pose.shape[0]):
        q = d.qpos[c.i, 7 + j]
        limits += -wp.min(q - m.joint_low[j] * soft, 0.0) + wp.max(q - m.joint_high[j] * soft,
                                                                  0.0)
    return limits


@wp.func
def pose_weighted(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum w (q - default)^2`` (``w``: ``pose_weight``)."""
    pose = float(0.0)
    for j in range(m.default_pose.shape[0]):
        dq = d.qpos[c.i, 7 + j] - m.default_pose[j]
        pose += dq * dq * m.pose_weight[j]
    return pose


@wp.func
def pose_exp(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
             act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum w (q - default)^2)`` (``w``: ``pose_weight``; :func:`pose_weighted`)."""
    return wp.exp(-pose_weighted(c, m, sn, p, d, st, act))


@wp.func
def termination(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """1 at a termination."""
    return wp.where(c.done, 1.0, 0.0)


@wp.func
def joint_deviation(c: Ctx, m: TaskModel, d: TaskData) -> float:
    """``sum |q - default|`` over the actuated joints (the stand-still terms' sum)."""
    dev = float(0.0)
    for j in range(m.default_pose.shape[0]):
        dev += wp.abs(d.qpos[c.i, 7 + j] - m.default_pose[j])
    return dev


@wp.func
def stand_still(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` when ``|cmd| < 0.01``."""
    return joint_deviation(c, m, d) * wp.where(c.cmd_norm < 0.01, 1.0, 0.0)


@wp.func
def torques_l1(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``sum |tau|`` (actuator forces)."""
    tau1 = float(0.0)
    for j in range(m.default_pose.shape[0]):
        tau1 += wp.abs(d.actuator_force[c.i, j])
    return tau1


@wp.func
def torques_l2sq(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum tau^2`` (actuator forces)."""
    tau2 = float(0.0)
    for j in range(m.default_pose.shape[0]):
        tau = d.actuator_force[c.i, j]
        tau2 += tau * tau
    return tau2


@wp.func
def torques_l2_l1(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|tau| + sum |tau|`` (actuator forces; Playground's Go1)."""
    return wp.sqrt(torques_l2sq(c, m, sn, p, d, st, act)) + torques_l1(c, m, sn, p, d, st, act)


@wp.func
def action_rate(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|action - last action|^2``."""
    rate = float(0.0)
    for j in range(m.default_pose.shape[0]):
        da = act[c.i, j] - st.last_act[c.i, j]
        rate += da * da
    return rate


@wp.func
def action_rate2(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|a - last a|^2 + |a - 2 last a + last last a|^2`` (Playground's Go1 Getup)."""
    rate = float(0.0)
    for j in range(m.default_pose.shape[0]):
        a1 = st.last_act[c.i, j]
        da = act[c.i, j] - a1
        dd = act[c.i, j] - 2.0 * a1 + st.last_last_act[c.i, j]
        rate += da * da
        rate += dd * dd
    return rate


@wp.func
def dof_vel_excess(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum max(|joint qvel| - 2 pi, 0)^2``."""
    e = float(0.0)
    for j in range(m.default_pose.shape[0]):
        x = wp.max(wp.abs(d.qvel[c.i, 6 + j]) - 2.0 * wp.pi, 0.0)
        e += x * x
    return e


@wp.func
def dof_pos_limits_centred(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                           st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """Joint angles beyond the soft limits ``centre -+ soft_limit * width / 2`` of each
    joint range, summed (Playground's G1, T1, Go1 Getup / Handstand)."""
    soft = c.k[K_SOFT_LIMIT]
    limits = float(0.0)
    for j in range(m.default_pose.shape[0]):
        lo = m.joint_low[j]
        hi = m.joint_high[j]
        mid = (lo + hi) * 0.5
        half = (hi - lo) * 0.5 * soft
        q = d.qpos[c.i, 7 + j]
        limits += -wp.min(q - (mid - half), 0.0) + wp.max(q - (mid + half), 0.0)
    return limits


@wp.func
def energy(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
           act: wp.array2d(dtype=float)) -> float:
    """``sum |qvel| |tau|``."""
    e = float(0.0)
    for j in range(m.default_pose.shape[0]):
        e += wp.abs(d.qvel[c.i, 6 + j]) * wp.abs(d.actuator_force[c.i, j])
    return e


@wp.func
def dof_acc(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
            act: wp.array2d(dtype=float)) -> float:
    """``|joint qacc|^2``."""
    acc = float(0.0)
    for j in range(m.default_pose.shape[0]):
        a = d.qacc[c.i, 6 + j]
        acc += a * a
    return acc


@wp.func
def feet_clearance(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |foot height - foot_height| |foot vel_xy|^(1/2)``."""
    clear = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        fv = sensor3(d.sensordata, c.i, sn.foot_vel[f])
        v2 = fv[0] * fv[0] + fv[1] * fv[1]
        clear += wp.abs(c.foot_z[f] - c.k[K_FOOT_HEIGHT]) * wp.sqrt(wp.sqrt(v2))
    return clear


@wp.func
def _moving(c: Ctx) -> float:
    return wp.where(c.cmd_norm > 0.01, 1.0, 0.0)


@wp.func
def feet_slip(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
              act: wp.array2d(dtype=float)) -> float:
    """``sum |foot vel_xy|^2`` of the feet in contact."""
    slip = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        fv = sensor3(d.sensordata, c.i, sn.foot_vel[f])
        slip += (fv[0] * fv[0] + fv[1] * fv[1]) * c.contact[f]
    return slip


@wp.func
def feet_height(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum (swing peak / foot_height - 1)^2`` at first contacts."""
    height = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        err = st.swing_peak[c.i, f] / c.k[K_FOOT_HEIGHT] - 1.0
        height += err * err * c.first[f]
    return height


@wp.func
def feet_height_moving(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                       st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """:func:`feet_height` if ``|cmd| > 0.01``, else 0."""
    return feet_height(c, m, sn, p, d, st, act) * _moving(c)


@wp.func
def feet_slip_moving(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """:func:`feet_slip` (``sum |foot vel_xy|^2`` of the feet in contact) if ``|cmd| >
    0.01``, else 0."""
    return feet_slip(c, m, sn, p, d, st, act) * _moving(c)


@wp.func
def air_time_sum(c: Ctx, sn: Sensors, st: TaskState) -> float:
    """``sum (air time - 0.1)`` at first contacts (the gated air-time terms' sum)."""
    air = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        air += (st.air_time[c.i, f] - 0.1) * c.first[f]
    return air


@wp.func
def feet_air_time_moving(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                         st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum (air time - 0.1)`` at first contacts, if ``|cmd| > 0.01``."""
    return air_time_sum(c, sn, st) * _moving(c)


@wp.func
def undesired_contacts(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                       st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """The number of penalized contact groups touching (any sensor of the group)."""
    touching = float(0.0)
    for g in range(sn.n_penalized):
        hit = float(0.0)
        for k in range(sn.penalized_start[g], sn.penalized_start[g + 1]):
            if d.sensordata[c.i, sn.penalized[k]] > 0.0:
                hit = 1.0
        touching += hit
    return touching


@wp.func
def base_height(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``(base z - base_height)^2``."""
    bh = d.qpos[c.i, 2] - c.k[K_BASE_HEIGHT]
    return bh * bh


@wp.func
def contact_force(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum max(|foot force_z| - max_force, 0)`` (the feet's force sensors)."""
    force = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        fz = wp.abs(d.sensordata[c.i, sn.foot_force[f] + 2])
        force += wp.max(fz - c.k[K_MAX_FORCE], 0.0)
    return force


@wp.func
def pose_l2(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
            act: wp.array2d(dtype=float)) -> float:
    """``|q - default|^2``."""
    pose = float(0.0)
    for j in range(m.default_pose.shape[0]):
        dq = d.qpos[c.i, 7 + j] - m.default_pose[j]
        pose += dq * dq
    return pose


@wp.func
def any_foot_contact(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams,
                     d: TaskData, st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """1 if a foot touches the floor (its contact sensor), else 0."""
    hit = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        hit = wp.max(hit, c.contact[f])
    return hit


@wp.func
def pose_subset(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams,
                d: TaskData, st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum (q_j - home_j)^2`` over the actuators ``m.index``."""
    pose = float(0.0)
    for k in range(m.index.shape[0]):
        dq = d.qpos[c.i, 7 + m.index[k]] - m.default_pose[m.index[k]]
        pose += dq * dq
    return pose


@wp.func
def alive(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
          act: wp.array2d(dtype=float)) -> float:
    """1."""
    return 1.0


@wp.func
def ang_vel_l2(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``|global angvel|^2`` (3 axes)."""
    return wp.dot(c.gang, c.gang)


@wp.func
def lin_vel_xy(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``|global linvel_xy|^2``."""
    return c.glin[0] * c.glin[0] + c.glin[1] * c.glin[1]


# ----------------------------------------------------------------- termination terms
@wp.func
def joint_out_of_range(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                       st: TaskState) -> bool:
    """An actuated joint strictly outside its range."""
    out = bool(False)
    for j in range(m.default_pose.shape[0]):
        q = d.qpos[c.i, 7 + j]
        if q < m.joint_low[j] or q > m.joint_high[j]:
            out = True
    return out


@wp.func
def upside_down(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState) -> bool:
    """The upvector's z below 0."""
    return c.up[2] < 0.0


@wp.func
def tilted(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
           st: TaskState) -> bool:
    """The upvector's z below ``up_min``, when ``early_termination`` > 0.5."""
    return c.k[K_EARLY_TERMINATION] > 0.5 and c.up[2] < c.k[K_UP_MIN]


@wp.func
def contact_terminating(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                        st: TaskState) -> bool:
    """A terminating contact sensor touching, when ``terminate_contact`` > 0.5."""
    done = bool(False)
    for k in range(sn.n_terminating):
        if d.sensordata[c.i, sn.terminating[k]] > 0.0 and c.k[K_TERMINATE_CONTACT] > 0.5:
            done = True
    return done


@wp.func
def nan_state(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
              st: TaskState) -> bool:
    """A NaN in ``qpos`` or ``qvel``."""
    done = bool(False)
    for k in range(d.qpos.shape[1]):
        if wp.isnan(d.qpos[c.i, k]):
            done = True
    for k in range(d.qvel.shape[1]):
        if wp.isnan(d.qvel[c.i, k]):
            done = True
    return done


# ----------------------------------------------------------------- state laws
@wp.func
def no_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState, h: wp.uint32):
    """A task without state of its own to reset (no command)."""
    pass


@wp.func
def no_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """A task without state of its own to update."""
    pass


# ----------------------------------------------------------------- commands
@wp.func
def command_draw(h: wp.uint32, p: TaskParams, i: int) -> wp.vec3:
    """A command ``U(command_low_k, command_high_k)`` per component (``p.cmd`` rows
    ``CMD_LOW``, ``CMD_HIGH``); 3 draws from ``h``. With ``low = -a``, ``high = a`` it is
    bit for bit the symmetric ``U(-a, a)`` (``uniform_in``: ``(high - low) u + low``)."""
    c = wp.vec3(0.0)
    for k in range(3):
        c[k] = uniform_in(h, p.cmd[CMD_LOW + k, i], p.cmd[CMD_HIGH + k, i])
        h = next_bits(h)
    return c


@wp.func
def command_drawn(c: Ctx, p: TaskParams, st: TaskState, step: int):
    """After a command law drew a command (at a reset: ``step`` ``RESET_STEP``; at a
    resample: the step): with probability ``rel_standing_envs`` the env stands (command 0,
    no heading), else with probability ``rel_heading_envs`` it is a heading env, its target
    ``U(heading_range)``. 3 draws of its own stream; nothing without a command block."""
    i = c.i
    if p.cmd.shape[0] == 0:
        return
    h = step_bits(c.seed, c.gid, STREAM_COMMAND_MODE, c.episode, step)
    standing = uniform(h) < p.cmd[CMD_STANDING, i]
    h = next_bits(h)
    heading = uniform(h) < p.cmd[CMD_HEADING_ENVS, i]
    h = next_bits(h)
    st.heading[i, 1] = uniform_in(h, p.cmd[CMD_HEADING, i], p.cmd[CMD_HEADING + 1, i])
    st.heading[i, 0] = 0.0
    if standing:
        for k in range(3):
            st.command[i, k] = 0.0
    elif heading:
        st.heading[i, 0] = 1.0


@wp.func
def base_yaw(d: TaskData, i: int) -> float:
    """The free-joint base's yaw (of ``qpos[3:7]``, w x y z), in ``[-pi, pi]``."""
    w = d.qpos[i, 3]
    x = d.qpos[i, 4]
    y = d.qpos[i, 5]
    z = d.qpos[i, 6]
    return wp.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


@wp.func
def command_now(p: TaskParams, st: TaskState, i: int) -> wp.vec3:
    """The command env ``i`` follows: ``command_value`` while ``command_fixed`` is 1, else
    its command state."""
    if p.cmd[CMD_FIXED, i] > 0.5:
        return wp.vec3(p.cmd[CMD_VALUE, i], p.cmd[CMD_VALUE + 1, i], p.cmd[CMD_VALUE + 2, i])
    return wp.vec3(st.command[i, 0], st.command[i, 1], st.command[i, 2])


@wp.func
def command_steer(c: Ctx, p: TaskParams, d: TaskData, st: TaskState):
    """After the command laws (a reset, a step), IsaacLab's ``heading_command``: a heading
    env's yaw rate is ``clip(heading_stiffness * wrap(target - yaw), command_low_2,
    command_high_2)`` (``wrap`` to ``[-pi, pi]``); then a pinned env (``command_fixed`` 1)
    gets ``command_value``."""
    i = c.i
    if st.heading[i, 0] > 0.5:
        err = st.heading[i, 1] - base_yaw(d, i)
        err = wp.atan2(wp.sin(err), wp.cos(err))
        st.command[i, 2] = wp.clamp(p.cmd[CMD_STIFFNESS, i] * err, p.cmd[CMD_LOW + 2, i],
                                    p.cmd[CMD_HIGH + 2, i])
    cmd = command_now(p, st, i)
    for k in range(3):
        st.command[i, k] = cmd[k]


@wp.func
def command_countdown_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData,
                            st: TaskState, h: wp.uint32):
    """Playground's Go1 command at a reset: ``U(low, high)`` per component
    (:func:`command_draw`; Playground's ``U(-a, a)`` by default), countdown
    ``round(Exponential(1) * cmd_resample / dt)`` steps (4 draws)."""
    i = c.i
    cmd = command_draw(h, p, i)
    for k in range(3):
        st.command[i, k] = cmd[k]
        h = next_bits(h)
    st.countdown[i] = exponential_steps(h, c.k[K_CMD_RESAMPLE], c.dt)


@wp.func
def command_countdown_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData,
                             st: TaskState):
    """Playground's Go1 command law after a step: when the countdown ends each component
    is kept with probability ``cmd_keep``, else redrawn ``U(low_k, high_k)`` with
    probability ``cmd_prob[k]`` or 0 (9 draws; then :func:`command_drawn`); the countdown
    is redrawn then and at a termination."""
    i = c.i
    left = st.countdown[i] - 1
    hc = step_bits(c.seed, c.gid, STREAM_COMMAND, c.episode, c.step)
    if left <= 0:
        h = hc
        for k in range(3):
            y = uniform_in(h, p.cmd[CMD_LOW + k, i], p.cmd[CMD_HIGH + k, i])
            h = next_bits(h)
            z = uniform(h) < p.cmd_prob[k, i]
            h = next_bits(h)
            replace = uniform(h) >= c.k[K_CMD_KEEP]
            h = next_bits(h)
            if replace:
                st.command[i, k] = wp.where(z, y, 0.0)
        command_drawn(c, p, st, c.step)
    if left <= 0 or c.done:
        for _k in range(9):  # past the resample's draws
            hc = next_bits(hc)
        left = exponential_steps(hc, c.k[K_CMD_RESAMPLE], c.dt)
    st.countdown[i] = left


@wp.func
def command_interval_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData,
                           st: TaskState, h: wp.uint32):
    """A command ``U(-a, a)`` per component (``cmd_range``), all 0 with probability
    ``cmd_zero_prob`` (4 draws); the step counter ``countdown`` 0."""
    cmd = reset_command(h, p.cmd_range, c.i)
    for _k in range(3):
        h = next_bits(h)
    zero = uniform(h) < c.k[K_CMD_ZERO_PROB]
    for k in range(3):
        st.command[c.i, k] = wp.where(zero, 0.0, cmd[k])
    st.countdown[c.i] = 0


@wp.func
def command_interval_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData,
                            st: TaskState):
    """A new command (as at a reset) once the step counter passes ``cmd_resample`` steps;
    the counter is zeroed then and at a termination (Playground's Spot)."""
    n = st.countdown[c.i] + 1
    if float(n) > c.k[K_CMD_RESAMPLE]:
        command_interval_reset(c, m, p, d, st,
                               step_bits(c.seed, c.gid, STREAM_COMMAND, c.episode, c.step))
        n = 0
    if c.done:
        n = 0
    st.countdown[c.i] = n


# the gait law of Playground's gait tracking tasks (``gait.py``)
PI = wp.constant(3.14159265358979)


@wp.func
def obs_gait(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
             act: wp.array2d(dtype=float), j: int) -> float:
    """Gait frequency (Hz), gait index, swing height (m) (3)."""
    if j == 0:
        return st.gait_freq[c.i]
    return wp.where(j == 1, float(st.gait[c.i]), st.foot_height[c.i])


@wp.func
def _bezier(x: float) -> float:
    return x * x * x + 3.0 * x * x * (1.0 - x)


@wp.func
def foot_target(phase: float, height: float) -> float:
    """Playground's ``gait.get_rz``: the target foot height at gait ``phase`` (radians in
    [-pi, pi)), a cubic Bezier from 0 at -pi up to ``height`` at 0 and back to 0 at pi."""
    x = (phase + PI) / (2.0 * PI)
    if x <= 0.5:
        return height * _bezier(2.0 * x)
    return height + (0.0 - height) * _bezier(2.0 * x - 1.0)


@wp.func
def phase_error(c: Ctx, sn: Sensors, st: TaskState, height: float) -> float:
    """``sum_feet (foot z - foot_target(phase, height))^2`` (the feet-phase terms' error)."""
    err = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        dz = c.foot_z[f] - foot_target(st.phase[c.i, f], height)
        err += dz * dz
    return err


@wp.func
def feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum (foot z - rz(phase))^2 / sigma)`` (sigma: ``extra`` row 4, ``rz``:
    :func:`foot_target` of the drawn swing height)."""
    return wp.exp(-phase_error(c, sn, st, st.foot_height[c.i]) / p.extra[4, c.i])


@wp.func
def gait_offset(g: int, f: int) -> float:
    """Foot ``f``'s (FL, FR, HL, HR) phase in gait ``g`` (trot, walk, pace, bound, pronk)."""
    if g == 0:
        return wp.where(f == 1 or f == 2, PI, 0.0)
    if g == 1:
        return float(f) * 0.5 * PI
    if g == 2:
        return wp.where(f == 1 or f == 3, PI, 0.0)
    return wp.where(g == 3 and f >= 2, PI, 0.0)


@wp.func
def gait_draw(c: Ctx, st: TaskState, h: wp.uint32, freq_low: float, freq_high: float,
              gaits: float, height_low: float, height_high: float) -> int:
    """Playground's gait draws (``gait.py``) from ``h`` and its next two bits: frequency
    ``U(freq_low, freq_high)`` Hz (phase advance ``2 pi dt f``), gait ``min(floor(U(0,
    gaits)), gaits - 1)``, swing height ``U(height_low, height_high)`` m, written to the
    task state; returns the gait."""
    i = c.i
    f = uniform_in(h, freq_low, freq_high)
    h = next_bits(h)
    g = wp.max(wp.min(int(wp.floor(uniform_in(h, 0.0, gaits))), int(gaits) - 1), 0)
    h = next_bits(h)
    st.foot_height[i] = uniform_in(h, height_low, height_high)
    st.gait_freq[i] = f
    st.gait[i] = g
    st.phase_dt[i] = 2.0 * PI * c.dt * f
    return g


@wp.func
def gait_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
               h: wp.uint32):
    """After the command's 4 draws: :func:`gait_draw` of the 5 gaits (``extra`` rows 0-3:
    frequency low, high, height low, high); the feet's phases the gait's (Playground's
    ``gait.py``)."""
    i = c.i
    for _k in range(4):
        h = next_bits(h)
    g = gait_draw(c, st, h, p.extra[0, i], p.extra[1, i], 5.0, p.extra[2, i], p.extra[3, i])
    for f in range(st.phase.shape[1]):
        st.phase[i, f] = gait_offset(g, f)


@wp.func
def gait_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """Each foot's phase advances by ``phase_dt``, wrapped to ``[-pi, pi)``."""
    for f in range(st.phase.shape[1]):
        st.phase[c.i, f] = wp.mod(st.phase[c.i, f] + st.phase_dt[c.i] + PI, 2.0 * PI) - PI



# ----------------------------------------------------------------- the task kernel
def make_task_kernel(spec: tuple) -> wp.Kernel:
    """The task kernel of a config (``gpuparam.envs.mujoco.legged_task.LeggedTaskConfig``,
    compiled by its ``kernel_spec``): ``spec`` is ``(nfeet, consts, obs, priv, rewards,
    terminations, resets, updates, reward_clip, has_command, progress_always,
    reward_exp)`` with

    - ``consts``: ``((k, block, row, default), ...)``: ``Ctx.k[k]`` from row ``row`` of
      block ``block`` (``block_value``; -1: ``default``);
    - ``obs``: ``((size, value, bias, noise_row), ...)`` (``bias`` a term or None;
      ``noise_row`` -1: no noise); ``priv``: ``((size, value), ...)``;
    - ``rewards``, ``terminations``: tuples of terms; ``resets``, ``updates``: tuples of
      laws, run in order (each reset law gets the same task-reset bits ``h``);
    - ``reward_exp``: None (the reward is the sum) or ``(coef, in_exp)``, ``in_exp`` one
      bool per reward term (the terms in the exponent);
    - ``reward_clip``: clip the reward to ``[0, 1e4]``; ``has_command``: 0 none, 1 read
      ``st.command``, 2 also the command block ``params.cmd`` (after the reset laws
      :func:`command_drawn` then :func:`command_steer`; after the update laws
      :func:`command_steer`; the command read is :func:`command_now`);
      ``progress_always``: the terrain metric also without a terrain.

    Cached per spec: one Warp module per config (compiled once, cached on disk)."""
    return _make(spec)


@cache
def _make(spec: tuple) -> wp.Kernel:
    (nfeet, consts, obs, priv, rewards, terminations, resets, updates, reward_clip,
     has_command, progress_always, reward_exp) = spec
    nterms = len(rewards)
    exp_coef, in_exp = (0.0, (False,) * nterms) if reward_exp is None else reward_exp
    termvec = wp.types.vector(length=max(nterms, 1), dtype=float)

    # every wp.static sits in the kernel itself (its module hash covers them)
    # a unique module is named after the kernel's qualified name: "gpuparam_..." (set
    # below) so that gpuparam's launch accounting (benchmarks/budgets.py counts modules
    # named gpuparam*) sees it as ours
    def gpuparam_legged_task(
        # Model:
        model: TaskModel,
        sn: Sensors,
        tr: Terrain,
        params: TaskParams,
        # Data in:
        mode: int,
        mask: wp.array(dtype=wp.bool),
        keys: StepKeys,
        data: TaskData,
        action: wp.array2d(dtype=float),
        # Data out:
        task_out: TaskState,
        out: TaskOutputs,
    ):
        """The task of one env (module docstring), ``mode`` ``MODE_*``; ``mask`` (bool
        ``[N]``) selects the envs of the reset modes."""
        i = thread_index(wp.tid())
        if mode != MODE_STEP and not mask[i]:
            return
        st = task_out
        sd = data.sensordata
        c = Ctx()
        c.i = i
        c.seed = keys.seed[0]
        c.gid = keys.env_offset + i
        c.episode = keys.episode_count[i] - 1
        c.step = keys.step_count[i]
        c.dt = model.dt
        c.mode = mode
        kv = vec16(0.0)
        for q in range(wp.static(len(consts))):
            kv[wp.static(consts[q][0])] = block_value(
                params, wp.static(consts[q][1]), wp.static(consts[q][2]), i,
                wp.static(consts[q][3]))
        c.k = kv
        c.lvl = params.noise[0, i]
        if mode == MODE_RESET:
            h = rng_key(c.seed, c.gid, STREAM_TASK_RESET, c.episode)
            for t in range(wp.static(len(resets))):
                wp.static(resets[t])(c, model, params, data, st, h)
            if wp.static(has_command == 2):
                command_drawn(c, params, st, RESET_STEP)
                command_steer(c, params, data, st)
            for j in range(st.last_act.shape[1]):
                st.last_act[i, j] = 0.0
            for j in range(st.last_last_act.shape[1]):
                st.last_last_act[i, j] = 0.0
            for j in range(st.qpos_error_history.shape[1]):
                st.qpos_error_history[i, j] = 0.0
            for j in range(st.qvel_history.shape[1]):
                st.qvel_history[i, j] = 0.0
            for f in range(wp.static(nfeet)):
                st.air_time[i, f] = 0.0
                st.swing_peak[i, f] = 0.0
                st.last_contact[i, f] = 0.0
            if st.start_xy.shape[0] > 0:  # kept (the terrain curriculum's state)
                terrain_start(i, data.qpos, st.start_xy, st.cmd_distance, st.metric)
        step = wp.where(mode == MODE_STEP, c.step, RESET_STEP)
        hn = step_bits(c.seed, c.gid, STREAM_OBS_NOISE, c.episode, step)

        # the feet: height above the ground, contact; first contact and timing (a step)
        contact = wp.vec4(0.0)
        first = wp.vec4(0.0)
        foot_z = wp.vec4(0.0)
        for f in range(wp.static(nfeet)):
            p = data.site_xpos[i, sn.foot_site[f]]
            foot_z[f] = p[2] - ground(tr, i, p[0], p[1])
            touch = bool(False)
            for fs in range(sn.found_per_foot):
                adr = sn.foot_found[f * sn.found_per_foot + fs]
                if mode == MODE_STEP:
                    adr = sn.foot_found_step[f * sn.found_per_foot + fs]
                if sd[i, adr] > 0.0:
                    touch = True
            if touch:
                contact[f] = 1.0
            if mode == MODE_STEP:
                air = st.air_time[i, f]
                if air > 0.0 and (touch or st.last_contact[i, f] > 0.5):
                    first[f] = 1.0
                st.air_time[i, f] = air + c.dt
                st.swing_peak[i, f] = wp.max(st.swing_peak[i, f], foot_z[f])
        c.contact = contact
        c.first = first
        c.foot_z = foot_z

        c.lin = sensor3(sd, i, sn.linvel)
        c.gyro = sensor3(sd, i, sn.gyro)
        xm = data.site_xmat[i, sn.imu_site]
        c.grav = wp.vec3(-xm[2, 0], -xm[2, 1], -xm[2, 2])
        c.accel = sensor3(sd, i, sn.accel)
        c.gang = sensor3(sd, i, sn.global_angvel)
        c.glin = sensor3(sd, i, sn.global_linvel)
        c.up = sensor3(sd, i, sn.upvector)
        c.cmd = wp.vec3(0.0)
        if wp.static(has_command == 1):
            c.cmd = wp.vec3(st.command[i, 0], st.command[i, 1], st.command[i, 2])
        if wp.static(has_command == 2):
            c.cmd = command_now(params, st, i)  # a pinned command from the step it is set
        c.cmd_norm = wp.length(c.cmd)

        # observation (noisy terms draw in order), copied into the privileged observation
        col = int(0)
        for t in range(wp.static(len(obs))):
            for j in range(wp.static(obs[t][0])):
                v = wp.static(obs[t][1])(c, model, sn, params, data, st, action, j)
                if wp.static(obs[t][3] >= 0):
                    v = noisy(v, hn, c.lvl, params.noise[wp.static(obs[t][3]), i])
                    hn = next_bits(hn)
                if wp.static(obs[t][2] is not None):
                    v = v - wp.static(obs[t][2])(c, model, sn, params, data, st, action, j)
                out.obs[i, col] = v
                out.priv[i, col] = v
                col += 1
        n_obs = col
        for t in range(wp.static(len(priv))):
            for j in range(wp.static(priv[t][0])):
                out.priv[i, col] = wp.static(priv[t][1])(c, model, sn, params, data, st,
                                                         action, j)
                col += 1
        hn = write_height_scan(tr, i, data.qpos[i, 2], c.k[K_SCAN_OFFSET], c.k[K_SCAN_SCALE],
                               c.lvl, c.k[K_SCAN_NOISE], hn, out.obs, n_obs, out.priv, col)
        if mode != MODE_STEP:
            return
        copy_row(out.obs, out.final_obs, i)

        # termination, then the rewards with it
        done = bool(False)
        for t in range(wp.static(len(terminations))):
            if wp.static(terminations[t])(c, model, sn, params, data, st):
                done = True
        c.done = done
        tv = termvec()
        for t in range(wp.static(nterms)):
            tv[t] = wp.static(rewards[t])(c, model, sn, params, data, st, action)
        total = float(0.0)
        expo = float(0.0)
        for t in range(wp.static(nterms)):
            s = tv[t] * params.scales[t, i]
            out.terms[i, t] = s
            if wp.static(in_exp[t]):
                expo += s
            else:
                total += s
        if wp.static(reward_exp is not None):
            total = total * wp.exp(wp.static(exp_coef) * expo)
        r = total * c.dt
        if wp.static(reward_clip):
            r = wp.where(wp.isnan(r), r, wp.clamp(r, 0.0, 10000.0))  # NaN stays NaN
        out.reward[i] = r
        out.terminated[i] = done
        bad = has_nan(action, i)  # stepped with the zero action: every output NaN
        if bad:
            nan_row(out.obs, i)
            nan_row(out.final_obs, i)
            nan_row(out.priv, i)
            nan_row(out.terms, i)
            out.reward[i] = wp.nan
        if wp.static(progress_always) or tr.on != 0:  # terrain curriculum bookkeeping
            terrain_progress(i, data.qpos, c.cmd[0], c.cmd[1], c.dt, tr.tile, st.start_xy,
                             st.cmd_distance, st.metric)

        # state laws: last actions, the task's own, the feet
        for j in range(st.last_last_act.shape[1]):
            st.last_last_act[i, j] = st.last_act[i, j]
        for j in range(st.last_act.shape[1]):
            st.last_act[i, j] = action_or_zero(action, i, j, bad)  # the action stepped with
        for t in range(wp.static(len(updates))):
            wp.static(updates[t])(c, model, params, data, st)
        if wp.static(has_command == 2):
            command_steer(c, params, data, st)
        for f in range(wp.static(nfeet)):
            if c.contact[f] > 0.5:
                st.air_time[i, f] = 0.0
                st.swing_peak[i, f] = 0.0
            st.last_contact[i, f] = c.contact[f]

    gpuparam_legged_task.__qualname__ = "gpuparam_legged_task"
    return wp.kernel(gpuparam_legged_task, module="unique",
                     module_options={"fuse_fp": False}, enable_backward=False)
