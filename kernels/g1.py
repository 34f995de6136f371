"""Unitree G1 velocity tracking (MuJoCo Playground's ``G1Joystick*Terrain``) on MuJoCo
Warp: observation, privileged observation, the 24 reward terms, termination, the gait
phase, Playground's pushes, and the task's state (command and its step counter, last
action, foot air time, swing peak, last contact, phase, push timer), one thread per env.

The step follows Playground's ``Joystick.step`` (``locomotion/g1/joystick.py``) after the
physics: contacts from the feet's contact sensors, ``first_contact`` from the air time
before this step's increment, air time ``+= dt``, swing peak, observation (this step's
command, the previous action, the phase before its advance), termination (torso upside
down, a foot touching the other foot or shin, NaN), rewards with this step's
termination, then the state updates (step counters, air time and swing peak cleared on
contact, phase advance, last action, the command resampled after 500 steps). Playground
pushes at the start of a step, before the physics; here the same push is written into
``qvel`` at the end of the step before it (the auto-reset of a finished episode then
overwrites it, as Playground's reset does). Sensors are read from ``sensordata`` where
MuJoCo Warp's last substep left them (the start of that substep), as Playground does.
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
    ground,
    noisy,
    round_steps,
    step_bits,
    terrain_progress,
    terrain_start,
    write_height_scan,
)
from gpuparam.kernels.locomotion import copy_row
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, rng_key, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

# the stream of Playground's pushes (the legged streams use + 1 .. + 4)
STREAM_PUSH = wp.constant(STREAM_TERM0 + (1 << 20) + 5)
NUM_TERMS = wp.constant(24)
# the reward terms, in the order of ``g1.REWARD_TERMS`` (envpool's config order)
vec24 = wp.types.vector(length=24, dtype=float)
PI = wp.constant(3.14159265358979)

# rows of the ``noise`` block: level, then the scales of the noisy terms
N_LEVEL = wp.constant(0)
N_LINVEL = wp.constant(1)
N_GYRO = wp.constant(2)
N_GRAVITY = wp.constant(3)
N_JOINT_POS = wp.constant(4)
N_JOINT_VEL = wp.constant(5)

# rows of the ``consts`` block
C_SIGMA = wp.constant(0)
C_FOOT_HEIGHT = wp.constant(1)
C_BASE_HEIGHT = wp.constant(2)
C_MAX_FORCE = wp.constant(3)
C_ZERO_PROB = wp.constant(4)
C_RESAMPLE = wp.constant(5)
C_PUSH = wp.constant(6)
C_SOFT_LIMIT = wp.constant(7)

# rows of the ``scan`` block (a terrain env's height scan)
S_NOISE = wp.constant(0)
S_OFFSET = wp.constant(1)
S_SCALE = wp.constant(2)


@wp.struct
class G1Sensors:
    """Where the task reads MuJoCo Warp's data: ``sensordata`` addresses of the pelvis imu
    (gyro, local linear velocity, accelerometer, global linear and angular velocity), of
    the torso's upvector and global velocities, the pelvis imu site; per foot (left,
    right) its site, floor-contact sensor, global linear velocity and force sensors; the 3
    terminating contact sensors (foot on foot or shin) and the 2 hand-thigh collision
    sensors."""

    gyro: int
    linvel: int
    accel: int
    global_linvel: int
    global_angvel: int
    upvector: int
    torso_linvel: int
    torso_angvel: int
    imu_site: int
    foot_site: wp.array(dtype=int)
    foot_found: wp.array(dtype=int)
    foot_vel: wp.array(dtype=int)
    foot_force: wp.array(dtype=int)
    terminating: wp.array(dtype=int)
    collision: wp.array(dtype=int)


@wp.struct
class G1Model:
    """Constants of the model: seconds per env step; per actuated joint (``[nu]``) the
    default pose and the joint range (low, high); the actuator indices of the hip
    roll and yaw joints (left roll, left yaw, right roll, right yaw) and of the knees."""

    dt: float
    default_pose: wp.array(dtype=float)
    joint_low: wp.array(dtype=float)
    joint_high: wp.array(dtype=float)
    hip: wp.array(dtype=int)
    knee: wp.array(dtype=int)


@wp.struct
class G1Params:
    """The parameter rows the task reads (views of the effective table): the reward
    scales ``[24, N]``, the ``noise`` block ``[6, N]`` (rows ``N_*``), the ``consts`` block
    ``[8, N]`` (rows ``C_*``), ``[3, N]`` / ``[2, N]`` vectors: ``command_range``,
    ``gait_frequency``, ``push_interval``, ``push_velocity`` (low, high); the ``scan``
    block ``[3, N]`` (rows ``S_*``: noise scale, offset, scale; zeros without a scan)."""

    scales: wp.array2d(dtype=float)
    noise: wp.array2d(dtype=float)
    consts: wp.array2d(dtype=float)
    cmd_range: wp.array2d(dtype=float)
    gait_freq: wp.array2d(dtype=float)
    push_interval: wp.array2d(dtype=float)
    push_velocity: wp.array2d(dtype=float)
    scan: wp.array2d(dtype=float)


@wp.struct
class G1Data:
    """What the task reads of MuJoCo Warp's data (``[N, ...]``); ``qvel`` is also written:
    a push for the next step."""

    qpos: wp.array2d(dtype=float)
    qvel: wp.array2d(dtype=float)
    qacc: wp.array2d(dtype=float)
    sensordata: wp.array2d(dtype=float)
    site_xpos: wp.array2d(dtype=wp.vec3)
    site_xmat: wp.array2d(dtype=wp.mat33)
    actuator_force: wp.array2d(dtype=float)


@wp.struct
class G1State:
    """The task's per-env state (``[N, ...]``): command (vx, vy, yaw rate), steps since
    the last command (``step``), the previous action, per foot (left, right) air time,
    swing peak and last contact (0/1), the gait phase per foot and its advance per step,
    steps since the episode's start (``push_step``) and the push interval in steps; for
    the terrain curriculum the episode's start xy, the commanded distance so far, and the
    metric (+1 promote, -1 demote, 0 stay)."""

    command: wp.array2d(dtype=float)
    step: wp.array(dtype=wp.int32)
    last_act: wp.array2d(dtype=float)
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


@wp.struct
class G1Outputs:
    """The step's outputs: observation ``[N, 103 + P]`` (its copy as the final
    observation), privileged observation ``[N, 216 + P]`` (P: the height-scan points),
    scaled reward terms ``[N, 24]``, reward and terminated ``[N]``."""

    obs: wp.array2d(dtype=float)
    final_obs: wp.array2d(dtype=float)
    priv: wp.array2d(dtype=float)
    terms: wp.array2d(dtype=float)
    reward: wp.array(dtype=float)
    terminated: wp.array(dtype=wp.bool)


@wp.func
def _vec(sd: wp.array2d(dtype=float), i: int, adr: int) -> wp.vec3:
    return wp.vec3(sd[i, adr], sd[i, adr + 1], sd[i, adr + 2])


@wp.func
def sample_command(h: wp.uint32, a: wp.array2d(dtype=float), zero_prob: float,
                   i: int) -> wp.vec3:
    """Playground's G1 ``sample_command``: ``U(-a_k, a_k)`` per component (``a`` rows ``[3,
    N]``), all three zeroed with probability ``zero_prob``; 4 draws from ``h``."""
    c = wp.vec3(0.0)
    for k in range(3):
        c[k] = uniform_in(h, -a[k, i], a[k, i])
        h = next_bits(h)
    if uniform(h) < zero_prob:
        c = wp.vec3(0.0)
    return c


@wp.func
def _bezier(x: float) -> float:
    return x * x * x + 3.0 * x * x * (1.0 - x)


@wp.func
def foot_target(phase: float, height: float) -> float:
    """Playground's ``gait.get_rz``: the target foot height at gait ``phase`` (radians in
    [-pi, pi)), a cubic Bezier up to ``height`` and back to 0."""
    x = (phase + PI) / (2.0 * PI)
    if x <= 0.5:
        return height * _bezier(2.0 * x)
    return height + (0.0 - height) * _bezier(2.0 * x - 1.0)


@wp.func
def _reset_task(i: int, h: wp.uint32, dt: float, qpos: wp.array2d(dtype=float),
                params: G1Params, st: G1State):
    """Playground's reset of env ``i``'s task state (draws from ``h``): gait frequency
    ``U(gait_frequency)`` (phase advance ``2 pi dt f``, phases (0, pi)), command
    (:func:`sample_command`), push interval ``round(U(push_interval) / dt)`` steps; last
    action, air time, swing peak, last contact and the step counters zero; the episode's
    start xy (terrain curriculum)."""
    f = uniform_in(h, params.gait_freq[0, i], params.gait_freq[1, i])
    h = next_bits(h)
    st.phase_dt[i] = 2.0 * PI * dt * f
    st.phase[i, 0] = 0.0
    st.phase[i, 1] = PI
    c = sample_command(h, params.cmd_range, params.consts[C_ZERO_PROB, i], i)
    for _k in range(4):  # past the command's draws
        h = next_bits(h)
    for k in range(3):
        st.command[i, k] = c[k]
    st.push_interval[i] = round_steps(
        uniform_in(h, params.push_interval[0, i], params.push_interval[1, i]), dt)
    st.step[i] = 0
    st.push_step[i] = 0
    for j in range(st.last_act.shape[1]):
        st.last_act[i, j] = 0.0
    for f2 in range(2):
        st.air_time[i, f2] = 0.0
        st.swing_peak[i, f2] = 0.0
        st.last_contact[i, f2] = 0.0
    terrain_start(i, qpos, st.start_xy, st.cmd_distance, st.metric)


@wp.kernel
def g1(
    # Model:
    model: G1Model,
    sn: G1Sensors,
    tr: Terrain,
    params: G1Params,
    # Data in:
    observe: int,
    mask: wp.array(dtype=wp.bool),
    keys: StepKeys,
    data: G1Data,
    action: wp.array2d(dtype=float),
    # Data out:
    task_out: G1State,
    out: G1Outputs,
):
    """``observe`` = 0: after a step, every env: the whole step of the task (module
    docstring). ``observe`` = 1: after a reset (the base reset, whose episode index the
    draws key on, and ``mj_forward`` run), masked envs: the task state's reset
    (:func:`_reset_task`), then the observation and privileged observation only;
    ``observe`` = 2: those observations only, from the current data and task state.

    Observation ``[N, 103 + P]``: pelvis local linear velocity, gyro, gravity in the pelvis
    imu frame (each with uniform noise ``level * scale``), command, joint angles minus the
    default pose, joint velocities (noisy), previous action, cos and sin of the two foot
    phases, then P height-scan values ``clip(base_z - offset - h, -1, 1)`` (noisy) times
    ``scale`` (a terrain env's). Privileged ``[N, 216 + P]``: the observation, then noise-free gyro,
    accelerometer, gravity, local linear velocity, global angular velocity, joint angles
    minus default, joint velocities, base height, actuator forces, foot contacts (2),
    feet global linear velocities (2 x 3), air time (2), the noise-free scan. Foot heights
    are world z, above the terrain under the foot on a terrain grid. ``terms`` ``[N, 24]``:
    each term times its scale (before the sum and ``dt``); ``reward = sum * dt`` (not
    clipped). An env whose action has a NaN component (stepped with the zero action,
    ``kernels.legged.pre_step``) gets NaN in every value of its observations, terms and
    reward, and the zero action as its last action."""
    # the bundles' fields under the names the math below reads (views: no copies)
    dt = model.dt
    default_pose = model.default_pose
    scales, noise, consts = params.scales, params.noise, params.consts
    seed, env_offset = keys.seed, keys.env_offset
    episode_count, step_count = keys.episode_count, keys.step_count
    qpos, qvel, sd = data.qpos, data.qvel, data.sensordata
    actuator_force = data.actuator_force
    st = task_out
    i = thread_index(wp.tid())
    if observe != 0 and not mask[i]:
        return
    gid = env_offset + i
    if observe == 1:
        h = rng_key(seed[0], gid, STREAM_TASK_RESET, episode_count[i] - 1)
        _reset_task(i, h, dt, qpos, params, st)
    nu = default_pose.shape[0]
    step = wp.where(observe == 0, step_count[i], RESET_STEP)
    hn = step_bits(seed[0], gid, STREAM_OBS_NOISE, episode_count[i] - 1, step)

    # contacts (also in the reset's privileged observation) and foot timing (a step only)
    contact = wp.vec2(0.0)
    first = wp.vec2(0.0)
    foot_z = wp.vec2(0.0)
    for f in range(2):
        p = data.site_xpos[i, sn.foot_site[f]]
        foot_z[f] = p[2] - ground(tr, i, p[0], p[1])
        c = sd[i, sn.foot_found[f]] > 0.0
        if c:
            contact[f] = 1.0
        if observe == 0:
            air = st.air_time[i, f]
            if air > 0.0 and (c or st.last_contact[i, f] > 0.5):
                first[f] = 1.0
            st.air_time[i, f] = air + dt
            st.swing_peak[i, f] = wp.max(st.swing_peak[i, f], foot_z[f])

    # observation: noisy local linear velocity, gyro, gravity, the command, noisy joint
    # angles minus the default pose and joint velocities, the previous action, the phase
    lin = _vec(sd, i, sn.linvel)
    gyro = _vec(sd, i, sn.gyro)
    xm = data.site_xmat[i, sn.imu_site]
    grav = wp.vec3(-xm[2, 0], -xm[2, 1], -xm[2, 2])
    imu = wp.matrix_from_rows(lin, gyro, grav)
    lvl = noise[N_LEVEL, i]
    cmd = wp.vec3(st.command[i, 0], st.command[i, 1], st.command[i, 2])
    n_obs = 16 + 3 * nu
    for k in range(n_obs):
        v = float(0.0)
        if k < 9:  # rows N_LINVEL, N_GYRO, N_GRAVITY
            v = noisy(imu[k // 3, k % 3], hn, lvl, noise[N_LINVEL + k // 3, i])
            hn = next_bits(hn)
        elif k < 12:
            v = cmd[k - 9]
        elif k < 12 + nu:
            v = noisy(qpos[i, 7 + k - 12], hn, lvl, noise[N_JOINT_POS, i]) - default_pose[k - 12]
            hn = next_bits(hn)
        elif k < 12 + 2 * nu:
            v = noisy(qvel[i, 6 + k - 12 - nu], hn, lvl, noise[N_JOINT_VEL, i])
            hn = next_bits(hn)
        elif k < 12 + 3 * nu:
            v = st.last_act[i, k - 12 - 2 * nu]
        elif k < 14 + 3 * nu:
            v = wp.cos(st.phase[i, k - 12 - 3 * nu])
        else:
            v = wp.sin(st.phase[i, k - 14 - 3 * nu])
        out.obs[i, k] = v
        out.priv[i, k] = v
    # privileged, noise-free
    p0 = n_obs
    accel = _vec(sd, i, sn.accel)
    gang = _vec(sd, i, sn.global_angvel)
    for k in range(3):
        out.priv[i, p0 + k] = gyro[k]
        out.priv[i, p0 + 3 + k] = accel[k]
        out.priv[i, p0 + 6 + k] = grav[k]
        out.priv[i, p0 + 9 + k] = lin[k]
        out.priv[i, p0 + 12 + k] = gang[k]
    p0 = p0 + 15
    for j in range(nu):
        out.priv[i, p0 + j] = qpos[i, 7 + j] - default_pose[j]
        out.priv[i, p0 + nu + j] = qvel[i, 6 + j]
        out.priv[i, p0 + 2 * nu + 1 + j] = actuator_force[i, j]
    out.priv[i, p0 + 2 * nu] = qpos[i, 2]
    p0 = p0 + 3 * nu + 1
    for f in range(2):
        out.priv[i, p0 + f] = contact[f]
        fv = _vec(sd, i, sn.foot_vel[f])
        for k in range(3):
            out.priv[i, p0 + 2 + 3 * f + k] = fv[k]
        out.priv[i, p0 + 8 + f] = st.air_time[i, f]
    scan = params.scan
    hn = write_height_scan(tr, i, qpos[i, 2], scan[S_OFFSET, i], scan[S_SCALE, i], lvl,
                           scan[S_NOISE, i], hn, out.obs, n_obs, out.priv, p0 + 10)
    if observe != 0:
        return
    copy_row(out.obs, out.final_obs, i)

    # termination: torso upside down, a foot on the other foot or shin, NaN
    up = _vec(sd, i, sn.upvector)
    done = up[2] < 0.0
    for c in range(sn.terminating.shape[0]):
        if sd[i, sn.terminating[c]] > 0.0:
            done = True
    for k in range(qpos.shape[1]):
        if wp.isnan(qpos[i, k]):
            done = True
    for k in range(qvel.shape[1]):
        if wp.isnan(qvel[i, k]):
            done = True

    # rewards
    sigma = consts[C_SIGMA, i]
    max_h = consts[C_FOOT_HEIGHT, i]
    cmd_norm = wp.length(cmd)
    glin = _vec(sd, i, sn.global_linvel)
    tlin = _vec(sd, i, sn.torso_linvel)
    tang = _vec(sd, i, sn.torso_angvel)
    e0 = cmd[0] - lin[0]
    e1 = cmd[1] - lin[1]
    ea = cmd[2] - gyro[2]
    ux = up[0] - 0.073
    uz = up[2] - 1.0
    bh = qpos[i, 2] - consts[C_BASE_HEIGHT, i]
    torques = float(0.0)
    rate = float(0.0)
    energy = float(0.0)
    acc = float(0.0)
    stand = float(0.0)
    limits = float(0.0)
    pose = float(0.0)
    soft = consts[C_SOFT_LIMIT, i]
    for j in range(nu):
        q = qpos[i, 7 + j]
        tau = actuator_force[i, j]
        torques += wp.abs(tau)
        da = action[i, j] - st.last_act[i, j]
        rate += da * da
        energy += wp.abs(qvel[i, 6 + j]) * wp.abs(tau)
        a = data.qacc[i, 6 + j]
        acc += a * a
        dq = q - default_pose[j]
        stand += wp.abs(dq)
        # Playground's G1 soft limits: the range shrunk about its centre by ``soft``
        centre = 0.5 * (model.joint_low[j] + model.joint_high[j])
        half = 0.5 * (model.joint_high[j] - model.joint_low[j]) * soft
        limits += wp.max(centre - half - q, 0.0) + wp.max(q - (centre + half), 0.0)
        pose += dq * dq
    clear = float(0.0)
    height = float(0.0)
    air_r = float(0.0)
    phase_err = float(0.0)
    force = float(0.0)
    for f in range(2):
        fv = _vec(sd, i, sn.foot_vel[f])
        clear += wp.abs(foot_z[f] - max_h) * wp.sqrt(wp.sqrt(fv[0] * fv[0] + fv[1] * fv[1]))
        err = st.swing_peak[i, f] / max_h - 1.0
        height += err * err * first[f]
        air_r += wp.min(st.air_time[i, f] - 0.2, 0.3) * first[f]
        dz = foot_z[f] - foot_target(st.phase[i, f], max_h)
        phase_err += dz * dz
        fz = wp.abs(sd[i, sn.foot_force[f] + 2])
        force += wp.max(fz - consts[C_MAX_FORCE, i], 0.0)
    body_v = wp.sqrt(glin[0] * glin[0] + glin[1] * glin[1])
    moving = body_v > 0.1 or wp.abs(gang[2]) > 0.1 or cmd_norm > 0.01
    hit = float(0.0)
    for c in range(sn.collision.shape[0]):
        if sd[i, sn.collision[c]] > 0.0:
            hit = 1.0
    knee = float(0.0)
    for k in range(2):
        j = model.knee[k]
        knee += wp.abs(qpos[i, 7 + j] - default_pose[j])
    hip = float(0.0)
    for k in range(4):
        j = model.hip[k]
        w = wp.where(cmd[1] > 0.1 and k % 2 == 0, 0.0, 1.0)  # roll free when moving left
        hip += wp.abs(qpos[i, 7 + j] - default_pose[j]) * w
    t = vec24(
        wp.exp(-(e0 * e0 + e1 * e1) / sigma),  # tracking_lin_vel
        wp.exp(-(ea * ea) / sigma),  # tracking_ang_vel
        tlin[2] * tlin[2] + glin[2] * glin[2],  # lin_vel_z
        tang[0] * tang[0] + tang[1] * tang[1],  # ang_vel_xy
        ux * ux + up[1] * up[1] + uz * uz,  # orientation
        bh * bh,  # base_height
        torques,  # torques
        rate,  # action_rate
        energy,  # energy
        acc,  # dof_acc
        clear,  # feet_clearance
        air_r,  # feet_air_time
        body_v * (contact[0] + contact[1]),  # feet_slip
        height,  # feet_height
        wp.where(moving, wp.exp(-phase_err / 0.01), 0.0),  # feet_phase
        wp.where(cmd_norm < 0.01, stand, 0.0),  # stand_still
        1.0,  # alive
        wp.where(done, 1.0, 0.0),  # termination
        hit,  # collision
        force,  # contact_force
        knee,  # joint_deviation_knee
        hip,  # joint_deviation_hip
        limits,  # dof_pos_limits
        pose,  # pose
    )
    total = float(0.0)
    for k in range(NUM_TERMS):
        s = t[k] * scales[k, i]
        out.terms[i, k] = s
        total += s
    out.reward[i] = total * dt
    out.terminated[i] = done
    bad = has_nan(action, i)  # stepped with the zero action: every output NaN
    if bad:
        nan_row(out.obs, i)
        nan_row(out.final_obs, i)
        nan_row(out.priv, i)
        nan_row(out.terms, i)
        out.reward[i] = wp.nan
    if tr.on != 0:  # terrain curriculum bookkeeping: distance walked vs commanded
        terrain_progress(i, qpos, cmd[0], cmd[1], dt, tr.tile, st.start_xy, st.cmd_distance,
                         st.metric)

    # state updates
    n = st.step[i] + 1
    ps = st.push_step[i] + 1
    st.push_step[i] = ps
    for f in range(2):
        if contact[f] > 0.5:
            st.air_time[i, f] = 0.0
            st.swing_peak[i, f] = 0.0
        st.last_contact[i, f] = contact[f]
        st.phase[i, f] = wp.mod(st.phase[i, f] + st.phase_dt[i] + PI, 2.0 * PI) - PI
    for j in range(nu):
        st.last_act[i, j] = action_or_zero(action, i, j, bad)  # the action stepped with
    resample = float(n) > consts[C_RESAMPLE, i]
    if resample:
        hc = step_bits(seed[0], gid, STREAM_COMMAND, episode_count[i] - 1, step_count[i])
        cmd = sample_command(hc, params.cmd_range, consts[C_ZERO_PROB, i], i)
        for k in range(3):
            st.command[i, k] = cmd[k]
    if resample or done:
        n = 0
    st.step[i] = n
    # Playground's push at the start of the next step: (push_step + 1) % interval == 0
    iv = st.push_interval[i]
    if consts[C_PUSH, i] > 0.5 and iv > 0:
        if (ps + 1) % iv == 0:
            hp = step_bits(seed[0], gid, STREAM_PUSH, episode_count[i] - 1, step_count[i])
            theta = uniform(hp) * 2.0 * PI
            hp = next_bits(hp)
            mag = uniform_in(hp, params.push_velocity[0, i], params.push_velocity[1, i])
            qvel[i, 0] = qvel[i, 0] + wp.cos(theta) * mag
            qvel[i, 1] = qvel[i, 1] + wp.sin(theta) * mag
