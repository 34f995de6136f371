"""Randomization terms: one masked Warp launch per trigger class evaluates every term.

Each term of a class is a row of a small device table (``ti`` ints, ``tf`` floats); one
thread per env walks the rows. A term that fires for an env draws from the counter-based
key ``rng_key(seed, env, STREAM_TERM0 + uid, counter[t, env])`` (the first three factors
are precomputed per term and env in ``keys``), writes ``op(nominal, draw)`` clamped to the
parameter's valid range into the effective table and counts clamped draws.

All arrays are 1D (per-term and per-env data flattened as ``row * n + env``): Warp's CPU
backend compiles 1D-only kernels to a loop without per-thread index division.
"""

from __future__ import annotations

import warp as wp

from kernels.rng import STREAM_TERM0

# distributions
UNIFORM = wp.constant(0)
LOGUNIFORM = wp.constant(1)
GAUSSIAN = wp.constant(2)
CHOICE = wp.constant(3)
# operations on the nominal value
OP_SET = wp.constant(0)
OP_ADD = wp.constant(1)
OP_SCALE = wp.constant(2)
# triggers evaluated inside a launch (I_TIMED)
PLAIN = wp.constant(0)  # every env the launch considers
EVERY = wp.constant(1)  # per-env countdown of k steps, first one a random phase
INTERVAL = wp.constant(2)  # per-env countdown of random intervals
MIN_STEPS = wp.constant(3)  # only if >= F_PLO global steps since the env's previous draw
# schedule interpolation between breakpoints
HOLD = wp.constant(0)
LINEAR = wp.constant(1)

# columns of the int term table ``ti [T * NI]``
I_DIST = wp.constant(0)
I_OP = wp.constant(1)
I_TIMED = wp.constant(2)  # PLAIN, EVERY, INTERVAL or MIN_STEPS (below)
I_DTCOL = wp.constant(3)  # column of the env's time step (clock in seconds), or -1 (steps)
I_MASK = wp.constant(4)  # row of the term's mask in ``masks``, or -1
I_COL = wp.constant(5)  # first column of the parameter in the [C, N] tables
I_SIZE = wp.constant(6)  # components
I_R0 = wp.constant(7)  # first index of the term's values in ``vals``
I_NBP = wp.constant(8)  # schedule breakpoints (1: constant range)
I_BP0 = wp.constant(9)  # first index in ``bp_step``
I_INTERP = wp.constant(10)  # HOLD or LINEAR
I_PE = wp.constant(11)  # first per-env range row in ``pe``, or -1
I_NCH = wp.constant(12)  # number of choices (CHOICE only)
I_CDF0 = wp.constant(13)  # first index of the cumulative probabilities in ``vals``
NI = 14
# columns of the float term table ``tf [T * NF]``
F_LOW = wp.constant(0)  # the parameter's valid range: every result is clamped into it
F_HIGH = wp.constant(1)
F_PLO = wp.constant(2)  # clock period range (steps, or seconds with I_DTCOL >= 0)
F_PHI = wp.constant(3)
NF = 4

_HALF_ULP = wp.constant(1.0 / 33554432.0)  # 2^-25: shifts randf's [0, 1) grid into (0, 1)


@wp.func
def normal_icdf(p: float) -> float:
    """Standard normal quantile of ``p`` in (0, 1).

    Acklam's rational approximation (relative error < 1.2e-9 before float32 rounding): no
    transcendental function in the central 95% of draws, unlike Box-Muller's log and cos.
    """
    if p < 0.02425 or p > 0.97575:
        q = wp.sqrt(-2.0 * wp.log(wp.min(p, 1.0 - p)))
        x = (
            ((((-7.784894002430293e-03 * q - 3.223964580411365e-01) * q
               - 2.400758277161838e00) * q - 2.549732539343734e00) * q
             + 4.374664141464968e00) * q + 2.938163982698783e00
        ) / ((((7.784695709041462e-03 * q + 3.224671290700398e-01) * q
               + 2.445134137142996e00) * q + 3.754408661907416e00) * q + 1.0)
        if p > 0.5:
            x = -x
        return x
    q = p - 0.5
    r = q * q
    num = (((((-3.969683028665376e01 * r + 2.209460984245205e02) * r
              - 2.759285104469687e02) * r + 1.383577518672690e02) * r
            - 3.066479806614716e01) * r + 2.506628277459239e00)
    den = (((((-5.447609879822406e01 * r + 1.615858368580409e02) * r
              - 1.556989798598866e02) * r + 6.680131188771972e01) * r
            - 1.328068155288572e01) * r + 1.0)
    return num * q / den


@wp.func
def sample(dist: int, a: float, b: float, u: float) -> float:
    """A draw from UNIFORM [a, b], GAUSSIAN (mean a, std b) or LOGUNIFORM [a, b], given a
    uniform ``u`` in [0, 1). (Takes ``u``, not the random state: ``wp.randf`` advances its
    state only in the caller's scope.)"""
    if dist == UNIFORM:
        return a + (b - a) * u
    if dist == GAUSSIAN:
        return a + b * normal_icdf(u + _HALF_ULP)
    return a * wp.exp(wp.log(b / a) * u)


