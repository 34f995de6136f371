"""Exchanging running statistics between ranks (``sync``): pack and apply, one launch each.

Statistics as in ``kernels/stats.py`` (float64, group ``g``, feature ``f`` of ``P``, index
``g * P + f``), in three sets: live (``count``, ``mean``, ``m2``), the shared baseline
(``synced_*``, identical on every rank) and the live statistics as of the last pack
(``sent_*``). A rank's row holds per group ``R = 2 P + 2`` float64 values: the count, means
and M2 of the data since the last pack, and a reset flag. ``unsent`` / ``pending`` are bool
(uint8) per group: a reset since the last pack / not yet applied to the baseline.

One thread per group walks its features and the ranks' rows in rank order, so every rank
runs the same float operations on the same values and gets the same bits.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.stats import write_tables


@wp.func
def unmerge_into(
    n: wp.float64,
    mean: wp.float64,
    m2: wp.float64,
    n_a: wp.float64,
    mean_a: wp.float64,
    m2_a: wp.float64,
) -> wp.vec2d:
    """Mean and M2 of B given A∪B (``n``, ``mean``, ``m2``) and A; zeros where B is empty."""
    n_b = n - n_a
    out = wp.vec2d(wp.float64(0.0), wp.float64(0.0))
    if n_b > wp.float64(0.0):
        mean_b = mean_a + (mean - mean_a) * (n / n_b)
        d = mean_b - mean_a
        corr = d * d * (n_a * n_b / wp.max(n, wp.float64(1.0)))
        out = wp.vec2d(mean_b, wp.max(m2 - m2_a - corr, wp.float64(0.0)))
    return out


@wp.func
def merge_moments(
    n_a: wp.float64,
    mean_a: wp.float64,
    m2_a: wp.float64,
    w_b: wp.float64,
    mean_b: wp.float64,
    m2_b: wp.float64,
) -> wp.vec2d:
    """Mean and M2 of A∪B from A's (count ``n_a``) and B's, ``w_b = n_b / (n_a + n_b)``."""
    d = mean_b - mean_a
    return wp.vec2d(mean_a + d * w_b, m2_a + m2_b + d * d * n_a * w_b)


@wp.kernel
def exchange_pack(
    P: int,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    sent_count: wp.array(dtype=wp.float64),
    sent_mean: wp.array(dtype=wp.float64),
    sent_m2: wp.array(dtype=wp.float64),
    unsent: wp.array(dtype=wp.uint8),
    out: wp.array(dtype=wp.float64),
):
    """Launch over G: write the data since the last pack (live minus sent) and the reset
    flag into ``out`` ``[G * R]``; sent := live, unsent := 0."""
    g = thread_index(wp.tid())
    R = 2 * P + 2
    n = count[g]
    n_a = sent_count[g]
    out[g * R] = n - n_a
    for f in range(P):
        i = g * P + f
        b = unmerge_into(n, mean[i], m2[i], n_a, sent_mean[i], sent_m2[i])
        out[g * R + 1 + f] = b[0]
        out[g * R + 1 + P + f] = b[1]
        sent_mean[i] = mean[i]
        sent_m2[i] = m2[i]
    out[g * R + R - 1] = wp.float64(unsent[g])
    sent_count[g] = n
    unsent[g] = wp.uint8(0)


@wp.kernel
def exchange_apply(
    rows: wp.array(dtype=wp.float64),
    stride: int,
    W: int,
    P: int,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    synced_count: wp.array(dtype=wp.float64),
    synced_mean: wp.array(dtype=wp.float64),
    synced_m2: wp.array(dtype=wp.float64),
    sent_count: wp.array(dtype=wp.float64),
    sent_mean: wp.array(dtype=wp.float64),
    sent_m2: wp.array(dtype=wp.float64),
    unsent: wp.array(dtype=wp.uint8),
    pending: wp.array(dtype=wp.uint8),
    k: int,
    eps: wp.float64,
    center_out: wp.array(dtype=wp.float32),
    scale_out: wp.array(dtype=wp.float32),
    offset_out: wp.array(dtype=wp.float32),
):
    """Launch over G: merge the W ranks' rows (rank ``r``'s value ``j`` at
    ``rows[r * stride + j]``) into the baseline, dropping it first where any rank flagged a
    reset: baseline' = baseline + sum over ranks (count-weighted means, M2 plus the
    between-rank term around the merged mean). Live' = baseline' + this rank's data since
    the pack (live minus sent), except for a group reset here since the pack, which keeps
    only that data; sent' = baseline' there too; pending := unsent. Then rebuild the ``k``
    float32 table rows of the group (``kernels/stats.py``; ``k = 0``: no tables)."""
    g = thread_index(wp.tid())
    R = 2 * P + 2
    one = wp.float64(1.0)
    n_t = wp.float64(0.0)
    flag = wp.float64(0.0)
    for r in range(W):
        n_t = n_t + rows[r * stride + g * R]
        flag = flag + rows[r * stride + g * R + R - 1]
    n_s = synced_count[g]
    if flag > wp.float64(0.0):
        n_s = wp.float64(0.0)
    n_b = n_s + n_t  # the new baseline's count
    w_t = n_t / wp.max(n_b, one)
    n_l = count[g]
    n_sent = sent_count[g]
    n_e = n_l - n_sent  # data since the pack
    n = n_b + n_e
    w_e = n_e / wp.max(n, one)
    here = unsent[g] != wp.uint8(0)
    for f in range(P):
        i = g * P + f
        mt = wp.float64(0.0)
        for r in range(W):
            mt = mt + rows[r * stride + g * R + 1 + f] * rows[r * stride + g * R]
        mt = mt / wp.max(n_t, one)
        m2t = wp.float64(0.0)
        for r in range(W):
            d = rows[r * stride + g * R + 1 + f] - mt
            m2t = m2t + rows[r * stride + g * R + 1 + P + f] + d * d * rows[r * stride + g * R]
        ms = wp.float64(0.0)
        m2s = wp.float64(0.0)
        if flag == wp.float64(0.0):
            ms = synced_mean[i]
            m2s = synced_m2[i]
        b = merge_moments(n_s, ms, m2s, w_t, mt, m2t)
        mb = b[0]
        m2b = b[1]
        e = unmerge_into(n_l, mean[i], m2[i], n_sent, sent_mean[i], sent_m2[i])
        synced_mean[i] = mb
        synced_m2[i] = m2b
        if not here:
            live = merge_moments(n_b, mb, m2b, w_e, e[0], e[1])
            mean[i] = live[0]
            m2[i] = live[1]
            sent_mean[i] = mb
            sent_m2[i] = m2b
    synced_count[g] = n_b
    if not here:
        count[g] = n
        sent_count[g] = n_b
    pending[g] = unsent[g]
    write_tables(g, count[g], P, k, eps, 0, mean, m2, center_out, scale_out, offset_out)
