"""The thread index every env kernel starts from."""

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
