"""Spot's own task terms (``gpuparam.envs.mujoco.spot``): MuJoCo Playground's Spot joystick
and gait-tracking terms that the shared ``kernels.legged_terms`` lacks, as ``@wp.func``\\ s
with its term signatures.

Rows the terms read: noise block ``NOISE_JOINT`` (joint angles), ``NOISE_FEET`` .. + 2
(feet positions x, y, z); consts block rows ``C_*``. ``TaskState.aux`` holds the joint error
history (``[0, 3 nu)``: newest first) and, for the gait task, the gait frequency, index and
swing height (``[3 nu, 3 nu + 3)``).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.legged import RESET_STEP, STREAM_COMMAND, reset_command, step_bits
from gpuparam.kernels.legged_terms import (
    MODE_OBSERVE,
    MODE_STEP,
    Ctx,
    Sensors,
    TaskData,
    TaskModel,
    TaskParams,
    TaskState,
    sensor3,
)
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

# the draws of the noise that two terms share (the joint angles: the observation and the
# error history), keyed by (env, episode, step) and the component
STREAM_SPOT_NOISE = wp.constant(STREAM_TERM0 + (1 << 20) + 32)
NOISE_JOINT = wp.constant(3)
NOISE_FEET = wp.constant(4)
C_UP_MIN = wp.constant(0)
C_EARLY = wp.constant(1)
C_ZERO_PROB = wp.constant(2)
C_RESAMPLE = wp.constant(3)
C_PHASE_SIGMA = wp.constant(5)
C_GAIT = wp.constant(6)  # gait frequency low, high, swing height low, high
NGAITS = wp.constant(5)
PI = wp.constant(3.14159265358979)


# ----------------------------------------------------------------- observation terms
@wp.func
def _noise(c: Ctx, p: TaskParams, row: int, k: int) -> float:
    step = wp.where(c.mode == MODE_STEP, c.step, RESET_STEP)
    h = wp.rand_init(int(step_bits(c.seed, c.gid, STREAM_SPOT_NOISE, c.episode, step)), k)
    return (2.0 * uniform(h) - 1.0) * c.lvl * p.noise[row, c.i]


@wp.func
def noisy_q(c: Ctx, p: TaskParams, d: TaskData, j: int) -> float:
    """Joint angle ``j`` plus its noise (the same value wherever read in a step)."""
    x = d.qpos[c.i, 7 + j]
    n = _noise(c, p, NOISE_JOINT, j)
    return wp.where(n == 0.0, x, x + n)


@wp.func
def obs_noisy_q(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
                act: wp.array2d(dtype=float), j: int) -> float:
    """Joint angle plus noise (nu)."""
    return noisy_q(c, p, d, j)


@wp.func
def _target(c: Ctx, m: TaskModel, d: TaskData, j: int) -> float:
    # this step's PD target clipped to the joint range (0 at a reset, as Playground's)
    return wp.where(c.mode == MODE_STEP,
                    wp.clamp(d.ctrl[c.i, j], m.joint_low[j], m.joint_high[j]), 0.0)


@wp.func
def obs_history(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Playground's ``qpos_error_history`` (3 nu, newest first): rolled by nu at each step
    and reset, its first block ``noisy q - target``; shown as is by an observe-only call."""
    i = c.i
    nu = m.default_pose.shape[0]
    if c.mode == MODE_OBSERVE:
        return st.aux[i, j]
    v = float(0.0)
    if j < nu:
        v = noisy_q(c, p, d, j) - _target(c, m, d, j)
    else:
        v = st.aux[i, j - nu]
    if j == 3 * nu - 1:  # every block read: roll the state
        for r in range(2 * nu):
            st.aux[i, 3 * nu - 1 - r] = st.aux[i, 2 * nu - 1 - r]
        for k in range(nu):
            st.aux[i, k] = noisy_q(c, p, d, k) - _target(c, m, d, k)
    return v


