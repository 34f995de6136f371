"""Unitree Go1 velocity tracking (MuJoCo Playground's ``Go1Joystick*Terrain``) on MuJoCo
Warp: observation, privileged observation, the 16 reward terms (plus an undesired-contact
penalty), termination, and the task's state (command and its countdown, last action, foot
air time, swing peak, last contact), one thread per env.

The step follows Playground's ``Joystick.step`` (``locomotion/go1/joystick.py``) after the
physics: contacts from the feet's contact sensors, ``first_contact`` from the air time
before this step's increment, air time ``+= dt``, swing peak, observation (with this step's
command and the previous action), termination (base upside down), rewards with this step's
termination, then the state updates (last action, command countdown and resampling, air
time and swing peak cleared on contact, last contact). Sensors are read from
``sensordata`` where MuJoCo Warp's last substep left them (the start of that substep), as
Playground does.
"""

from __future__ import annotations

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
    resample_command,
    reset_command,
    step_bits,
    terrain_progress,
    terrain_start,
    write_height_scan,
)
from gpuparam.kernels.locomotion import copy_row
from gpuparam.kernels.rng import next_bits, rng_key

wp.set_module_options({"fuse_fp": False})

NUM_TERMS = wp.constant(17)
# the reward terms, in the order of ``go1.REWARD_TERMS`` (envpool's config order)
vec17 = wp.types.vector(length=17, dtype=float)

# rows of the ``noise`` block: level, then the scales of the noisy terms
N_LEVEL = wp.constant(0)
N_LINVEL = wp.constant(1)
N_GYRO = wp.constant(2)
N_GRAVITY = wp.constant(3)
N_JOINT_POS = wp.constant(4)
N_JOINT_VEL = wp.constant(5)
N_HEIGHT = wp.constant(6)

# rows of the ``consts`` block
C_SIGMA = wp.constant(0)
C_FOOT_HEIGHT = wp.constant(1)
C_SOFT_LIMIT = wp.constant(2)
C_KEEP = wp.constant(3)
C_RESAMPLE = wp.constant(4)
C_SCAN_OFFSET = wp.constant(5)
C_SCAN_SCALE = wp.constant(6)
C_TERMINATE_CONTACT = wp.constant(7)


@wp.struct
class Sensors:
    """Where the task reads MuJoCo Warp's data: ``sensordata`` addresses of the imu
    sensors, per foot (FR, FL, RR, RL) the address of its floor-contact sensor and of its
    global linear velocity, the foot and imu site ids, the base body, the undesired-contact
    sensors: ``n_penalized`` bodies, body ``b``'s sensors ``penalized[penalized_start[b] :
    penalized_start[b + 1]]``, and ``n_terminating`` sensors ``terminating`` (arrays of
    size >= 1 even when empty)."""

    gyro: int
    linvel: int
    accel: int
    upvector: int
    global_linvel: int
    global_angvel: int
    imu_site: int
    base_body: int
    foot_found: wp.array(dtype=int)
    foot_vel: wp.array(dtype=int)
    foot_site: wp.array(dtype=int)
    n_penalized: int
    penalized: wp.array(dtype=int)
    penalized_start: wp.array(dtype=int)
    n_terminating: int
    terminating: wp.array(dtype=int)


@wp.struct
class TaskState:
    """The task's per-env state (``[N, ...]``): command (vx, vy, yaw rate) and its
    countdown in steps, the previous action, per foot (FR, FL, RR, RL) air time, swing
    peak and last contact (0/1), and for the terrain curriculum the episode's start xy, the
    commanded distance so far, and the metric (+1 promote, -1 demote, 0 stay)."""

    command: wp.array2d(dtype=float)
    countdown: wp.array(dtype=wp.int32)
    last_act: wp.array2d(dtype=float)
    air_time: wp.array2d(dtype=float)
    swing_peak: wp.array2d(dtype=float)
    last_contact: wp.array2d(dtype=float)
    start_xy: wp.array2d(dtype=float)
    cmd_distance: wp.array(dtype=float)
    metric: wp.array(dtype=float)


