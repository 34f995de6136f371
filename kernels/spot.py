"""Spot's own task terms (``gpuparam.envs.mujoco.spot``), with ``kernels.legged_terms``'
signatures: the joint-angle noise shared by the observation and the error history, the feet
positions, posture, and the gait law (``gait.py`` of MuJoCo Playground). Rows read: noise
``NOISE_JOINT``, ``NOISE_FEET`` (+ 0, 1, 2: x, y, z); consts ``C_*``."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.legged import RESET_STEP, step_bits
from gpuparam.kernels.legged_terms import (
    MODE_OBSERVE,
    MODE_STEP,
    Ctx,
    Sensors,
    TaskData,
    TaskModel,
    TaskParams,
    TaskState,
)
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

STREAM_SPOT_NOISE = wp.constant(STREAM_TERM0 + (1 << 20) + 32)  # keyed by component
NOISE_JOINT = wp.constant(3)
NOISE_FEET = wp.constant(4)
C_UP_MIN = wp.constant(0)
C_EARLY = wp.constant(1)
C_PHASE_SIGMA = wp.constant(5)
C_GAIT = wp.constant(6)  # gait frequency low, high; swing height low, high
PI = wp.constant(3.14159265358979)


@wp.func
def _noisy(c: Ctx, p: TaskParams, x: float, row: int, k: int) -> float:
    # x + level * scale * U(-1, 1), the draw keyed by (env, episode, step, k): the same
    # wherever component k is read in a step (exactly x without noise)
    step = wp.where(c.mode == MODE_STEP, c.step, RESET_STEP)
    h = wp.rand_init(int(step_bits(c.seed, c.gid, STREAM_SPOT_NOISE, c.episode, step)), k)
    n = (2.0 * uniform(h) - 1.0) * c.lvl * p.noise[row, c.i]
    return wp.where(n == 0.0, x, x + n)


@wp.func
def obs_noisy_q(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
                act: wp.array2d(dtype=float), j: int) -> float:
    """Joint angle plus noise (nu)."""
    return _noisy(c, p, d.qpos[c.i, 7 + j], NOISE_JOINT, j)


@wp.func
def _error(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, j: int) -> float:
    # noisy q - this step's PD target clipped to the joint range (0 at a reset)
    t = wp.clamp(d.ctrl[c.i, j], m.joint_low[j], m.joint_high[j])
    return _noisy(c, p, d.qpos[c.i, 7 + j], NOISE_JOINT, j) - wp.where(
        c.mode == MODE_STEP, t, 0.0)


@wp.func
def obs_history(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Playground's ``qpos_error_history`` (3 nu, newest first), rolled by nu at each step
    and reset (its new block ``noisy q - target``); an observe-only call shows it as is."""
    i, nu = c.i, m.default_pose.shape[0]
    hist = st.qpos_error_history
    if c.mode == MODE_OBSERVE:
        return hist[i, j]
    v = wp.where(j < nu, _error(c, m, p, d, j % nu), hist[i, wp.max(j - nu, 0)])
    if j == 3 * nu - 1:  # every block read: roll
        for r in range(2 * nu):
            hist[i, 3 * nu - 1 - r] = hist[i, 2 * nu - 1 - r]
        for k in range(nu):
            hist[i, k] = _error(c, m, p, d, k)
    return v


@wp.func
def obs_feet_pos(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Feet positions relative to the imu (3 F, foot-major), noise per axis."""
    return _noisy(c, p, d.sensordata[c.i, sn.extra[j // 3] + j % 3], NOISE_FEET + j % 3,
                  16 + j)


@wp.func
def obs_feet_pos_clean(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                       st: TaskState, act: wp.array2d(dtype=float), j: int) -> float:
    """Feet positions relative to the imu (3 F)."""
    return d.sensordata[c.i, sn.extra[j // 3] + j % 3]


@wp.func
def obs_gait(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
             act: wp.array2d(dtype=float), j: int) -> float:
    """Gait frequency (Hz), gait index, swing height (m) (3)."""
    if j == 0:
        return st.gait_freq[c.i]
    return wp.where(j == 1, float(st.gait[c.i]), st.foot_height[c.i])


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
def _bezier(s: float) -> float:
    return s * s * s + 3.0 * s * s * (1.0 - s)


@wp.func
def feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
               act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum (foot z - rz(phase))^2 / sigma)``, ``rz`` Playground's ``get_rz``: 0 at
    phase -pi, the swing height h at 0, 0 at pi (Bezier)."""
    h = st.foot_height[c.i]
    e = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        x = (st.phase[c.i, f] + PI) / (2.0 * PI)
        rz = wp.where(x <= 0.5, h * _bezier(2.0 * x), h + (0.0 - h) * _bezier(2.0 * x - 1.0))
        e += (c.foot_z[f] - rz) * (c.foot_z[f] - rz)
    return wp.exp(-e / p.consts[C_PHASE_SIGMA, c.i])


@wp.func
def lin_vel_z_bound_pronk(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                          st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``global linvel_z^2`` in the bound and pronk gaits (index > 2), else 0."""
    return wp.where(st.gait[c.i] > 2, c.glin[2] * c.glin[2], 0.0)


@wp.func
def tilted(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
           st: TaskState) -> bool:
    """Upvector z below ``C_UP_MIN``, if ``C_EARLY`` > 0.5."""
    return c.up[2] < p.consts[C_UP_MIN, c.i] and p.consts[C_EARLY, c.i] > 0.5


@wp.func
def history_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
                  h: wp.uint32):
    """The error history zeroed."""
    for k in range(st.qpos_error_history.shape[1]):
        st.qpos_error_history[c.i, k] = 0.0


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
def gait_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
               h: wp.uint32):
    """After the command's 4 draws: frequency ``U(lo, hi)`` Hz, gait ``floor(U(0, 5))``,
    swing height ``U(lo, hi)`` m; the feet's phases the gait's; the error history 0."""
    i = c.i
    history_reset(c, m, p, d, st, h)
    for _k in range(4):
        h = next_bits(h)
    freq = uniform_in(h, p.consts[C_GAIT, i], p.consts[C_GAIT + 1, i])
    g = wp.min(int(wp.floor(uniform(next_bits(h)) * 5.0)), 4)
    st.foot_height[i] = uniform_in(next_bits(next_bits(h)), p.consts[C_GAIT + 2, i],
                                   p.consts[C_GAIT + 3, i])
    st.gait_freq[i] = freq
    st.gait[i] = g
    st.phase_dt[i] = 2.0 * PI * c.dt * freq
    for f in range(st.phase.shape[1]):
        st.phase[i, f] = gait_offset(g, f)


@wp.func
def gait_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """Each foot's phase advances by ``phase_dt``, wrapped to ``[-pi, pi)``."""
    for f in range(st.phase.shape[1]):
        st.phase[c.i, f] = wp.mod(st.phase[c.i, f] + st.phase_dt[c.i] + PI, 2.0 * PI) - PI
