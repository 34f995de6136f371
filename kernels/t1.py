"""Booster T1 velocity tracking (MuJoCo Playground's ``T1Joystick*Terrain``): the task's
own terms and state laws for the legged-task kernel (``kernels.legged_terms``; the config
is ``gpuparam.envs.mujoco.t1.T1_JOYSTICK``). Signatures: ``legged_terms``' module docstring.

The extra parameter block (``TaskParams.extra``, rows ``X_*``) holds the gait frequency
range (Hz), the push interval range (s) and the push velocity range (m/s), each (low,
high). Playground pushes at the start of a step, before the physics; here the same push is
written into ``qvel`` at the end of the step before it (G1's way: an auto-reset of a
finished episode then overwrites it, as Playground's reset does).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.legged import STREAM_COMMAND, round_steps, step_bits
from gpuparam.kernels.legged_terms import (
    K_BASE_HEIGHT,
    K_CMD_RESAMPLE,
    K_CMD_ZERO_PROB,
    K_FOOT_HEIGHT,
    K_PUSH,
    K_SOFT_LIMIT,
    Ctx,
    Sensors,
    TaskData,
    TaskModel,
    TaskParams,
    TaskState,
)
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

# the stream of Playground's pushes (the legged streams use + 1 .. + 4)
STREAM_PUSH = wp.constant(STREAM_TERM0 + (1 << 20) + 5)
PI = wp.constant(3.14159265358979)
X_GAIT_LO = wp.constant(0)
X_GAIT_HI = wp.constant(1)
X_PUSH_IV_LO = wp.constant(2)
X_PUSH_IV_HI = wp.constant(3)
X_PUSH_V_LO = wp.constant(4)
X_PUSH_V_HI = wp.constant(5)


# ----------------------------------------------------------------- reward terms
@wp.func
def lin_vel_z_local(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                    st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``local linvel_z^2`` (the imu's)."""
    return c.lin[2] * c.lin[2]


@wp.func
def ang_vel_xy_gyro(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                    st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``gyro_x^2 + gyro_y^2``."""
    return c.gyro[0] * c.gyro[0] + c.gyro[1] * c.gyro[1]


@wp.func
def dof_vel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
            act: wp.array2d(dtype=float)) -> float:
    """``|joint qvel|^2``."""
    v2 = float(0.0)
    for j in range(m.default_pose.shape[0]):
        v = d.qvel[c.i, 6 + j]
        v2 += v * v
    return v2


@wp.func
def feet_air_time(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum min(air time - 0.2, 0.3)`` at first contacts, if ``|cmd| > 0.1``."""
    air = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        air += wp.min(st.air_time[c.i, f] - 0.2, 0.3) * c.first[f]
    return wp.where(c.cmd_norm > 0.1, air, 0.0)


@wp.func
def feet_slip(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
              act: wp.array2d(dtype=float)) -> float:
    """``|imu global linvel_xy|`` times the number of feet in contact."""
    n = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        n += c.contact[f]
    return wp.sqrt(c.glin[0] * c.glin[0] + c.glin[1] * c.glin[1]) * n


@wp.func
def foot_target(phase: float, height: float) -> float:
    """Playground's ``gait.get_rz``: the target foot height at gait ``phase`` (radians in
    [-pi, pi]), a cubic Bezier up to ``height`` and back to 0."""
    x = (phase + PI) / (2.0 * PI)
    s = wp.where(x <= 0.5, 2.0 * x, 2.0 * x - 1.0)
    b = s * s * s + 3.0 * s * s * (1.0 - s)
    if x <= 0.5:
        return height * b
    return height + (0.0 - height) * b


@wp.func
def feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
               st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum (foot z - gait target(phase))^2 / 0.01)``."""
    err = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        dz = c.foot_z[f] - foot_target(st.phase[c.i, f], c.k[K_FOOT_HEIGHT])
        err += dz * dz
    return wp.exp(-err / 0.01)


@wp.func
def stand_still(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` when ``|cmd| < 0.1``."""
    stand = float(0.0)
    for j in range(m.default_pose.shape[0]):
        stand += wp.abs(d.qpos[c.i, 7 + j] - m.default_pose[j])
    return wp.where(c.cmd_norm < 0.1, stand, 0.0)


@wp.func
def _deviation(c: Ctx, m: TaskModel, d: TaskData, k0: int, k1: int) -> float:
    dev = float(0.0)
    for k in range(k0, k1):
        j = m.index[k]
        dev += wp.abs(d.qpos[c.i, 7 + j] - m.default_pose[j])
    return dev