@wp.func
def _vec(sd: wp.array2d(dtype=float), i: int, adr: int) -> wp.vec3:
    return wp.vec3(sd[i, adr], sd[i, adr + 1], sd[i, adr + 2])


@wp.func
def _reset_task(i: int, h: wp.uint32, dt: float, qpos: wp.array2d(dtype=float),
                consts: wp.array2d(dtype=float), cmd_range: wp.array2d(dtype=float),
                st: TaskState):
    """Playground's reset of env ``i``'s task state (draws from ``h``): command ``U(-a,
    a)``, countdown ``round(Exponential(1) * resample_time / dt)``, last action, air time,
    swing peak and last contact zero; the episode's start xy (terrain curriculum)."""
    c = reset_command(h, cmd_range, i)
    for k in range(3):
        st.command[i, k] = c[k]
        h = next_bits(h)
    st.countdown[i] = exponential_steps(h, consts[C_RESAMPLE, i], dt)
    for j in range(st.last_act.shape[1]):
        st.last_act[i, j] = 0.0
    for f in range(4):
        st.air_time[i, f] = 0.0
        st.swing_peak[i, f] = 0.0
        st.last_contact[i, f] = 0.0
    terrain_start(i, qpos, st.start_xy, st.cmd_distance, st.metric)


@wp.struct
class Go1Model:
    """Constants of the model: seconds per env step; per actuated joint (``[nu]``) the
    default pose, the joint range (low, high) and the pose reward's weight."""

    dt: float
    default_pose: wp.array(dtype=float)
    joint_low: wp.array(dtype=float)
    joint_high: wp.array(dtype=float)
    pose_weight: wp.array(dtype=float)


@wp.struct
class Go1Params:
    """The parameter rows the task reads (views of the effective table): the reward
    scales ``[17, N]``, the ``noise`` block ``[7, N]`` (rows ``N_*``), the ``consts`` block
    ``[8, N]`` (rows ``C_*``), ``command_range`` and ``command_nonzero_prob`` ``[3, N]``."""

    scales: wp.array2d(dtype=float)
    noise: wp.array2d(dtype=float)
    consts: wp.array2d(dtype=float)
    cmd_range: wp.array2d(dtype=float)
    cmd_nonzero: wp.array2d(dtype=float)


@wp.struct
class Go1Data:
    """What the task reads of MuJoCo Warp's data (``[N, ...]``), and the kick state
    ``[N, 4]`` (``kernels.legged.pre_step``)."""

    qpos: wp.array2d(dtype=float)
    qvel: wp.array2d(dtype=float)
    sensordata: wp.array2d(dtype=float)
    site_xpos: wp.array2d(dtype=wp.vec3)
    site_xmat: wp.array2d(dtype=wp.mat33)
    actuator_force: wp.array2d(dtype=float)
    xfrc_applied: wp.array2d(dtype=wp.spatial_vector)
    kick_i: wp.array2d(dtype=wp.int32)


@wp.struct
class Go1Outputs:
    """The step's outputs: observation ``[N, 48 + P]`` (its copy as the final
    observation), privileged observation ``[N, 123 + P]``, scaled reward terms ``[N, 17]``,
    reward and terminated ``[N]``."""

    obs: wp.array2d(dtype=float)
    final_obs: wp.array2d(dtype=float)
    priv: wp.array2d(dtype=float)
    terms: wp.array2d(dtype=float)
    reward: wp.array(dtype=float)
    terminated: wp.array(dtype=wp.bool)


