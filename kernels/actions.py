"""Actions in and outputs out: actions outside the action space counted on the device (no
host sync), a NaN action kept out of a robot's physics (``copy_ctrl``, ``action_or_zero``)
and shown in its outputs (``nan_row``), and the stages a training-library adapter adds to
the step (its action mapping, and the copy of the step's outputs into its own buffers).

The adapter stages are armed per step by a flag the adapter sets before ``env.step`` (``0``:
disarmed, a plain ``env.step`` of the same env leaves the adapter's buffers alone; ``k``:
write output set ``k - 1``) and cleared by ``disarm`` at the end of the step. One thread
per env, on every device.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index


@wp.kernel
def count_invalid_discrete(
    action: wp.array(dtype=wp.int64),
    n: wp.int64,
    counter_out: wp.array(dtype=wp.int64),
):
    """Count actions outside ``[0, n)``."""
    i = thread_index(wp.tid())
    a = action[i]
    if a < wp.int64(0) or a >= n:
        wp.atomic_add(counter_out, 0, wp.int64(1))


@wp.func
def has_nan(action: wp.array2d(dtype=float), i: int) -> bool:
    """Whether env ``i``'s action (row ``i`` of ``[N, k]``) has a NaN component."""
    bad = bool(False)
    for j in range(action.shape[1]):
        if wp.isnan(action[i, j]):
            bad = True
    return bad


@wp.func
def action_or_zero(action: wp.array2d(dtype=float), i: int, j: int, bad: bool) -> float:
    """Component ``j`` of env ``i``'s action, or 0 when its row has a NaN (``bad``, from
    :func:`has_nan`): what a robot's physics is stepped with (the value itself otherwise, so
    finite actions keep their bits)."""
    return wp.where(bad, 0.0, action[i, j])


@wp.func
def nan_row(out: wp.array2d(dtype=float), i: int):
    """``out[i, :] = NaN`` (an output of an env whose action had a NaN)."""
    for k in range(out.shape[1]):
        out[i, k] = wp.nan


@wp.kernel
def count_invalid_box(
    action: wp.array2d(dtype=float),
    counter_out: wp.array(dtype=wp.int64),
):
    """Count envs whose action has a NaN component."""
    i = thread_index(wp.tid())
    if has_nan(action, i):
        wp.atomic_add(counter_out, 0, wp.int64(1))


@wp.kernel
def copy_ctrl(action: wp.array2d(dtype=float), ctrl_out: wp.array2d(dtype=float)):
    """A robot's controls from its actions ``[N, nu]``: a copy, the zero action for an env
    whose action has a NaN component (MuJoCo Warp would clamp a NaN control to a bound of
    its range)."""
    i = thread_index(wp.tid())
    bad = has_nan(action, i)
    for j in range(action.shape[1]):
        ctrl_out[i, j] = action_or_zero(action, i, j, bad)


@wp.kernel
def pick_positive(
    flag: wp.array(dtype=wp.int32),
    logits: wp.array(dtype=float),
    action_out: wp.array(dtype=wp.int64),
):
    """Armed: ``action_out[e] = 1 if logits[e] > 0 else 0`` (NaN and -0.0 give 0)."""
    if flag[0] == 0:
        return
    e = thread_index(wp.tid())
    action_out[e] = wp.where(logits[e] > 0.0, wp.int64(1), wp.int64(0))


@wp.kernel
def write_outputs(
    # In:
    flag: wp.array(dtype=wp.int32),
    which: int,
    obs: wp.array2d(dtype=float),
    reward: wp.array(dtype=float),
    done: wp.array(dtype=wp.bool),
    truncated: wp.array(dtype=wp.bool),
    terminated: wp.array(dtype=wp.bool),
    # Out (the output set):
    obs_out: wp.array2d(dtype=float),
    reward_out: wp.array(dtype=float),
    dones_out: wp.array(dtype=wp.int64),
    time_outs_out: wp.array(dtype=wp.bool),
):
    """Armed with ``which``: copy the step's outputs into this output set (an adapter
    launches it once per set): ``obs`` ``[N, d]`` (observations, flattened per env),
    ``reward``, ``dones`` int64 (``done``), ``time_outs`` (truncated and not terminated)."""
    if flag[0] != which:
        return
    e = thread_index(wp.tid())
    for j in range(obs.shape[1]):
        obs_out[e, j] = obs[e, j]
    reward_out[e] = reward[e]
    dones_out[e] = wp.where(done[e], wp.int64(1), wp.int64(0))
    time_outs_out[e] = truncated[e] and not terminated[e]


@wp.kernel
def copy_rows_armed(
    flag: wp.array(dtype=wp.int32),
    which: int,
    src: wp.array2d(dtype=float),
    dst_out: wp.array2d(dtype=float),
):
    """Armed with ``which``: ``dst_out[e] = src[e]`` (``[N, d]``, a further observation
    group of the output set)."""
    if flag[0] != which:
        return
    e = thread_index(wp.tid())
    for j in range(src.shape[1]):
        dst_out[e, j] = src[e, j]


@wp.kernel
def disarm(flag_out: wp.array(dtype=wp.int32)):
    """Clear the adapter's flag: the step is over."""
    flag_out[0] = 0
