"""Masked writes into both parameter tables (float32 ``[C, N]``, one row per parameter
component, as ``gpuparam.ParamTable`` lays them out), one thread per env."""

from __future__ import annotations

import warp as wp


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
    ``[N, C]`` reset every row): as is when validated (``clamp == 0``), else clamped to
    ``[low, high]``, and a non-finite value then leaves both entries unchanged."""
    env = wp.tid()
    if not mask[env]:
        return
    for j in range(ncols):
        x = scalar
        if use_scalar == 0:
            x = values[env, j]
        if clamp == 0 or wp.isfinite(x):
            if clamp != 0:
                x = wp.clamp(x, low, high)
            nominal_out[col0 + j, env] = x
            effective_out[col0 + j, env] = x


@wp.kernel
def check_values(
    mask: wp.array(dtype=wp.bool),
    values: wp.array2d(dtype=float),
    low: float,
    high: float,
    flag_out: wp.array(dtype=int),
):
    """One thread per row of ``values`` (``[rows, ncols]``, any strides): a row outside
    ``mask`` (``[>= rows]``) is skipped; a value that is not finite or lies outside
    ``[low, high]`` sets ``flag_out[0] = 1`` (the caller reads and clears it)."""
    row = wp.tid()
    if not mask[row]:
        return
    for j in range(values.shape[1]):
        x = values[row, j]
        if not (wp.isfinite(x) and x >= low and x <= high):
            flag_out[0] = 1
