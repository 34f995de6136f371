"""Randomization terms: one masked Warp launch per trigger class evaluates every term.

Each term of a class is a row of a small device table (``ti`` ints, ``tf`` floats). A
term that fires for an env draws the 32 bits ``draw_bits(key, counter)`` (``kernels.rng``)
of its key ``term_key(seed, env, STREAM_TERM0 + uid)`` and its per-env event counter (which
it then advances), turns them into a value (``sample``: Uniform, LogUniform, Gaussian; a
Choice picks with them), writes ``op(nominal, value)`` clamped to the parameter's valid
range into the effective table and counts clamped draws. Component ``j`` of a vector
parameter uses the event's ``j``-th bits (``next_bits`` applied ``j`` times); an
``Every``/``Interval`` clock takes the bits after the value's (a Choice: after the pick's).

A thread handles a block of envs (GPUs: one env; CPUs: all of them, Warp running CPU
threads one after the other) and walks the terms, each term by one of three paths that
give the same values (``randomize``). On CPUs the hot loops are branch-free loops over
contiguous memory that the compiler vectorizes: they read top-level array arguments only
(the strides of arrays inside structs stay runtime values), start at indices it can see
are >= 0 (``wp.max(., 0)``), and call no library function (``kernels.rng.normal_vec``).

All arrays are 1D, per-term and per-env data flattened as ``row * n + env``, except the
counters of the reset class: ``[n, T]``, so that a resetting env's counters of all terms
share one cache line (``ctr_t``, ``ctr_e``).
"""

from __future__ import annotations

import warp as wp

from kernels.index import thread_index
from kernels.rng import (
    STREAM_TERM0,
    draw_bits,
    next_bits,
    normal,
    normal_vec,
    term_key,
    uniform,
)

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
I_MASK = wp.constant(4)  # row of the term's mask in ``masks``, or -1 (all envs)
I_COL = wp.constant(5)  # first column of the parameter in the [C, N] tables
I_SIZE = wp.constant(6)  # components
I_R0 = wp.constant(7)  # first index of the term's values in ``vals``
I_NBP = wp.constant(8)  # schedule breakpoints (1: constant range)
I_BP0 = wp.constant(9)  # first index in ``bp_step``
I_INTERP = wp.constant(10)  # HOLD or LINEAR
I_PE = wp.constant(11)  # first per-env range row in ``pe``, or -1
I_NCH = wp.constant(12)  # number of choices (CHOICE only)
I_CDF0 = wp.constant(13)  # first index of the cumulative probabilities in ``vals``
I_UID = wp.constant(14)  # the term's uid: its random stream is STREAM_TERM0 + uid
NI = 15
# columns of the float term table ``tf [T * NF]``
F_LOW = wp.constant(0)  # the parameter's valid range: every result is clamped into it
F_HIGH = wp.constant(1)
F_PLO = wp.constant(2)  # clock period range (steps, or seconds with I_DTCOL >= 0)
F_PHI = wp.constant(3)
NF = 4

@wp.struct
class TermTables:
    """One trigger class's term tables (read-only in a launch; see ``randomize``)."""

    ti: wp.array(dtype=wp.int32)  # [T * NI]
    tf: wp.array(dtype=float)  # [T * NF]
    num_terms: int
    n: int  # num_envs
    block: int  # envs per thread
    vals: wp.array(dtype=float)  # ranges, choices, cdfs of all terms
    bp_step: wp.array(dtype=wp.int64)  # schedule breakpoints (global steps)
    pe: wp.array(dtype=float)  # per-env ranges, rows of [n]
    gstep: wp.array(dtype=wp.int64)  # [1] global step
    seed: wp.array(dtype=wp.int32)  # [1] the env's seed
    ones_row: int  # a row of ``masks`` that is all True (read for terms without a mask)
    ctr_t: int  # ``counter`` index of (term t, env) is ``t * ctr_t + env * ctr_e``: (n, 1)
    ctr_e: int  # or, interleaving a gated class's terms per env (one cache line), (1, T)
    track: int  # write ``changed_out``


@wp.struct
class TermClocks:
    """Per term and env timing state, clamped draws per term."""

    clock: wp.array(dtype=wp.float64)  # [T * n]
    clamped_out: wp.array(dtype=wp.int64)  # [T] clamped draws so far


