"""Episode bookkeeping, written once for every env kind: step counters, truncation, done,
returns; and the key of a new episode's initial-state draw."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.rng import STREAM_RESET, rng_key


@wp.struct
class StepKeys:
    """What keys an env's draws (``kernels.rng``), bound once per env: the run's seed int32
    ``[1]``, the global id of env 0, the episodes begun and the steps of the current
    episode, int32 ``[N]`` each (the step context's buffers)."""

    seed: wp.array(dtype=wp.int32)
    env_offset: int
    episode_count: wp.array(dtype=wp.int32)
    step_count: wp.array(dtype=wp.int32)


@wp.kernel
def end_step(
    # Data in:
    max_episode_steps: wp.array(dtype=wp.int32),
    reward: wp.array(dtype=float),
    terminated: wp.array(dtype=wp.bool),
    # Data out (``step_count``, ``running_return``: read, then written):
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
    keep the env's previous finished episode. ``max_episode_steps`` int32 ``[1]``."""
    i = thread_index(wp.tid())
    n = step_count[i] + 1
    ret = running_return[i] + reward[i]
    truncated = n >= max_episode_steps[0]
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
    # Data in:
    mask: wp.array(dtype=wp.bool),
    # Data out:
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


@wp.kernel
def scale(
    # Model:
    k: float,
    # Data out (read, then written):
    x: wp.array(dtype=float),
):
    """``x *= k``, one thread per entry: the device work of a ``"warp"`` hook in
    ``gpuparam.testing`` (a float32 ``[N]`` output such as the reward)."""
    i = wp.tid()
    x[i] = x[i] * k
