"""Randomization terms: one masked Warp launch per trigger class evaluates every term.

Each term of a class is a row of a small device table (``ti`` ints, ``tf`` floats). A
term that fires for an env draws the 32 bits ``draw_bits(key, counter)`` (``kernels.rng``)
of its key ``term_key(seed, env_offset + env, STREAM_TERM0 + uid)`` (keyed by the global
env id) and its per-env event counter (which it then advances), turns them into a value
(``sample``: Uniform, LogUniform, Gaussian; a Choice picks with them), writes
``op(nominal, value)`` clamped to the parameter's valid range into the effective table and
counts clamped draws. Component ``j`` of a vector parameter uses the event's ``j``-th bits
(``next_bits`` applied ``j`` times); an ``Every``/``Interval`` clock takes the bits after
the value's (a Choice: after the pick's).

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
from gpuparam.kernels.draws import draw_dense, draw_dense_masked, draw_general, draw_scratch
from gpuparam.kernels.index import list_masked, thread_index
from gpuparam.kernels.rng import STREAM_TERM0, draw_bits, term_key, uniform
from gpuparam.kernels.term_table import (  # noqa: F401 - the layout, re-exported for gpuparam
    CHOICE,
    EVERY,
    F_HIGH,
    F_LOW,
    F_PHI,
    F_PLO,
    GAUSSIAN,
    HOLD,
    I_BP0,
    I_COL,
    I_DIST,
    I_INTERP,
    I_LOCK,
    I_MASK,
    I_NBP,
    I_OP,
    I_PE,
    I_R0,
    I_SIZE,
    I_TIMED,
    I_UID,
    INTERVAL,
    LINEAR,
    LOGUNIFORM,
    MIN_STEPS,
    NF,
    NI,
    OP_ADD,
    OP_SCALE,
    OP_SET,
    PLAIN,
    UNIFORM,
    TermClocks,
    TermTables,
)

# No floating-point contraction: NVRTC would fuse ``a + (b - a) * u`` into one FMA that
# the CPU build rounds twice, and every randomization draw must be bit-identical on CPU and
# GPU.
wp.set_module_options({"fuse_fp": False})


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
        m = list_masked(gate, gate_words, block % 8 == 0, e0, e1, scratch)
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
                nclamped = draw_dense(dist, op, ti[q + I_LOCK], a, b, low, high, e0, e1, toff,
                                      coff, keys, counter, nominal, effective_out)
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
                dist, op, pe_row >= 0, a, b, low, high, seed, terms.env_offset, stream, e0,
                e0 + mh, r_env, r_ctr, r_a, r_b, scratch, scratch_f,
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
    env_offset: int,
    keys_out: wp.array(dtype=wp.int32),
    counter_out: wp.array(dtype=wp.int32),
    clock_out: wp.array(dtype=wp.float64),
):
    """Launch over ``len(rows) * n``: term row ``rows[r]`` gets its keys ``term_key(seed,
    env_offset + env, STREAM_TERM0 + uid)`` (keyed by the global env id). With ``restart``
    its counters restart at 0 and its clock gets its first value, drawn from event counter
    -1 (never used by a draw): ``EVERY`` a phase (first firing at a step in [1, k]),
    ``INTERVAL`` a first interval; ``MIN_STEPS`` "never drawn"."""
    i = thread_index(wp.tid())
    r = i // n
    env = i - r * n
    t = rows[r]
    slot = t * n + env
    key = int(term_key(seed, env_offset + env, STREAM_TERM0 + ti[t * NI + I_UID]))
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
