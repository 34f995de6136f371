"""TransformedEnv against a minimal env that follows gpuparam's env contract."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from gpuparam.transforms import ObsNorm, RewardNorm, TransformedEnv

N = 6


class FakeParams:
    """``env.params``: names, values [N], ``set`` with a mask, ``on_change`` callbacks."""

    def __init__(self, n: int):
        self.names = ("length", "gravity")
        self.values = {k: torch.ones(n) for k in self.names}
        self.callbacks = []

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.values[name]

    def on_change(self, cb):
        self.callbacks.append(cb)
        return lambda: self.callbacks.remove(cb)

    def set(self, name: str, value: float, mask: torch.Tensor | None = None) -> None:
        v = self.values[name]
        v.copy_(torch.where(mask, value, v) if mask is not None else torch.full_like(v, value))
        for cb in self.callbacks:
            cb((name,), mask)


class FakeEnv:
    """A 1-D random walk with obs ``[pos * length, length]``; episodes end at |pos| > 2 or
    after 4 steps, then auto-reset, re-randomizing ``length`` (notifying like the real one).
    Returns its own static buffers, overwritten on each step."""

    def __init__(self, n: int = N, seed: int = 0):
        self.num_envs, self.device = n, torch.device("cpu")
        self.params = FakeParams(n)
        self.observation_spec = types.SimpleNamespace(shape=(2,))
        self.action_spec = types.SimpleNamespace(shape=())
        self.randomized = []
        self.gen = torch.Generator().manual_seed(seed)
        self.pos, self.t = torch.zeros(n), torch.zeros(n, dtype=torch.int64)
        self.td = TensorDict(
            {
                "observation": torch.zeros(n, 2),
                "final_observation": torch.zeros(n, 2),
                "reward": torch.zeros(n),
                "terminated": torch.zeros(n, dtype=torch.bool),
                "truncated": torch.zeros(n, dtype=torch.bool),
                "done": torch.zeros(n, dtype=torch.bool),
                "episode_return": torch.zeros(n),
                "episode_length": torch.zeros(n, dtype=torch.int64),
            },
            batch_size=[n],
        )
        self.reset_td = TensorDict({"observation": self.td["observation"]}, batch_size=[n])

    def randomize(self, *terms) -> None:
        self.randomized.extend(terms)

    def _obs(self, out: torch.Tensor) -> None:
        out[:, 0] = self.pos * self.params["length"]
        out[:, 1] = self.params["length"]

    def _reset(self, mask: torch.Tensor) -> None:
        self.pos.copy_(torch.where(mask, torch.rand(self.num_envs, generator=self.gen), self.pos))
        self.t.masked_fill_(mask, 0)
        new_len = torch.rand(self.num_envs, generator=self.gen) + 0.5
        self.params.values["length"].copy_(torch.where(mask, new_len, self.params["length"]))
        for cb in self.params.callbacks:
            cb(("length",), mask)

    def reset(self, mask: torch.Tensor | None = None) -> TensorDict:
        self._reset(torch.ones(self.num_envs, dtype=torch.bool) if mask is None else mask)
        self._obs(self.td["observation"])
        return self.reset_td

    def step(self, action: torch.Tensor) -> TensorDict:
        td = self.td
        self.pos += action + 0.1 * torch.randn(self.num_envs, generator=self.gen)
        self.t += 1
        td["reward"].copy_(-self.pos.abs())
        td["terminated"].copy_(self.pos.abs() > 2)
        td["truncated"].copy_(self.t >= 4)
        torch.logical_or(td["terminated"], td["truncated"], out=td["done"])
        self._obs(td["final_observation"])
        self._reset(td["done"])
        self._obs(td["observation"])
        return td


def run(env: TransformedEnv, steps: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [env.step(torch.randn(N, generator=g)).clone() for _ in range(steps)]


def test_outputs_match_standalone_transforms():
    obs, rew = ObsNorm(2, group_ids=torch.arange(N) % 3), RewardNorm(0.9, clip=5.0)
    env = TransformedEnv(FakeEnv(), obs, rew)
    ref_obs = ObsNorm(2, group_ids=torch.arange(N) % 3)
    ref_rew = RewardNorm(0.9, clip=5.0)
    first = env.reset()
    assert torch.equal(first["observation"], ref_obs.normalize(first["observation_raw"]))
    finals = []
    for td in run(env, 12):
        finals.append(td["final_observation_raw"].double().numpy())
        expect_final = ref_obs(td["final_observation_raw"])  # stats updated once, from here
        assert torch.equal(td["final_observation"], expect_final)
        assert torch.equal(td["observation"], ref_obs.normalize(td["observation_raw"]))
        assert torch.equal(td["reward"], ref_rew(td["reward_raw"], td["done"]))
        assert td["done"].dtype == torch.bool and td.batch_size == torch.Size([N])
    assert torch.equal(obs.count, torch.full((3,), 24.0).double())
    f = np.stack(finals)
    for g in range(3):
        data = f[:, np.arange(N) % 3 == g].reshape(-1, 2)
        np.testing.assert_allclose(obs.mean[g].numpy(), data.mean(0), rtol=1e-9)
        np.testing.assert_allclose(obs.std[g].numpy(), data.std(0), rtol=1e-9)


def test_buffers_are_preallocated_and_raw_keys_are_the_envs():
    base = FakeEnv()
    env = TransformedEnv(base, ObsNorm(2), RewardNorm())
    env.reset()
    a, b = env.step(torch.zeros(N)), env.step(torch.zeros(N))
    for k in ("observation", "final_observation", "reward"):
        assert a[k].data_ptr() == b[k].data_ptr()
        assert b[k + "_raw"] is base.td[k]
    assert set(b.keys()) == set(base.td.keys()) | {
        "observation_raw",
        "final_observation_raw",
        "reward_raw",
    }


def test_env_api_stays_reachable():
    base = FakeEnv()
    env = TransformedEnv(base, ObsNorm(2))
    assert env.params is base.params and env.num_envs == N and env.device == base.device
    assert env.observation_spec is base.observation_spec and env.action_spec is base.action_spec
    env.randomize("term")
    assert base.randomized == ["term"]
    assert isinstance(env.transforms[0], ObsNorm) and "ObsNorm" in repr(env)
    with pytest.raises(AttributeError):
        env.no_such_attribute  # noqa: B018


def test_transforms_and_outputs_are_read_only():
    """The stage and the checkpoint hold the transforms given; step returns outputs: an
    assignment would silently part them (a captured step never runs the Python stage)."""
    env = TransformedEnv(FakeEnv(), ObsNorm(2))
    env.step(torch.zeros(N))
    ts, out = env.transforms, env.outputs
    for name in ("transforms", "outputs"):
        with pytest.raises(AttributeError):
            setattr(env, name, ())
    assert env.transforms is ts and env.outputs is out and out is not None


def test_reset_on_resets_only_groups_of_changed_envs():
    obs = ObsNorm(2, group_ids=torch.arange(N), reset_on=("length",))
    rew = RewardNorm(0.9, group_ids=torch.arange(N), reset_on=("length",))
    env = TransformedEnv(FakeEnv(), obs, rew)
    env.reset()
    run(env, 3)  # no episode ends before step 4
    before = {k: v.clone() for k, v in obs.state_dict().items()}
    returns = rew.returns.clone()
    mask = torch.tensor([False, True, False, False, True, False])
    env.params.set("gravity", 2.0, mask)
    assert torch.equal(obs.count, before["count"])
    env.params.set("length", 0.7, mask)
    assert obs.count.tolist() == [3, 0, 3, 3, 0, 3] and rew.count.tolist() == obs.count.tolist()
    for k in ("count", "mean", "m2"):
        assert torch.equal(getattr(obs, k)[~mask], before[k][~mask])
    assert torch.equal(rew.returns[~mask], returns[~mask]) and torch.all(rew.returns[mask] == 0)


def test_resets_during_step_run_after_the_update():
    obs = ObsNorm(2, group_ids=torch.arange(N), reset_on=("length",))
    env = TransformedEnv(FakeEnv(), obs)
    env.reset()
    run(env, 3)
    td = env.step(torch.zeros(N))  # step 4: every episode truncates, length re-randomized
    assert td["done"].all()
    assert torch.all(obs.count == 0)  # pre-change final observations are not in the stats
    assert torch.isfinite(td["observation"]).all()
    run(env, 2)
    assert torch.all(obs.count == 2)


def test_unmasked_change_during_step_resets_all_after_the_update():
    obs = ObsNorm(2, group_ids=torch.arange(N), reset_on=("gravity",))
    base = FakeEnv()
    env = TransformedEnv(base, obs)
    env.reset()
    run(env, 2)
    real_step = base.step

    def step(action):
        td = real_step(action)
        base.params.set("gravity", 3.0)  # mask None: every env, as an after-step hook might
        return td

    base.step = step
    td = env.step(torch.zeros(N))
    assert torch.all(obs.count == 0) and torch.isfinite(td["observation"]).all()
    base.step = real_step
    run(env, 1)
    assert torch.all(obs.count == 1)


def test_reset_clears_returns_of_reset_envs():
    rew = RewardNorm(0.9)
    env = TransformedEnv(FakeEnv(), rew)
    env.reset()
    run(env, 2)
    mask = torch.tensor([True, False, False, False, False, True])
    kept = rew.returns[~mask].clone()
    td = env.reset(mask)
    assert "reward" not in td.keys() and torch.all(rew.returns[mask] == 0)
    assert torch.equal(rew.returns[~mask], kept)


def test_eval_mode_stops_updates_through_the_wrapper():
    obs = ObsNorm(2)
    env = TransformedEnv(FakeEnv(), obs)
    env.reset()
    run(env, 2)
    obs.eval()
    count = obs.count.clone()
    run(env, 2)
    assert torch.equal(obs.count, count)


def test_bad_transforms_and_names():
    with pytest.raises(TypeError, match="expected ObsNorm or RewardNorm"):
        TransformedEnv(FakeEnv(), torch.nn.Identity())
    with pytest.raises(KeyError, match="valid names"):
        TransformedEnv(FakeEnv(), ObsNorm(2, reset_on=("mass",)))
    with pytest.raises(ValueError, match=r"num_envs=7"):
        TransformedEnv(FakeEnv(), ObsNorm(2, num_envs=7))


def test_reset_never_updates_statistics():
    base = FakeEnv()
    base.reset_td = base.td  # an env whose reset returns all of its buffers
    obs, rew = ObsNorm(2), RewardNorm()
    env = TransformedEnv(base, obs, rew)
    td = env.reset()
    assert obs.count.item() == 0 and rew.count.item() == 0
    assert td["reward"] is base.td["reward"]


def test_step_never_syncs(monkeypatch):
    obs = ObsNorm(2, group_ids=torch.arange(N) % 2, reset_on=("length",))
    env = TransformedEnv(FakeEnv(), obs, RewardNorm(0.9, reset_on=("length",)))
    env.reset()
    action = torch.zeros(N)
    env.step(action)

    def boom(*a, **k):
        raise AssertionError("host sync in the hot path")

    for name in ("item", "tolist", "nonzero", "cpu", "numpy", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, boom)
    for _ in range(5):  # includes auto-resets that re-randomize length
        env.step(action)


def test_close_takes_the_transforms_out_of_a_gpuparam_env():
    import gpuparam as gp

    env = gp.make("CartPole-v1", num_envs=16, device="cpu", seed=0)
    obs = ObsNorm((4,), reset_on=("length",))
    t = TransformedEnv(env, obs, RewardNorm(0.9))
    t.reset()
    a = torch.zeros(16, dtype=torch.int64)
    for _ in range(3):
        t.step(a)
    assert env.pipeline.names[-1] == "transforms" and float(obs.count[0]) == 48
    t.close()
    assert "transforms" not in env.pipeline.names
    count, mean = obs.count.clone(), obs.mean.clone()
    env.step(a)  # a plain step: no longer normalized, statistics untouched
    env.params.set("length", 0.7)  # no longer a reset_on listener
    assert torch.equal(obs.count, count) and torch.equal(obs.mean, mean)
    with pytest.raises(RuntimeError, match=r"TransformedEnv.step: called after close\(\)"):
        t.step(a)
    with pytest.raises(RuntimeError, match=r"TransformedEnv.reset: called after close\(\)"):
        t.reset()
    t.close()  # twice: nothing more to do


def test_an_obsnorm_of_another_shape_is_refused_at_construction():
    # issue 24: accepted, then failed at the first step
    import gpuparam as gp

    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    ok = RewardNorm(0.9)
    with pytest.raises(ValueError, match=r"ObsNorm shape \(3,\) does not match the env's "
                                         r"observation shape \(4,\)"):
        gp.TransformedEnv(env, ok, gp.ObsNorm((3,)))
    assert "transforms" not in env.pipeline.names and ok.num_envs is None  # nothing changed
    with pytest.raises(ValueError, match="num_envs=7"):
        gp.TransformedEnv(env, ok, gp.ObsNorm((4,), num_envs=7))
    assert ok.num_envs is None
    env.step(torch.zeros(N, dtype=torch.int64))


def test_reset_on_is_read_when_the_wrapper_is_built():
    # review: a reset_on set afterwards on a transform that had none raised KeyError
    # inside the step (its deferred mask did not exist)
    import gpuparam as gp

    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    env.randomize(gp.Uniform("length", 0.4, 0.6, on="step"))
    watched, late = ObsNorm((4,), reset_on=("length",)), RewardNorm(0.9)
    t = TransformedEnv(env, watched, late)
    late.reset_on = ("length",)
    t.reset()
    a = torch.zeros(N, dtype=torch.int64)
    for _ in range(3):
        t.step(a)
    assert float(late.count.sum()) == 3 * N  # never reset by the late reset_on
    assert float(watched.count.sum()) == 0  # reset after each step's update


@pytest.mark.parametrize("how", ["attach", "TransformedEnv"])
@pytest.mark.parametrize("order", ["statistics first", "env first"])
def test_loading_statistics_and_env_in_either_order_keeps_the_statistics(how, order):
    # issue 33 (2): a load is a restore, not a write: loading the statistics, then the env
    # whose lengths differ from the fresh env's, reset every changed env's group (counts
    # [11, 11, 5, ...] -> 0); the other order kept them
    import gpuparam as gp

    def build():
        # every env ends an episode, drawing a new length, at steps 8 and 16
        env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=8)
        env.randomize(gp.Uniform("length", 0.4, 0.9, on="reset"))
        obs = ObsNorm((4,), group_ids=torch.arange(N), reset_on=("length",))
        rew = RewardNorm(0.9, group_ids=torch.arange(N), reset_on=("length",))
        if how == "attach":
            obs.attach(env)
            rew.attach(env)
            return env, (obs, rew), env.step
        return env, (obs, rew), TransformedEnv(env, obs, rew).step

    env, norms, step = build()
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        a = torch.randint(0, 2, (N,), generator=g)
        step(a)
        if how == "attach":  # (a TransformedEnv updates them itself)
            norms[0](env.outputs["final_observation"])
            norms[1](env.outputs["reward"], env.outputs["done"])
    assert (norms[0].count > 0).all()
    saved_env, saved = env.state_dict(), [dict(n.state_dict()) for n in norms]
    target, loaded, _ = build()
    assert not torch.equal(target.params["length"], env.params["length"])  # a load changes it
    if order == "env first":
        target.load_state_dict(saved_env)
    for n, s in zip(loaded, saved, strict=True):
        n.load_state_dict(s)
    if order == "statistics first":
        target.load_state_dict(saved_env)
    for n, s in zip(loaded, saved, strict=True):
        assert torch.equal(n.count, s["count"]) and torch.equal(n.mean, s["mean"])
    target.params.set("length", 0.8, mask=torch.arange(N) == 2)  # writes still reset
    for n in loaded:
        assert float(n.count[2]) == 0 and (n.count[torch.arange(N) != 2] > 0).all()


def test_cartpole_with_norms_is_captured_by_its_third_step():
    """The first step binds the transforms' stage (a new plan), the second warms it up, the
    third captures it: ``tests/test_gpu.py`` counts on this on CUDA."""
    import gpuparam as gp

    env = gp.make("CartPole-v1", num_envs=64, device="cpu", seed=0)
    tenv = TransformedEnv(env, ObsNorm((4,), num_envs=64), RewardNorm())
    a = torch.zeros(64, dtype=torch.int64)
    seen = []
    for _ in range(3):
        tenv.step(a)
        seen.append(env.pipeline.captured)
    assert seen == [False, False, True]
