"""Masked and indexed writes into the parameter table.

The table is float32 ``[C, N]``: one row per parameter component, so a kernel that reads
one parameter for all envs reads contiguous memory. Nominal and effective tables are
written together; envs outside the mask are not touched.
"""

from __future__ import annotations

import warp as wp


@wp.func
def _checked(v: float, low: float, high: float, clamp: int, old: float) -> float:
    if clamp == 0:
        return v
    if not wp.isfinite(v):
        return old
    return wp.clamp(v, low, high)


@wp.kernel
def masked_write(
    mask: wp.array(dtype=wp.bool),
    use_mask: int,
    value: wp.array2d(dtype=float),
    col0: int,
    low: float,
    high: float,
    clamp: int,
    nominal_out: wp.array2d(dtype=float),
    effective_out: wp.array2d(dtype=float),
):
    """Launch over (N, ncols); ``value`` is ``[N, ncols]`` (stride 0 to broadcast)."""
    env, j = wp.tid()
    if use_mask != 0 and not mask[env]:
        return
    col = col0 + j
    v = _checked(value[env, j], low, high, clamp, nominal_out[col, env])
    nominal_out[col, env] = v
    effective_out[col, env] = v


@wp.kernel
def indexed_write(
    env_ids: wp.array(dtype=wp.int64),
    value: wp.array2d(dtype=float),
    col0: int,
    low: float,
    high: float,
    clamp: int,
    nominal_out: wp.array2d(dtype=float),
    effective_out: wp.array2d(dtype=float),
):
    """Launch over (K, ncols); row k of ``value`` goes to env ``env_ids[k]``."""
    k, j = wp.tid()
    env = int(env_ids[k])
    if env < 0 or env >= nominal_out.shape[1]:
        return
    col = col0 + j
    v = _checked(value[k, j], low, high, clamp, nominal_out[col, env])
    nominal_out[col, env] = v
    effective_out[col, env] = v
