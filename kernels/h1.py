"""Unitree H1 gait tracking (MuJoCo Playground's ``H1JoystickGaitTracking`` and
``H1InplaceGaitTracking``): the task's own terms and laws for ``legged_terms``' kernel
(signatures there). Constants are rows of the task's ``consts`` block (``C_*``, in
``gpuparam.envs.mujoco.h1``'s order); per-env gait draws live in the task state
(``gait_freq``, ``gait``, ``foot_height``; phase per foot, its advance ``phase_dt``)."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.legged import STREAM_COMMAND, reset_command, step_bits
from gpuparam.kernels.legged_terms import (
    PI,
    Ctx,
    Sensors,
    TaskData,
    TaskModel,
    TaskParams,
    TaskState,
    air_time_sum,
    gait_draw,
    phase_error,
)
from gpuparam.kernels.rng import next_bits

wp.set_module_options({"fuse_fp": False})

# the rows of CONST_ROWS (tracking_sigma, early_termination and fall_upvector_z are read as
# Ctx.k, the fall by legged_terms.tilted)
(C_PHASE_SIGMA, C_FREQ_MIN, C_FREQ_MAX, C_GAIT_COUNT, C_HEIGHT_MIN, C_HEIGHT_MAX,
 C_EARLY_TERMINATION, C_FALL_UP_Z, C_LIN_THRESHOLD, C_ANG_THRESHOLD,
 C_RESAMPLE_STEPS) = (wp.constant(k) for k in range(1, 12))
CONST_ROWS = ("tracking_sigma", "feet_phase_sigma", "gait_frequency_min",
              "gait_frequency_max", "gait_count", "foot_height_min", "foot_height_max",
              "early_termination", "fall_upvector_z", "lin_vel_threshold",
              "ang_vel_threshold", "command_resample_steps")


# ----------------------------------------------------------------- terms
@wp.func
def action_rate_h1(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """Playground's ``_cost_action_rate(last_act, last_last_act, act)`` (its argument
    order, envpool's too): ``|la - lla|^2 + |la - 2 lla + a|^2``."""
    rate = float(0.0)
    for j in range(m.default_pose.shape[0]):
        la = st.last_act[c.i, j]
        lla = st.last_last_act[c.i, j]
        rate += (la - lla) * (la - lla) + (la - 2.0 * lla + act[c.i, j]) * (
            la - 2.0 * lla + act[c.i, j])
    return rate


@wp.func
def feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
               st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum_feet (foot z - rz(phase, foot_height))^2 / feet_phase_sigma)``."""
    err = phase_error(c, sn, st, st.foot_height[c.i])
    return wp.exp(-err / p.consts[C_PHASE_SIGMA, c.i])


@wp.func
def feet_air_time(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum (air time - 0.1)`` at first contacts, if ``|cmd_xy| > 0.05``."""
    moving = wp.sqrt(c.cmd[0] * c.cmd[0] + c.cmd[1] * c.cmd[1]) > 0.05
    return wp.where(moving, air_time_sum(c, sn, st), 0.0)


@wp.func
def lin_vel_z_jump(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``global linvel_z^2`` under the jump gait (gait > 0), else 0."""
    return wp.where(st.gait[c.i] > 0, c.glin[2] * c.glin[2], 0.0)


# ----------------------------------------------------------------- state laws
@wp.func
def _deadband(h: wp.uint32, c: Ctx, p: TaskParams, st: TaskState):
    """A command ``U(-a, a)`` (3 draws from ``h``), each component under its threshold
    (linear, linear, angular) set to 0."""
    cmd = reset_command(h, p.cmd_range, c.i)
    for k in range(3):
        thr = p.consts[wp.where(k < 2, C_LIN_THRESHOLD, C_ANG_THRESHOLD), c.i]
        st.command[c.i, k] = wp.where(wp.abs(cmd[k]) < thr, 0.0, cmd[k])


@wp.func
def command_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
                  h: wp.uint32):
    """The command at a reset (draws 0-2 of ``h``); the step counter 0."""
    _deadband(h, c, p, st)
    st.countdown[c.i] = 0


@wp.func
def command_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """After a step: the counter + 1; past ``command_resample_steps`` the command is
    redrawn; the counter restarts then and at a termination."""
    n = st.countdown[c.i] + 1
    resample = float(n) > p.consts[C_RESAMPLE_STEPS, c.i]
    if resample:
        _deadband(step_bits(c.seed, c.gid, STREAM_COMMAND, c.episode, c.step), c, p, st)
    if resample or c.done:
        n = 0
    st.countdown[c.i] = n


@wp.func
def gait_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState,
               h: wp.uint32):
    """Gait draws (draws 3-5 of ``h``, ``legged_terms.gait_draw``): frequency
    ``U(gait_frequency_min, max)``, gait ``min(floor(U(0, gait_count)), gait_count - 1)``
    (0 walk: phases (0, pi); 1 jump: (0, 0)), apex ``U(foot_height_min, max)``."""
    i = c.i
    for _k in range(3):  # past the command's draws
        h = next_bits(h)
    g = gait_draw(c, st, h, p.consts[C_FREQ_MIN, i], p.consts[C_FREQ_MAX, i],
                  p.consts[C_GAIT_COUNT, i], p.consts[C_HEIGHT_MIN, i], p.consts[C_HEIGHT_MAX, i])
    st.phase[i, 0] = 0.0
    st.phase[i, 1] = wp.where(g == 0, PI, 0.0)

