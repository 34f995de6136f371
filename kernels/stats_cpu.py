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
from gpuparam.kernels.stats import merge_sums, write_tables

vec16 = wp.types.vector(length=16, dtype=wp.float32)
vec16d = wp.types.vector(length=16, dtype=wp.float64)
vec16b = wp.types.vector(length=16, dtype=wp.uint8)  # 16 bools


@wp.func
def merge_features(
    P: int,
    k: int,
    n_ok: wp.float64,
    eps: wp.float64,
    feat: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_flat: wp.array(dtype=wp.float32),
    scale_flat: wp.array(dtype=wp.float32),
    offset_flat: wp.array(dtype=wp.float32),
):
    """Merge ``n_ok`` samples, given as sums ``feat[f]`` of ``d = x - center_flat[f]`` and
    ``feat[P + f]`` of ``d * d``, into one group's statistics; rewrite its ``k`` table rows."""
    n_a = count[0]
    n = n_a + n_ok
    if n_ok > wp.float64(0.0):
        w_b = n_ok / n
        for f in range(P):
            shift = wp.float64(center_flat[f])
            merge_sums(f, n_a, n_ok, w_b, feat[f], feat[P + f], shift, mean, m2)
        count[0] = n
    write_tables(0, n, P, k, eps, 0, mean, m2, center_flat, scale_flat, offset_flat)


@wp.func
def merge_returns(
    n_ok: wp.float64,
    sd: wp.float64,
    sq: wp.float64,
    eps: wp.float64,
    shift: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.float64),
    mean: wp.array(dtype=wp.float64),
    m2: wp.array(dtype=wp.float64),
    center_flat: wp.array(dtype=wp.float32),
    scale_flat: wp.array(dtype=wp.float32),
    offset_flat: wp.array(dtype=wp.float32),
):
    """Merge ``n_ok`` returns, given as sums ``sd`` of ``d = r - shift[0]`` and ``sq`` of
    ``d * d``, into the statistics; the shift moves to the new mean; rewrite the table."""
    n_a = count[0]
    n = n_a + n_ok
    if n_ok > wp.float64(0.0):
        w_b = n_ok / n
        merge_sums(0, n_a, n_ok, w_b, sd, sq, shift[0], mean, m2)
        count[0] = n
    shift[0] = mean[0]
    write_tables(0, n, 1, 1, eps, 0, mean, m2, center_flat, scale_flat, offset_flat)


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


@wp.func
def _finite_sums(
    x: wp.array(dtype=vec16),
    P: int,
    n_b: wp.float64,
    n_a: wp.float64,
    center_flat: wp.array(dtype=wp.float32),
    feat: wp.array(dtype=wp.float64),
) -> wp.float64:
    """The slow path of a batch holding NaN or inf: sums of ``d = x - center`` and ``d * d``
    per feature over the envs whose ``P`` values are all finite, into ``feat`` ``[2 * P]``;
    returns their number. A group with count ``n_a == 0`` is shifted by the first finite
    env instead (written into the centers, which ``write_tables`` rewrites afterwards)."""
    n = int(n_b)
    for f in range(2 * P):
        feat[f] = wp.float64(0.0)
    ok = wp.float64(0.0)
    shifted = int(0)
    if n_a > wp.float64(0.0):
        shifted = 1
    for e in range(n):
        good = int(1)
        for f in range(P):
            if not wp.isfinite(_lane(x, e * P + f)):
                good = 0
        if good != 0:
            if shifted == 0:
                for i in range(center_flat.shape[0]):
                    center_flat[i] = _lane(x, e * P + i % P)
                shifted = 1
            for f in range(P):
                d = wp.float64(_lane(x, e * P + f)) - wp.float64(center_flat[f])
                feat[f] = feat[f] + d
                feat[P + f] = feat[P + f] + d * d
            ok = ok + wp.float64(1.0)
    return ok


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
    nonfinite: wp.array(dtype=wp.int64),
):
    """Launch over 1: with ``update``, merge the batch ``x`` (``[n_b * P / 16]``) into the
    statistics and rebuild the tables; then ``out = (x - center) * scale + offset``
    (clipped to ``[-clip, clip]`` if ``clip > 0``), and the same for ``x2`` if ``pair``.
    Envs whose sample holds a NaN or inf are left out of the statistics and counted in
    ``nonfinite[0]`` (their output is NaN or inf). Scratch: ``acc`` ``[3 * Q]``,
    ``feat`` ``[2 * P]``."""
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
        total = wp.float64(0.0)
        for q in range(Q):
            s1 = acc[q]
            s2 = acc[Q + q]
            for j in range(16):
                f = (16 * q + j) % P
                feat[f] = feat[f] + s1[j]
                feat[P + f] = feat[P + f] + s2[j]
                total = total + s1[j] + s2[j]
        n_ok = n_b
        if not wp.isfinite(total):  # float64 sums of float32 data overflow never: a NaN/inf
            n_ok = _finite_sums(x, P, n_b, count[0], center_flat, feat)
            nonfinite[0] = nonfinite[0] + wp.int64(n_b - n_ok)
        merge_features(P, 16 * Q // P, n_ok, eps, feat, count, mean, m2, center_flat,
                       scale_flat, offset_flat)
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


