"""Curriculum levels and automatic domain randomization (ADR), masked by episode ends.

Parameter tables are ``[C, N]`` (column, env) like ``ParamTable``'s. ADR sums metrics in
fixed point (``ADR_SCALE``) with integer atomics, so the sums do not depend on the order
threads add them; built without floating-point contraction, so decisions do not depend on
the device either.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.randomize import OP_ADD, OP_SCALE

wp.set_module_options({"fuse_fp": False})

ADR_SCALE = wp.constant(1024.0)
ADR_METRIC_MAX = wp.constant(2097152.0)  # 2**21: |metric * ADR_SCALE| <= 2**31


@wp.struct
class Levels:
    """A curriculum's levels: the parameter columns ``pcol [P]`` its values go to, the
    values ``pval [L, P]`` and per-env ranges ``rval [L, 2Q]`` of each level."""

    pcol: wp.array(dtype=wp.int32)
    pval: wp.array2d(dtype=float)
    rval: wp.array2d(dtype=float)


@wp.kernel
def update_levels(
    # Model:
    table: Levels,
    promote: float,
    demote: float,
    # Data in:
    force: int,
    gate: wp.array(dtype=wp.bool),
    metric: wp.array(dtype=float),
    # Data out (``levels``: read, then written):
    levels: wp.array(dtype=wp.int32),
    changed_out: wp.array(dtype=wp.bool),
    nominal_out: wp.array2d(dtype=float),
    effective_out: wp.array2d(dtype=float),
    pe_out: wp.array2d(dtype=float),
):
    """One thread per env in ``gate``. Unless ``force``, move the level one up when
    ``metric >= promote``, one down when ``metric <= demote`` (clamped to the ``L`` levels
    of ``pval [L, P]``) and stop if it did not change. Then write the level's parameter
    values (``pval[level, p]`` into table column ``pcol[p]``, nominal and effective) and
    per-env ranges (row ``rval[level]`` ``[2Q]`` into ``pe_out [2Q, N]``).
    ``changed_out[env]``: whether this launch wrote the env (what listeners are told)."""
    pcol, pval, rval = table.pcol, table.pval, table.rval
    env = thread_index(wp.tid())
    changed_out[env] = False
    if not gate[env]:
        return
    level = levels[env]
    if force == 0:
        m = metric[env]  # NaN: neither
        step = wp.where(m >= promote, 1, wp.where(m <= demote, -1, 0))
        new = wp.clamp(level + step, 0, pval.shape[0] - 1)
        if new == level:
            return
        levels[env] = new
        level = new
    changed_out[env] = True
    for p in range(pcol.shape[0]):
        v = pval[level, p]
        nominal_out[pcol[p], env] = v
        effective_out[pcol[p], env] = v
    for q in range(pe_out.shape[0]):
        pe_out[q, env] = rval[level, q]


@wp.struct
class AdrSlot:
    """One component of an ADR term: where its range lives and how it moves."""

    ranges: wp.array(dtype=float)  # [2]: the component's (low, high) in the term's ranges
    col: int  # the parameter column of the component
    op: int  # the term's op (kernels.randomize OP_*)
    edge: float  # fraction of the width counted as "at a bound"
    samples: int  # episodes per decision
    thr_high: float  # widen at or above this mean metric
    thr_low: float  # narrow below it
    delta: float  # step per decision
    lim_low: float  # the lowest low
    lim_high: float  # the highest high


@wp.kernel
def adr_collect(
    gate: wp.array(dtype=wp.bool),
    metric: wp.array(dtype=float),
    slots: wp.array(dtype=AdrSlot),
    nominal: wp.array2d(dtype=float),
    effective: wp.array2d(dtype=float),
    sums_out: wp.array(dtype=wp.int64),
    counts_out: wp.array(dtype=wp.int32),
):
    """One thread per env in ``gate`` (episode ended). For each slot ``a``: recover the
    draw the episode ran with from the effective and nominal values; if it lies within
    ``edge`` of the range's width (and a float tolerance) of the low (high) bound, add the
    metric to statistic ``2a`` (``2a + 1``) of ``sums_out``, ``counts_out`` ``[2A]``.

    An episode whose metric is NaN or infinite is not counted, and a metric is clamped to
    ``+-ADR_METRIC_MAX`` before its conversion to fixed point: a float outside int64 has no
    defined conversion (the CPU gives -2**63, CUDA saturates or gives 0), and the sums of
    at most 2**31 clamped values cannot overflow int64."""
    env = thread_index(wp.tid())
    if not gate[env]:
        return
    m = metric[env]
    if not wp.isfinite(m):
        return
    mq = wp.int64(wp.round(wp.clamp(m, -ADR_METRIC_MAX, ADR_METRIC_MAX) * ADR_SCALE))
    for a in range(slots.shape[0]):
        s = slots[a]
        x = effective[s.col, env]
        if s.op == OP_ADD:
            x = x - nominal[s.col, env]
        elif s.op == OP_SCALE:
            x = x / nominal[s.col, env]
        lo = s.ranges[0]
        hi = s.ranges[1]
        w = (hi - lo) * s.edge + 1.0e-5 * wp.max(wp.max(wp.abs(lo), wp.abs(hi)), 1.0e-6)
        if x <= lo + w:
            wp.atomic_add(sums_out, 2 * a, mq)
            wp.atomic_add(counts_out, 2 * a, 1)
        if x >= hi - w:
            wp.atomic_add(sums_out, 2 * a + 1, mq)
            wp.atomic_add(counts_out, 2 * a + 1, 1)


@wp.kernel
def adr_update(
    slots: wp.array(dtype=AdrSlot),
    sums: wp.array(dtype=wp.int64),
    counts: wp.array(dtype=wp.int32),
):
    """One thread per slot. A bound with at least ``samples`` episodes decides: mean
    metric ``>= thr_high`` widens it by ``delta`` (up to its limit), ``< thr_low`` narrows
    it by ``delta`` (not past the other bound); then its statistics restart."""
    a = thread_index(wp.tid())
    s = slots[a]
    for side in range(2):
        i = 2 * a + side
        c = counts[i]
        if c >= s.samples:
            mean = float(sums[i]) / (ADR_SCALE * float(c))
            v = s.ranges[side]
            if mean >= s.thr_high:
                v = wp.where(side == 0, wp.max(v - s.delta, s.lim_low),
                             wp.min(v + s.delta, s.lim_high))
            elif mean < s.thr_low:
                v = wp.where(side == 0, wp.min(v + s.delta, s.ranges[1]),
                             wp.max(v - s.delta, s.ranges[0]))
            s.ranges[side] = v
            sums[i] = wp.int64(0)
            counts[i] = 0
