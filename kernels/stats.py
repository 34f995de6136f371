"""Running statistics on the device: chunked batch moments, Chan et al.'s merge, the float32
normalization tables, normalization and the masked reset. The same launches on CPU and CUDA.

Statistics are float64 per group ``g`` of ``G`` and feature ``f`` of ``P``, flattened as
``i = g * P + f``: ``count [G]``, ``mean [G * P]``, ``m2 [G * P]`` (sum of squared deviations
from the mean). The tables the normalization reads are float32 ``tab [3, G * P]``: a center
``c = float32(mean)``, the scale ``s = 1 / sqrt(var + eps)`` and the offset
``o = float32((c - mean) * s)``, so that ``(x - c) * s + o`` is ``(x - mean) * s`` to float32
rounding even where ``x`` is far from 0. A group with count 0 normalizes with mean 0, var 1.

A batch holds ``M`` rows of ``P`` values; row ``r`` is env ``r % n_env`` of slice
``r // n_env`` (the env batch is one slice of ``N`` rows). The envs listed by group
(``order``) are cut into chunks of at most C envs of one group (:class:`Chunks`), those
chunks into chunks of the next level, and so on until a group has at most C items (about
``log_C(N / G)`` levels). An update is ``flag_rows`` (float32 data), ``partial``, a
``combine`` per level above the first and one at the top: no float atomics, so its result
does not depend on thread scheduling.

Settings are read from ``ctl`` (float64 ``[4]``, written by the module's setters): training,
frozen, clip (0: none) and gamma. ``mode`` says when a call updates: 0 never, 1 unless
frozen, 2 when training and not frozen; kernels return early when it does not.
"""

from __future__ import annotations

import warp as wp

# the same float rounding on CPU and CUDA: no contraction of a * b + c into an FMA
wp.set_module_options({"fuse_fp": False})

TRAINING, FROZEN, CLIP, GAMMA = 0, 1, 2, 3  # slots of ``ctl``

F32 = wp.array(dtype=wp.float32)
F64 = wp.array(dtype=wp.float64)
I32 = wp.array(dtype=wp.int32)
I64 = wp.array(dtype=wp.int64)
TAB = wp.array2d(dtype=wp.float32)
BOOL = wp.array(dtype=wp.bool)
ZERO = wp.constant(wp.float64(0.0))


@wp.struct
class Stats:
    """Statistics of ``K`` groups (a module's live ones, its baseline, or as of the last
    pack) or chunks of ``P`` features: float64 ``count [K]``, ``mean [K * P]``, ``m2
    [K * P]``, and int64 ``bad [K]``, the rows left out (NaN or inf; empty where unused)."""

    count: F64
    mean: F64
    m2: F64
    bad: I64


@wp.struct
class Chunks:
    """One level of the chunk tree: ``order`` the items listed by group (level 0; empty
    above), chunk ``c`` covering ``order[bounds[c]:bounds[c + 1]]`` of group ``grp[c]``,
    group ``g`` owning chunks ``first[g]`` to ``first[g + 1] - 1``; int32."""

    order: I32
    bounds: I32
    grp: I32
    first: I32


@wp.func
def updating(ctl: F64, mode: int) -> bool:
    """Whether a call with ``mode`` updates the statistics under the settings ``ctl``."""
    upd = mode == 1 or (mode == 2 and ctl[0] != ZERO)
    return upd and ctl[1] == ZERO


@wp.func
def chan(n_a: wp.float64, mean_a: wp.float64, m2_a: wp.float64,
         n_b: wp.float64, mean_b: wp.float64, m2_b: wp.float64) -> wp.vec3d:
    """Chan et al.'s parallel merge: ``(count, mean, M2)`` of the union of sets A and B.
    B empty: A unchanged (so groups empty on both sides keep their mean)."""
    out = wp.vec3d(n_a, mean_a, m2_a)
    if n_b > ZERO:
        n = n_a + n_b
        w = n_b / n
        d = mean_b - mean_a
        out = wp.vec3d(n, mean_a + d * w, m2_a + m2_b + d * d * n_a * w)
    return out


@wp.func
def unmerge(n: wp.float64, mean: wp.float64, m2: wp.float64,
            n_a: wp.float64, mean_a: wp.float64, m2_a: wp.float64) -> wp.vec3d:
    """Inverse of :func:`chan`: ``(count, mean, M2)`` of B given A∪B and A (zeros where B is
    empty)."""
    n_b = n - n_a
    out = wp.vec3d(ZERO, ZERO, ZERO)
    if n_b > ZERO:
        mean_b = mean_a + (mean - mean_a) * (n / n_b)
        d = mean_b - mean_a
        corr = d * d * (n_a * n_b / n)
        out = wp.vec3d(n_b, mean_b, wp.max(m2 - m2_a - corr, ZERO))
    return out