@wp.func
def _cleared_bad(r: vec16d, done: vec16b) -> vec16d:
    """``r`` with the lanes where ``done`` or not finite set to 0."""
    for j in range(16):
        clear = done[j] != wp.uint8(0) or not wp.isfinite(r[j])
        r[j] = wp.where(clear, wp.float64(0.0), r[j])
    return r


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
    nonfinite: wp.array(dtype=wp.int64),
):
    """Launch over 1: ``returns = returns * gamma + reward`` (float64); with ``update``,
    merge the returns into the statistics (one group, around ``shift``: the running mean,
    or the first env's return for a group with count 0; then ``shift`` moves to the new
    mean); ``out = reward * scale`` (clipped if ``clip > 0``); ``returns`` cleared where
    ``done`` (exactly 0, whatever they held). With ``update``, returns that are NaN or inf
    are left out of the statistics, counted in ``nonfinite[0]`` and cleared too."""
    M = reward.shape[0]
    if update != 0:
        if count[0] == wp.float64(0.0):
            shift[0] = returns[0][0] * gamma + wp.float64(reward[0][0])
        sh = vec16d(shift[0])
        s1 = vec16d()
        s2 = vec16d()
        for i0 in range(M):  # returns advanced, not yet cleared: the last loop clears
            i = i0 & 0x7FFFFFFF
            r = returns[i] * gamma + vec16d(reward[i])
            d = r - sh
            s1 = s1 + d
            s2 = s2 + wp.cw_mul(d, d)
            returns[i] = r
        sd = wp.float64(0.0)
        sq = wp.float64(0.0)
        for j in range(16):
            sd += s1[j]
            sq += s2[j]
        n_ok = n_b
        clean = int(1)
        if not wp.isfinite(sd + sq):  # a NaN or inf return: sum the finite ones
            clean = 0
            n_ok = wp.float64(0.0)
            sd = wp.float64(0.0)
            sq = wp.float64(0.0)
            first = int(0)
            if count[0] == wp.float64(0.0):
                first = 1
            for i0 in range(M):
                for j in range(16):
                    rj = returns[i0][j]
                    if wp.isfinite(rj):
                        if first != 0:
                            shift[0] = rj
                            first = 0
                        dj = rj - shift[0]
                        sd += dj
                        sq += dj * dj
                        n_ok += wp.float64(1.0)
            nonfinite[0] = nonfinite[0] + wp.int64(n_b - n_ok)
        merge_returns(n_ok, sd, sq, eps, shift, count, mean, m2, center_flat, scale_flat,
                      offset_flat)
        s = vec16(scale_flat[0])
        if clean != 0:
            for i0 in range(M):
                i = i0 & 0x7FFFFFFF
                out[i] = _clip(wp.cw_mul(reward[i], s), clip)
                returns[i] = _cleared(returns[i], done[i])
        else:
            for i0 in range(M):
                i = i0 & 0x7FFFFFFF
                out[i] = _clip(wp.cw_mul(reward[i], s), clip)
                returns[i] = _cleared_bad(returns[i], done[i])
    else:
        s = vec16(scale_flat[0])
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            returns[i] = _cleared(returns[i] * gamma + vec16d(reward[i]), done[i])
            out[i] = _clip(wp.cw_mul(reward[i], s), clip)


