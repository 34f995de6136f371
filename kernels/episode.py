"""Episode bookkeeping shared by every env kernel: step counters, truncation, returns."""

from __future__ import annotations

import warp as wp

from kernels.rng import STREAM_RESET, rng_key


@wp.func
def end_step(
    env: int,
    reward: float,
    terminated: bool,
    max_episode_steps: int,
    step_count: wp.array(dtype=wp.int32),
    running_return: wp.array(dtype=float),
    reward_out: wp.array(dtype=float),
    terminated_out: wp.array(dtype=wp.bool),
    truncated_out: wp.array(dtype=wp.bool),
    done_out: wp.array(dtype=wp.bool),
    episode_return_out: wp.array(dtype=float),
    episode_length_out: wp.array(dtype=wp.int32),
):
    """Count the step, truncate at the time limit (Gymnasium's TimeLimit) and report
    the return and length of an episode that ends here. Those two outputs are written
    only where done (one store less per env per step); elsewhere they keep the env's
    previous finished episode."""
    n = step_count[env] + 1
    ret = running_return[env] + reward
    truncated = n >= max_episode_steps
    done = terminated or truncated
    step_count[env] = n
    running_return[env] = ret
    reward_out[env] = reward
    terminated_out[env] = terminated
    truncated_out[env] = truncated
    done_out[env] = done
    if done:
        episode_return_out[env] = ret
        episode_length_out[env] = n


@wp.func
def begin_episode(
    env: int,
    seed: int,
    episode_count: wp.array(dtype=wp.int32),
    step_count: wp.array(dtype=wp.int32),
    running_return: wp.array(dtype=float),
) -> wp.uint32:
    """Zero the counters of a resetting env and return the random state for its
    initial state, keyed by (seed, env, episode index)."""
    k = episode_count[env]
    episode_count[env] = k + 1
    step_count[env] = 0
    running_return[env] = 0.0
    return rng_key(seed, env, STREAM_RESET, k)