@wp.func
def write_table(i: int, n: wp.float64, mean: wp.float64, m2: wp.float64, eps: wp.float64,
                tab: TAB):
    """Table entry ``i`` from the statistics ``(n, mean, m2)``."""
    some = n > ZERO
    mu = wp.where(some, mean, ZERO)
    s = wp.float64(1.0) / wp.sqrt(wp.where(some, m2 / n, wp.float64(1.0)) + eps)
    c = wp.float32(mu)
    tab[0, i] = c
    tab[1, i] = wp.float32(s)
    tab[2, i] = wp.float32((wp.float64(c) - mu) * s)


@wp.func
def clipped(y: wp.float32, clip: wp.float32) -> wp.float32:
    """``y`` clamped to ``[-clip, clip]``; ``clip`` 0: unchanged."""
    return wp.where(clip > wp.float32(0.0), wp.clamp(y, -clip, clip), y)


@wp.kernel
def flag_rows(x: F32, P: int, ctl: F64, mode: int, tick: I64, stamp_out: I64):
    """Launch over (M, P): stamp row ``r`` with ``tick[0]`` when value ``f`` is NaN or inf
    (every writer of a row writes the same value)."""
    r, f = wp.tid()
    if updating(ctl, mode) and not wp.isfinite(x[r * P + f]):
        stamp_out[r] = tick[0]


@wp.kernel
def partial(
    # Data in:
    x32: F32, x64: F64, P: int, n_env: int, chunks: Chunks,
    ctl: F64, mode: int, tick: I64, stamp: I64, count: F64,
    # Data out:
    n_old_out: F64, part_out: Stats,
):
    """Launch over (B, K, P): moments of feature ``f`` over the unstamped rows of chunk
    ``c`` in slice ``b`` of the data (``x32`` if it is not empty, else ``x64``: one kernel,
    no overloads), reduced in float64 around the chunk's first such value, so neither
    overflow nor a far mean costs precision, at partial ``s = b * K + c``. Also keeps each
    group's count before the merge (``n_old``)."""
    order, bounds, grp, first = chunks.order, chunks.bounds, chunks.grp, chunks.first
    b, c, f = wp.tid()
    if not updating(ctl, mode):
        return
    t = tick[0]
    f32 = x32.shape[0] > 0
    n = wp.float64(0.0)  # (mutable locals: not the constant ZERO)
    shift = wp.float64(0.0)
    sd = wp.float64(0.0)
    sq = wp.float64(0.0)
    bad = wp.int64(0)
    for j in range(bounds[c], bounds[c + 1]):
        r = b * n_env + int(order[j])
        if stamp[r] == t:
            bad += wp.int64(1)
        else:
            v = wp.float64(0.0)
            if f32:
                v = wp.float64(x32[r * P + f])
            else:
                v = x64[r * P + f]
            if n == ZERO:
                shift = v
            d = v - shift
            sd += d
            sq += d * d
            n += wp.float64(1.0)
    some = n > ZERO
    s = b * grp.shape[0] + c
    part_out.mean[s * P + f] = wp.where(some, shift + sd / n, ZERO)
    part_out.m2[s * P + f] = wp.where(some, wp.max(sq - sd * (sd / n), ZERO), ZERO)
    if f == 0:
        part_out.count[s] = n
        part_out.bad[s] = bad
        g = int(grp[c])
        if b == 0 and c == int(first[g]):
            n_old_out[g] = count[g]


