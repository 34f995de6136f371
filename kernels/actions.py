"""Actions outside the action space, counted on the device (no host sync)."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index


@wp.kernel
def count_invalid_discrete(
    action: wp.array(dtype=wp.int64),
    n: wp.int64,
    counter: wp.array(dtype=wp.int64),
):
    """Count actions outside ``[0, n)``."""
    i = thread_index(wp.tid())
    a = action[i]
    if a < wp.int64(0) or a >= n:
        wp.atomic_add(counter, 0, wp.int64(1))


@wp.kernel
def count_invalid_box(
    action: wp.array2d(dtype=float),
    counter: wp.array(dtype=wp.int64),
):
    """Count envs whose action has a NaN component (launched over envs)."""
    i = thread_index(wp.tid())
    bad = int(0)
    for j in range(action.shape[1]):
        a = action[i, j]
        if a != a:
            bad = 1
    if bad != 0:
        wp.atomic_add(counter, 0, wp.int64(1))
