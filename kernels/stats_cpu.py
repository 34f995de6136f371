"""One-launch statistics updates for Warp's CPU device: reduce, merge and normalize.

On CPU a Warp launch runs its threads one after another, so these kernels run as a single
thread that walks the batch in lanes of 16 floats (``vec16``, which the compiler maps to
SIMD registers), instead of the torch reductions plus merge launch of the CUDA path. One
group; the layouts of ``kernels.stats`` with ``k = lcm(16, P) / P`` copies of the group's
row, so the ``Q = k * P / 16`` table vectors repeat along the batch: flat float index
``16 * (b * Q + q) + j`` holds feature ``(16 * q + j) % P``.

Each batch is reduced around a shift in float64: the tables' center (the running mean in
float32) or, for a group with count 0, the first env's values; so ``sum(d^2) - sum(d)^2/n``
cancels nothing but rounding of order ``1e-16 * (batch mean - shift)^2 / batch var``.
"""

from __future__ import annotations

import warp as wp

from kernels.stats import merge_sums, write_tables

vec16 = wp.types.vector(length=16, dtype=wp.float32)
vec16d = wp.types.vector(length=16, dtype=wp.float64)
vec16b = wp.types.vector(length=16, dtype=wp.uint8)  # 16 bools


@wp.func
def _lane(x: wp.array(dtype=vec16), i: int) -> wp.float32:
    """Float ``i`` of a flat ``vec16`` array."""
    return x[i // 16][i % 16]


@wp.func
def _clip(y: vec16, clip: wp.float32) -> vec16:
    if clip > wp.float32(0.0):
        for j in range(16):
            y[j] = wp.min(wp.max(y[j], -clip), clip)
    return y


@wp.func
def _cleared(r: vec16d, done: vec16b) -> vec16d:
    """``r`` with the lanes where ``done`` set to 0."""
    for j in range(16):
        r[j] = wp.where(done[j] != wp.uint8(0), wp.float64(0.0), r[j])
    return r


@wp.kernel
def obs_step(
    x: wp.array(dtype=vec16),
    out: wp.array(dtype=vec16),
    x2: wp.array(dtype=vec16),
    out2: wp.array(dtype=vec16),
    pair: int,
    update: int,
    P: int,
    Q: int,
    n_b: wp.float64,
    eps: wp.float64,
    clip: wp.float32,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center: wp.array(dtype=vec16),
    scale: wp.array(dtype=vec16),
    offset: wp.array(dtype=vec16),
    center_flat: wp.array(dtype=wp.float32),
    scale_flat: wp.array(dtype=wp.float32),
    offset_flat: wp.array(dtype=wp.float32),
    acc: wp.array(dtype=vec16d),
    feat: wp.array(dtype=wp.float64),
):
    """Launch over 1: with ``update``, merge the batch ``x`` (``[n_b * P / 16]``) into the
    statistics and rebuild the tables; then ``out = (x - center) * scale + offset``
    (clipped to ``[-clip, clip]`` if ``clip > 0``), and the same for ``x2`` if ``pair``.
    Scratch: ``acc`` ``[3 * Q]``, ``feat`` ``[2 * P]``."""
    M = x.shape[0]
    if update != 0:
        if count[0] == wp.float64(0.0):  # no running mean yet: shift by the first env
            for q in range(Q):
                c = vec16()
                for j in range(16):
                    c[j] = _lane(x, (16 * q + j) % P)
                center[q] = c
        for q in range(Q):
            acc[q] = vec16d()
            acc[Q + q] = vec16d()
            acc[2 * Q + q] = vec16d(center[q])
        if Q == 1:  # sums in registers, two sets to halve the add latency chain
            sh = acc[2]
            s1a = vec16d()
            s2a = vec16d()
            s1b = vec16d()
            s2b = vec16d()
            for h in range(M // 2):
                i = (2 * h) & 0x7FFFFFFF
                da = vec16d(x[i]) - sh
                db = vec16d(x[i + 1]) - sh
                s1a = s1a + da
                s2a = s2a + wp.cw_mul(da, da)
                s1b = s1b + db
                s2b = s2b + wp.cw_mul(db, db)
            if M % 2 == 1:
                da = vec16d(x[M - 1]) - sh
                s1a = s1a + da
                s2a = s2a + wp.cw_mul(da, da)
            acc[0] = s1a + s1b
            acc[1] = s2a + s2b
        else:
            q = int(0)
            for i0 in range(M):
                i = i0 & 0x7FFFFFFF
                d = vec16d(x[i]) - acc[2 * Q + q]
                acc[q] = acc[q] + d
                acc[Q + q] = acc[Q + q] + wp.cw_mul(d, d)
                q = (q + 1) & 0x7FFFFFFF
                if q == Q:
                    q = 0
        for f in range(2 * P):
            feat[f] = wp.float64(0.0)
        for q in range(Q):
            s1 = acc[q]
            s2 = acc[Q + q]
            for j in range(16):
                f = (16 * q + j) % P
                feat[f] = feat[f] + s1[j]
                feat[P + f] = feat[P + f] + s2[j]
        n_a = count[0]
        n = n_a + n_b
        w_b = n_b / n
        for f in range(P):
            shift = wp.float64(center_flat[f])
            merge_sums(f, n_a, n_b, w_b, feat[f], feat[P + f], shift, mean, m2)
        count[0] = n
        write_tables(0, n, P, 16 * Q // P, eps, 0, mean, m2, center_flat, scale_flat, offset_flat)
    if Q == 1:  # tables in registers
        c = center[0]
        s = scale[0]
        o = offset[0]
        i = int(0)
        while i < M:
            out[i] = _clip(wp.cw_mul(x[i] - c, s) + o, clip)
            if pair != 0:
                out2[i] = _clip(wp.cw_mul(x2[i] - c, s) + o, clip)
            i = (i + 1) & 0x7FFFFFFF
    else:
        q = int(0)
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            c = center[q]
            s = scale[q]
            o = offset[q]
            out[i] = _clip(wp.cw_mul(x[i] - c, s) + o, clip)
            if pair != 0:
                out2[i] = _clip(wp.cw_mul(x2[i] - c, s) + o, clip)
            q = (q + 1) & 0x7FFFFFFF
            if q == Q:
                q = 0


@wp.kernel
def reward_step(
    reward: wp.array(dtype=vec16),
    done: wp.array(dtype=vec16b),
    returns: wp.array(dtype=vec16d),
    out: wp.array(dtype=vec16),
    gamma: wp.float64,
    update: int,
    n_b: wp.float64,
    eps: wp.float64,
    clip: wp.float32,
    shift: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_flat: wp.array(dtype=wp.float32),
    scale_flat: wp.array(dtype=wp.float32),
    offset_flat: wp.array(dtype=wp.float32),
):
    """Launch over 1: ``returns = returns * gamma + reward`` (float64); with ``update``,
    merge the returns into the statistics (one group, around ``shift``: the running mean,
    or the first env's return for a group with count 0; then ``shift`` moves to the new
    mean); ``out = reward * scale`` (clipped if ``clip > 0``); ``returns`` cleared where
    ``done`` (exactly 0, whatever they held)."""
    M = reward.shape[0]
    if update != 0 and count[0] == wp.float64(0.0):
        shift[0] = returns[0][0] * gamma + wp.float64(reward[0][0])
    sh = vec16d(shift[0])
    s1 = vec16d()
    s2 = vec16d()
    if update != 0:  # (two loops: a branch inside would keep the sums in memory)
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            r = returns[i] * gamma + vec16d(reward[i])
            d = r - sh
            s1 = s1 + d
            s2 = s2 + wp.cw_mul(d, d)
            returns[i] = _cleared(r, done[i])
    else:
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            returns[i] = _cleared(returns[i] * gamma + vec16d(reward[i]), done[i])
    if update != 0:
        sd = wp.float64(0.0)
        sq = wp.float64(0.0)
        for j in range(16):
            sd += s1[j]
            sq += s2[j]
        n_a = count[0]
        n = n_a + n_b
        w_b = n_b / n
        merge_sums(0, n_a, n_b, w_b, sd, sq, shift[0], mean, m2)
        shift[0] = mean[0]
        count[0] = n
        write_tables(0, n, 1, 1, eps, 0, mean, m2, center_flat, scale_flat, offset_flat)
    s = vec16(scale_flat[0])
    for i0 in range(M):
        i = i0 & 0x7FFFFFFF
        out[i] = _clip(wp.cw_mul(reward[i], s), clip)


# ----------------------------------------------------------------------------- any N
# The same one-launch updates for batches that do not fill whole 16-float vectors (e.g.
# N = 1, P = 4): scalar loops over the flat batch, the same float64 shifted sums and merge.


@wp.func
def _clip1(y: wp.float32, clip: wp.float32) -> wp.float32:
    if clip > wp.float32(0.0):
        y = wp.min(wp.max(y, -clip), clip)
    return y


@wp.kernel
def obs_step_any(
    x: wp.array(dtype=wp.float32),
    out: wp.array(dtype=wp.float32),
    x2: wp.array(dtype=wp.float32),
    out2: wp.array(dtype=wp.float32),
    pair: int,
    update: int,
    P: int,
    k: int,
    n_b: wp.float64,
    eps: wp.float64,
    clip: wp.float32,
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_flat: wp.array(dtype=wp.float32),
    scale_flat: wp.array(dtype=wp.float32),
    offset_flat: wp.array(dtype=wp.float32),
    feat: wp.array(dtype=wp.float64),
):
    """``obs_step`` for a flat float32 batch ``[n_b * P]`` of any length (tables with ``k``
    copies of the group's row). Scratch: ``feat`` ``[2 * P]``."""
    M = x.shape[0]
    if update != 0:
        if count[0] == wp.float64(0.0):  # no running mean yet: shift by the first env
            for f in range(P):
                center_flat[f] = x[f]
        for f in range(2 * P):
            feat[f] = wp.float64(0.0)
        f = int(0)
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            d = wp.float64(x[i]) - wp.float64(center_flat[f])
            feat[f] = feat[f] + d
            feat[P + f] = feat[P + f] + d * d
            f = (f + 1) & 0x7FFFFFFF
            if f == P:
                f = 0
        n_a = count[0]
        n = n_a + n_b
        w_b = n_b / n
        for g in range(P):
            shift = wp.float64(center_flat[g])
            merge_sums(g, n_a, n_b, w_b, feat[g], feat[P + g], shift, mean, m2)
        count[0] = n
        write_tables(0, n, P, k, eps, 0, mean, m2, center_flat, scale_flat, offset_flat)
    f = int(0)
    for i0 in range(M):
        i = i0 & 0x7FFFFFFF
        c = center_flat[f]
        s = scale_flat[f]
        o = offset_flat[f]
        out[i] = _clip1((x[i] - c) * s + o, clip)
        if pair != 0:
            out2[i] = _clip1((x2[i] - c) * s + o, clip)
        f = (f + 1) & 0x7FFFFFFF
        if f == P:
            f = 0


@wp.kernel
def reward_step_any(
    reward: wp.array(dtype=wp.float32),
    done: wp.array(dtype=wp.bool),
    returns: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float32),
    gamma: wp.float64,
    update: int,
    n_b: wp.float64,
    eps: wp.float64,
    clip: wp.float32,
    shift: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_flat: wp.array(dtype=wp.float32),
    scale_flat: wp.array(dtype=wp.float32),
    offset_flat: wp.array(dtype=wp.float32),
):
    """``reward_step`` for ``[n_b]`` rewards of any length."""
    M = reward.shape[0]
    if update != 0 and count[0] == wp.float64(0.0):
        shift[0] = returns[0] * gamma + wp.float64(reward[0])
    sh = shift[0]
    s1 = wp.float64(0.0)
    s2 = wp.float64(0.0)
    for i0 in range(M):
        i = i0 & 0x7FFFFFFF
        r = returns[i] * gamma + wp.float64(reward[i])
        d = r - sh
        s1 += d
        s2 += d * d
        if done[i]:
            r = wp.float64(0.0)
        returns[i] = r
    if update != 0:
        n_a = count[0]
        n = n_a + n_b
        w_b = n_b / n
        merge_sums(0, n_a, n_b, w_b, s1, s2, shift[0], mean, m2)
        shift[0] = mean[0]
        count[0] = n
        write_tables(0, n, 1, 1, eps, 0, mean, m2, center_flat, scale_flat, offset_flat)
    s = scale_flat[0]
    for i0 in range(M):
        i = i0 & 0x7FFFFFFF
        out[i] = _clip1(reward[i] * s, clip)