@wp.kernel
def combine(
    # Data in:
    P: int, B: int, K: int, bounds: I32, part: Stats, n_old: F64,
    ctl: F64, mode: int, eps: wp.float64,
    # Data out:
    out: Stats, tick: I64, tab: TAB,
):
    """Launch over (K', P): item ``c`` of the next level folds items ``bounds[c] ..
    bounds[c + 1] - 1`` of this one (of every slice: ``B`` slices of ``K`` items; in slice,
    then item order) into ``out``. At the top (``tick`` not empty) item ``c`` is group
    ``c`` and ``out`` its statistics (``n_old``: its count before; ``bad``: ``nonfinite``):
    the fold is merged in, the stamped rows added, the tables rewritten and ``tick``
    advances; a group without envs, or whose rows were all stamped, keeps its statistics.
    Below the top ``n_old``, ``tick`` and ``tab`` are empty."""
    c, f = wp.tid()
    if not updating(ctl, mode):
        return
    top = tick.shape[0] > 0
    if top and c == 0 and f == 0:
        tick[0] = tick[0] + wp.int64(1)
    c0 = int(bounds[c])
    c1 = int(bounds[c + 1])
    if c0 == c1:
        return
    new = wp.vec3d(ZERO, ZERO, ZERO)
    bad = wp.int64(0)
    for b in range(B):
        for j in range(c0, c1):
            s = b * K + j
            new = chan(new[0], new[1], new[2], part.count[s], part.mean[s * P + f],
                       part.m2[s * P + f])
            bad += part.bad[s]
    i = c * P + f
    if top:
        new = chan(n_old[c], out.mean[i], out.m2[i], new[0], new[1], new[2])
        write_table(i, new[0], new[1], new[2], eps, tab)
    out.mean[i] = new[1]
    out.m2[i] = new[2]
    if f == 0:
        out.count[c] = new[0]
        if top:
            bad += out.bad[c]
        out.bad[c] = bad


@wp.kernel
def refresh(P: int, eps: wp.float64, live: Stats, tab: TAB):
    """Launch over (G, P): rewrite the tables from the statistics."""
    g, f = wp.tid()
    i = g * P + f
    write_table(i, live.count[g], live.mean[i], live.m2[i], eps, tab)


@wp.kernel
def normalize(
    x: F32, out: F32, x2: F32, out2: F32, pair: int,
    P: int, n_env: int, gid: I64, ctl: F64, tab: TAB,
):
    """Launch over (M, P): ``out = clip((x - c) * s + o)`` with the tables of row ``r``'s
    group ``gid[r % n_env]``; with ``pair`` also ``out2`` from ``x2``. ``out`` may be ``x``
    and ``out2`` may be ``x2``."""
    r, f = wp.tid()
    j = int(gid[r % n_env]) * P + f
    c = tab[0, j]
    s = tab[1, j]
    o = tab[2, j]
    clip = wp.float32(ctl[2])
    i = r * P + f
    out[i] = clipped((x[i] - c) * s + o, clip)
    if pair != 0:
        out2[i] = clipped((x2[i] - c) * s + o, clip)


@wp.kernel
def returns_step(reward: F32, ctl: F64, mode: int, tick: I64, ret: F64, stamp_out: I64):
    """Launch over N: ``ret = ret * gamma + reward`` in float64; an updating call stamps a
    return that is not finite."""
    e = wp.tid()
    r = ret[e] * ctl[3] + wp.float64(reward[e])
    ret[e] = r
    if updating(ctl, mode) and not wp.isfinite(r):
        stamp_out[e] = tick[0]


@wp.kernel
def scale_rewards(reward: F32, done: BOOL, gid: I64, ctl: F64, mode: int, tab: TAB,
                  out: F32, ret: F64):
    """Launch over N: ``out = clip(reward * s)`` with the env's group scale; then the return
    is cleared (to +0) where ``done``, and, in an updating call, where it is not finite.
    ``out`` may be ``reward``."""
    e = wp.tid()
    out[e] = clipped(reward[e] * tab[1, int(gid[e])], wp.float32(ctl[2]))
    if done[e] or (updating(ctl, mode) and not wp.isfinite(ret[e])):
        ret[e] = ZERO


RESET_LANES = 64  # threads of a ``reset`` block on CUDA (Warp's CPU runs 1 per block)


@wp.kernel
def reset(
    # Data in:
    P: int, chunks: Chunks, mask: BOOL, groups: BOOL, eps: wp.float64,
    # Data out:
    live: Stats, sent: Stats, pending: BOOL, unsent: BOOL, tab: TAB, ret: F64,
):
    """Launch tiled over K + G blocks: the masked reset of the statistics (of every group
    when ``mask`` and ``groups`` are both empty). Block ``c < K`` is chunk ``c`` of a group's
    envs: its lanes scan the envs (clearing the returns of the selected ones, unless ``ret``
    is empty), agree through a block maximum whether one is selected (all, masked, or in a
    selected group), and then clear the group's features. Block ``K + g`` clears group ``g``
    when all or ``groups[g]`` are selected (groups without envs too). Writers of a value
    write the same value (at most one block per chunk of a group); other groups are not
    touched."""
    order, bounds, grp = chunks.order, chunks.bounds, chunks.grp
    row, lane = wp.tid()
    nb = wp.block_dim()
    K = grp.shape[0]
    use_mask = mask.shape[0] > 0
    use_groups = groups.shape[0] > 0
    every = not use_mask and not use_groups
    g = row - K
    hit = int(0)
    if row < K:
        g = int(grp[row])
        whole = every or (use_groups and groups[g])
        for j in range(int(bounds[row]) + lane, int(bounds[row + 1]), nb):
            e = int(order[j])
            if whole or (use_mask and mask[e]):
                hit = 1
                if ret.shape[0] > 0:
                    ret[e] = ZERO
    elif every or (use_groups and groups[g]):
        hit = 1
    if wp.tile_max(wp.tile(hit))[0] != 0:
        for f in range(lane, P, nb):
            i = g * P + f
            live.mean[i] = ZERO
            live.m2[i] = ZERO
            sent.mean[i] = ZERO
            sent.m2[i] = ZERO
            write_table(i, ZERO, ZERO, ZERO, eps, tab)
        if lane == 0:
            live.count[g] = ZERO
            sent.count[g] = ZERO
            pending[g] = True
            unsent[g] = True


