"""TransformedEnv's replayed step plan (CPU, fused engines) gives the same results as the
full path, and falls back to it whenever something the plan baked in changes."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

N = 64


def _pair():
    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1)
    env.randomize(gp.Uniform("length", 0.4, 0.6, on="reset"))
    obs = gp.ObsNorm((4,), reset_on=("length",), clip=5.0)
    return env, gp.TransformedEnv(env, obs, gp.RewardNorm(0.9))


def test_plan_matches_the_full_path_through_changes(engine_path):
    _, a = _pair()
    _, b = _pair()  # dropping b's plan before each step keeps it on the full path
    g = torch.Generator().manual_seed(0)
    half = torch.arange(N) < N // 2
    for step in range(60):
        act = torch.randint(0, 2, (N,), generator=g)
        ta = a.step(act)
        b._plan = None
        tb = b.step(act)
        for k in ("observation", "final_observation", "reward", "observation_raw"):
            assert torch.equal(ta[k], tb[k]), (step, k)
        if step == 5:
            assert (a._plan is not None) == (engine_path == "fused")
        # things a plan must notice
        if step == 10:
            for t in (a, b):
                t.transforms[0].clip = 1.0
        if step == 20:
            for t in (a, b):
                t.transforms[1].eval()
        if step == 25:
            for t in (a, b):
                t.transforms[1].train()
                t.transforms[0].freeze()
        if step == 30:
            for t in (a, b):
                t.transforms[0].unfreeze()
                t.params.set("length", 0.55, mask=half)  # reset_on: stats of those envs
        if step == 40:
            for t in (a, b):
                t.transforms[0].load_state_dict(t.transforms[0].state_dict())  # new engine
        if step == 50:
            for t in (a, b):
                t.transforms[1].gamma = 0.5
    assert torch.equal(a.transforms[0].m2, b.transforms[0].m2)
    assert torch.equal(a.transforms[1].returns, b.transforms[1].returns)


def test_plan_follows_a_replaced_env_buffer(engine_path):
    env, t = _pair()
    act = torch.zeros(N, dtype=torch.long)
    t.step(act)
    t.step(act)
    new_reward = torch.full((N,), 3.0)
    env._td["reward"] = new_reward  # the env now returns another tensor under "reward"
    out = t.step(act)
    assert out["reward_raw"] is new_reward


@pytest.mark.parametrize("n", [10])  # N not filling 16-float vectors: torch path, no plan
def test_no_plan_without_fused_engines(n):
    env = gp.make("CartPole-v1", num_envs=n, device="cpu")
    t = gp.TransformedEnv(env, gp.ObsNorm((4,)), gp.RewardNorm())
    t.step(torch.zeros(n, dtype=torch.long))
    assert t._plan is None
