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
    kind, names = env.pipeline.plan[-1]  # the push, then the writes a late stage made
    assert names[-2:] == ("push", "model_writes") and kind == "warp" and env.pipeline.captured


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


# ---------------------------------------------------------------- issue 24: edges
@pytest.mark.parametrize("every", [2**31, gp.Every(2**33), 2**40])
def test_intervals_the_int32_timers_cannot_hold_are_refused(every):
    # issue 24 (4): the timers wrapped to negative values and every env was pushed at
    # every step instead of never
    with pytest.raises(ValueError, match=r"Push: every expects at most 2147483647 steps "
                                         r"\(int32 timers\), got Every\(k="):
        gp.Push(VEL, every=every)


def test_an_interval_in_seconds_beyond_the_timers_is_refused_when_added():
    env = gp.make("Hopper-v5", 2, device="cpu")
    push = gp.Push([(0.1, 0.2)], every=gp.Interval(1e8, 1e9))
    with pytest.raises(ValueError, match=r"is up to 125000000000 steps of 0.008 s; expected at "
                                         r"most 2147483647 steps \(int32 timers\)"):
        env.add_event(push)
    assert "push" not in env.pipeline.names  # nothing was added


@pytest.mark.parametrize("every", [gp.Every(2**31 - 1), gp.Interval(1.6e7, 1.7e7)])
def test_the_longest_intervals_count_down_and_push_nobody_yet(every):
    push = gp.Push(VEL, every=every)
    env, twin = _pair(2, push)
    start = push.timer.clone()
    assert (start > 2).all()
    for _ in range(2):
        env.step(torch.zeros(2, 8))
        twin.step(torch.zeros(2, 8))
    assert torch.equal(push.timer, start - 2) and (push.count == 1).all()
    assert torch.equal(env.state["qvel"], twin.state["qvel"])


def test_interval_draws_stay_inside_the_range_at_the_int32_limit():
    env = gp.make("Hopper-v5", 64, device="cpu", seed=3)
    push = gp.Push([(0.1, 0.2)], every=gp.Every(2**31 - 1))
    env.add_event(push)
    assert ((push.timer >= 1) & (push.timer <= 2**31 - 1)).all()
    assert (push.count == 1).all()
    k_lo, k_hi = 2**31 - 10, 2**31 - 1
    p2 = gp.Push([(0.1, 0.2)], every=gp.Interval(k_lo * env.dt, k_hi * env.dt))
    assert p2.steps(env.dt) == (k_lo, k_hi)
    env.add_event(p2)
    assert ((p2.timer >= k_lo) & (p2.timer <= k_hi)).all()


@pytest.mark.parametrize("velocity", [
    [(-float("inf"), float("inf"))], [(0.0, 1e39)], [(-3e38, 3e38)], [(float("nan"), 1.0)],
    [(0.0, float("nan"))], [(1.0,)], [("a", "b")], [],
])
def test_velocity_ranges_that_are_not_finite_in_float32_are_refused(velocity):
    # issue 24 (9): (-inf, inf) made qvel NaN, (0, 1e39) made it inf
    with pytest.raises(ValueError, match=r"Push: velocity expects \[\(low, high\), \.\.\.\] "
                                         r"with low <= high, both and high - low finite in "
                                         r"float32"):
        gp.Push(velocity, every=1)


def test_push_counts_wrap_without_overflow():
    push = gp.Push(VEL, every=1)
    env, twin = _pair(2, push)
    push.count.fill_(2**31 - 1)
    push.timer.fill_(1)
    env.step(torch.zeros(2, 8))
    twin.step(torch.zeros(2, 8))
    assert (push.count == 1).all() and (push.timer == 1).all()
    dv = env.state["qvel"][:, :2] - twin.state["qvel"][:, :2]
    assert ((dv[:, 0] >= -0.5) & (dv[:, 0] <= 0.5)).all() and (dv[:, 1] >= 0.2 - 1e-6).all()


def test_every_beyond_the_float64_trigger_clocks_is_refused():
    # gp.Every(k) as a randomization trigger counts in float64: 10**400 raised a raw
    # OverflowError when added
    gp.Every(2**53)
    with pytest.raises(ValueError, match=r"Every\(k\): expected an int k in \[1, 2\*\*53\]"):
        gp.Every(2**53 + 1)
    with pytest.raises(ValueError, match=r"Every\(k\): expected an int k in \[1, 2\*\*53\]"):
        gp.Every(10**400)