@wp.func
def joint_deviation_knee(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                         st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` of the knees (``index[0:2]``)."""
    return _deviation(c, m, d, 0, 2)


@wp.func
def joint_deviation_hip(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                        st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` of the hips' roll and yaw (``index[2:6]``), if ``|cmd_y| >
    0.1``."""
    return wp.where(wp.abs(c.cmd[1]) > 0.1, _deviation(c, m, d, 2, 6), 0.0)


@wp.func
def dof_pos_limits(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """Joint angles beyond the soft limits (each range shrunk about its centre by
    ``soft_limit``), summed."""
    limits = float(0.0)
    for j in range(m.default_pose.shape[0]):
        q = d.qpos[c.i, 7 + j]
        centre = 0.5 * (m.joint_low[j] + m.joint_high[j])
        half = 0.5 * (m.joint_high[j] - m.joint_low[j]) * c.k[K_SOFT_LIMIT]
        limits += wp.max(centre - half - q, 0.0) + wp.max(q - (centre + half), 0.0)
    return limits


@wp.func
def pose(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
         act: wp.array2d(dtype=float)) -> float:
    """``sum w (q - default)^2`` (``w``: ``pose_weight``)."""
    cost = float(0.0)
    for j in range(m.default_pose.shape[0]):
        dq = d.qpos[c.i, 7 + j] - m.default_pose[j]
        cost += dq * dq * m.pose_weight[j]
    return cost


@wp.func
def feet_distance(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``clip(0.2 - |lateral distance of the feet in the imu's yaw frame|, 0, 0.1)``."""
    xm = d.site_xmat[c.i, sn.imu_site]
    yaw = wp.atan2(xm[1, 0], xm[0, 0])
    dl = d.site_xpos[c.i, sn.foot_site[0]] - d.site_xpos[c.i, sn.foot_site[1]]
    dist = wp.abs(wp.cos(yaw) * dl[1] - wp.sin(yaw) * dl[0])
    return wp.clamp(0.2 - dist, 0.0, 0.1)


# ----------------------------------------------------------------- state laws
@wp.func
def sample_command(h: wp.uint32, p: TaskParams, zero_prob: float, i: int) -> wp.vec3:
    """Playground's T1 ``sample_command``: ``U(-a_k, a_k)`` per component (``cmd_range``),
    all three zero with probability ``zero_prob``; 4 draws from ``h``."""
    cmd = wp.vec3(0.0)
    for k in range(3):
        cmd[k] = uniform_in(h, -p.cmd_range[k, i], p.cmd_range[k, i])
        h = next_bits(h)
    if uniform(h) < zero_prob:
        cmd = wp.vec3(0.0)
    return cmd


@wp.func
def command_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
                  h: wp.uint32):
    """The command at a reset (:func:`sample_command`, draws 0-3 of ``h``); its step
    counter 0."""
    cmd = sample_command(h, p, c.k[K_CMD_ZERO_PROB], c.i)
    for k in range(3):
        st.command[c.i, k] = cmd[k]
    st.countdown[c.i] = 0


@wp.func
def command_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """A new command once more than ``cmd_resample`` steps have passed; the counter
    restarts then and at a termination."""
    n = st.countdown[c.i] + 1
    resample = float(n) > c.k[K_CMD_RESAMPLE]
    if resample:
        hc = step_bits(c.seed, c.gid, STREAM_COMMAND, c.episode, c.step)
        cmd = sample_command(hc, p, c.k[K_CMD_ZERO_PROB], c.i)
        for k in range(3):
            st.command[c.i, k] = cmd[k]
    if resample or c.done:
        n = 0
    st.countdown[c.i] = n


@wp.func
def gait_push_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
                    h: wp.uint32):
    """Gait frequency ``U(gait range)`` (phase advance ``2 pi dt f``, phases (0, pi)), push
    interval ``round(U(push interval range) / dt)`` steps (draws 4-5 of ``h``: after the
    command's), push step 0."""
    i = c.i
    for _k in range(4):
        h = next_bits(h)
    f = uniform_in(h, p.extra[X_GAIT_LO, i], p.extra[X_GAIT_HI, i])
    h = next_bits(h)
    st.phase_dt[i] = 2.0 * PI * c.dt * f
    st.phase[i, 0] = 0.0
    st.phase[i, 1] = PI
    st.push_interval[i] = round_steps(
        uniform_in(h, p.extra[X_PUSH_IV_LO, i], p.extra[X_PUSH_IV_HI, i]), c.dt)
    st.push_step[i] = 0


@wp.func
def gait_push_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """The phase advances (wrapped to [-pi, pi)), both held at pi while ``|cmd| <= 0.01``
    (this step's command); Playground's push at the start of the next step, if due
    (``(push step + 1) % interval == 0``): ``qvel[0:2] += U(push velocity range) (cos t,
    sin t)``, ``t ~ U(0, 2 pi)``."""
    i = c.i
    for f in range(2):
        ph = wp.mod(st.phase[i, f] + st.phase_dt[i] + PI, 2.0 * PI) - PI
        st.phase[i, f] = wp.where(c.cmd_norm > 0.01, ph, PI)
    ps = st.push_step[i] + 1
    st.push_step[i] = ps
    iv = st.push_interval[i]
    if c.k[K_PUSH] > 0.5 and iv > 0:
        if (ps + 1) % iv == 0:
            hp = step_bits(c.seed, c.gid, STREAM_PUSH, c.episode, c.step)
            theta = uniform(hp) * 2.0 * PI
            hp = next_bits(hp)
            mag = uniform_in(hp, p.extra[X_PUSH_V_LO, i], p.extra[X_PUSH_V_HI, i])
            d.qvel[i, 0] = d.qvel[i, 0] + wp.cos(theta) * mag
            d.qvel[i, 1] = d.qvel[i, 1] + wp.sin(theta) * mag


# ------------------------------------------- the framework's, until its G1 terms land
@wp.func
def base_height(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``(base z - base_height)^2``."""
    bh = d.qpos[c.i, 2] - c.k[K_BASE_HEIGHT]
    return bh * bh


@wp.func
def feet_height(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum (swing peak / foot_height - 1)^2`` at first contacts."""
    height = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        err = st.swing_peak[c.i, f] / c.k[K_FOOT_HEIGHT] - 1.0
        height += err * err * c.first[f]
    return height
