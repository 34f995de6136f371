"""Random pushes: per env, on the device, counter-based draws keyed by global env id."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

VEL = [(-0.5, 0.5), (0.2, 0.3)]


def _pair(n: int, push: gp.Push, seed: int = 0):
    env = gp.make("Ant-v5", n, device="cpu", seed=seed)
    twin = gp.make("Ant-v5", n, device="cpu", seed=seed)
    env.add_event(push)
    return env, twin


def test_push_adds_a_velocity_in_range_to_the_root_only():
    env, twin = _pair(4, gp.Push(VEL, every=1))
    a = torch.zeros(4, 8)
    env.step(a)
    twin.step(a)
    dv = env.state["qvel"] - twin.state["qvel"]
    assert ((dv[:, 0] >= -0.5) & (dv[:, 0] <= 0.5)).all()
    assert ((dv[:, 1] >= 0.2 - 1e-6) & (dv[:, 1] <= 0.3 + 1e-6)).all()
    assert torch.equal(env.state["qvel"][:, 2:], twin.state["qvel"][:, 2:])
    assert torch.equal(env.state["qpos"], twin.state["qpos"])
    env.step(a)  # the second step captures: the push replays inside the Warp graph
    kind, names = env.pipeline.plan[-1]
    assert names[-1] == "push" and kind == "warp" and env.pipeline.captured


def test_every_k_pushes_each_env_once_per_window_and_is_independent_of_n():
    k = 3
    small = gp.make("Ant-v5", 4, device="cpu", seed=5)
    big = gp.make("Ant-v5", 8, device="cpu", seed=5)
    ps, pb = gp.Push(VEL, every=gp.Every(k)), gp.Push(VEL, every=gp.Every(k))
    small.add_event(ps)
    big.add_event(pb)
    assert torch.equal(ps.timer, pb.timer[:4])
    for _ in range(3 * k):
        small.step(torch.zeros(4, 8))
        big.step(torch.zeros(8, 8))
    assert (ps.count == 1 + 3).all() and (pb.count == 1 + 3).all()
    assert torch.equal(small.state["qvel"], big.state["qvel"][:4])


def test_interval_in_seconds_and_bad_input():
    p = gp.Push(VEL, every=gp.Interval(1.0, 2.0))
    assert p.steps(0.05) == (20, 40)
    with pytest.raises(ValueError, match="low <= high"):
        gp.Push([(1.0, -1.0)], every=2)
    with pytest.raises(ValueError, match="every expects"):
        gp.Push(VEL, every="often")
    env = gp.make("Hopper-v5", 1, device="cpu")
    with pytest.raises(ValueError, match="Hopper-v5 has 6"):
        env.add_event(gp.Push([(0, 1)] * 3, every=1, first_dof=5))
