"""Running statistics: Chan et al.'s merge of batch moments and the normalization tables.

Statistics are float64 per group ``g`` and feature ``f`` of ``P`` (arrays flattened as
``g * P + f``): ``count [G]``, ``mean [G * P]``, ``m2 [G * P]`` (sum of squared deviations).
The float32 tables the hot path normalizes with hold ``k`` copies of each group's row
(index ``(g * k + t) * P + f`` for ``t < k``): a center ``c``, the scale
``s = 1 / sqrt(var + eps)`` and the offset ``b = (c - mean) * s``, so that
``(x - c) * s + b == (x - mean) * s``. The center is the group's mean rounded to float32
(``b`` is then a rounding residue), or the batch mean of the current update (``shifted``):
the hot path then reuses ``x - c``, which it computed for the batch statistics. A group with
count 0 normalizes with mean 0 and var 1.

One thread per group walks its features, so no two threads touch the same count and the
kernels need no atomics; the big reductions over envs happen before, in torch.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index


@wp.func
def write_tables(
    g: int,
    n: wp.float64,
    P: int,
    k: int,
    eps: wp.float64,
    keep_center: int,
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center: wp.array(dtype=wp.float32),
    scale_out: wp.array(dtype=wp.float32),
    offset_out: wp.array(dtype=wp.float32),
):
    """Fill group ``g``'s ``k`` table rows from its statistics (count ``n``); with
    ``keep_center`` the centers already hold the batch mean, else they get the mean."""
    for f in range(P):
        i = g * P + f
        var = wp.float64(1.0)
        if n > wp.float64(0.0):
            var = m2[i] / n
        s = wp.float64(1.0) / wp.sqrt(var + eps)
        c = wp.float32(mean[i])
        if keep_center != 0:
            c = center[g * k * P + f]
        b = wp.float32((wp.float64(c) - mean[i]) * s)
        for t in range(k):
            j = (g * k + t) * P + f
            center[j] = c
            scale_out[j] = wp.float32(s)
            offset_out[j] = b


@wp.func
def merge_sums(
    i: int,
    n_a: wp.float64,
    n_b: wp.float64,
    w_b: wp.float64,
    sd: wp.float64,
    sq: wp.float64,
    shift: wp.float64,
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
):
    """Merge into statistic ``i`` (count ``n_a``) a batch of ``n_b`` samples given as the
    sums ``sd`` of ``d = x - shift`` and ``sq`` of ``d * d``; ``w_b = n_b / (n_a + n_b)``."""
    mean_d = sd / n_b
    batch_m2 = wp.max(sq - sd * mean_d, wp.float64(0.0))
    delta = shift + mean_d - mean[i]
    m2[i] = m2[i] + batch_m2 + delta * delta * n_a * w_b
    mean[i] = mean[i] + delta * w_b


@wp.kernel
def refresh(
    P: int,
    k: int,
    eps: wp.float64,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_out: wp.array(dtype=wp.float32),
    scale_out: wp.array(dtype=wp.float32),
    offset_out: wp.array(dtype=wp.float32),
):
    """Launch over G: rebuild the tables after the statistics changed outside a merge."""
    g = thread_index(wp.tid())
    write_tables(g, count[g], P, k, eps, 0, mean, m2, center_out, scale_out, offset_out)


@wp.kernel
def merge(
    batch_count: wp.array(dtype=wp.float64),
    batch_mean: wp.array(dtype=wp.float64),
    batch_m2: wp.array(dtype=wp.float64),
    P: int,
    k: int,
    eps: wp.float64,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_out: wp.array(dtype=wp.float32),
    scale_out: wp.array(dtype=wp.float32),
    offset_out: wp.array(dtype=wp.float32),
):
    """Launch over G: merge batch moments (``[G]``, ``[G * P]``, ``[G * P]``) into the
    statistics, then rebuild the tables. Groups empty on both sides keep their mean."""
    g = thread_index(wp.tid())
    n_a = count[g]
    n_b = batch_count[g]
    n = n_a + n_b
    w_b = n_b / wp.max(n, wp.float64(1.0))
    for f in range(P):
        i = g * P + f
        delta = batch_mean[i] - mean[i]
        m2[i] = m2[i] + batch_m2[i] + delta * delta * n_a * w_b
        mean[i] = mean[i] + delta * w_b
    count[g] = n
    write_tables(g, n, P, k, eps, 0, mean, m2, center_out, scale_out, offset_out)


@wp.kernel
def batch_center64(
    col_sum: wp.array(dtype=wp.float64),
    n_b: wp.array(dtype=wp.float64),
    P: int,
    k: int,
    mean: wp.array(dtype=wp.float64),
    center_out: wp.array(dtype=wp.float32),
    center64_out: wp.array(dtype=wp.float64),
):
    """Launch over 1 (one group): the batch mean per feature from the float64 per-column
    sums of the ``[N // k, k * P]`` row view over ``n_b[0]`` finite samples, written as the
    ``k`` centers of each feature (the running mean if the batch has no finite sample),
    in float32 and (the same values) in float64."""
    for f in range(P):
        s = wp.float64(0.0)
        for t in range(k):
            s += col_sum[t * P + f]
        c = wp.float32(mean[f])
        if n_b[0] > wp.float64(0.0):
            c = wp.float32(s / n_b[0])
        for t in range(k):
            center_out[t * P + f] = c
            center64_out[t * P + f] = wp.float64(c)


@wp.kernel
def merge_shifted_n(
    col_sums: wp.array(dtype=wp.float64),
    nb: wp.array(dtype=wp.float64),
    n_total: wp.float64,
    P: int,
    k: int,
    eps: wp.float64,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center: wp.array(dtype=wp.float32),
    scale_out: wp.array(dtype=wp.float32),
    offset_out: wp.array(dtype=wp.float32),
    nonfinite: wp.array(dtype=wp.int64),
):
    """Launch over 1 (one group): merge a batch of ``nb[0]`` finite samples given as the
    float64 per-column sums of ``d = x - center`` (``col_sums[:W]``) and of ``d * d``
    (``col_sums[W:]``, ``W = k * P``) over the row view, then rebuild the tables around the
    same centers (around the mean if the batch has no finite sample); the other
    ``n_total - nb[0]`` samples are added to ``nonfinite[0]``."""
    W = k * P
    n_a = count[0]
    n_b = nb[0]
    nonfinite[0] = nonfinite[0] + wp.int64(n_total - n_b)
    if n_b == wp.float64(0.0):
        write_tables(0, n_a, P, k, eps, 0, mean, m2, center, scale_out, offset_out)
        return
    n = n_a + n_b
    w_b = n_b / n
    for f in range(P):
        sd = wp.float64(0.0)
        sq = wp.float64(0.0)
        for t in range(k):
            sd += col_sums[t * P + f]
            sq += col_sums[W + t * P + f]
        merge_sums(f, n_a, n_b, w_b, sd, sq, wp.float64(center[f]), mean, m2)
    count[0] = n
    write_tables(0, n, P, k, eps, 1, mean, m2, center, scale_out, offset_out)


@wp.kernel
def merge_shifted64(
    sums: wp.array(dtype=wp.float64),
    nb: wp.array(dtype=wp.float64),
    n_total: wp.float64,
    P: int,
    eps: wp.float64,
    shift: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_out: wp.array(dtype=wp.float32),
    scale_out: wp.array(dtype=wp.float32),
    offset_out: wp.array(dtype=wp.float32),
    nonfinite: wp.array(dtype=wp.int64),
):
    """Launch over 1 (one group of ``nb[0]`` finite samples, float64 data): merge a batch
    given as the sums of ``d * d`` (``sums[:P]``) and of ``d`` (``sums[P:]``) for
    ``d = x - shift``, then rebuild the tables and move ``shift`` to the new mean for the
    next batch (a batch with no finite sample changes no statistic); the other
    ``n_total - nb[0]`` samples are added to ``nonfinite[0]``."""
    n_a = count[0]
    n_b = nb[0]
    nonfinite[0] = nonfinite[0] + wp.int64(n_total - n_b)
    n = n_a + n_b
    if n_b > wp.float64(0.0):
        w_b = n_b / n
        for f in range(P):
            merge_sums(f, n_a, n_b, w_b, sums[P + f], sums[f], shift[f], mean, m2)
    for f in range(P):
        shift[f] = mean[f]
    count[0] = n
    write_tables(0, n, P, 1, eps, 0, mean, m2, center_out, scale_out, offset_out)
