"""Spot's own task terms (``gpuparam.envs.mujoco.spot``), with ``kernels.legged_terms``'
signatures: the joint-angle noise shared by the observation and the error history, the feet
positions, posture, hip splay, the gait-gated vertical velocity (its tilt termination:
``legged_terms.tilted``). Rows read: noise ``NOISE_JOINT``, ``NOISE_FEET`` (+ 0, 1, 2: x,
y, z)."""

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
from gpuparam.kernels.rng import STREAM_TERM0, uniform

wp.set_module_options({"fuse_fp": False})

STREAM_SPOT_NOISE = wp.constant(STREAM_TERM0 + (1 << 20) + 32)  # keyed by component
NOISE_JOINT = wp.constant(3)
NOISE_FEET = wp.constant(4)


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
def lin_vel_z_bound_pronk(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                          st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``global linvel_z^2`` in the bound and pronk gaits (index > 2), else 0."""
    return wp.where(st.gait[c.i] > 2, c.glin[2] * c.glin[2], 0.0)