@wp.func
def uniform_value(a: float, b: float, h: wp.uint32) -> float:
    """UNIFORM draw in [a, b]."""
    return a + (b - a) * uniform(h)


@wp.func
def gaussian_value(a: float, b: float, h: wp.uint32) -> float:
    """GAUSSIAN draw, mean a, std b."""
    return a + b * normal(h)


@wp.func
def gaussian_value_vec(a: float, b: float, h: wp.uint32) -> float:
    """``gaussian_value``, branch-free (for vectorized loops; the same bits)."""
    return a + b * normal_vec(h)


@wp.func
def sample(dist: int, a: float, b: float, h: wp.uint32) -> float:
    """A draw from UNIFORM [a, b], GAUSSIAN (mean a, std b) or LOGUNIFORM [a, b] given the
    event's bits ``h``."""
    if dist == GAUSSIAN:
        return gaussian_value(a, b, h)
    if dist == LOGUNIFORM:
        return a * wp.exp(wp.log(b / a) * uniform(h))
    return uniform_value(a, b, h)


@wp.func
def apply_op(op: int, nominal: float, x: float) -> float:
    """``x`` (set), ``nominal + x`` (add) or ``nominal * x`` (scale)."""
    if op == OP_ADD:
        return nominal + x
    if op == OP_SCALE:
        return nominal * x
    return x


@wp.func
def store_draw(
    hit: bool,
    op: int,
    x: float,
    low: float,
    high: float,
    ci: int,
    nominal: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
) -> int:
    """Where ``hit``, write ``clamp(op(nominal, x))`` to ``effective_out[ci]`` (elsewhere
    write back its value: branch-free); 1 if that clamped a draw."""
    v = apply_op(op, nominal[ci], x)
    vc = wp.clamp(v, low, high)
    effective_out[ci] = wp.where(hit, vc, effective_out[ci])
    return int(hit and vc != v)


@wp.func
def store_value(op: int, x: float, low: float, high: float, j: int,
                nominal: wp.array(dtype=float), values_out: wp.array(dtype=float)) -> int:
    """``values_out[j] = clamp(op(nominal[j], x))``; 1 if that clamped the draw."""
    v = apply_op(op, nominal[j], x)
    vc = wp.clamp(v, low, high)
    values_out[j] = vc
    return int(vc != v)


@wp.func
def draw_dense(
    dist: int,
    op: int,
    a: float,
    b: float,
    low: float,
    high: float,
    e0: int,
    e1: int,
    toff: int,
    coff: int,
    keys: wp.array(dtype=wp.int32),
    counter: wp.array(dtype=wp.int32),
    nominal: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
) -> int:
    """Dense path of a term without mask: draw for envs ``e0 <= e < e1`` (term row ``toff``
    of ``keys`` and ``counter``, parameter row ``coff``); returns the number of clamped
    draws. One branch-free loop per distribution (vectorized on CPUs)."""
    nclamped = int(0)
    e = int(e0)
    if dist == GAUSSIAN:
        while e < e1:
            c = counter[toff + e]
            counter[toff + e] = c + 1
            x = gaussian_value_vec(a, b, draw_bits(keys[toff + e], c))
            nclamped += store_value(op, x, low, high, coff + e, nominal, effective_out)
            e += 1
    else:
        while e < e1:
            c = counter[toff + e]
            counter[toff + e] = c + 1
            x = uniform_value(a, b, draw_bits(keys[toff + e], c))
            nclamped += store_value(op, x, low, high, coff + e, nominal, effective_out)
            e += 1
    return nclamped


@wp.func
def draw_dense_masked(
    dist: int,
    op: int,
    a: float,
    b: float,
    low: float,
    high: float,
    e0: int,
    e1: int,
    toff: int,
    coff: int,
    moff: int,
    masks: wp.array(dtype=wp.bool),
    keys: wp.array(dtype=wp.int32),
    counter: wp.array(dtype=wp.int32),
    nominal: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
) -> int:
    """``draw_dense`` for a term with a mask (row ``moff`` of ``masks``): every env draws,
    the mask selects which results and counter increments are written."""
    nclamped = int(0)
    e = int(e0)
    if dist == GAUSSIAN:
        while e < e1:
            hit = masks[moff + e]
            c = counter[toff + e]
            counter[toff + e] = c + int(hit)
            x = gaussian_value_vec(a, b, draw_bits(keys[toff + e], c))
            nclamped += store_draw(hit, op, x, low, high, coff + e, nominal, effective_out)
            e += 1
    else:
        while e < e1:
            hit = masks[moff + e]
            c = counter[toff + e]
            counter[toff + e] = c + int(hit)
            x = uniform_value(a, b, draw_bits(keys[toff + e], c))
            nclamped += store_draw(hit, op, x, low, high, coff + e, nominal, effective_out)
            e += 1
    return nclamped


