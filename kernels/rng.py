"""Counter-based random numbers keyed by (seed, env, stream, counter).

A draw depends only on its key, never on ``num_envs``, launch order or device, so env i
sees the same numbers whatever the batch size, on CPU and GPU alike.
"""

from __future__ import annotations

import warp as wp

# Stream ids: reset sampling uses RESET; randomization term k uses TERM0 + k.
STREAM_RESET = wp.constant(0)
STREAM_TERM0 = wp.constant(16)


@wp.func
def rng_key(seed: int, env: int, stream: int, counter: int) -> wp.uint32:
    """PCG state for one (seed, env, stream, counter) key."""
    s = wp.rand_init(seed, env)
    s = wp.rand_init(int(s), stream)
    return wp.rand_init(int(s), counter)

