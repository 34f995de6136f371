"""Exchanging running statistics between ranks (``sync``): pack and apply, one launch each.

Statistics as in ``kernels/stats.py`` (float64, group ``g``, feature ``f`` of ``P``, index
``g * P + f``), in three sets: live (``count``, ``mean``, ``m2``), the shared baseline
(``synced_*``, identical on every rank) and the live statistics as of the last pack
(``sent_*``). A rank's row holds per group ``R = 2 P + 2`` float64 values: the count, means
and M2 of the data since the last pack, and a reset flag. ``unsent`` / ``pending`` are bool
per group: a reset since the last pack / not yet applied to the baseline.

One thread per group (a sync runs every few steps, not every step): it must read a group's
counts before it rewrites them. Ranks' rows are folded in rank order with the one merge,
``chan``, so every rank runs the same float operations on the same values: the same bits.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.stats import F64, TAB, chan, unmerge, write_table

wp.set_module_options({"fuse_fp": False})

BOOL = wp.array(dtype=wp.bool)


@wp.kernel
def exchange_pack(
    P: int,
    count: F64,
    mean: F64,
    m2: F64,
    sent_count: F64,
    sent_mean: F64,
    sent_m2: F64,
    unsent: BOOL,
    out: F64,
):
    """Launch over G: write the data since the last pack (live minus sent) and the reset
    flag into ``out`` ``[G * R]``; sent := live, unsent := False."""
    g = wp.tid()
    R = 2 * P + 2
    n = count[g]
    n_a = sent_count[g]
    out[g * R] = n - n_a
    for f in range(P):
        i = g * P + f
        b = unmerge(n, mean[i], m2[i], n_a, sent_mean[i], sent_m2[i])
        out[g * R + 1 + f] = b[1]
        out[g * R + 1 + P + f] = b[2]
        sent_mean[i] = mean[i]
        sent_m2[i] = m2[i]
    out[g * R + R - 1] = wp.where(unsent[g], wp.float64(1.0), wp.float64(0.0))
    sent_count[g] = n
    unsent[g] = False


@wp.kernel
def exchange_apply(
    rows: F64,
    stride: int,
    W: int,
    P: int,
    count: F64,
    mean: F64,
    m2: F64,
    synced_count: F64,
    synced_mean: F64,
    synced_m2: F64,
    sent_count: F64,
    sent_mean: F64,
    sent_m2: F64,
    unsent: BOOL,
    pending: BOOL,
    eps: wp.float64,
    tab: TAB,
):
    """Launch over G: fold the W ranks' rows (rank ``r``'s value ``j`` at
    ``rows[r * stride + j]``) in rank order into the baseline, dropping it first where any
    rank flagged a reset. Live' = baseline' + this rank's data since the pack (live minus
    sent), except for a group reset here since the pack, which keeps only that data;
    sent' = baseline' there too; pending := unsent. Then rewrite the group's tables."""
    g = wp.tid()
    R = 2 * P + 2
    zero = wp.float64(0.0)
    dropped = bool(False)
    for r in range(W):
        if rows[r * stride + g * R + R - 1] != zero:
            dropped = True
    n_l = count[g]
    n_sent = sent_count[g]
    here = unsent[g]
    n_s = synced_count[g]
    if dropped:
        n_s = zero
    n_new = n_s
    for f in range(P):
        i = g * P + f
        base = wp.vec3d(n_s, zero, zero)
        if not dropped:
            base = wp.vec3d(n_s, synced_mean[i], synced_m2[i])
        for r in range(W):
            k = r * stride + g * R
            base = chan(base[0], base[1], base[2], rows[k], rows[k + 1 + f], rows[k + 1 + P + f])
        own = unmerge(n_l, mean[i], m2[i], n_sent, sent_mean[i], sent_m2[i])
        synced_mean[i] = base[1]
        synced_m2[i] = base[2]
        n_new = base[0]
        if not here:
            live = chan(base[0], base[1], base[2], own[0], own[1], own[2])
            mean[i] = live[1]
            m2[i] = live[2]
            sent_mean[i] = base[1]
            sent_m2[i] = base[2]
    synced_count[g] = n_new
    if not here:
        count[g] = n_new + (n_l - n_sent)
        sent_count[g] = n_new
    pending[g] = here
    for f in range(P):
        i = g * P + f
        write_table(i, count[g], mean[i], m2[i], eps, tab)