@wp.func
def draw_general(
    terms: TermTables,
    gated: int,
    clocks: TermClocks,
    t: int,
    p: int,
    frac: float,
    e0: int,
    m: int,
    masks: wp.array(dtype=wp.bool),
    counter: wp.array(dtype=wp.int32),
    nominal: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
    changed_out: wp.array(dtype=wp.bool),
    scratch: wp.array(dtype=wp.int32),
) -> int:
    """General path of term ``t`` (any trigger, distribution, size, per-env ranges) over
    the block's ``m`` envs from ``e0`` (or those listed in ``scratch`` when gated), one env
    at a time; returns the number of clamped draws."""
    ti = terms.ti
    tf = terms.tf
    vals = terms.vals
    n = terms.n
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
    seed = terms.seed[0]
    stream = STREAM_TERM0 + ti[q + I_UID]
    nclamped = int(0)
    i = int(0)
    while i < m:
        env = e0 + i
        if gated != 0:
            env = scratch[e0 + i]
        i += 1
        if mrow >= 0:
            if not masks[mrow * n + env]:
                continue
        slot = t * n + env
        if timed == MIN_STEPS:
            gnow = wp.float64(terms.gstep[0])
            if gnow - clocks.clock[slot] < wp.float64(plo):
                continue
            clocks.clock[slot] = gnow
        elif timed != PLAIN:
            dt = wp.float64(1.0)
            if dtcol >= 0:
                dt = wp.float64(effective_out[dtcol * n + env])
            left = clocks.clock[slot] - dt
            if left >= wp.float64(0.5) * dt:  # due once less than half a step is left
                clocks.clock[slot] = left
                continue
        if terms.track != 0:
            changed_out[env] = True
        cs = t * terms.ctr_t + env * terms.ctr_e
        c = counter[cs]
        counter[cs] = c + 1
        h = draw_bits(int(term_key(seed, env, stream)), c)
        pick = int(0)
        if dist == CHOICE:
            u = uniform(h)
            h = next_bits(h)
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
                    a = terms.pe[(2 * (pe_row + j)) * n + env]
                    b = terms.pe[(2 * (pe_row + j) + 1) * n + env]
                else:
                    k = r0 + 2 * (p * size + j)
                    a = vals[k]
                    b = vals[k + 1]
                    if frac > 0.0:
                        a = a + (vals[k + 2 * size] - a) * frac
                        b = b + (vals[k + 2 * size + 1] - b) * frac
                x = sample(dist, a, b, h)
                h = next_bits(h)
            nclamped += store_draw(True, op, x, low, high, (col + j) * n + env, nominal,
                                   effective_out)
            j += 1
        if timed == EVERY or timed == INTERVAL:
            clocks.clock[slot] = wp.float64(plo + (phi - plo) * uniform(h))
    return nclamped


