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


class _Spy:
    """Records the core env's actions and episode statistics at every step."""

    def __init__(self, env):
        self.env, self.actions, self.returns, self.dones = env, [], [], []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action):
        self.actions.append(action.clone())
        td = self.env.step(action)
        self.returns.append(td["episode_return"].clone())
        self.dones.append(td["done"].clone())
        return td


def test_next_step_mode_semantics():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=3)
    envs = GymnasiumVectorEnv(base, autoreset_mode="next_step")
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    envs.reset(seed=0)
    a = torch.ones(N, 1)
    for _ in range(2):
        obs, rew, term, trunc, info = envs.step(a)
        assert not (term | trunc).any() and info == {}
    obs3, rew3, term3, trunc3, _ = envs.step(a)
    assert trunc3.all() and not term3.any() and (rew3 < 0).all()
    kept = obs3.clone()
    obs4, rew4, term4, trunc4, _ = envs.step(a)
    assert torch.equal(obs3, kept)  # outputs are copies
    assert not (term4 | trunc4).any() and torch.equal(rew4, torch.zeros(N))
    # the returned observation is the state the new episode starts from
    th, thdot = base.state[:, 0], base.state[:, 1]
    torch.testing.assert_close(obs4, torch.stack([th.cos(), th.sin(), thdot], 1))
    assert torch.equal(base.episode_length, torch.zeros(N, dtype=torch.int32))
    assert not torch.allclose(obs4, obs3)
    for _ in range(2):
        assert not envs.step(a)[3].any()
    assert envs.step(a)[3].all()  # a full new episode of 3 steps


def test_gymnasium_vector_wrappers_run_in_next_step_mode():
    # issue 13, defect 4: NormalizeObservation refused SAME_STEP, RecordEpisodeStatistics
    # failed on torch tensors, NormalizeReward on bool tensors
    from gymnasium.wrappers.vector import (
        ClipAction,
        NormalizeObservation,
        NormalizeReward,
        RecordEpisodeStatistics,
    )

    spy = _Spy(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=10))
    envs = GymnasiumVectorEnv(spy, autoreset_mode=AutoresetMode.NEXT_STEP, numpy=True)
    wrapped = ClipAction(NormalizeReward(NormalizeObservation(RecordEpisodeStatistics(envs))))
    obs, _ = wrapped.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
    episodes = 0
    for t in range(25):
        obs, rew, term, trunc, info = wrapped.step(np.full((N, 1), 10.0, dtype=np.float32))
        assert isinstance(rew, np.ndarray) and term.dtype == np.bool_ and np.isfinite(obs).all()
        if "episode" in info:
            done = info["_episode"]
            assert done.all() and t in (9, 20)
            np.testing.assert_allclose(info["episode"]["r"][done], spy.returns[t].numpy(),
                                       rtol=1e-5)
            assert (info["episode"]["l"][done] == 10).all()
            episodes += 1
    assert episodes == 2
    assert max(float(a.abs().max()) for a in spy.actions) == 2.0  # ClipAction's bound
    assert abs(float(obs.mean())) < 3.0


def test_numpy_same_step_and_episode_info():
    envs = GymnasiumVectorEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0),
                              numpy=True, episode_info=True)
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.shape == (N, 4)
    steps = np.zeros(N, dtype=np.int32)
    seen = 0
    for _ in range(60):
        obs, rew, term, trunc, info = envs.step(np.ones(N, dtype=np.int64))
        steps += 1
        assert isinstance(info["final_obs"], np.ndarray) and rew.dtype == np.float32
        done = info["_episode"]
        assert np.array_equal(done, term | trunc)
        if done.any():  # CleanRL-style reading
            assert np.array_equal(info["episode"]["l"][done], steps[done])
            np.testing.assert_array_equal(info["episode"]["r"][done], steps[done])
            seen += done.sum()
            steps[done] = 0
    assert seen > 0


def test_bad_autoreset_mode():
    with pytest.raises(ValueError, match="autoreset_mode expected AutoresetMode.SAME_STEP or "
                                         "NEXT_STEP, got 'disabled'"):
        _envs_mode("disabled")


def _envs_mode(mode):
    return GymnasiumVectorEnv(gp.make("CartPole-v1", num_envs=N, device="cpu"),
                              autoreset_mode=mode)


def test_any_non_negative_seed_is_taken_as_gymnasium_does():
    envs = _envs()
    for seed in (0, 2**31, 2**32 + 5):  # beyond int32: reduced, as the SB3 and TorchRL adapters
        obs, _ = envs.reset(seed=seed)
        again, _ = _envs().reset(seed=seed % 2**31)
        assert torch.equal(torch.as_tensor(obs), torch.as_tensor(again))


