"""Reward terms, terminations and privileged observations across the adapters (issue 42
items 3 and 7), on a CartPole that declares Go1's extra outputs: ``"reward_terms"`` (the
reward and a constant 1, named by ``reward_term_names``) and ``"privileged_observation"``
(the observation times 2), written by an ``after_step`` hook."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp
from gpuparam.envs.cartpole import CartPoleEnv
from gpuparam.spec import OutputSpec

pytest.importorskip("rsl_rl")


class TermCartPole(CartPoleEnv):
    name = "TermCartPole-v0"
    reward_term_names = ("balance", "alive")

    def output_specs(self):
        return {"reward_terms": OutputSpec((2,)),
                "privileged_observation": OutputSpec((4,), reset=True)}


def _write(env, td) -> None:
    td["reward_terms"][:, 0].copy_(td["reward"])
    td["reward_terms"][:, 1].fill_(1.0)


def _make(n: int = 16, steps: int = 20):
    env = TermCartPole(n, device="cpu", seed=3, max_episode_steps=steps)
    env.after_step(_write, kind="torch")
    return env


def test_episode_reward_and_termination_entries_are_exact():
    """``Episode_Reward/<term>`` * max_episode_length is the mean episode sum of the term
    (here: the mean return, and the mean length), over the same episodes as "sums"; the
    termination fractions are the terminated share of those episodes, counted by hand."""
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    env = _make()
    wrapped = RslRlVecEnv(env, log_interval=30, episode_stats="sums")
    gen = torch.Generator().manual_seed(0)
    done_n = term_n = 0
    for _ in range(30):
        obs, _, dones, extras = wrapped.step(torch.randn(16, 1, generator=gen))
        td = env.outputs
        done_n += int(td["done"].sum())
        term_n += int(td["terminated"].sum())
    log = extras["log"]
    assert done_n > 0 and 0 < term_n < done_n  # both causes occur: the check can fail
    t = wrapped.max_episode_length
    torch.testing.assert_close(log["Episode_Reward/balance"] * t, log["Episode/return"])
    torch.testing.assert_close(log["Episode_Reward/alive"] * t, log["Episode/length"])
    assert float(log["Episode/count"]) == done_n
    torch.testing.assert_close(log["Episode_Termination/terminated"],
                               torch.tensor(term_n / done_n))
    torch.testing.assert_close(log["Episode_Termination/time_out"],
                               torch.tensor(1 - term_n / done_n))


def test_log_values_are_added_and_checked():
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    env = _make()
    level = torch.tensor(2.5)
    wrapped = RslRlVecEnv(env, log_interval=1, log_values={"Curriculum/level": lambda: level})
    _, _, _, extras = wrapped.step(torch.zeros(16, 1))
    assert float(extras["log"]["Curriculum/level"]) == 2.5
    with pytest.raises(ValueError, match="log_values expected"):
        RslRlVecEnv(_make(), log_values={"x": 3.0})


def test_plain_env_has_no_term_entries():
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    wrapped = RslRlVecEnv(gp.make("CartPole-v1", 4, device="cpu"), log_interval=1)
    _, _, _, extras = wrapped.step(torch.zeros(4, 1))
    assert not any(k.startswith("Episode_") for k in extras["log"])


def test_torchrl_spec_holds_the_privileged_observation():
    pytest.importorskip("torchrl")
    from gpuparam.integrations.torchrl import TorchRLEnv

    env = _make(8)
    env.after_step(lambda env, td: td["privileged_observation"].copy_(td["observation"] * 2),
                   kind="torch")
    tenv = TorchRLEnv(env)
    spec = tenv.observation_spec["privileged_observation"]
    assert spec.shape == (8, 4) and spec.dtype == torch.float32
    td = tenv.reset()
    torch.testing.assert_close(td["privileged_observation"], env.outputs[
        "privileged_observation"])
    out = tenv.rollout(3, break_when_any_done=False)
    assert out["next", "privileged_observation"].shape == (8, 3, 4)
    assert out["next", "privileged_observation"].abs().sum() > 0  # the hook's values
    torch.testing.assert_close(out["next", "privileged_observation"][:, -1],
                               env.outputs["privileged_observation"])
    assert "privileged_observation" not in TorchRLEnv(
        gp.make("CartPole-v1", 2, device="cpu")).observation_spec.keys()


def test_skrl_state_space_is_the_privileged_observation():
    pytest.importorskip("skrl")
    from gpuparam.integrations.skrl import SkrlWrapper

    env = _make(8)

    def priv(env, td):
        td["privileged_observation"].copy_(td["observation"] * 2.0)

    env.after_step(priv, kind="torch")
    w = SkrlWrapper(env)
    assert w.state_space.shape == (4,)
    w.reset()
    w.step(torch.zeros(8, 1, dtype=torch.int64))
    state = w.state()
    assert state.shape == (8, 4)
    torch.testing.assert_close(state, env.outputs["privileged_observation"])
    assert state.data_ptr() != env.outputs["privileged_observation"].data_ptr()  # a copy
    plain = SkrlWrapper(gp.make("CartPole-v1", 2, device="cpu"))
    assert plain.state_space is None and plain.state() is None