# ----------------------------------------------------------------------------- any N
# The same one-launch updates for batches that do not fill whole 16-float vectors (e.g.
# N = 1, P = 4): scalar loops over the flat batch, the same float64 shifted sums and merge,
# the same non-finite policy (an env whose sample holds a NaN or inf is left out of the
# statistics and counted; its output stays NaN or inf).


@wp.func
def _clip1(y: wp.float32, clip: wp.float32) -> wp.float32:
    if clip > wp.float32(0.0):
        y = wp.min(wp.max(y, -clip), clip)
    return y


@wp.func
def _env_finite(x: wp.array(dtype=wp.float32), e: int, P: int) -> bool:
    bad = int(0)
    for f in range(P):
        if not wp.isfinite(x[e * P + f]):
            bad = 1
    return bad == 0


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
    nonfinite: wp.array(dtype=wp.int64),
):
    """``obs_step`` for a flat float32 batch ``[n_b * P]`` of any length (tables with ``k``
    copies of the group's row). Scratch: ``feat`` ``[2 * P]``."""
    M = x.shape[0]
    N = M // P
    if update != 0:
        if count[0] == wp.float64(0.0):  # no running mean yet: shift by the first finite env
            found = int(0)
            for e in range(N):
                if found == 0 and _env_finite(x, e, P):
                    for f in range(P):
                        center_flat[f] = x[e * P + f]
                    found = 1
        for f in range(2 * P):
            feat[f] = wp.float64(0.0)
        n_ok = wp.float64(0.0)
        for e0 in range(N):
            e = e0 & 0x7FFFFFFF
            if _env_finite(x, e, P):
                for f in range(P):
                    d = wp.float64(x[e * P + f]) - wp.float64(center_flat[f])
                    feat[f] = feat[f] + d
                    feat[P + f] = feat[P + f] + d * d
                n_ok += wp.float64(1.0)
        if n_ok < n_b:
            nonfinite[0] = nonfinite[0] + wp.int64(n_b - n_ok)
        merge_features(P, k, n_ok, eps, feat, count, mean, m2, center_flat, scale_flat,
                       offset_flat)
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
    nonfinite: wp.array(dtype=wp.int64),
):
    """``reward_step`` for ``[n_b]`` rewards of any length."""
    M = reward.shape[0]
    s = scale_flat[0]
    if update != 0:
        first = int(0)
        if count[0] == wp.float64(0.0):
            first = 1
        sd = wp.float64(0.0)
        sq = wp.float64(0.0)
        n_ok = wp.float64(0.0)
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            r = returns[i] * gamma + wp.float64(reward[i])
            returns[i] = r
            if wp.isfinite(r):
                if first != 0:  # no running mean yet: shift by the first finite return
                    shift[0] = r
                    first = 0
                d = r - shift[0]
                sd += d
                sq += d * d
                n_ok += wp.float64(1.0)
        if n_ok < n_b:
            nonfinite[0] = nonfinite[0] + wp.int64(n_b - n_ok)
        merge_returns(n_ok, sd, sq, eps, shift, count, mean, m2, center_flat, scale_flat,
                      offset_flat)
        s = scale_flat[0]
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            r = returns[i]
            if done[i] or not wp.isfinite(r):
                r = wp.float64(0.0)
            returns[i] = r
            out[i] = _clip1(reward[i] * s, clip)
    else:
        for i0 in range(M):
            i = i0 & 0x7FFFFFFF
            r = returns[i] * gamma + wp.float64(reward[i])
            if done[i]:
                r = wp.float64(0.0)
            returns[i] = r
            out[i] = _clip1(reward[i] * s, clip)