@wp.func
def obs_feet_pos(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Feet positions relative to the imu (3 F, foot-major), noise per axis."""
    x = d.sensordata[c.i, sn.extra[j // 3] + j % 3]
    n = _noise(c, p, NOISE_FEET + j % 3, 16 + j)
    return wp.where(n == 0.0, x, x + n)


@wp.func
def obs_feet_pos_clean(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                       st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Feet positions relative to the imu (3 F), no noise."""
    return d.sensordata[c.i, sn.extra[j // 3] + j % 3]


@wp.func
def obs_upvector(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """The body z axis in world coordinates (3; Playground's ``get_gravity``)."""
    return c.up[j]


@wp.func
def obs_gait(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
             act: wp.array2d(dtype=float), j: int) -> float:
    """Gait frequency (Hz), gait index, swing height (m) (3)."""
    return st.aux[c.i, 3 * m.default_pose.shape[0] + j]


# ----------------------------------------------------------------- reward terms
@wp.func
def _pose_err2(c: Ctx, m: TaskModel, d: TaskData) -> float:
    e = float(0.0)
    for j in range(m.default_pose.shape[0]):
        q = d.qpos[c.i, 7 + j] - m.default_pose[j]
        e += m.pose_weight[j] * q * q
    return e


@wp.func
def posture(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
            act: wp.array2d(dtype=float)) -> float:
    """``exp(w |q - default|^2)``, ``w`` -10 if ``|cmd| < 0.01`` else 0."""
    return wp.exp(wp.where(c.cmd_norm < 0.01, -10.0, 0.0) * _pose_err2(c, m, d))


@wp.func
def hip_splay(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
              act: wp.array2d(dtype=float)) -> float:
    """``sum w (q - default)^2`` (w: the config's pose weights, 1 on the hx joints)."""
    return _pose_err2(c, m, d)


@wp.func
def action_rate2(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|a - last a|^2 + |a - 2 last a + last last a|^2``."""
    r = float(0.0)
    for j in range(m.default_pose.shape[0]):
        la = st.last_act[c.i, j]
        d1 = act[c.i, j] - la
        d2 = act[c.i, j] - 2.0 * la + st.last_last_act[c.i, j]
        r += d1 * d1 + d2 * d2
    return r


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
def _bezier(s: float) -> float:
    return s * s * s + 3.0 * s * s * (1.0 - s)


@wp.func
def gait_rz(phase: float, h: float) -> float:
    """Playground's ``gait.get_rz``: the target foot height at ``phase``, swing height h."""
    x = (phase + PI) / (2.0 * PI)
    if x <= 0.5:
        return h * _bezier(2.0 * x)
    return h + (0.0 - h) * _bezier(2.0 * x - 1.0)


@wp.func
def feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum (foot z - rz(phase))^2 / sigma)``."""
    h = st.aux[c.i, 3 * m.default_pose.shape[0] + 2]
    e = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        dz = c.foot_z[f] - gait_rz(st.phase[c.i, f], h)
        e += dz * dz
    return wp.exp(-e / p.consts[C_PHASE_SIGMA, c.i])


@wp.func
def lin_vel_z_bound_pronk(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                          st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``global linvel_z^2`` in the bound and pronk gaits (index > 2), else 0."""
    g = st.aux[c.i, 3 * m.default_pose.shape[0] + 1]
    return wp.where(g > 2.5, c.glin[2] * c.glin[2], 0.0)


# ----------------------------------------------------------------- termination
@wp.func
def tilted(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
           st: TaskState) -> bool:
    """Upvector z below ``C_UP_MIN``, if ``C_EARLY`` > 0.5."""
    return c.up[2] < p.consts[C_UP_MIN, c.i] and p.consts[C_EARLY, c.i] > 0.5


# ----------------------------------------------------------------- state laws
@wp.func
def _command(h: wp.uint32, p: TaskParams, i: int) -> wp.vec3:
    cmd = reset_command(h, p.cmd_range, i)
    for _k in range(3):
        h = next_bits(h)
    return wp.where(uniform(h) < p.consts[C_ZERO_PROB, i], wp.vec3(0.0), cmd)


@wp.func
def command_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
                  h: wp.uint32):
    """``U(-a, a)`` per component, all 0 with probability ``C_ZERO_PROB`` (4 draws); the
    step counter and the error history zeroed."""
    cmd = _command(h, p, c.i)
    for k in range(3):
        st.command[c.i, k] = cmd[k]
    st.countdown[c.i] = 0
    for k in range(3 * m.default_pose.shape[0]):
        st.aux[c.i, k] = 0.0


@wp.func
def command_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """A new command once the counter passes ``C_RESAMPLE`` steps; the counter is zeroed
    then and at a termination."""
    n = st.countdown[c.i] + 1
    if float(n) > p.consts[C_RESAMPLE, c.i]:
        cmd = _command(step_bits(c.seed, c.gid, STREAM_COMMAND, c.episode, c.step), p, c.i)
        for k in range(3):
            st.command[c.i, k] = cmd[k]
        n = 0
    if c.done:
        n = 0
    st.countdown[c.i] = n


@wp.func
def gait_offset(g: int, f: int) -> float:
    """Foot ``f``'s (FL, FR, HL, HR) phase offset in gait ``g`` (trot, walk, pace, bound,
    pronk)."""
    if g == 0:
        return wp.where(f == 1 or f == 2, PI, 0.0)
    if g == 1:
        return float(f) * 0.5 * PI
    if g == 2:
        return wp.where(f == 1 or f == 3, PI, 0.0)
    if g == 3:
        return wp.where(f >= 2, PI, 0.0)
    return 0.0


@wp.func
def gait_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
               h: wp.uint32):
    """After the command's 4 draws: frequency ``U(lo, hi)`` Hz, gait ``floor(U(0, 5))``,
    swing height ``U(lo, hi)`` m; each foot's phase its gait offset."""
    i = c.i
    for _k in range(4):
        h = next_bits(h)
    freq = uniform_in(h, p.consts[C_GAIT, i], p.consts[C_GAIT + 1, i])
    h = next_bits(h)
    g = wp.min(int(wp.floor(uniform(h) * float(NGAITS))), NGAITS - 1)
    h = next_bits(h)
    a = 3 * m.default_pose.shape[0]
    st.aux[i, a] = freq
    st.aux[i, a + 1] = float(g)
    st.aux[i, a + 2] = uniform_in(h, p.consts[C_GAIT + 2, i], p.consts[C_GAIT + 3, i])
    st.phase_dt[i] = 2.0 * PI * c.dt * freq
    for f in range(st.phase.shape[1]):
        st.phase[i, f] = gait_offset(g, f)


@wp.func
def gait_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """Each foot's phase advances by ``phase_dt``, wrapped to ``[-pi, pi)``."""
    for f in range(st.phase.shape[1]):
        st.phase[c.i, f] = wp.mod(st.phase[c.i, f] + st.phase_dt[c.i] + PI, 2.0 * PI) - PI
