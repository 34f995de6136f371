"""Masked and indexed writes into the parameter table.

The table is float32 ``[C, N]``: one row per parameter component, so a kernel that reads
one parameter for all envs reads contiguous memory. Nominal and effective tables are
written together; envs outside the mask are not touched. One launch per write, one thread
per env walking the parameter's components.
"""

from __future__ import annotations

import warp as wp


@wp.func
def _store(x: float, low: float, high: float, clamp: int, col: int, env: int,
           nominal_out: wp.array2d(dtype=float), effective_out: wp.array2d(dtype=float)):
    """Write ``x`` to both tables: as is when validated (``clamp == 0``), else clamped to
    ``[low, high]``, and a non-finite ``x`` leaves both entries unchanged."""
    if clamp == 0 or wp.isfinite(x):
        v = x
        if clamp != 0:
            v = wp.clamp(x, low, high)
        nominal_out[col, env] = v
        effective_out[col, env] = v


@wp.kernel
def masked_write(
    mask: wp.array(dtype=wp.bool),
    values: wp.array2d(dtype=float),
    scalar: float,
    use_scalar: int,
    col0: int,
    ncols: int,
    low: float,
    high: float,
    clamp: int,
    nominal_out: wp.array2d(dtype=float),
    effective_out: wp.array2d(dtype=float),
):
    """Rows ``col0 .. col0 + ncols`` of the masked envs get ``scalar`` (``use_scalar``) or
    ``values[env, j]`` (``[N, ncols]``, any strides: the defaults ``[C]`` expanded to
    ``[N, C]`` reset every row)."""
    env = wp.tid()
    if not mask[env]:
        return
    for j in range(ncols):
        x = scalar
        if use_scalar == 0:
            x = values[env, j]
        _store(x, low, high, clamp, col0 + j, env, nominal_out, effective_out)


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
    k = wp.tid()
    env = int(env_ids[k])
    if env < 0 or env >= nominal_out.shape[1]:
        return
    for j in range(ncols):
        _store(value[k, j], low, high, clamp, col0 + j, env, nominal_out, effective_out)
