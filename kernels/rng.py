"""Counter-based random numbers keyed by (seed, env, stream, counter), and their
uniform and normal variates.

A draw depends only on its key, never on ``num_envs``, launch order or device, so env i
sees the same numbers whatever the batch size, on CPU and GPU alike (integer hashing only).
The key is built in two parts so that the part that never changes can be kept:
``term_key(seed, env, stream)`` chains two PCG hashes, and ``draw_bits(key, counter)`` =
``wp.rand_init(key, counter)`` = ``pcg(key + pcg(counter))`` gives the 32 bits of event
``counter`` (the counter is mixed before it is added, which keeps the streams of different
keys from being shifted copies of each other, as ``key + counter`` would make them).

The variates (``uniform``, ``normal``, ``log_uniform``) use plain arithmetic only
(IEEE-rounded +, -, *, /, sqrt, floor and bit casts, in modules built without
floating-point contraction): that is what makes a variate bit-identical on CPU and GPU,
where the libraries' ``expf``/``logf`` differ in the last bit between host and CUDA.
"""

from __future__ import annotations

import warp as wp

# Stream ids: reset sampling uses RESET; randomization term k uses TERM0 + k.
STREAM_RESET = wp.constant(0)
STREAM_TERM0 = wp.constant(16)


@wp.func
def term_key(seed: int, env: int, stream: int) -> wp.uint32:
    """The fixed part of the key of (seed, env, stream): ``rand_init(rand_init(seed, env),
    stream)`` (randomization recomputes it at each draw: cheaper than a memory read)."""
    s = wp.rand_init(seed, env)
    return wp.rand_init(int(s), stream)


@wp.func
def draw_bits(key: int, counter: int) -> wp.uint32:
    """32 random bits of event ``counter`` under ``key`` (a ``term_key``)."""
    return wp.rand_init(key, counter)


@wp.func
def rng_key(seed: int, env: int, stream: int, counter: int) -> wp.uint32:
    """PCG state (and bits) for one (seed, env, stream, counter) key (env resets draw their
    initial state from it with ``wp.randf``)."""
    return draw_bits(int(term_key(seed, env, stream)), counter)


@wp.func
def next_bits(h: wp.uint32) -> wp.uint32:
    """The next 32 random bits of the same event (one PCG round)."""
    return wp.rand_init(int(h))


@wp.func
def uniform(h: wp.uint32) -> float:
    """A float in [0, 1) on the grid of 2^-24 from the top 24 bits of ``h`` (exact)."""
    return float(h >> wp.uint32(8)) * 5.9604644775390625e-08


@wp.func
def uniform_in(h: wp.uint32, low: float, high: float) -> float:
    """``wp.randf(state, low, high)`` once ``state`` has advanced to ``h`` (bit for bit), as
    a function of values (``low + (high - low) u`` rounds the same: + commutes exactly)."""
    return (high - low) * uniform(h) + low


_LN2 = wp.constant(0.6931471805599453)


@wp.func
def log_pos(x: float) -> float:
    """``ln(x)`` for a positive normal float with plain arithmetic (no library call: the
    same bits on every device): ``x = 2^e f`` with ``f`` in ``[sqrt(1/2), sqrt(2))``
    (exponent and mantissa read from the bits of ``x``), ``ln f`` by a degree-8 polynomial
    in ``f - 1`` fitted on Chebyshev nodes (absolute error < 1e-7 in float32)."""
    bits = wp.cast(x, wp.int32)
    e = (bits >> 23) - 127  # floor(log2 x)
    f = wp.cast((bits & 0x7FFFFF) | 0x3F800000, float)  # x / 2^e in [1, 2), exact
    big = f > 1.4142135
    f = wp.where(big, f * 0.5, f)
    e = wp.where(big, e + 1, e)
    d = f - 1.0
    lnf = d * (0.99999982 + d * (-0.50000697 + d * (0.33335689 + d * (-0.24957781 + d * (
        0.19885361 + d * (-0.17363153 + d * (0.16338556 + d * -0.099136561)))))))
    return float(e) * _LN2 + lnf


_LOG2E = wp.constant(1.4426950408889634)
_LN2_HI = wp.constant(0.693359375)  # k * _LN2_HI is exact for |k| < 2^15
_LN2_LO = wp.constant(-2.12194440e-4)


@wp.func
def exp_pos(y: float) -> float:
    """``e^y`` for ``-87 < y < 88`` with plain arithmetic (the same bits on every device;
    relative error about 2e-7): Cody-Waite reduction ``y = k ln2 + r``, ``|r| <= ln2 / 2``,
    ``e^r`` by its Taylor polynomial of degree 7 (truncation < 6e-9 relative), times ``2^k``
    built from its bits."""
    k = wp.floor(y * _LOG2E + 0.5)
    r = (y - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666667 + r * (0.041666668 + r * (
        0.008333334 + r * (0.0013888889 + r * 0.0001984127))))))
    scale = wp.cast((wp.clamp(int(k), -126, 127) + 127) << 23, float)  # 2^k
    return p * scale


@wp.func
def log_uniform(a: float, b: float, u: float) -> float:
    """A log-uniform value between ``a > 0`` and ``b > 0`` given a uniform ``u`` in [0, 1):
    ``a (b / a)^u``, kept inside ``[min(a, b), max(a, b)]`` (``u = 0`` gives ``a``)."""
    x = a * exp_pos(log_pos(b / a) * u)
    return wp.clamp(x, wp.min(a, b), wp.max(a, b))


_M_MAX = wp.constant(16777215)  # 2^24 - 1
_K_CENTRAL = wp.constant(14260633)  # |q| <= 0.425 on the 24-bit grid
_LN_2POW25 = wp.constant(17.328679513998633)  # 25 ln 2


@wp.func
def normal(h: wp.uint32) -> float:
    """A standard normal draw from the top 24 bits ``m`` of ``h``: the quantile of ``p =
    (m + 1/2) / 2^24`` (so draws are symmetric, |x| <= 5.42), by Wichura's AS 241 PPND7
    (relative error ~1e-7): a rational function of ``r = 0.180625 - q^2`` for ``|q| = |p -
    1/2| <= 0.425``, else of ``sqrt(-ln min(p, 1 - p)) - 1.6`` (its segment for ``r > 5`` is
    never reached: min p = 2^-25). ``q`` and ``min(p, 1 - p) = t / 2^25`` (``t = 2 min(m,
    2^24 - 1 - m) + 1``, odd) come from the integer ``m``: no library call but ``sqrt``."""
    m = int(h >> wp.uint32(8))
    k = 2 * m - _M_MAX  # (p - 1/2) 2^25, odd, exact in float32
    q = float(k) * 2.9802322387695312e-08
    if wp.abs(k) <= _K_CENTRAL:
        r = 0.180625 - q * q
        num = q * (((59.10937472 * r + 159.29113202) * r + 50.434271938) * r + 3.387132872)
        return num / (((67.1875636 * r + 78.757757664) * r + 17.895169469) * r + 1.0)
    r = wp.sqrt(_LN_2POW25 - log_pos(float(2 * wp.min(m, _M_MAX - m) + 1))) - 1.6
    num = ((0.17023821103 * r + 1.3067284816) * r + 2.75681539) * r + 1.4234372777
    return wp.where(k < 0, -num, num) / ((0.12021132975 * r + 0.7370016425) * r + 1.0)
