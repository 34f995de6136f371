"""Trigger semantics (Every, Interval, OnReset) and schedules (Linear, Step)."""

from __future__ import annotations

import torch
from randomization_helpers import N, StepCountedCartPole, actions, cartpole, pendulum

import gpuparam as gp


def firing_steps(env, term, steps: int) -> torch.Tensor:
    """bool ``[steps, N]``: whether ``term`` drew for each env at each step."""
    fired = []
    for a in actions(env, steps):
        before = env.randomization.counters(term).clone()
        env.step(a)
        fired.append(env.randomization.counters(term) != before)
    return torch.stack(fired)


def test_every_k_fires_exactly_once_per_k_steps_with_per_env_phases():
    k = 4
    env = cartpole()
    term = gp.Uniform("gravity", 5.0, 15.0, on=gp.Every(k))
    env.randomize(term)
    fired = firing_steps(env, term, 10 * k)
    windows = fired.unfold(0, k, 1).sum(-1)  # [steps - k + 1, N]: fires in each window
    assert (windows == 1).all()
    first = fired.int().argmax(0)
    assert first.max() < k and len(set(first.tolist())) == k  # phases spread over [0, k)


def test_every_k_changes_the_value_only_when_it_fires():
    env = cartpole()
    term = gp.Uniform("gravity", 5.0, 15.0, on=gp.Every(3))
    env.randomize(term)
    for a in actions(env, 12):
        before = env.params["gravity"].clone()
        c0 = env.randomization.counters(term).clone()
        env.step(a)
        fired = env.randomization.counters(term) != c0
        assert torch.equal(env.params["gravity"] != before, fired)


def test_interval_counts_seconds_with_the_env_time_step():
    env = cartpole()  # tau = 0.02 s
    fixed = gp.Uniform("gravity", 5.0, 15.0, on=gp.Interval(0.1, 0.1))
    rand = gp.Uniform("length", 0.3, 1.0, on=gp.Interval(0.06, 0.2))
    env.randomize(fixed, rand)
    f = firing_steps(env, fixed, 30)
    assert torch.equal(f.nonzero()[:, 0].view(-1, N)[:, 0], torch.arange(4, 30, 5))
    assert f.sum(0).eq(6).all()  # steps 5, 10, ..., 30
    r = firing_steps(env, rand, 200)
    for i in range(0, N, 7):
        gaps = r[:, i].nonzero()[:, 0].diff()
        assert gaps.min() >= 3 and gaps.max() <= 10
    assert len({tuple(r[:, i].nonzero()[:3, 0].tolist()) for i in range(N)}) > 1


def test_interval_counts_steps_without_a_time_step_parameter():
    env = cartpole(cls=StepCountedCartPole)
    term = gp.Uniform("gravity", 5.0, 15.0, on=gp.Interval(3, 3))
    env.randomize(term)
    f = firing_steps(env, term, 12)
    assert f.sum(0).eq(4).all() and f[2].all() and f[5].all()


def test_interval_follows_a_randomized_time_step():
    env = cartpole()
    env.params.set("tau", 0.05)
    term = gp.Uniform("gravity", 5.0, 15.0, on=gp.Interval(0.25, 0.25))
    env.randomize(term)
    f = firing_steps(env, term, 20)
    assert f.sum(0).eq(4).all()  # every 5 steps of 0.05 s


def test_on_reset_min_steps_skips_early_resets():
    env = pendulum(max_episode_steps=5)  # every env ends an episode every 5 steps
    term = gp.Uniform("m", 0.5, 2.0, on=gp.OnReset(min_steps=8))
    env.randomize(term)
    env.reset()
    counts = []
    for a in actions(env, 30):
        env.step(a)
        counts.append(int(env.randomization.counters(term)[0]))
    # drawn at the explicit reset (step 0) and at the resets after steps 10, 20, 30
    assert counts[4] == 1 and counts[9] == 2 and counts[14] == 2 and counts[19] == 3
    assert counts[29] == 4
    assert torch.equal(env.randomization.counters(term), torch.full((N,), 4, dtype=torch.int32))


def test_linear_schedule_widens_with_the_global_step():
    env = cartpole()
    for a in actions(env, 10):  # the global step counts steps taken before the term exists
        env.step(a)
    env.randomize(
        gp.Uniform(
            "force_mag", schedule=gp.Linear((0.0, 0.0), (-2.0, 2.0), steps=100), op="add",
            on="step",
        )
    )
    for a in actions(env, 120):
        g = int(env.randomization.global_step)
        env.step(a)
        dev = (env.params["force_mag"] - 10.0).abs()
        bound = 2.0 * min(g, 100) / 100
        assert dev.max() <= bound + 1e-5
        assert g < 20 or dev.max() > 0.5 * bound
    assert int(env.randomization.global_step) == 130


def test_step_schedule_switches_ranges():
    env = cartpole()
    env.randomize(
        gp.Uniform("gravity", schedule=gp.Step([(9.0, 9.0), (10.0, 10.0), (11.0, 11.0)],
                                               at=[5, 10]), on="step")
    )
    seen = []
    for a in actions(env, 14):
        env.step(a)
        x = env.params["gravity"]
        assert (x == x[0]).all()
        seen.append(float(x[0]))
    assert seen == [9.0] * 5 + [10.0] * 5 + [11.0] * 4


def test_schedule_on_reset_term_uses_the_step_of_the_reset():
    env = pendulum(max_episode_steps=4)
    env.randomize(
        gp.Uniform("g", schedule=gp.Linear((10.0, 10.0), (12.0, 12.0), steps=8), on="reset")
    )
    env.reset()
    assert (env.params["g"] == 10.0).all()
    for a in actions(env, 8):
        env.step(a)
    # resets during the steps with global step 3 and 7: values 10 + 2 * 7 / 8
    assert torch.allclose(env.params["g"], torch.full((N,), 10.0 + 2.0 * 7 / 8))
