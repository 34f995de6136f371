"""skrl: PPO with SequentialTrainer through gpuparam's wrapper, ObsNorm as preprocessor."""

from __future__ import annotations

import importlib
import re
import sys
import warnings

import pytest
import torch
from torch import nn

import gpuparam as gp

pytest.importorskip("skrl")

from skrl.agents.torch.ppo import PPO  # noqa: E402
from skrl.memories.torch import RandomMemory  # noqa: E402
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model  # noqa: E402
from skrl.trainers.torch import SequentialTrainer  # noqa: E402

from gpuparam.integrations.skrl import (  # noqa: E402
    FinalObservation,
    ObsNormPreprocessor,
    SkrlWrapper,
    wrap,
)

N, ROLLOUTS = 8, 8


class Policy(GaussianMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space,
                       device=device)
        GaussianMixin.__init__(self, clip_actions=True)
        self.net = nn.Sequential(nn.Linear(self.num_observations, 16), nn.Tanh(),
                                 nn.Linear(16, self.num_actions))
        self.log_std = nn.Parameter(torch.zeros(self.num_actions))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space,
                       device=device)
        DeterministicMixin.__init__(self)
        self.net = nn.Sequential(nn.Linear(self.num_observations, 16), nn.Tanh(),
                                 nn.Linear(16, 1))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


def agent_for(env: SkrlWrapper, **cfg) -> PPO:
    dev = env.device
    models = {"policy": Policy(env.observation_space, env.action_space, dev),
              "value": Value(env.observation_space, env.action_space, dev)}
    return PPO(models=models, memory=RandomMemory(memory_size=ROLLOUTS, num_envs=N, device=dev),
               observation_space=env.observation_space, action_space=env.action_space,
               device=dev, cfg={"rollouts": ROLLOUTS, "learning_epochs": 2, "mini_batches": 2,
                                "time_limit_bootstrap": True, **cfg,
                                # no TensorBoard files or checkpoints under ./runs
                                "experiment": {"write_interval": 0, "checkpoint_interval": 0}})


def train(env, agent, timesteps: int) -> None:
    cfg = {"timesteps": timesteps, "headless": True, "disable_progressbar": True,
           "close_environment_at_exit": False}
    SequentialTrainer(env=env, agents=agent, cfg=cfg).train()


def test_ppo_trains_with_obsnorm_preprocessor_and_keeps_what_it_is_given():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    env = wrap(base)
    agent = agent_for(env, observation_preprocessor=ObsNormPreprocessor,
                      observation_preprocessor_kwargs={"size": env.observation_space})
    norm = agent.checkpoint_modules["observation_preprocessor"].norm
    seen = []
    step = env.step

    def spy(actions):
        out = step(actions)
        seen.append(out[0].clone())
        return out

    env.step = spy
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        train(env, agent, 2 * ROLLOUTS)
    assert [str(w.message) for w in record if "gpuparam" in w.filename] == []
    # the first epoch of each update merged its minibatches: 2 updates x ROLLOUTS x N samples
    assert norm.count[0] == 2 * ROLLOUTS * N
    stored = agent.memory.get_tensor_by_name("observations")  # [ROLLOUTS, N, 3], raw obs
    # memory holds the observations acted on: step t's output is stored at t + 1
    torch.testing.assert_close(stored[1:], torch.stack(seen[-ROLLOUTS:-1]), rtol=0, atol=0)
    for p in agent.models["policy"].parameters():
        assert torch.isfinite(p).all()


def test_outputs_are_fresh_tensors():
    env = wrap(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0))
    obs, _ = env.reset()
    out = env.step(torch.ones(N, 1))
    kept = [t.clone() for t in out[:4]]
    out[1].add_(1.0)  # skrl bootstraps into the reward in place
    second = env.step(-torch.ones(N, 1))
    assert all(torch.equal(a, b) for a, b in zip(out[:4:2], kept[::2], strict=True))
    assert torch.equal(out[1], kept[1] + 1.0) and torch.equal(out[3], kept[3])
    assert not torch.equal(second[1], kept[1] + 1.0)
    assert out[1].shape == (N, 1) and out[2].dtype == torch.bool and out[3].shape == (N, 1)
    assert env.state() is None and env.num_envs == N and env.params is env.gp_env.params