@wp.kernel
def go1(
    # Model:
    model: Go1Model,
    sn: Sensors,
    tr: Terrain,
    params: Go1Params,
    # Data in:
    observe: int,
    mask: wp.array(dtype=wp.bool),
    keys: StepKeys,
    data: Go1Data,
    action: wp.array2d(dtype=float),
    # Data out:
    task_out: TaskState,
    out: Go1Outputs,
):
    """``observe`` = 0: after a step, every env: the whole step of the task (module
    docstring). ``observe`` = 1: after a reset (the base reset, whose episode index the
    draws key on, and ``mj_forward`` run), masked envs: the task state's reset
    (:func:`_reset_task`), then the observation and privileged observation only;
    ``observe`` = 2: those observations only, from the current data and task state.

    Observation ``[N, 48 + P]``: local linear velocity, gyro, gravity in the imu frame,
    joint angles minus the default pose, joint velocities (each with uniform noise ``level
    * scale``), previous action, command; then P height-scan values ``clip(base_z - offset
    - h, -1, 1)`` (noisy) times ``scale``. Privileged ``[N, 123 + P]``: the observation's
    first 48, then noise-free gyro, accelerometer, gravity, local linear velocity, global
    angular velocity, joint angles minus default, joint velocities, actuator forces, last
    contact (4), feet global linear velocities (4 x 3), air time (4), the kick force on
    the base (3), kicking (1); then the noise-free scan. ``terms_out`` ``[N, 17]``: each
    term times its scale (before the sum, ``dt`` and the clip); ``reward = clip(sum * dt, 0,
    1e4)`` (NaN when the sum is NaN). An env whose action has a NaN component (stepped with
    the zero action, ``kernels.legged.pre_step``) gets NaN in every value of its
    observations, terms and reward, and the zero action as its last action."""
    # the bundles' fields under the names the math below reads (views: no copies)
    dt = model.dt
    default_pose, joint_low, joint_high = model.default_pose, model.joint_low, model.joint_high
    pose_weight = model.pose_weight
    scales, noise, consts = params.scales, params.noise, params.consts
    cmd_range, cmd_nonzero = params.cmd_range, params.cmd_nonzero
    seed, env_offset = keys.seed, keys.env_offset
    episode_count, step_count = keys.episode_count, keys.step_count
    qpos, qvel, sensordata = data.qpos, data.qvel, data.sensordata
    site_xpos, site_xmat = data.site_xpos, data.site_xmat
    actuator_force, xfrc_applied, kick_i = data.actuator_force, data.xfrc_applied, data.kick_i
    st = task_out
    obs_out, final_obs_out, priv_out = out.obs, out.final_obs, out.priv
    terms_out, reward_out, terminated_out = out.terms, out.reward, out.terminated
    i = thread_index(wp.tid())
    if observe != 0 and not mask[i]:
        return
    gid = env_offset + i
    if observe == 1:
        h = rng_key(seed[0], gid, STREAM_TASK_RESET, episode_count[i] - 1)
        _reset_task(i, h, dt, qpos, consts, cmd_range, st)
    nu = default_pose.shape[0]
    step = wp.where(observe == 0, step_count[i], RESET_STEP)
    hn = step_bits(seed[0], gid, STREAM_OBS_NOISE, episode_count[i] - 1, step)

    # contacts and foot timing (a step only)
    contact = wp.vec4(0.0)
    first = wp.vec4(0.0)
    foot_z = wp.vec4(0.0)
    for f in range(4):
        p = site_xpos[i, sn.foot_site[f]]
        foot_z[f] = p[2] - ground(tr, i, p[0], p[1])
        if observe == 0:
            c = sensordata[i, sn.foot_found[f]] > 0.0
            if c:
                contact[f] = 1.0
            air = st.air_time[i, f]
            if air > 0.0 and (c or st.last_contact[i, f] > 0.5):
                first[f] = 1.0
            st.air_time[i, f] = air + dt
            st.swing_peak[i, f] = wp.max(st.swing_peak[i, f], foot_z[f])

    # observation: noisy local linear velocity, gyro, gravity, joint angles minus the
    # default pose, joint velocities (in that draw order), the previous action, the command
    sd = sensordata
    lin = _vec(sd, i, sn.linvel)
    gyro = _vec(sd, i, sn.gyro)
    xm = site_xmat[i, sn.imu_site]
    grav = wp.vec3(-xm[2, 0], -xm[2, 1], -xm[2, 2])
    imu = wp.matrix_from_rows(lin, gyro, grav)
    lvl = noise[N_LEVEL, i]
    cmd = wp.vec3(st.command[i, 0], st.command[i, 1], st.command[i, 2])
    for k in range(12 + 3 * nu):
        v = float(0.0)
        if k < 9:  # rows N_LINVEL, N_GYRO, N_GRAVITY
            v = noisy(imu[k // 3, k % 3], hn, lvl, noise[N_LINVEL + k // 3, i])
        elif k < 9 + nu:
            v = noisy(qpos[i, 7 + k - 9], hn, lvl, noise[N_JOINT_POS, i]) - default_pose[k - 9]
        elif k < 9 + 2 * nu:
            v = noisy(qvel[i, 6 + k - 9 - nu], hn, lvl, noise[N_JOINT_VEL, i])
        elif k < 9 + 3 * nu:
            v = st.last_act[i, k - 9 - 2 * nu]
        else:
            v = cmd[k - 9 - 3 * nu]
        if k < 9 + 2 * nu:
            hn = next_bits(hn)
        obs_out[i, k] = v
        priv_out[i, k] = v
    n_state = 12 + 3 * nu
    # privileged, noise-free
    p0 = n_state
    accel = _vec(sd, i, sn.accel)
    gang = _vec(sd, i, sn.global_angvel)
    for k in range(3):
        priv_out[i, p0 + k] = gyro[k]
        priv_out[i, p0 + 3 + k] = accel[k]
        priv_out[i, p0 + 6 + k] = grav[k]
        priv_out[i, p0 + 9 + k] = lin[k]
        priv_out[i, p0 + 12 + k] = gang[k]
    p0 = p0 + 15
    for j in range(nu):
        priv_out[i, p0 + j] = qpos[i, 7 + j] - default_pose[j]
        priv_out[i, p0 + nu + j] = qvel[i, 6 + j]
        priv_out[i, p0 + 2 * nu + j] = actuator_force[i, j]
    p0 = p0 + 3 * nu
    for f in range(4):
        priv_out[i, p0 + f] = st.last_contact[i, f]
        fv = _vec(sd, i, sn.foot_vel[f])
        for k in range(3):
            priv_out[i, p0 + 4 + 3 * f + k] = fv[k]
        priv_out[i, p0 + 16 + f] = st.air_time[i, f]
    p0 = p0 + 20
    xf = xfrc_applied[i, sn.base_body]
    for k in range(3):
        priv_out[i, p0 + k] = xf[k]
    priv_out[i, p0 + 3] = wp.where(kick_i[i, 0] >= kick_i[i, 1], 1.0, 0.0)
    p0 = p0 + 4
    # height scan
    hn = write_height_scan(tr, i, qpos[i, 2], consts[C_SCAN_OFFSET, i],
                           consts[C_SCAN_SCALE, i], lvl, noise[N_HEIGHT, i], hn, obs_out,
                           n_state, priv_out, p0)
    if observe != 0:
        return
    copy_row(obs_out, final_obs_out, i)

    # termination
    up = _vec(sd, i, sn.upvector)
    done = up[2] < 0.0
    for c in range(sn.n_terminating):
        if sd[i, sn.terminating[c]] > 0.0 and consts[C_TERMINATE_CONTACT, i] > 0.5:
            done = True

    # rewards
    sigma = consts[C_SIGMA, i]
    max_h = consts[C_FOOT_HEIGHT, i]
    soft = consts[C_SOFT_LIMIT, i]
    cmd_norm = wp.length(cmd)
    moving = wp.where(cmd_norm > 0.01, 1.0, 0.0)
    still = wp.where(cmd_norm < 0.01, 1.0, 0.0)
    glin = _vec(sd, i, sn.global_linvel)
    e0 = cmd[0] - lin[0]
    e1 = cmd[1] - lin[1]
    ea = cmd[2] - gyro[2]
    limits = float(0.0)
    pose = float(0.0)
    stand = float(0.0)
    tau2 = float(0.0)
    tau1 = float(0.0)
    rate = float(0.0)
    energy = float(0.0)
    for j in range(nu):
        q = qpos[i, 7 + j]
        limits += -wp.min(q - joint_low[j] * soft, 0.0) + wp.max(q - joint_high[j] * soft, 0.0)
        dq = q - default_pose[j]
        pose += dq * dq * pose_weight[j]
        stand += wp.abs(dq)
        tau = actuator_force[i, j]
        tau2 += tau * tau
        tau1 += wp.abs(tau)
        da = action[i, j] - st.last_act[i, j]
        rate += da * da
        energy += wp.abs(qvel[i, 6 + j]) * wp.abs(tau)
    clear = float(0.0)
    height = float(0.0)
    slip = float(0.0)
    air_r = float(0.0)
    for f in range(4):
        fv = _vec(sd, i, sn.foot_vel[f])
        v2 = fv[0] * fv[0] + fv[1] * fv[1]
        clear += wp.abs(foot_z[f] - max_h) * wp.sqrt(wp.sqrt(v2))
        err = st.swing_peak[i, f] / max_h - 1.0
        height += err * err * first[f]
        slip += v2 * contact[f]
        air_r += (st.air_time[i, f] - 0.1) * first[f]
    touching = float(0.0)
    for c in range(sn.n_penalized):
        hit = float(0.0)
        for k in range(sn.penalized_start[c], sn.penalized_start[c + 1]):
            if sd[i, sn.penalized[k]] > 0.0:
                hit = 1.0
        touching += hit
    t = vec17(
        wp.exp(-(e0 * e0 + e1 * e1) / sigma),  # tracking_lin_vel
        wp.exp(-(ea * ea) / sigma),  # tracking_ang_vel
        glin[2] * glin[2],  # lin_vel_z
        gang[0] * gang[0] + gang[1] * gang[1],  # ang_vel_xy
        up[0] * up[0] + up[1] * up[1],  # orientation
        limits,  # dof_pos_limits
        wp.exp(-pose),  # pose
        wp.where(done, 1.0, 0.0),  # termination
        stand * still,  # stand_still
        wp.sqrt(tau2) + tau1,  # torques
        rate,  # action_rate
        energy,  # energy
        clear,  # feet_clearance
        height * moving,  # feet_height
        slip * moving,  # feet_slip
        air_r * moving,  # feet_air_time
        touching,  # undesired_contacts
    )
    total = float(0.0)
    for k in range(NUM_TERMS):
        s = t[k] * scales[k, i]
        terms_out[i, k] = s
        total += s
    r = total * dt
    reward_out[i] = wp.where(wp.isnan(r), r, wp.clamp(r, 0.0, 10000.0))  # NaN stays NaN
    terminated_out[i] = done
    bad = has_nan(action, i)  # stepped with the zero action: every output NaN
    if bad:
        nan_row(obs_out, i)
        nan_row(final_obs_out, i)
        nan_row(priv_out, i)
        nan_row(terms_out, i)
        reward_out[i] = wp.nan

    # terrain curriculum bookkeeping: distance walked vs commanded
    terrain_progress(i, qpos, cmd[0], cmd[1], dt, tr.tile, st.start_xy, st.cmd_distance,
                     st.metric)

    # state updates
    for j in range(nu):
        st.last_act[i, j] = action_or_zero(action, i, j, bad)  # the action stepped with
    left = st.countdown[i] - 1
    hc = step_bits(seed[0], gid, STREAM_COMMAND, episode_count[i] - 1, step_count[i])
    if left <= 0:
        cmd = resample_command(hc, cmd, cmd_range, cmd_nonzero, consts[C_KEEP, i], i)
        for k in range(3):
            st.command[i, k] = cmd[k]
    if left <= 0 or done:
        for _k in range(9):  # past the resample's draws
            hc = next_bits(hc)
        left = exponential_steps(hc, consts[C_RESAMPLE, i], dt)
    st.countdown[i] = left
    for f in range(4):
        if contact[f] > 0.5:
            st.air_time[i, f] = 0.0
            st.swing_peak[i, f] = 0.0
        st.last_contact[i, f] = contact[f]
