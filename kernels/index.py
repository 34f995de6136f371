"""The thread index every env kernel starts from."""

from __future__ import annotations

import warp as wp


@wp.func
def thread_index(tid: int) -> int:
    """``tid`` (from ``wp.tid()``), known to the compiler to be non-negative: the mask is a
    no-op for any launch size (< 2^31) but lets the CPU compiler drop the wrap-around test
    (Warp arrays accept negative indices) from every array access of the kernel, so the
    CartPole step runs about 30% faster on Warp's CPU device. Same results, same on CUDA."""
    return tid & 0x7FFFFFFF
