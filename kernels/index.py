"""The thread index every env kernel starts from, and the list of a block's masked envs."""

from __future__ import annotations

import warp as wp


@wp.func
def thread_index(tid: int) -> int:
    """``tid`` (from ``wp.tid()``), known to the compiler to be non-negative.

    Warp arrays accept negative indices (Python style), so every ``a[i]`` with an ``i`` of
    unknown sign carries a wrap-around test. The mask is a no-op for any launch size (< 2^31)
    but lets the CPU compiler drop that test from every array access of the kernel: the
    CartPole step runs about 30% faster on Warp's CPU device. Same results, same on CUDA.
    """
    return tid & 0x7FFFFFFF


@wp.func
def env_block(tid: int, block: int, n: int) -> wp.vec2i:
    """The envs ``[e0, e1)`` of thread ``tid`` when each thread handles ``block`` envs
    (``e0 >= 0`` visible to the compiler)."""
    e0 = wp.max(tid * block, 0)
    return wp.vec2i(e0, wp.min(e0 + block, n))


@wp.func
def list_masked(
    mask: wp.array(dtype=wp.bool),
    mask_words: wp.array(dtype=wp.int64),
    by_words: bool,
    e0: int,
    e1: int,
    out: wp.array(dtype=wp.int32),
) -> int:
    """List the envs ``e`` of ``[e0, e1)`` where ``mask[e]``, ascending, into ``out[e0:]``;
    returns how many. With ``by_words`` (the caller's block a multiple of 8 envs, so ``e0``
    is one and ``e1`` is one or the end), ``mask_words`` holds the mask's bytes 8 envs per
    word (the mask padded with False to a multiple of 8): 8 envs are read per load and a
    zero word costs one test; else one env at a time. A block's scan on CPUs, where one
    thread walks every env."""
    m = int(0)
    if by_words:
        w = int(e0 // 8)
        while w < (e1 + 7) // 8:
            # the lowest set byte (env) of the 8-env word, branch-free (a zero word writes a
            # position it does not count); a loop for the rare other ones. (Branching per
            # word or per env mispredicts on a random mask.)
            word = mask_words[w]
            low_bit = word & (-word)
            out[wp.max(e0 + m, 0)] = w * 8 + (wp.bit_count(low_bit - wp.int64(1)) >> 3)
            m += int(word != wp.int64(0))
            word = word ^ low_bit
            while word != wp.int64(0):
                low_bit = word & (-word)
                out[wp.max(e0 + m, 0)] = w * 8 + (wp.bit_count(low_bit - wp.int64(1)) >> 3)
                m += 1
                word = word ^ low_bit
            w += 1
    else:
        e = int(e0)
        while e < e1:
            if mask[e]:
                out[wp.max(e0 + m, 0)] = e
                m += 1
            e += 1
    return m
