"""Masked and indexed writes into the parameter table.

The table is float32 ``[C, N]``: one row per parameter component, so a kernel that reads
one parameter for all envs reads contiguous memory. Nominal and effective tables are
written together; envs outside the mask are not touched. Masked writes work on one table
row (one parameter component) per launch: 1-D rows index fastest on every device.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index


@wp.func
def _writes(v: float, clamp: int) -> bool:
    """Whether a value is written: always when validated (``clamp == 0``), else only a
    finite one (a non-finite value leaves both tables' entries unchanged)."""
    return clamp == 0 or wp.isfinite(v)


@wp.func
def _checked(v: float, low: float, high: float, clamp: int, old: float) -> float:
    if clamp == 0:
        return v
    if not wp.isfinite(v):
        return old
    return wp.clamp(v, low, high)


@wp.kernel
def masked_fill(
    mask: wp.array(dtype=wp.bool),
    value: float,
    low: float,
    high: float,
    clamp: int,
    nominal_out: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
):
    """Write one scalar into one table row (one parameter component) of the masked envs.

    Kept apart from ``masked_write`` on purpose: reading the value from a stride-0 array
    instead of a kernel argument makes a scalar write about 2.5x slower on CPU.
    """
    env = thread_index(wp.tid())
    if not mask[env]:
        return
    if _writes(value, clamp):
        v = _checked(value, low, high, clamp, 0.0)
        nominal_out[env] = v
        effective_out[env] = v


@wp.kernel
def masked_write(
    mask: wp.array(dtype=wp.bool),
    value: wp.array(dtype=float),
    low: float,
    high: float,
    clamp: int,
    nominal_out: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
):
    """Write ``value[env]`` into one table row of the masked envs."""
    env = thread_index(wp.tid())
    if not mask[env]:
        return
    x = value[env]
    if _writes(x, clamp):
        v = _checked(x, low, high, clamp, 0.0)
        nominal_out[env] = v
        effective_out[env] = v


@wp.kernel
def indexed_write(
    env_ids: wp.array(dtype=wp.int64),
    value: wp.array2d(dtype=float),
    col0: int,
    ncols: int,
    low: float,
    high: float,
    clamp: int,
    nominal_out: wp.array2d(dtype=float),
    effective_out: wp.array2d(dtype=float),
):
    """Row k of ``value`` ``[K, ncols]`` goes to env ``env_ids[k]`` (out-of-range ids skip)."""
    k = thread_index(wp.tid())
    env = int(env_ids[k])
    if env < 0 or env >= nominal_out.shape[1]:
        return
    for j in range(ncols):
        col = col0 + j
        x = value[k, j]
        if _writes(x, clamp):
            v = _checked(x, low, high, clamp, 0.0)
            nominal_out[col, env] = v
            effective_out[col, env] = v
