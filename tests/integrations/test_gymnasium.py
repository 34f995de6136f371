"""GymnasiumVectorEnv: Gymnasium 1.x vector API conformance, same-step auto-reset, bad input."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import torch

import gpuparam as gp

gym = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402

from gpuparam.integrations.gymnasium import GymnasiumVectorEnv  # noqa: E402

N = 8


def _envs(name: str = "CartPole-v1", **kw) -> GymnasiumVectorEnv:
    return GymnasiumVectorEnv(gp.make(name, num_envs=N, device="cpu", seed=0, **kw))


def test_spaces_and_metadata():
    envs = _envs()
    assert isinstance(envs, VectorEnv) and envs.num_envs == N
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    ref = gym.make("CartPole-v1")
    assert envs.single_observation_space == ref.observation_space
    assert envs.single_action_space == ref.action_space
    assert envs.observation_space.shape == (N, 4)
    assert envs.observation_space.dtype == np.float32
    assert envs.action_space == gym.spaces.MultiDiscrete([2] * N)
    pend = _envs("Pendulum-v1")
    assert pend.single_action_space == gym.make("Pendulum-v1").action_space
    assert pend.action_space.shape == (N, 1)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
def test_reset_and_step_types(name):
    envs = _envs(name)
    obs, info = envs.reset(seed=3)
    shape = envs.observation_space.shape
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32 and obs.shape == shape
    assert obs.device == envs.device and info == {}
    assert envs.observation_space.contains(obs.numpy())
    obs2, _ = envs.reset(seed=3)
    assert torch.equal(obs, obs2)
    out = envs.step(envs.action_space.sample())  # numpy actions are accepted
    obs, reward, terminated, truncated, info = out
    assert obs.shape == shape and obs.dtype == torch.float32
    assert reward.shape == (N,) and reward.dtype == torch.float32
    for t in (terminated, truncated):
        assert t.shape == (N,) and t.dtype == torch.bool
    assert isinstance(info, dict)
    # results are copies: the next step does not overwrite them
    kept = obs.clone()
    envs.step(torch.as_tensor(envs.action_space.sample()))
    assert torch.equal(obs, kept)


def test_same_step_autoreset_reports_final_obs():
    envs = _envs()
    envs.reset(seed=0)
    steps = torch.zeros(N, dtype=torch.int32)
    seen_done = 0
    for _ in range(200):
        obs, _, terminated, truncated, info = envs.step(torch.randint(0, 2, (N,)))
        steps += 1
        done = terminated | truncated
        assert torch.equal(info["_final_obs"], done) and torch.equal(info["_final_info"], done)
        if done.any():
            seen_done += int(done.sum())
            final = info["final_obs"][done]
            # the final observation is past a termination bound; the returned one is a new start
            out = (final[:, 0].abs() > 2.4) | (final[:, 2].abs() > 12 * 2 * np.pi / 360)
            assert out.all()
            assert obs[done].abs().max() <= 0.05
            ep = info["final_info"]["episode"]
            assert torch.equal(ep["l"][done], steps[done])
            assert torch.equal(ep["r"][done], steps[done].float())
            assert torch.equal(info["final_info"]["_episode"], done)
            steps[done] = 0
    assert seen_done > 0


def test_truncation_and_partial_reset():
    envs = _envs("Pendulum-v1", max_episode_steps=5)
    obs0, _ = envs.reset(seed=1)
    for i in range(5):
        obs, _, terminated, truncated, info = envs.step(torch.zeros(N, 1))
        assert not terminated.any()
        assert truncated.all() == (i == 4)
    assert not torch.equal(info["final_obs"], obs)
    mask = np.zeros(N, dtype=bool)
    mask[2] = True
    before = envs.step(torch.zeros(N, 1))[0]
    after, _ = envs.reset(options={"reset_mask": mask})
    assert torch.equal(after[~torch.from_numpy(mask)], before[~torch.from_numpy(mask)])
    assert not torch.equal(after[2], before[2])


@pytest.mark.parametrize(
    "action",
    [
        torch.zeros(N, 2, dtype=torch.int64),
        torch.zeros(N, dtype=torch.float32),
        np.zeros(N + 1, dtype=np.int64),
    ],
)
def test_bad_action_same_error_as_core(action):
    core = gp.make("CartPole-v1", num_envs=N, device="cpu")
    as_tensor = torch.as_tensor(action)
    with pytest.raises(ValueError) as core_err:
        core.step(as_tensor)
    envs = _envs()
    with pytest.raises(ValueError) as err:
        envs.step(action)
    assert str(err.value) == str(core_err.value)


@pytest.mark.gpu
def test_cuda_tensors_stay_on_device():
    envs = GymnasiumVectorEnv(gp.make("CartPole-v1", num_envs=N, device="cuda"))
    obs, _ = envs.reset(seed=0)
    out = envs.step(torch.zeros(N, dtype=torch.int64, device="cuda"))
    assert obs.is_cuda and all(t.is_cuda for t in out[:4]) and out[4]["final_obs"].is_cuda
    out = envs.step(envs.action_space.sample())  # NumPy actions are copied to the device
    assert out[0].is_cuda


def test_params_reachable():
    core = gp.make("CartPole-v1", num_envs=N, device="cpu")
    envs = GymnasiumVectorEnv(core)
    assert envs.params is core.params and envs.gp_env is core
    envs.params.set("force_mag", 0.0)
    assert (core.params["force_mag"] == 0).all()
    with pytest.raises(AttributeError):
        envs.no_such_attribute  # noqa: B018


def test_import_error_names_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    monkeypatch.delitem(sys.modules, "gpuparam.integrations.gymnasium", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gpuparam\[gymnasium\]"'):
        importlib.import_module("gpuparam.integrations.gymnasium")