@wp.func
def apply_op(op: int, nominal: float, x: float) -> float:
    """``x`` (set), ``nominal + x`` (add) or ``nominal * x`` (scale)."""
    if op == OP_ADD:
        return nominal + x
    if op == OP_SCALE:
        return nominal * x
    return x


@wp.kernel
def randomize(
    # term tables
    ti: wp.array(dtype=wp.int32),
    tf: wp.array(dtype=float),
    num_terms: int,
    n: int,
    block: int,
    vals: wp.array(dtype=float),
    bp_step: wp.array(dtype=wp.int64),
    masks: wp.array(dtype=wp.bool),
    pe: wp.array(dtype=float),
    gstep: wp.array(dtype=wp.int64),
    # launch gate: with use_gate, only envs where gate[env] is True are considered
    gate: wp.array(dtype=wp.bool),
    gate_words: wp.array(dtype=wp.int64),
    use_gate: int,
    track: int,
    scratch: wp.array(dtype=wp.int32),
    # per term and env, [T * n]
    keys: wp.array(dtype=wp.int32),
    counter: wp.array(dtype=wp.int32),
    clock: wp.array(dtype=wp.float64),
    # parameter tables [C * n]
    nominal: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
    # outputs
    clamped_out: wp.array(dtype=wp.int64),
    changed_out: wp.array(dtype=wp.bool),
):
    """One thread per block of ``block`` envs (1 on GPUs; a multiple of 8 on CPUs, where the
    term loop runs outside the env loop so each term's row is read once per block and the
    gate is read 8 envs per load from ``gate_words``, a padded int64 view of ``gate``).

    ``vals`` holds, per term, its range values ``(a, b)`` per breakpoint and component at
    ``R0 + 2 * (p * size + j)`` (``a, b`` = low, high or mean, std), or for CHOICE the choice
    values at ``R0 + k * size + j`` and cumulative probabilities at ``CDF0 + k``. ``pe``
    holds per-env ranges (rows ``2 * r`` and ``2 * r + 1``, each ``[n]``) that override
    ``vals`` when ``I_PE >= 0``. With ``track``, ``changed_out[env]`` tells whether any term
    wrote the env. ``scratch`` (``[n]`` padded to a multiple of 8) holds each block's gated
    env indices."""
    e0 = wp.tid() * block
    e1 = wp.min(e0 + block, n)
    # the envs of this block to consider: e0..e1, or the gated ones listed in scratch
    m = int(e1 - e0)
    if use_gate != 0:
        m = int(0)
        if block % 8 == 0:
            w = int(e0 // 8)
            while w < (e1 + 7) // 8:
                word = gate_words[w]
                if word != wp.int64(0):
                    for bit in range(8):  # unrolled, branch-free: write always, advance if set
                        scratch[e0 + m] = w * 8 + bit
                        m += int((word >> wp.int64(8 * bit)) & wp.int64(1))
                w += 1
        else:
            e = int(e0)
            while e < e1:
                if gate[e]:
                    scratch[e0 + m] = e
                    m += 1
                e += 1
    if track != 0:
        e = int(e0)
        while e < e1:
            changed_out[e] = False
            e += 1
    if m == 0:
        return
    t = int(0)
    while t < num_terms:
        q = t * NI
        mrow = ti[q + I_MASK]
        timed = ti[q + I_TIMED]
        dtcol = ti[q + I_DTCOL]
        plo = tf[t * NF + F_PLO]
        phi = tf[t * NF + F_PHI]
        dist = ti[q + I_DIST]
        op = ti[q + I_OP]
        col = ti[q + I_COL]
        size = ti[q + I_SIZE]
        r0 = ti[q + I_R0]
        pe_row = ti[q + I_PE]
        low = tf[t * NF + F_LOW]
        high = tf[t * NF + F_HIGH]
        cdf0 = ti[q + I_CDF0]
        nch = ti[q + I_NCH]
        # schedule: breakpoint p in effect and the fraction of the way to p + 1
        nbp = ti[q + I_NBP]
        p = int(0)
        frac = float(0.0)
        if nbp > 1:
            bp0 = ti[q + I_BP0]
            g = gstep[0]
            while p < nbp - 1 and g >= bp_step[bp0 + p + 1]:
                p += 1
            if p < nbp - 1 and ti[q + I_INTERP] == LINEAR:
                s0 = bp_step[bp0 + p]
                if g > s0:
                    frac = float(g - s0) / float(bp_step[bp0 + p + 1] - s0)
        nclamped = int(0)
        i = int(0)
        if mrow < 0 and timed == 0 and size == 1 and pe_row < 0 and dist != CHOICE:
            # fast path (the common term): one component, the same range for every env
            k = r0 + 2 * p
            a = vals[k]
            b = vals[k + 1]
            if frac > 0.0:
                a = a + (vals[k + 2] - a) * frac
                b = b + (vals[k + 3] - b) * frac
            while i < m:
                env = e0 + i
                if use_gate != 0:
                    env = scratch[e0 + i]
                i += 1
                slot = t * n + env
                if track != 0:
                    changed_out[env] = True
                c = counter[slot]
                counter[slot] = c + 1
                s = wp.rand_init(keys[slot], c)
                x = sample(dist, a, b, wp.randf(s))
                ci = col * n + env
                v = apply_op(op, nominal[ci], x)
                vc = wp.clamp(v, low, high)
                if vc != v:
                    nclamped += 1
                effective_out[ci] = vc
        while i < m:
            env = e0 + i
            if use_gate != 0:
                env = scratch[e0 + i]
            i += 1
            if mrow >= 0:
                if not masks[mrow * n + env]:
                    continue
            slot = t * n + env
            if timed == MIN_STEPS:
                gnow = wp.float64(gstep[0])
                if gnow - clock[slot] < wp.float64(plo):
                    continue
                clock[slot] = gnow
            elif timed != PLAIN:
                dt = wp.float64(1.0)
                if dtcol >= 0:
                    dt = wp.float64(effective_out[dtcol * n + env])
                left = clock[slot] - dt
                if left >= wp.float64(0.5) * dt:  # due once less than half a step is left
                    clock[slot] = left
                    continue
            if track != 0:
                changed_out[env] = True
            c = counter[slot]
            counter[slot] = c + 1
            s = wp.rand_init(keys[slot], c)
            if timed == EVERY or timed == INTERVAL:
                clock[slot] = wp.float64(plo + (phi - plo) * wp.randf(s))
            pick = int(0)
            if dist == CHOICE:
                u = wp.randf(s)
                while pick < nch - 1 and u >= vals[cdf0 + pick]:
                    pick += 1
            j = int(0)
            while j < size:
                x = float(0.0)
                if dist == CHOICE:
                    x = vals[r0 + pick * size + j]
                else:
                    a = float(0.0)
                    b = float(0.0)
                    if pe_row >= 0:
                        a = pe[(2 * (pe_row + j)) * n + env]
                        b = pe[(2 * (pe_row + j) + 1) * n + env]
                    else:
                        k = r0 + 2 * (p * size + j)
                        a = vals[k]
                        b = vals[k + 1]
                        if frac > 0.0:
                            a = a + (vals[k + 2 * size] - a) * frac
                            b = b + (vals[k + 2 * size + 1] - b) * frac
                    x = sample(dist, a, b, wp.randf(s))
                ci = (col + j) * n + env
                v = apply_op(op, nominal[ci], x)
                vc = wp.clamp(v, low, high)
                if vc != v:
                    nclamped += 1
                effective_out[ci] = vc
                j += 1
        if nclamped > 0:
            wp.atomic_add(clamped_out, t, wp.int64(nclamped))
        t += 1


@wp.kernel
def init_keys(
    ti: wp.array(dtype=wp.int32),
    tf: wp.array(dtype=float),
    uid: wp.array(dtype=wp.int32),
    rows: wp.array(dtype=wp.int32),
    restart: wp.array(dtype=wp.int32),
    n: int,
    seed: int,
    keys_out: wp.array(dtype=wp.int32),
    counter_out: wp.array(dtype=wp.int32),
    clock_out: wp.array(dtype=wp.float64),
):
    """Launch over ``len(rows) * n``: term row ``rows[r]`` (uid ``uid[r]``) gets its per-env
    base keys, the first three factors of ``rng_key(seed, env, STREAM_TERM0 + uid, .)``.
    With ``restart[r]`` its counters restart at 0 and its clock gets its first value, drawn
    from key counter -1 (never used by a draw): ``EVERY`` a phase (first firing at a step in
    [1, k]), ``INTERVAL`` a first interval; ``MIN_STEPS`` "never drawn"."""
    i = wp.tid()
    r = i // n
    env = i - r * n
    t = rows[r]
    k = wp.rand_init(wp.int32(wp.rand_init(seed, env)), STREAM_TERM0 + uid[r])
    slot = t * n + env
    keys_out[slot] = wp.int32(k)
    if restart[r] == 0:
        return
    counter_out[slot] = 0
    s = wp.rand_init(wp.int32(k), -1)
    plo = tf[t * NF + F_PLO]
    phi = tf[t * NF + F_PHI]
    u = wp.randf(s)
    timed = ti[t * NI + I_TIMED]
    if timed == EVERY:
        clock_out[slot] = wp.float64(wp.floor(u * plo) + 1.0)  # phase in [0, k), due at +1
    elif timed == INTERVAL:
        clock_out[slot] = wp.float64(plo + (phi - plo) * u)
    else:
        clock_out[slot] = wp.float64(-1.0e300)
