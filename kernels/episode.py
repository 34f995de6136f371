"""Episode bookkeeping, written once for every env kind: step counters, truncation, done,
returns; and the key of a new episode's initial-state draw."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import env_block, list_masked, thread_index
from gpuparam.kernels.rng import STREAM_RESET, rng_key


@wp.kernel
def end_step(
    max_episode_steps: wp.int32,
    reward: wp.array(dtype=float),
    terminated: wp.array(dtype=wp.bool),
    step_count: wp.array(dtype=wp.int32),
    running_return: wp.array(dtype=float),
    truncated_out: wp.array(dtype=wp.bool),
    done_out: wp.array(dtype=wp.bool),
    episode_return_out: wp.array(dtype=float),
    episode_length_out: wp.array(dtype=wp.int32),
):
    """Count the step, truncate at the time limit (Gymnasium's TimeLimit), and for an
    episode that ends here report its return and length and clear the counters (the
    auto-reset follows). Those two outputs are written only where done; elsewhere they
    keep the env's previous finished episode."""
    i = thread_index(wp.tid())
    n = step_count[i] + 1
    ret = running_return[i] + reward[i]
    truncated = n >= max_episode_steps
    done = terminated[i] or truncated
    truncated_out[i] = truncated
    done_out[i] = done
    if done:
        episode_return_out[i] = ret
        episode_length_out[i] = n
        n = 0
        ret = 0.0
    step_count[i] = n
    running_return[i] = ret


@wp.kernel
def clear_counters(
    mask: wp.array(dtype=wp.bool),
    step_count: wp.array(dtype=wp.int32),
    running_return: wp.array(dtype=float),
):
    """Zero the step counter and running return of the masked envs (explicit resets)."""
    i = thread_index(wp.tid())
    if mask[i]:
        step_count[i] = 0
        running_return[i] = 0.0


@wp.kernel
def tick(clock: wp.array(dtype=wp.int64)):
    """Advance a global step counter by one (launched with one thread)."""
    clock[0] = clock[0] + wp.int64(1)


@wp.func
def begin_episode(
    env: int,
    seed: int,
    env_offset: int,
    episode_count: wp.array(dtype=wp.int32),
) -> wp.uint32:
    """Count a new episode of ``env`` and return the random state of its initial state,
    keyed by (seed, global env id ``env_offset + env``, episode index)."""
    k = episode_count[env]
    episode_count[env] = k + 1
    return rng_key(seed, env_offset + env, STREAM_RESET, k)


@wp.func
def begin_listed(
    tid: int,
    block: int,
    mask: wp.array(dtype=wp.bool),
    mask_words: wp.array(dtype=wp.int64),
    episode_count: wp.array(dtype=wp.int32),
    scratch: wp.array(dtype=wp.int32),
) -> wp.vec2i:
    """``begin_episode`` for the masked envs of thread ``tid``'s block, as a listed reset
    kernel starts (``gpuparam.backend.KernelBackend``): lists them into ``scratch[e0:e0 +
    m]`` and their episode index into ``scratch[npad + e0:]`` (``npad``: half of
    ``scratch``), counting the new episodes; returns ``(e0, m)``. Their keys are then
    ``rng_key(seed, env_offset + env, STREAM_RESET, episode)``, drawn in a loop of their own."""
    r = env_block(tid, block, mask.shape[0])
    e0 = r[0]
    m = list_masked(mask, mask_words, block % 8 == 0, e0, r[1], scratch)
    npad = wp.max(scratch.shape[0] // 2, 0)
    j = int(e0)
    while j < e0 + m:
        env = wp.max(scratch[j], 0)
        k = episode_count[env]
        episode_count[env] = k + 1
        scratch[npad + j] = k
        j += 1
    return wp.vec2i(e0, m)