@wp.kernel
def clear_mask(mask_out: BOOL):
    """Launch over N: ``mask_out[e] = False``."""
    mask_out[wp.tid()] = False


# ---------------------------------------------------------------------------- exchange
# ``sync`` between ranks: a rank's row holds per group ``R = 2 P + 2`` float64 values (the
# count, means and M2 of the data since the last pack, and a reset flag). ``unsent`` /
# ``pending``: bool per group, a reset since the last pack / not yet applied to the
# baseline. One thread per group; rows folded in rank order: the same bits on every rank.


@wp.kernel
def exchange_pack(P: int, live: Stats, sent: Stats, unsent: BOOL, out: F64):
    """Launch over G: write the data since the last pack (live minus sent) and the reset
    flag into ``out`` ``[G * R]``; sent := live, unsent := False."""
    g = wp.tid()
    R = 2 * P + 2
    n = live.count[g]
    n_a = sent.count[g]
    out[g * R] = n - n_a
    for f in range(P):
        i = g * P + f
        b = unmerge(n, live.mean[i], live.m2[i], n_a, sent.mean[i], sent.m2[i])
        out[g * R + 1 + f] = b[1]
        out[g * R + 1 + P + f] = b[2]
        sent.mean[i] = live.mean[i]
        sent.m2[i] = live.m2[i]
    out[g * R + R - 1] = wp.where(unsent[g], wp.float64(1.0), ZERO)
    sent.count[g] = n
    unsent[g] = False


@wp.kernel
def exchange_apply(
    # Data in:
    rows: F64, stride: int, W: int, P: int,
    # Data out:
    live: Stats, synced: Stats, sent: Stats, unsent: BOOL, pending: BOOL,
    eps: wp.float64, tab: TAB,
):
    """Launch over G: fold the W ranks' rows (rank ``r``'s value ``j`` at
    ``rows[r * stride + j]``) in rank order into the baseline, dropping it first where any
    rank flagged a reset. Live' = baseline' + this rank's data since the pack (live minus
    sent), except for a group reset here since the pack, which keeps only that data;
    sent' = baseline' there too; pending := unsent. Then rewrite the group's tables."""
    g = wp.tid()
    R = 2 * P + 2
    dropped = bool(False)
    for r in range(W):
        if rows[r * stride + g * R + R - 1] != ZERO:
            dropped = True
    n_l = live.count[g]
    n_sent = sent.count[g]
    here = unsent[g]
    n_s = wp.where(dropped, ZERO, synced.count[g])
    n_new = n_s
    for f in range(P):
        i = g * P + f
        base = wp.vec3d(n_s, ZERO, ZERO)
        if not dropped:
            base = wp.vec3d(n_s, synced.mean[i], synced.m2[i])
        for r in range(W):
            k = r * stride + g * R
            base = chan(base[0], base[1], base[2], rows[k], rows[k + 1 + f], rows[k + 1 + P + f])
        own = unmerge(n_l, live.mean[i], live.m2[i], n_sent, sent.mean[i], sent.m2[i])
        synced.mean[i] = base[1]
        synced.m2[i] = base[2]
        n_new = base[0]
        if not here:
            new = chan(base[0], base[1], base[2], own[0], own[1], own[2])
            live.mean[i] = new[1]
            live.m2[i] = new[2]
            sent.mean[i] = base[1]
            sent.m2[i] = base[2]
    synced.count[g] = n_new
    if not here:
        live.count[g] = n_new + (n_l - n_sent)
        sent.count[g] = n_new
    pending[g] = here
    for f in range(P):
        i = g * P + f
        write_table(i, live.count[g], live.mean[i], live.m2[i], eps, tab)
