"""The env runtime: reset/step outputs, auto-reset, truncation, seeding, bad actions."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp


def _rollout(env, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        if isinstance(env.action_spec, gp.DiscreteSpec):
            act = torch.randint(0, 2, (env.num_envs,), generator=g)
        else:
            act = torch.rand(env.num_envs, 1, generator=g) * 4 - 2
        out.append(env.step(act)["observation"].clone())
    return torch.stack(out)


def test_outputs_and_dtypes():
    env = gp.make("CartPole-v1", num_envs=8, device="cpu")
    obs = env.reset()["observation"]
    assert obs.shape == (8, 4) and obs.dtype == torch.float32
    assert torch.all(obs.abs() <= 0.05)
    td = env.step(torch.ones(8, dtype=torch.int64))
    assert td.batch_size == (8,)
    expected = {
        "observation": torch.float32, "final_observation": torch.float32,
        "reward": torch.float32, "terminated": torch.bool, "truncated": torch.bool,
        "done": torch.bool, "episode_return": torch.float32, "episode_length": torch.int32,
    }
    assert {k: td[k].dtype for k in td.keys()} == expected
    assert env.outputs is td and env.hook_outputs["reward"] is td["reward"]
    for name in ("outputs", "hook_outputs"):  # read-only: a step would return the buffers
        with pytest.raises(AttributeError):
            setattr(env, name, td.clone())


def test_same_seed_same_trajectories_and_num_envs_independence():
    a = _rollout(gp.make("CartPole-v1", num_envs=64, device="cpu", seed=11), 120)
    b = _rollout(gp.make("CartPole-v1", num_envs=64, device="cpu", seed=11), 120)
    assert torch.equal(a, b)
    c = gp.make("CartPole-v1", num_envs=128, device="cpu", seed=11)
    obs0 = c.state[:64].clone()
    assert torch.equal(obs0, gp.make("CartPole-v1", 64, device="cpu", seed=11).state)
    d = gp.make("CartPole-v1", num_envs=64, device="cpu", seed=12)
    assert not torch.equal(d.state, obs0)


def test_num_envs_independence_through_auto_resets():
    """Env i's resets draw the same initial states whether N is 64 or 128."""
    a = gp.make("CartPole-v1", num_envs=64, device="cpu", seed=3)
    b = gp.make("CartPole-v1", num_envs=128, device="cpu", seed=3)
    g = torch.Generator().manual_seed(0)
    for _ in range(150):
        act = torch.randint(0, 2, (128,), generator=g)
        oa, ob = a.step(act[:64])["observation"], b.step(act)["observation"]
        assert torch.equal(oa, ob[:64])


def test_auto_reset_and_final_observation():
    env = gp.make("CartPole-v1", num_envs=16, device="cpu", seed=1)
    push = torch.ones(16, dtype=torch.int64)
    t = 0
    while t < 200:
        t += 1
        td = env.step(push)
        if bool(td["done"].any()):
            break
    done = td["done"]
    assert torch.equal(done, td["terminated"])
    assert torch.all(td["final_observation"][done].abs().max(1).values > 0.2)
    assert torch.all(td["observation"][done].abs() <= 0.05)
    assert torch.equal(td["observation"][~done], td["final_observation"][~done])
    assert torch.all(td["episode_length"][done] == t)
    assert torch.all(td["episode_return"][done] == float(t))


def test_truncation_at_500_and_custom_limit():
    env = gp.make("CartPole-v1", num_envs=2, device="cpu", max_episode_steps=3)
    env.params.set({"gravity": 0.0, "force_mag": 0.0})  # nothing moves, nothing fails
    flags = [env.step(torch.zeros(2, dtype=torch.int64))["truncated"].tolist() for _ in range(6)]
    assert flags == [[False, False], [False, False], [True, True]] * 2
    assert gp.make("CartPole-v1", num_envs=1, device="cpu").max_episode_steps == 500


def test_masked_reset_and_reseed():
    env = gp.make("CartPole-v1", num_envs=8, device="cpu", seed=5)
    first = env.state.clone()
    _rollout(env, 5)
    moved = env.state.clone()
    mask = torch.arange(8) < 4
    obs = env.reset(mask)["observation"]
    assert torch.equal(obs[4:], moved[4:])
    assert not torch.equal(obs[:4], first[:4])  # a new episode draws new initial states
    env.reset(seed=5)
    assert torch.equal(env.state, first)


@pytest.mark.parametrize(
    "action, match",
    [
        (torch.zeros(7, dtype=torch.int64), r"expected shape \(8,\), got \(7,\)"),
        (torch.zeros(8, 1, dtype=torch.int64), r"expected shape \(8,\), got \(8, 1\)"),
        (torch.zeros(8), "expected an integer dtype, got torch.float32"),
        (torch.zeros(8, dtype=torch.bool), "expected an integer dtype, got torch.bool"),
        ([0] * 8, "expected a tensor"),
        (torch.zeros(8, dtype=torch.int64, device="meta"), "expected device cpu, got meta"),
    ],
)
def test_bad_actions(action, match):
    env = gp.make("CartPole-v1", num_envs=8, device="cpu")
    before = env.state.clone()
    with pytest.raises(ValueError, match=match):
        env.step(action)
    assert torch.equal(env.state, before)


def test_pendulum_action_dtype():
    env = gp.make("Pendulum-v1", num_envs=4, device="cpu")
    with pytest.raises(ValueError, match="floating-point dtype, got torch.int64"):
        env.step(torch.zeros(4, 1, dtype=torch.int64))
    env.step(torch.zeros(4, 1, dtype=torch.float64))  # converted to float32


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_envs: expected a positive int, got 0"):
        gp.make("CartPole-v1", num_envs=0, device="cpu")
    with pytest.raises(ValueError, match="device must be"):
        gp.make("CartPole-v1", num_envs=2, device="tpu")
    with pytest.raises(ValueError, match="max_episode_steps"):
        gp.make("CartPole-v1", num_envs=2, device="cpu", max_episode_steps=0)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
def test_captured_cpu_step_equals_eager(name):
    captured = gp.make(name, num_envs=16, device="cpu", seed=2)
    eager = gp.make(name, num_envs=16, device="cpu", seed=2, capture=False)
    assert torch.equal(_rollout(captured, 60), _rollout(eager, 60))
    assert captured.pipeline.captured and not eager.pipeline.captured
    assert captured.pipeline.names == ("physics", "episode", "clock", "autoreset")


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "Ant-v5"])
def test_eager_steps_and_resets_make_no_warp_views(name, monkeypatch):
    """Issue 34: the step's launches are bound once (the context's buffers never change):
    steady-state eager steps, auto-resets and explicit resets wrap no tensor in a new Warp
    array (``wp.from_torch``)."""
    if name == "Ant-v5":
        pytest.importorskip("mujoco_warp")
    import warp as wp

    env = gp.make(name, 8, device="cpu", seed=0, capture=False)
    a = torch.zeros(8, dtype=torch.int64) if name.startswith("Cart") else torch.zeros(
        8, *env.action_spec.shape)
    mask = torch.arange(8) < 3
    env.reset()
    env.step(a)
    env.reset(mask)
    env.episode_length = env.max_episode_steps - 1  # every env truncates at the next step
    env.step(a)  # the first calls bind
    calls = []
    real = wp.from_torch
    monkeypatch.setattr(wp, "from_torch", lambda *x, **k: calls.append(1) or real(*x, **k))
    env.step(a)
    env.reset(mask)
    env.episode_length = env.max_episode_steps - 1
    td = env.step(a)
    assert bool(td["truncated"].all())  # the auto-reset ran
    assert calls == []
