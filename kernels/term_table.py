"""The layout of randomization term tables and the value functions shared by every draw path.

Each term of a trigger class is a row of two small device tables: ``ti`` ints (``NI`` per
term, fields ``I_*``) and ``tf`` floats (``NF`` per term, fields ``F_*``); ``TermTables`` and
``TermClocks`` bundle a class's tables for one launch (``kernels.randomize``).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.rng import log_uniform, normal, normal_vec, uniform

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
I_LOCK = wp.constant(15)  # 1: every env's event counter is the same (an unmasked term that
#   draws for all envs or none, since its counters last restarted): the dense path mixes
#   the counter once per launch instead of once per env (``kernels.rng.draw_bits_mixed``)
NI = 16
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
    env_offset: int  # global id of env 0: keys are of global env ``env_offset + env``
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
        return log_uniform(a, b, uniform(h))
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