def test_next_step_masked_reset_keeps_the_last_observation_of_envs_outside_the_mask():
    # as Gymnasium's SyncVectorEnv: an env that ended at the last step and is not in the mask
    # keeps the (final) observation it last returned; its new episode starts at the next step
    gym = pytest.importorskip("gymnasium")
    from gymnasium.vector import SyncVectorEnv

    n, t = 3, 2
    m = np.array([True, False, False])
    a = np.zeros((n, 1), np.float32)
    ref = SyncVectorEnv([lambda: gym.make("Pendulum-v1", max_episode_steps=t)] * n,
                        autoreset_mode="NextStep")
    ours = GymnasiumVectorEnv(gp.make("Pendulum-v1", num_envs=n, device="cpu",
                                      max_episode_steps=t), autoreset_mode="next_step",
                              numpy=True)
    for e in (ref, ours):
        e.reset(seed=0)
        for _ in range(t):
            last = e.step(a)
        assert last[3].all()  # every env truncated at the last step
        obs, _ = e.reset(options={"reset_mask": m.copy()})
        assert np.array_equal(obs[~m], last[0][~m])
        after = e.step(a)  # the envs outside the mask start their new episode now
        assert (after[1][~m] == 0).all() and not after[3].any()


@pytest.mark.parametrize("numpy", [False, True])
def test_next_step_observations_the_caller_edits_are_not_handed_back(numpy):
    # issue 24 (11): NEXT_STEP returned the tensor it keeps for masked resets, so an in-place
    # edit of `obs` came back at the next masked reset
    n, t = 4, 2
    envs = GymnasiumVectorEnv(gp.make("Pendulum-v1", num_envs=n, device="cpu", seed=0,
                                      max_episode_steps=t), autoreset_mode="next_step",
                              numpy=numpy)
    envs.reset(seed=0)
    for _ in range(t):
        obs, *_ = envs.step(torch.zeros(n, 1))
    kept = torch.as_tensor(obs).clone()
    obs[:] = 99.0  # the caller's edit
    mask = torch.tensor([True, False, False, False])
    again, _ = envs.reset(options={"reset_mask": mask})
    assert torch.equal(torch.as_tensor(again)[1:], kept[1:])
    torch.as_tensor(again)[:] = -99.0
    after, *_ = envs.step(torch.zeros(n, 1))  # the pending envs start their new episode
    assert not (torch.as_tensor(after) == -99.0).any()


@pytest.mark.parametrize("numpy", [False, True])
def test_next_step_returns_the_ends_of_a_step_that_raised_at_the_next_step(numpy):
    # issue 33 (16): a hook raising at a truncation step lost those episodes in NEXT_STEP
    # mode (the env had started new ones; the caller never saw the ends)
    def make():
        base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=3)
        return GymnasiumVectorEnv(base, autoreset_mode="next_step", numpy=numpy,
                                  episode_info=True)

    envs, twin = make(), make()
    calls = {"n": 0}

    def hook(env, td):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    envs.gp_env.after_step(hook)
    envs.reset(seed=0), twin.reset(seed=0)
    a = torch.ones(N, 1)
    for _ in range(2):
        envs.step(a), twin.step(a)
    with pytest.raises(KeyboardInterrupt):
        envs.step(a)
    want = twin.step(a)  # what the step that raised would have returned
    assert want[3].all()
    got = envs.step(a)  # returned one step late
    for x, y in zip(got[:4], want[:4], strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert np.array_equal(got[4]["episode"]["l"], want[4]["episode"]["l"])
    assert np.array_equal(got[4]["episode"]["r"], want[4]["episode"]["r"])
    assert np.asarray(got[4]["_episode"]).all()
    obs, rew, term, trunc, _ = envs.step(a)  # then the new episode starts, as usual
    assert not (np.asarray(term) | np.asarray(trunc)).any() and not np.asarray(rew).any()
    th, thdot = envs.gp_env.state[:, 0], envs.gp_env.state[:, 1]
    torch.testing.assert_close(torch.as_tensor(obs), torch.stack([th.cos(), th.sin(), thdot], 1))
    for _ in range(2):
        assert not np.asarray(envs.step(a)[3]).any()
    assert np.asarray(envs.step(a)[3]).all()  # a full new episode of 3 steps


def test_next_step_reset_after_a_step_that_raised_drops_its_ends():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=2)
    envs = GymnasiumVectorEnv(base, autoreset_mode="next_step")
    remove = base.after_step(lambda env, td: 1 / 0)
    envs.reset(seed=0)
    a = torch.ones(N, 1)
    for _ in range(2):  # the second ends every episode
        with pytest.raises(ZeroDivisionError):
            envs.step(a)
    remove()
    mask = torch.arange(N) < N // 2
    obs, _ = envs.reset(options={"reset_mask": mask})  # the others' ends are still due
    out = envs.step(a)
    assert torch.equal(out[3], ~mask) and not out[2].any()
    envs.reset()  # a full reset drops them all
    assert not envs.step(a)[3].any()
