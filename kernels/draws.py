"""The three draw paths of ``kernels.randomize`` (dense, listed through scratch, general).

They give the same values; the dense and scratch loops are branch-free over contiguous memory
so that the CPU compiler vectorizes them (see ``kernels.randomize``).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.rng import (
    STREAM_TERM0,
    counter_mix,
    draw_bits,
    draw_bits_mixed,
    next_bits,
    term_key,
    uniform,
)
from gpuparam.kernels.term_table import (
    CHOICE,
    EVERY,
    F_HIGH,
    F_LOW,
    F_PHI,
    F_PLO,
    GAUSSIAN,
    I_CDF0,
    I_COL,
    I_DIST,
    I_DTCOL,
    I_MASK,
    I_NCH,
    I_OP,
    I_PE,
    I_R0,
    I_SIZE,
    I_TIMED,
    I_UID,
    INTERVAL,
    MIN_STEPS,
    NF,
    NI,
    PLAIN,
    UNIFORM,
    TermClocks,
    TermTables,
    gaussian_value_vec,
    sample,
    store_draw,
    store_value,
    uniform_value,
)


@wp.func
def draw_dense(
    dist: int,
    op: int,
    lock: int,
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
    draws. One branch-free loop per distribution (vectorized on CPUs). With ``lock`` (every
    env's counter is the same: ``I_LOCK``) the counter is mixed once, not per env: the
    same bits, one hash round less per draw."""
    nclamped = int(0)
    e = int(e0)
    if lock != 0:
        c0 = counter[toff + e0]
        mixed = counter_mix(c0)
        if dist == GAUSSIAN:
            while e < e1:
                counter[toff + e] = c0 + 1
                x = gaussian_value_vec(a, b, draw_bits_mixed(keys[toff + e], mixed))
                nclamped += store_value(op, x, low, high, coff + e, nominal, effective_out)
                e += 1
        else:
            while e < e1:
                counter[toff + e] = c0 + 1
                x = uniform_value(a, b, draw_bits_mixed(keys[toff + e], mixed))
                nclamped += store_value(op, x, low, high, coff + e, nominal, effective_out)
                e += 1
        return nclamped
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
        h = draw_bits(int(term_key(seed, terms.env_offset + env, stream)), c)
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
    env_offset: int,
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
    ``a, b``; keys of global env ``env_offset + env``) and leave the clamped results in
    ``scratch_f[j]``; returns the number of clamped draws. One loop per case, each free
    of branches (vectorized on CPUs)."""
    nclamped = int(0)
    j = int(j0)
    if per_env:
        if dist == GAUSSIAN:
            while j < j1:
                e = env_offset + scratch[r_env + j]
                h = draw_bits(int(term_key(seed, e, stream)), scratch[r_ctr + j])
                x = gaussian_value_vec(scratch_f[r_a + j], scratch_f[r_b + j], h)
                nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
                j += 1
        elif dist == UNIFORM:
            while j < j1:
                e = env_offset + scratch[r_env + j]
                h = draw_bits(int(term_key(seed, e, stream)), scratch[r_ctr + j])
                x = uniform_value(scratch_f[r_a + j], scratch_f[r_b + j], h)
                nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
                j += 1
        else:
            while j < j1:
                e = env_offset + scratch[r_env + j]
                h = draw_bits(int(term_key(seed, e, stream)), scratch[r_ctr + j])
                x = sample(dist, scratch_f[r_a + j], scratch_f[r_b + j], h)
                nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
                j += 1
    elif dist == GAUSSIAN:
        while j < j1:
            e = env_offset + scratch[r_env + j]
            h = draw_bits(int(term_key(seed, e, stream)), scratch[r_ctr + j])
            x = gaussian_value_vec(a, b, h)
            nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
            j += 1
    elif dist == UNIFORM:
        while j < j1:
            e = env_offset + scratch[r_env + j]
            h = draw_bits(int(term_key(seed, e, stream)), scratch[r_ctr + j])
            x = uniform_value(a, b, h)
            nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
            j += 1
    else:
        while j < j1:
            e = env_offset + scratch[r_env + j]
            h = draw_bits(int(term_key(seed, e, stream)), scratch[r_ctr + j])
            x = sample(dist, a, b, h)
            nclamped += store_value(op, x, low, high, j, scratch_f, scratch_f)
            j += 1
    return nclamped
