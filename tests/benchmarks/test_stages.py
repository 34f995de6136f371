"""The stage profile (benchmarks/stages.py) times the real step's work: replaying the
stages one by one advances an env exactly as ``env.step`` does."""

from __future__ import annotations

import pytest
from test_bad_input import assert_same_state

from benchmarks.config import STAGES as CONFIGS
from benchmarks.stages import profile
from benchmarks.subjects import gp_actions, make_gp_env

N, STEPS = 64, 15  # 30 steps in all: CartPole episodes end and reset (and randomize)

EXPECTED = {
    "bare": ("physics", "episode", "clock", "autoreset"),
    "reset_randomization_3": ("physics", "episode", "randomize_reset", "clock", "autoreset"),
    "ObsNorm+RewardNorm": ("physics", "episode", "clock", "autoreset", "transforms"),
}


@pytest.mark.parametrize("key", list(CONFIGS))
def test_stage_replays_step_the_env_as_env_step_does(key):
    profiled, stepped = (make_gp_env(CONFIGS[key], N, "cpu") for _ in range(2))
    for env in (profiled, stepped):
        env.reset()
    res = profile(profiled, STEPS, repeats=1)  # STEPS by stage replays, then STEPS env.step
    actions = gp_actions(stepped, N, stepped.device)
    dones = 0
    for _ in range(2):
        for i in range(STEPS):
            dones += int(stepped.step(actions[i % len(actions)])["done"].sum())
    assert dones > 0
    assert tuple(res["stages_s"]) == EXPECTED[key]
    assert all(t > 0 for t in res["stages_s"].values()) and res["step_s"] > 0
    assert res["sum_s"] == pytest.approx(sum(res["stages_s"].values()))
    assert_same_state(profiled.state_dict(), stepped.state_dict())
    assert_same_state(profiled.outputs.to_dict(), stepped.outputs.to_dict())


def test_timer_cost_ignores_a_preemption():
    """One long pause between a pair of clock calls (another process ran) must not become
    the cost subtracted from every stage (a mean made it 45 us and a stage time negative)."""
    from benchmarks.stages import _timer_cost_ns

    ticks = iter(range(10**9))
    pause = {"at": 1000}

    def clock() -> int:  # 40 ns per call, and one 90 ms pause
        t = next(ticks)
        return t * 40 + (90_000_000 if t > pause["at"] else 0)

    assert _timer_cost_ns(2000, clock) == 40