@wp.func
def draw_scratch(
    dist: int,
    op: int,
    per_env: bool,
    a: float,
    b: float,
    low: float,
    high: float,
    seed: int,
    stream: int,
    j0: int,
    j1: int,
    r_env: int,
    r_ctr: int,
    r_a: int,
    r_b: int,
    scratch: wp.array(dtype=wp.int32),
    scratch_f: wp.array(dtype=float),
) -> int:
    """Listed path: draw for positions ``j0 <= j < j1`` of the scratch regions (env
    ``scratch[r_env + j]``, counter ``scratch[r_ctr + j]``, nominal value ``scratch_f[j]``,
    per-env range ``scratch_f[r_a + j]``, ``scratch_f[r_b + j]`` when ``per_env``, else
    ``a, b``) and leave the clamped results in ``scratch_f[j]``; returns the number of
    clamped draws. One loop per case, each free of branches (vectorized on CPUs)."""
    nclamped = int(0)
    j = int(j0)
    if per_env:
        if dist == GAUSSIAN:
            while j < j1:
                h = draw_bits(int(term_key(seed, scratch[r_env + j], stream)), scratch[r_ctr + j])
                x = gaussian_value_vec(scratch_f[r_a + j], scratch_f[r_b + j], h)
                nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
                j += 1
        elif dist == UNIFORM:
            while j < j1:
                h = draw_bits(int(term_key(seed, scratch[r_env + j], stream)), scratch[r_ctr + j])
                x = uniform_value(scratch_f[r_a + j], scratch_f[r_b + j], h)
                nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
                j += 1
        else:
            while j < j1:
                h = draw_bits(int(term_key(seed, scratch[r_env + j], stream)), scratch[r_ctr + j])
                x = sample(dist, scratch_f[r_a + j], scratch_f[r_b + j], h)
                nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
                j += 1
    elif dist == GAUSSIAN:
        while j < j1:
            h = draw_bits(int(term_key(seed, scratch[r_env + j], stream)), scratch[r_ctr + j])
            x = gaussian_value_vec(a, b, h)
            nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
            j += 1
    elif dist == UNIFORM:
        while j < j1:
            h = draw_bits(int(term_key(seed, scratch[r_env + j], stream)), scratch[r_ctr + j])
            x = uniform_value(a, b, h)
            nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
            j += 1
    else:
        while j < j1:
            h = draw_bits(int(term_key(seed, scratch[r_env + j], stream)), scratch[r_ctr + j])
            x = sample(dist, a, b, h)
            nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
            j += 1
    return nclamped


