"""Curriculum levels and automatic domain randomization (ADR), masked by episode ends.

All arrays are 1D; per-env tables are flattened ``row * n + env`` like the parameter
tables. ADR sums metrics in fixed point (``ADR_SCALE``) with integer atomics, so the sums do
not depend on the order threads add them.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index

ADR_SCALE = wp.constant(1024.0)


@wp.kernel
def update_levels(
    gate: wp.array(dtype=wp.bool),
    force: int,
    metric: wp.array(dtype=float),
    promote: float,
    demote: float,
    num_levels: int,
    n: int,
    pcol: wp.array(dtype=wp.int32),
    pval: wp.array(dtype=float),
    num_p: int,
    prow: wp.array(dtype=wp.int32),
    rval: wp.array(dtype=float),
    num_q: int,
    levels: wp.array(dtype=wp.int32),
    changed_out: wp.array(dtype=wp.bool),
    nominal_out: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
    pe_out: wp.array(dtype=float),
):
    """One thread per env in ``gate``. Unless ``force``, move the level one up when
    ``metric >= promote``, one down when ``metric <= demote`` (clamped to the levels) and
    stop if it did not change. Then write the level's parameter values (``pval[level *
    num_p + p]`` into table column ``pcol[p]``, nominal and effective) and per-env ranges
    (``rval[2 * (level * num_q + q) + {0, 1}]`` into ``pe`` rows ``2 * prow[q] + {0, 1}``).
    ``changed_out[env]``: whether this launch wrote the env (what listeners are told)."""
    env = thread_index(wp.tid())
    changed_out[env] = False
    if not gate[env]:
        return
    level = levels[env]
    if force == 0:
        m = metric[env]
        new = level
        if m >= promote:
            new = level + 1
        elif m <= demote:
            new = level - 1
        new = wp.clamp(new, 0, num_levels - 1)
        if new == level:
            return
        levels[env] = new
        level = new
    changed_out[env] = True
    p = int(0)
    while p < num_p:
        v = pval[level * num_p + p]
        i = pcol[p] * n + env
        nominal_out[i] = v
        effective_out[i] = v
        p += 1
    q = int(0)
    while q < num_q:
        k = 2 * (level * num_q + q)
        r = 2 * prow[q]
        pe_out[r * n + env] = rval[k]
        pe_out[(r + 1) * n + env] = rval[k + 1]
        q += 1


@wp.kernel
def adr_collect(
    gate: wp.array(dtype=wp.bool),
    metric: wp.array(dtype=float),
    n: int,
    acol: wp.array(dtype=wp.int32),
    aval: wp.array(dtype=wp.int32),
    aop: wp.array(dtype=wp.int32),
    edge: wp.array(dtype=float),
    num_a: int,
    vals: wp.array(dtype=float),
    nominal: wp.array(dtype=float),
    effective: wp.array(dtype=float),
    sums_out: wp.array(dtype=wp.int64),
    counts_out: wp.array(dtype=wp.int32),
):
    """One thread per env in ``gate`` (episode ended). For each ADR component ``a``
    (parameter column ``acol[a]``, range ``vals[aval[a]]``, ``vals[aval[a] + 1]``, op
    ``aop[a]``): recover the draw the episode ran with from the effective and nominal
    values; if it lies within ``edge[a]`` of the range's width (and a float tolerance) of
    the low (high) bound, add the metric to slot ``2a`` (``2a + 1``)."""
    env = thread_index(wp.tid())
    if not gate[env]:
        return
    mq = wp.int64(wp.round(metric[env] * ADR_SCALE))
    a = int(0)
    while a < num_a:
        i = acol[a] * n + env
        x = effective[i]
        op = aop[a]
        if op == 1:
            x = x - nominal[i]
        elif op == 2:
            x = x / nominal[i]
        lo = vals[aval[a]]
        hi = vals[aval[a] + 1]
        w = (hi - lo) * edge[a] + 1.0e-5 * wp.max(wp.max(wp.abs(lo), wp.abs(hi)), 1.0e-6)
        if x <= lo + w:
            wp.atomic_add(sums_out, 2 * a, mq)
            wp.atomic_add(counts_out, 2 * a, 1)
        if x >= hi - w:
            wp.atomic_add(sums_out, 2 * a + 1, mq)
            wp.atomic_add(counts_out, 2 * a + 1, 1)
        a += 1


@wp.kernel
def adr_update(
    aval: wp.array(dtype=wp.int32),
    samples: wp.array(dtype=wp.int32),
    thr_high: wp.array(dtype=float),
    thr_low: wp.array(dtype=float),
    delta: wp.array(dtype=float),
    lim_low: wp.array(dtype=float),
    lim_high: wp.array(dtype=float),
    vals_out: wp.array(dtype=float),
    sums: wp.array(dtype=wp.int64),
    counts: wp.array(dtype=wp.int32),
):
    """One thread per ADR component. A bound with at least ``samples`` episodes decides:
    mean metric ``>= thr_high`` widens it by ``delta`` (up to its limit), ``< thr_low``
    narrows it by ``delta`` (not past the other bound); then its statistics restart."""
    a = thread_index(wp.tid())
    side = int(0)
    while side < 2:
        s = 2 * a + side
        c = counts[s]
        if c >= samples[a]:
            mean = float(sums[s]) / (ADR_SCALE * float(c))
            k = aval[a] + side
            v = vals_out[k]
            if mean >= thr_high[a]:
                if side == 0:
                    v = wp.max(v - delta[a], lim_low[a])
                else:
                    v = wp.min(v + delta[a], lim_high[a])
            elif mean < thr_low[a]:
                if side == 0:
                    v = wp.min(v + delta[a], vals_out[k + 1])
                else:
                    v = wp.max(v - delta[a], vals_out[k - 1])
            vals_out[k] = v
            sums[s] = wp.int64(0)
            counts[s] = 0
        side += 1