def test_reset_resets_once_then_returns_the_last_observations():
    # as skrl's wrappers of vectorized envs: its trainers call reset() after done steps of
    # single-env runs and at every train()/eval(); the envs reset themselves
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=3)
    env = wrap(base)
    before = base.context.episode_count.clone()
    env.reset()  # the first call resets every env
    assert torch.equal(base.context.episode_count, before + 1)
    for _ in range(4):
        obs = env.step(torch.ones(N, 1))[0]
    episodes = base.context.episode_count.clone()
    again, info = env.reset()
    assert torch.equal(again, obs) and info == {}
    assert torch.equal(base.context.episode_count, episodes)  # nothing was reset


def test_discrete_actions_from_categorical_models():
    env = wrap(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1))
    ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1)
    torch.testing.assert_close(env.reset()[0], ref.reset()["observation"])
    a = torch.randint(0, 2, (N, 1))
    torch.testing.assert_close(env.step(a)[0], ref.step(a.view(N))["observation"])
    assert env.action_space.n == 2


def test_param_write_and_reset_stats_between_trainings_take_effect():
    base = gp.TransformedEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0),
                             gp.ObsNorm(3))
    env = wrap(base)
    agent = agent_for(env)
    train(env, agent, ROLLOUTS)
    norm = base.transforms[0]
    mask = torch.arange(N) < 3
    env.params.set("max_torque", 0.5, mask=mask)
    norm.reset_stats(mask)
    assert norm.count[0] == 0
    train(env, agent, ROLLOUTS)
    assert norm.count[0] == ROLLOUTS * N
    assert torch.all(base.params["max_torque"][mask] == 0.5)
    assert torch.all(base.params["max_torque"][~mask] == 2.0)


def test_preprocessor_modes_and_errors():
    pre = ObsNormPreprocessor(3)
    x = torch.randn(64, 3) * 2 + 1
    y = pre(x)
    assert pre.norm.count[0] == 0 and torch.equal(y, x / (1 + 1e-8) ** 0.5)
    pre(x, train=True)
    assert pre.norm.count[0] == 64
    assert pre(None) is None
    assert "norm.count" in pre.state_dict()
    with pytest.raises(ValueError, match="inverse=True is not supported"):
        pre(x, inverse=True)
    with pytest.raises(ValueError, match="expected size or norm"):
        ObsNormPreprocessor()
    with pytest.raises(TypeError, match="expected a gp.ObsNorm, got int"):
        ObsNormPreprocessor(norm=3)


def test_preprocessor_statistics_live_on_skrls_default_device(monkeypatch):
    """skrl's agents pass observations on skrl's default device (cuda:0 when available), as
    its own RunningStandardScaler assumes: the default norm is built there."""
    import gpuparam.integrations.skrl as gskrl

    asked = []

    def parse_device(device, validate=True):
        asked.append(device)
        return torch.device("cpu")

    monkeypatch.setattr(gskrl.skrl_config.torch, "parse_device", parse_device)
    assert ObsNormPreprocessor(3).norm.device == torch.device("cpu") and asked == [None]
    ObsNormPreprocessor(3, device="cpu")
    assert asked == [None, "cpu"]


def test_import_error_names_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "skrl", None)
    monkeypatch.delitem(sys.modules, "gpuparam.integrations.skrl", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gpuparam\[skrl\]"'):
        importlib.import_module("gpuparam.integrations.skrl")


# ---------------------------------------------------------------- issue 24: edges
def test_returned_observations_are_not_the_wrappers_own():
    # issue 24 (11): reset() returned the very tensor the last step returned, so an edit of
    # either showed in the other (and in every later reset())
    env = wrap(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0))
    first, _ = env.reset()
    first.fill_(7.0)
    again, _ = env.reset()
    assert not torch.equal(again, first)
    obs = env.step(torch.ones(N, 1))[0]
    kept = obs.clone()
    obs.fill_(9.0)  # the user edits what step returned
    after, _ = env.reset()
    assert after is not obs and torch.equal(after, kept)
    after.fill_(5.0)
    assert torch.equal(env.reset()[0], kept)


