"""Pendulum-v1 against Gymnasium's reference step (float32 vs float64: 1e-5 per step,
1e-4 over 50-step trajectories, relative to the value's scale)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gpuparam as gp

gym = pytest.importorskip("gymnasium")  # the reference

PARAMS = ("g", "m", "l", "dt", "max_speed", "max_torque")


def _reference(values: dict[str, float]):
    ref = gym.make("Pendulum-v1").unwrapped
    ref.reset(seed=0)
    for k, v in values.items():
        setattr(ref, k, v)
    return ref


def _random_params(n, g):
    def u(lo, hi):
        return lo + (hi - lo) * torch.rand(n, generator=g)

    return {
        "g": u(5.0, 15.0), "m": u(0.5, 2.0), "l": u(0.5, 1.5),
        "dt": u(0.02, 0.08), "max_speed": u(4.0, 12.0), "max_torque": u(1.0, 3.0),
    }


@pytest.mark.parametrize("custom", [False, True], ids=["default", "per-env"])
def test_one_step_matches_gymnasium(custom):
    n = 2048
    g = torch.Generator().manual_seed(7)
    env = gp.make("Pendulum-v1", num_envs=n, device="cpu")
    if custom:
        env.params.set(_random_params(n, g), mask=torch.rand(n, generator=g) < 0.5)
    state = torch.stack([(torch.rand(n, generator=g) - 0.5) * 6 * np.pi,
                         (torch.rand(n, generator=g) - 0.5) * 16], dim=1)
    action = (torch.rand(n, 1, generator=g) - 0.5) * 6  # beyond the torque limit too
    env.state.copy_(state)
    td = env.step(action)
    for i in range(n):
        ref = _reference({k: float(env.params[k][i]) for k in PARAMS})
        ref.state = state[i].double().numpy()
        exp, reward, terminated, truncated, _ = ref.step(action[i].double().numpy())
        np.testing.assert_allclose(td["final_observation"][i].numpy(), exp, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(float(td["reward"][i]), reward, rtol=1e-5, atol=1e-5)
        assert not bool(td["terminated"][i])


def test_trajectories_match_gymnasium():
    n, steps = 16, 50
    g = torch.Generator().manual_seed(8)
    env = gp.make("Pendulum-v1", num_envs=n, device="cpu", seed=1)
    env.params.set(_random_params(n, g))
    start = env.state.clone()
    actions = (torch.rand(steps, n, 1, generator=g) - 0.5) * 4
    ours = [env.step(a)["final_observation"].clone() for a in actions]
    for i in range(n):
        ref = _reference({k: float(env.params[k][i]) for k in PARAMS})
        ref.state = start[i].double().numpy()
        for t in range(steps):
            exp, *_ = ref.step(actions[t, i].double().numpy())
            np.testing.assert_allclose(ours[t][i].numpy(), exp, rtol=1e-4, atol=1e-4)


def test_truncates_at_200_steps():
    env = gp.make("Pendulum-v1", num_envs=3, device="cpu")
    a = torch.zeros(3, 1)
    for t in range(1, 201):
        td = env.step(a)
        assert bool(td["truncated"].all()) == (t == 200)
    assert td["episode_length"].tolist() == [200, 200, 200]
    assert torch.equal(td["done"], td["truncated"])
