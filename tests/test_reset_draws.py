"""Initial states pinned to their formula: episode ``k`` of global env ``e`` starts from
``wp.randf`` draws of the key ``rng_key(seed, e, STREAM_RESET, k)``, whichever path resets it
(explicit resets through the reset mask's words, auto-resets through the done mask's,
any N, any env offset). A NumPy reference of Warp's PCG hash recomputes them bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gpuparam as gp


def _pcg(state: int) -> int:
    b = (state * 747796405 + 2891336453) & 0xFFFFFFFF
    c = (((b >> ((b >> 28) + 4)) ^ b) * 277803737) & 0xFFFFFFFF
    return (c >> 22) ^ c


def _rand_init(seed: int, offset: int) -> int:
    return _pcg(((seed & 0xFFFFFFFF) + _pcg(offset & 0xFFFFFFFF)) & 0xFFFFFFFF)


def _key(seed: int, env: int, episode: int) -> int:
    stream_reset = 0
    term = _rand_init(_rand_init(seed, env), stream_reset)
    return _rand_init(term, episode)


def _randf(state: int, low: float, high: float) -> tuple[int, np.float32]:
    """``wp.randf(state, low, high)`` in float32: the advanced state and the value."""
    state = _pcg(state)
    u = np.float32(state >> 8) * np.float32(1.0 / 16777216.0)
    lo, hi = np.float32(low), np.float32(high)
    return state, np.float32(np.float32(hi - lo) * u) + lo


def _initial(name: str, seed: int, env: int, episode: int) -> np.ndarray:
    r = _key(seed, env, episode)
    if name == "CartPole-v1":
        out = []
        for _ in range(4):
            r, x = _randf(r, -0.05, 0.05)
            out.append(x)
        return np.array(out, dtype=np.float32)
    r, th = _randf(r, -math.pi, math.pi)
    r, thdot = _randf(r, -1.0, 1.0)
    return np.array([np.cos(th), np.sin(th), thdot], dtype=np.float32), (th, thdot)


def _check(name, obs: torch.Tensor, seed, offset, envs, episodes, state=None):
    for i, k in zip(envs, episodes, strict=True):
        ref = _initial(name, seed, offset + i, k)
        if name == "CartPole-v1":
            assert np.array_equal(obs[i].numpy().view(np.int32), ref.view(np.int32)), (i, k)
        else:  # the state is drawn bit for bit; the observation's cos/sin are the device's
            th, thdot = ref[1]
            s = state[i].numpy()
            assert s[0] == th and s[1] == thdot, (i, k)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("n, offset, seed", [(1, 0, 0), (13, 5, 7), (64, 1000, -3)])
def test_initial_states_follow_their_key(name, n, offset, seed):
    env = gp.make(name, num_envs=n, device="cpu", seed=seed, env_offset=offset,
                  max_episode_steps=5)
    episodes = env.context.episode_count.numpy().astype(np.int64)  # (the constructor reset)
    assert (episodes == 1).all()
    obs = env.reset()["observation"].clone()
    _check(name, obs, seed, offset, range(n), episodes, env.state.clone())
    episodes += 1
    assert np.array_equal(env.context.episode_count.numpy(), episodes)
    g = torch.Generator().manual_seed(1)
    for t in range(12):
        if name == "CartPole-v1":
            a = torch.randint(0, 2, (n,), generator=g)
        else:
            a = torch.zeros(n, 1)
        td = env.step(a)
        done = td["done"].numpy().copy()
        # auto-reset envs start their next episode (the done mask's path)
        _check(name, td["observation"], seed, offset, np.flatnonzero(done),
               episodes[done], env.state)
        episodes[done] += 1
        if t % 4 == 1:  # an explicit masked reset (the reset mask's path)
            m = torch.rand(n, generator=g) < 0.5
            obs = env.reset(m)["observation"]
            sel = m.numpy()
            _check(name, obs, seed, offset, np.flatnonzero(sel), episodes[sel], env.state)
            episodes[sel] += 1
    assert env.pipeline.captured
    assert np.array_equal(env.context.episode_count.numpy(), episodes)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
def test_a_mask_without_words_resets_one_env_per_thread(name):
    # KernelBackend.reset given a mask other than the env's done or reset mask (no 8-env
    # words): one thread per env, the same draws
    n, seed = 11, 5
    env = gp.make(name, num_envs=n, device="cpu", seed=seed)
    episodes = env.context.episode_count.numpy().astype(np.int64)
    mask = torch.tensor([i % 3 == 1 for i in range(n)])
    env.backend.reset(env.context, mask)
    sel = mask.numpy()
    _check(name, env.context.outputs["observation"], seed, 0, np.flatnonzero(sel),
           episodes[sel], env.state)
    assert np.array_equal(env.context.episode_count.numpy(), episodes + sel)
