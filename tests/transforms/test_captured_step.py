"""A captured step (the default) equals eager stepping (``capture=False``) bit for bit,
through every change that alters what a replay must do: transform flags, checkpoint loads,
``.to()``, parameter writes with ``reset_on``, terms, hooks and curricula added, then
removed. Transform flags (train/eval, freeze, clip, gamma) are device values: toggling them
replays the same capture."""

from __future__ import annotations

import pytest
import torch
import warp as wp

import gpuparam as gp

N = 64


def _pair(capture: bool):
    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1, capture=capture)
    env.randomize(gp.Uniform("length", 0.4, 0.6, on="reset"))
    obs = gp.ObsNorm((4,), reset_on=("length",), clip=5.0)
    return env, gp.TransformedEnv(env, obs, gp.RewardNorm(0.9))


def _plain(capture: bool):
    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1, capture=capture)
    return env, gp.TransformedEnv(env, gp.ObsNorm((4,), clip=5.0), gp.RewardNorm(0.9))


def _changes(step: int, t, removers: list) -> None:
    if step == 10:
        t.transforms[0].clip = 1.0
    if step == 20:
        t.transforms[1].eval()
    if step == 25:
        t.transforms[1].train()
        t.transforms[0].freeze()
    if step == 30:
        t.transforms[0].unfreeze()
        if t.transforms[0].reset_on:
            t.params.set("length", 0.55, mask=torch.arange(N) < N // 2)
    if step == 40:
        t.transforms[0].load_state_dict(t.transforms[0].state_dict())  # a new engine
    if step == 45:
        t.transforms[0].to("cpu")
    if step == 50:
        t.transforms[1].gamma = 0.5
    if step == 55:
        removers.append(t.randomize(gp.Gaussian("force_mag", 0.0, 1.0, op="add", on="step")))
    if step == 60:
        removers.append(t.env.after_step(lambda e, td: td["reward"].mul_(2.0)))
    if step == 65:
        removers.append(t.env.add_curriculum(gp.Curriculum(
            3, params={"masspole": (0.1, 0.3)}, metric="episode_return", promote=5.0)))
    if step in (75, 80, 85):  # the curriculum, then the hook, then the term removed
        removers.pop()()


def _compare(make, steps=90):
    _, a = make(True)
    _, b = make(False)
    removers = {id(a): [], id(b): []}
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        act = torch.randint(0, 2, (N,), generator=g)
        ta, tb = a.step(act), b.step(act)
        for k in ("observation", "final_observation", "reward", "observation_raw", "done"):
            assert torch.equal(ta[k], tb[k]), (step, k)
        if step == 5:
            assert a.env.pipeline.captured and not b.env.pipeline.captured
        _changes(step, a, removers[id(a)])
        _changes(step, b, removers[id(b)])
    assert removers[id(a)] == [] and a.env.pipeline.names == b.env.pipeline.names
    assert torch.equal(a.transforms[0].m2, b.transforms[0].m2)
    assert torch.equal(a.transforms[1].returns, b.transforms[1].returns)
    return a


def test_captured_equals_eager_through_changes():
    _compare(_pair)


def test_captured_equals_eager_without_reset_on():
    a = _compare(_plain, steps=54)
    # the transforms are Warp launches only: the whole step is one Warp graph
    assert a.env.pipeline.plan == (("warp", a.env.pipeline.names),)


@pytest.mark.parametrize("n", [1, 10, 300])
def test_any_n_is_captured_and_stays_exact(n):
    outs = []
    for capture in (True, False):
        env = gp.make("CartPole-v1", num_envs=n, device="cpu", capture=capture)
        t = gp.TransformedEnv(env, gp.ObsNorm((4,)), gp.RewardNorm())
        outs.append(torch.stack([t.step(torch.ones(n, dtype=torch.long))["observation"].clone()
                                 for _ in range(20)]))
        if capture:
            assert env.pipeline.plan == (("warp", env.pipeline.names),)
    assert torch.equal(*outs)


def _toggle(step: int, t) -> None:
    obs, rew = t.transforms
    {3: lambda: setattr(obs, "clip", 1.0), 6: obs.eval, 9: obs.train, 12: rew.freeze,
     15: rew.unfreeze, 18: lambda: setattr(rew, "gamma", 0.5), 21: lambda: obs.freeze(True),
     24: lambda: setattr(obs, "clip", None), 27: lambda: rew.eval(), 30: obs.unfreeze,
     33: lambda: setattr(rew, "clip", 0.2)}.get(step, lambda: None)()


def test_toggling_flags_replays_the_same_capture(monkeypatch):
    """train/eval, freeze, clip and gamma between captured steps: no new capture (counted
    at Warp's ``capture_begin``, which every capture goes through), the pipeline stays
    captured with the same plan, and every step equals eager stepping."""
    a, b = _plain(True)[1], _plain(False)[1]
    acts = torch.randint(0, 2, (40, N), generator=torch.Generator().manual_seed(3))
    for act in acts[:3]:  # warm-up and capture
        a.step(act), b.step(act)
    assert a.env.pipeline.captured
    plan = a.env.pipeline.plan
    captures = []
    begin = wp.capture_begin
    monkeypatch.setattr(wp, "capture_begin", lambda *x, **k: captures.append(1) or begin(*x, **k))
    for step, act in enumerate(acts[3:]):
        _toggle(step, a)
        _toggle(step, b)
        ta, tb = a.step(act), b.step(act)
        for k in ("observation", "final_observation", "reward"):
            assert torch.equal(ta[k], tb[k]), (step, k)
        assert a.env.pipeline.captured and a.env.pipeline.plan == plan
    assert captures == []
    for ma, mb in zip(a.transforms, b.transforms, strict=True):
        for k in ("count", "mean", "m2"):
            assert torch.equal(getattr(ma, k), getattr(mb, k)), k
    assert a.transforms[1].count.item() < a.transforms[0].count.item()  # frozen a while
    assert a.transforms[1].count.item() > 0


@pytest.mark.parametrize("make", [lambda: gp.ObsNorm((4,), num_envs=N),
                                  lambda: gp.RewardNorm(0.9, num_envs=N)],
                         ids=["ObsNorm", "RewardNorm"])
def test_replay_key_changes_whenever_the_bound_buffers_are_replaced(make):
    """A captured step launches into the engine's buffers, so every new engine must change
    the key, also one built at the freed engine's address (``id()`` of the engine stays the
    same after ``load_state_dict``: CPython reuses the address)."""
    m = make()
    x = torch.randn(N, 4) if isinstance(m, gp.ObsNorm) else torch.randn(N)
    done = torch.zeros(N, dtype=torch.bool)

    def call():
        return m(x) if isinstance(m, gp.ObsNorm) else m(x, done)

    call()
    keys = [m.replay_key()]
    m.load_state_dict(m.state_dict())
    keys.append(m.replay_key())
    m.to("cpu")
    keys.append(m.replay_key())
    m.count = m.count.clone()  # a bound buffer replaced
    keys.append(m.replay_key())
    call()  # builds the next engine
    keys.append(m.replay_key())
    assert len(set(keys)) == len(keys)
    call()  # using an engine keeps the key
    call()
    assert m.replay_key() == keys[-1]