def test_actions_of_a_wrong_shape_raise_a_clear_error():
    # issue 24 (13): [N, 2] actions for Pendulum raised torch's raw view error
    env = wrap(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0))
    env.reset()
    for bad in (torch.zeros(N, 2), torch.zeros(N + 1, 1), torch.zeros(N, 1, 1), torch.zeros(N)):
        got = re.escape(str(tuple(bad.shape)))
        with pytest.raises(ValueError, match=rf"SkrlWrapper: actions expected shape \(8, 1\), "
                                             rf"got {got}"):
            env.step(bad)
    cart = wrap(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0))
    cart.reset()
    with pytest.raises(ValueError, match=r"expected shape \(8, 1\) or \(8,\) \(Discrete\(2\)\), "
                                         r"got \(8, 2\)"):
        cart.step(torch.zeros(N, 2, dtype=torch.int64))


class LinearValue(DeterministicMixin, Model):
    """V(s) = w . s with fixed weights (nothing is trained in these tests)."""

    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space,
                       device=device)
        DeterministicMixin.__init__(self)
        self.net = nn.Linear(self.num_observations, 1, bias=False)
        with torch.no_grad():
            self.net.weight.copy_(torch.tensor([[1.0, -2.0, 0.5]]))

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


class FinalPPO(FinalObservation, PPO):
    pass


@pytest.mark.parametrize(("final", "flag"), [(True, True), (False, True), (True, None),
                                             (True, False)])
def test_time_limit_bootstrap_through_skrls_ppo_and_trainer(final, flag):
    # issue 24 (12): skrl's PPO bootstraps truncated episodes from V(next_observations);
    # the env returns post-reset observations, so a plain agent bootstraps from the next
    # episode's first state; FinalObservation hands it the state the step reached.
    # issue 33 (10): with skrl's default time_limit_bootstrap=False the mixin did nothing
    # (skrl then chains a truncated episode's advantage into the next episode's first
    # value): the mixin turns time-limit bootstrapping on
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=3)
    env = wrap(base)
    dev = env.device
    models = {"policy": Policy(env.observation_space, env.action_space, dev),
              "value": LinearValue(env.observation_space, env.action_space, dev)}
    cls = FinalPPO if final else PPO
    cfg = {"rollouts": ROLLOUTS, "experiment": {"write_interval": 0, "checkpoint_interval": 0}}
    if flag is not None:
        cfg["time_limit_bootstrap"] = flag
    agent = cls(models=models, memory=RandomMemory(memory_size=ROLLOUTS, num_envs=N, device=dev),
                observation_space=env.observation_space, action_space=env.action_space,
                device=dev, cfg=cfg)
    assert agent.cfg.time_limit_bootstrap is True
    seen, step = [], env.step

    def spy(actions):
        out = step(actions)
        seen.append([t.clone() for t in out[:4]] + [out[4]["final_observation"].clone()])
        return out

    env.step = spy
    train(env, agent, 6)  # fewer steps than a rollout: no update, memory holds them all
    rewards = agent.memory.get_tensor_by_name("rewards")[:6]
    with torch.no_grad():
        v = models["value"].net
        for t, (obs, reward, _, truncated, final_obs) in enumerate(seen):
            bootstrap_from = final_obs if final else obs
            expected = reward + agent.cfg.discount_factor * v(bootstrap_from) * truncated
            torch.testing.assert_close(rewards[t], expected)
            if truncated.any():
                assert not torch.equal(final_obs[truncated[:, 0]], obs[truncated[:, 0]])
    assert sum(int(s[3].sum()) for s in seen) == 2 * N  # truncated at steps 3 and 6
    # the trainer acted on the reset observations: the memory's observations at t + 1 are
    # the ones step t returned
    stored = agent.memory.get_tensor_by_name("observations")[:6]
    for t in range(5):
        assert torch.equal(stored[t + 1], seen[t][0])


def test_final_observation_mixin_refuses_a_batch_it_cannot_match():
    class Base:
        def record_transition(self, **kw):
            self.got = kw

    class Agent(FinalObservation, Base):
        pass

    agent = Agent()
    agent.record_transition(next_observations=torch.zeros(2, 3), infos={})
    assert torch.equal(agent.got["next_observations"], torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"expected the shape of next_observations \(2, 3\), "
                                         r"got \(4, 3\)"):
        agent.record_transition(next_observations=torch.zeros(2, 3),
                                infos={"final_observation": torch.ones(4, 3)})