@wp.kernel
def randomize(
    terms: TermTables,
    gated: int,
    gate: wp.array(dtype=wp.bool),
    gate_words: wp.array(dtype=wp.int64),
    clocks: TermClocks,
    masks: wp.array(dtype=wp.bool),
    keys: wp.array(dtype=wp.int32),
    counter: wp.array(dtype=wp.int32),
    nominal: wp.array(dtype=float),
    effective_out: wp.array(dtype=float),
    changed_out: wp.array(dtype=wp.bool),
    scratch: wp.array(dtype=wp.int32),
    scratch_f: wp.array(dtype=float),
):
    """One thread per block of ``terms.block`` envs ``[e0, e1)``. With ``gated``, only envs
    where ``gate`` is True are considered (read 8 envs per load from ``gate_words``, the
    gate padded to a multiple of 8, when the block is a multiple of 8) and listed first.

    ``vals`` holds, per term, its range values ``(a, b)`` per breakpoint and component at
    ``R0 + 2 * (p * size + j)`` (``a, b`` = low, high or mean, std), or for CHOICE the choice
    values at ``R0 + k * size + j`` and cumulative probabilities at ``CDF0 + k``. ``pe``
    holds per-env ranges (rows ``2 * r`` and ``2 * r + 1``, each ``[n]``) that override
    ``vals`` when ``I_PE >= 0``. ``masks`` ``[rows * n]`` holds the term masks, its last
    row all True. ``keys`` ``[T * n]`` holds the terms' keys, ``counter`` their event
    counters (``t * ctr_t + env * ctr_e``). With ``track``, ``changed_out[env]`` tells
    whether any term wrote the env. ``scratch``, ``scratch_f`` hold three regions of
    ``npad`` (n rounded up to 8) each; a thread uses positions ``[e0, e0 + block)`` of them.

    Paths per term:
      dense: ungated, no timed trigger, one component, Uniform or Gaussian, no per-env
        range (the "step" term): every env of the block in one loop, a mask applied by
        select;
      listed: any other one-component non-Choice term without timed trigger (the
        "reset" term: a few scattered envs): gather the envs' counters, nominal values
        and ranges into contiguous scratch, draw there in one loop, scatter the results;
      general: the rest (Every, Interval, OnReset(min_steps), Choice, vector
        parameters), one env at a time with branches.
    """
    n = terms.n
    block = terms.block
    npad = wp.max((n + 7) // 8 * 8, 0)
    e0 = wp.max(wp.tid() * block, 0)  # (max: lets the compiler see indices are >= 0)
    e1 = wp.min(e0 + block, n)
    # the envs of this block to consider: e0..e1, or the gated ones listed in scratch
    m = int(e1 - e0)
    if gated != 0:
        m = int(0)
        if block % 8 == 0:
            w = int(e0 // 8)
            while w < (e1 + 7) // 8:
                # the lowest set byte (env) of the 8-env word, branch-free (a zero word
                # writes a position it does not count); a loop for the rare other ones.
                # (Branching per word or per env mispredicts on a random gate.)
                word = gate_words[w]
                low_bit = word & (-word)
                scratch[wp.max(e0 + m, 0)] = w * 8 + (wp.bit_count(low_bit - wp.int64(1)) >> 3)
                m += int(word != wp.int64(0))
                word = word ^ low_bit
                while word != wp.int64(0):
                    low_bit = word & (-word)
                    scratch[wp.max(e0 + m, 0)] = w * 8 + (wp.bit_count(low_bit - wp.int64(1)) >> 3)
                    m += 1
                    word = word ^ low_bit
                w += 1
        else:
            e = int(e0)
            while e < e1:
                if gate[e]:
                    scratch[e0 + m] = e
                    m += 1
                e += 1
    if terms.track != 0:
        e = int(e0)
        while e < e1:
            changed_out[e] = False
            e += 1
    if m == 0:
        return
    ti = terms.ti
    tf = terms.tf
    vals = terms.vals
    seed = terms.seed[0]
    t = int(0)
    while t < terms.num_terms:
        q = t * NI
        stream = STREAM_TERM0 + ti[q + I_UID]
        mrow = ti[q + I_MASK]
        timed = ti[q + I_TIMED]
        dist = ti[q + I_DIST]
        op = ti[q + I_OP]
        col = ti[q + I_COL]
        size = ti[q + I_SIZE]
        r0 = ti[q + I_R0]
        pe_row = ti[q + I_PE]
        low = tf[t * NF + F_LOW]
        high = tf[t * NF + F_HIGH]
        # schedule: breakpoint p in effect and the fraction of the way to p + 1
        nbp = ti[q + I_NBP]
        p = int(0)
        frac = float(0.0)
        if nbp > 1:
            bp0 = ti[q + I_BP0]
            g = terms.gstep[0]
            while p < nbp - 1 and g >= terms.bp_step[bp0 + p + 1]:
                p += 1
            if p < nbp - 1 and ti[q + I_INTERP] == LINEAR:
                s0 = terms.bp_step[bp0 + p]
                if g > s0:
                    frac = float(g - s0) / float(terms.bp_step[bp0 + p + 1] - s0)
        nclamped = int(0)
        simple = timed == PLAIN and size == 1 and dist != CHOICE
        # the term's range at this global step (per-env ranges override it)
        k = r0 + 2 * p
        a = vals[k]
        b = vals[k + 1]
        if frac > 0.0:
            a = a + (vals[k + 2 * size] - a) * frac
            b = b + (vals[k + 2 * size + 1] - b) * frac
        # row offsets (max: lets the compiler see that indices are >= 0)
        toff = wp.max(t * n, 0)
        coff = wp.max(col * n, 0)
        moff = wp.max(wp.where(mrow >= 0, mrow, terms.ones_row) * n, 0)
        dense = gated == 0 and pe_row < 0 and (dist == UNIFORM or dist == GAUSSIAN)
        if simple and dense and terms.ctr_e == 1:
            # dense path (term rows toff of keys and counters, coff of the parameters)
            if mrow < 0:
                nclamped = draw_dense(dist, op, a, b, low, high, e0, e1, toff, coff, keys,
                                      counter, nominal, effective_out)
            else:
                nclamped = draw_dense_masked(dist, op, a, b, low, high, e0, e1, toff, coff,
                                             moff, masks, keys, counter, nominal,
                                             effective_out)
            if terms.track != 0:
                e = int(e0)
                while e < e1:
                    changed_out[e] = changed_out[e] or masks[moff + e]
                    e += 1
        elif simple:
            # listed path. Gather the term's envs, their counters (advanced), nominal values
            # ("set" does not read them: one cache line less per env) and per-env ranges
            # into contiguous scratch: regions r_env (envs; the gated list itself when the
            # term has no mask), r_ctr (counters) and 0 (values) of scratch, r_a, r_b of
            # scratch_f (ranges)
            r_env = int(0)
            if mrow >= 0 or gated == 0:
                r_env = npad
            r_ctr = wp.max(2 * npad, 0)
            r_a = npad
            r_b = wp.max(2 * npad, 0)
            mh = int(0)  # envs gathered
            i = int(0)  # envs considered
            if gated != 0 and mrow < 0 and pe_row < 0:
                # the common reset term: every listed env, one tight loop
                mh = m
                i = m
                j = int(e0)
                if op != OP_SET:
                    while j < e0 + m:
                        env = wp.max(scratch[j], 0)
                        cs = wp.max(t * terms.ctr_t + env * terms.ctr_e, 0)
                        c = counter[cs]
                        counter[cs] = c + 1
                        scratch[r_ctr + j] = c
                        scratch_f[j] = nominal[coff + env]
                        j += 1
                else:
                    while j < e0 + m:
                        env = wp.max(scratch[j], 0)
                        cs = wp.max(t * terms.ctr_t + env * terms.ctr_e, 0)
                        c = counter[cs]
                        counter[cs] = c + 1
                        scratch[r_ctr + j] = c
                        j += 1
            while i < m:  # the other cases (branch-free: write always, advance on a hit)
                env = e0 + i
                if gated != 0:
                    env = wp.max(scratch[e0 + i], 0)
                i += 1
                hit = True
                if mrow >= 0:
                    hit = masks[moff + env]
                j = e0 + mh
                cs = wp.max(t * terms.ctr_t + env * terms.ctr_e, 0)
                c = counter[cs]
                counter[cs] = c + int(hit)
                if r_env != 0:
                    scratch[r_env + j] = env
                scratch[r_ctr + j] = c
                if op != OP_SET:
                    scratch_f[j] = nominal[coff + env]
                if pe_row >= 0:
                    scratch_f[r_a + j] = terms.pe[2 * pe_row * n + env]
                    scratch_f[r_b + j] = terms.pe[(2 * pe_row + 1) * n + env]
                mh += int(hit)
            # draw over contiguous scratch, then scatter the results
            nclamped = draw_scratch(
                dist, op, pe_row >= 0, a, b, low, high, seed, stream, e0, e0 + mh, r_env,
                r_ctr, r_a, r_b, scratch, scratch_f,
            )
            j = int(e0)
            while j < e0 + mh:
                effective_out[coff + wp.max(scratch[r_env + j], 0)] = scratch_f[j]
                j += 1
            if terms.track != 0:
                j = int(e0)
                while j < e0 + mh:
                    changed_out[wp.max(scratch[r_env + j], 0)] = True
                    j += 1
        else:
            nclamped = draw_general(
                terms, gated, clocks, t, p, frac, e0, m, masks, counter, nominal,
                effective_out, changed_out, scratch,
            )
        if nclamped > 0:
            wp.atomic_add(clocks.clamped_out, t, wp.int64(nclamped))
        t += 1


@wp.kernel
def init_keys(
    ti: wp.array(dtype=wp.int32),
    tf: wp.array(dtype=float),
    rows: wp.array(dtype=wp.int32),
    restart: int,
    n: int,
    ctr_t: int,
    ctr_e: int,
    seed: int,
    keys_out: wp.array(dtype=wp.int32),
    counter_out: wp.array(dtype=wp.int32),
    clock_out: wp.array(dtype=wp.float64),
):
    """Launch over ``len(rows) * n``: term row ``rows[r]`` gets its keys ``term_key(seed,
    env, STREAM_TERM0 + uid)``. With ``restart`` its counters restart at 0 and its clock
    gets its first value, drawn from event counter -1 (never used by a draw): ``EVERY`` a
    phase (first firing at a step in [1, k]), ``INTERVAL`` a first interval; ``MIN_STEPS``
    "never drawn"."""
    i = thread_index(wp.tid())
    r = i // n
    env = i - r * n
    t = rows[r]
    slot = t * n + env
    key = int(term_key(seed, env, STREAM_TERM0 + ti[t * NI + I_UID]))
    keys_out[slot] = key
    if restart == 0:
        return
    counter_out[t * ctr_t + env * ctr_e] = 0
    plo = tf[t * NF + F_PLO]
    phi = tf[t * NF + F_PHI]
    u = uniform(draw_bits(key, -1))
    timed = ti[t * NI + I_TIMED]
    if timed == EVERY:
        clock_out[slot] = wp.float64(wp.floor(u * plo) + 1.0)  # phase in [0, k), due at +1
    elif timed == INTERVAL:
        clock_out[slot] = wp.float64(plo + (phi - plo) * u)
    else:
        clock_out[slot] = wp.float64(-1.0e300)
