"""Checkpoints: env.state_dict() / load_state_dict() continue bit for bit."""

from __future__ import annotations

import pytest
import torch
from randomization_helpers import N, actions, cartpole, eff

import gpuparam as gp


def build(seed: int):
    """A CartPole batch using every kind of state: reset, step, Every, Interval, OnReset,
    scheduled and masked terms, a curriculum with per-level ranges and ADR."""
    env = cartpole(seed=seed)
    reset_term = gp.Uniform("length", 0.4, 0.6, on="reset")
    adr_term = gp.Uniform("masscart", 1.0, 1.0, op="scale", on="reset")
    env.randomize(
        reset_term,
        adr_term,
        gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step"),
        gp.LogUniform("masspole", 0.5, 2.0, op="scale", on=gp.Every(4)),
        gp.Choice("gravity", [9.0, 9.8, 10.6], on=gp.Interval(0.04, 0.3)),
        gp.Uniform("tau", 0.015, 0.025, on=gp.OnReset(min_steps=6), env_ids=range(0, N, 2)),
        gp.Uniform("x_threshold", schedule=gp.Linear((2.4, 2.4), (2.0, 3.0), 50), on="step"),
    )
    cur = gp.Curriculum(
        3, ranges={reset_term: ((0.4, 0.6), (0.6, 1.2))}, promote=20.0, demote=10.0,
        adr=[gp.ADR(adr_term, delta=0.05, limits=(0.5, 2.0), threshold_high=15.0, samples=4)],
    )
    env.add_curriculum(cur)
    env.reset()
    return env, cur


def run(env, cur, acts):
    out = []
    for a in acts:
        td = env.step(a)
        out.append((eff(env), td["observation"].clone(), td["reward"].clone(),
                    cur.levels.clone()))
    return out


def test_resume_reproduces_draws_bit_for_bit():
    a, cur_a = build(seed=4)
    acts = actions(a, 80)
    run(a, cur_a, acts[:40])
    state = a.state_dict()
    ref = run(a, cur_a, acts[40:])
    b, cur_b = build(seed=123)  # the seed comes from the checkpoint
    b.load_state_dict(state)
    got = run(b, cur_b, acts[40:])
    for x, y in zip(ref, got, strict=True):
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u, v)
    assert int(a.randomization.global_step) == int(b.randomization.global_step) == 80
    assert torch.equal(a.randomization.clamped, b.randomization.clamped)
    adr_range = a.randomization.ranges(a.randomization.terms[1])
    assert not torch.equal(adr_range[0, 0], torch.tensor([1.0, 1.0]))  # ADR moved it


def test_state_dict_holds_counters_levels_step_and_nominals():
    env, cur = build(seed=0)
    env.params.set("masscart", 1.5)
    for a in actions(env, 10):
        env.step(a)
    s = env.state_dict()
    assert s["randomization"]["global_step"] == 10
    assert torch.equal(s["curricula"][0]["levels"], cur.levels)
    assert torch.equal(s["params"]["nominal"], env.params.nominal_table)
    counters = [t["counter"] for t in s["randomization"]["terms"]]
    assert torch.equal(counters[2], torch.full((N,), 10, dtype=torch.int32))  # the step term


def test_loading_into_an_env_with_other_terms_raises_and_changes_nothing():
    a, _ = build(seed=0)
    state = a.state_dict()
    b = cartpole(seed=7)
    b.randomize(gp.Uniform("length", 0.4, 0.6))
    with pytest.raises(ValueError, match="curricula"):
        b.load_state_dict(state)
    b.add_curriculum(gp.Curriculum(2))
    before = eff(b)
    with pytest.raises(ValueError, match="expected terms"):
        b.load_state_dict(state)
    wrong = dict(state, num_envs=N + 1)
    with pytest.raises(ValueError, match="num_envs"):
        b.load_state_dict(wrong)
    assert int(b.randomization.global_step) == 0 and torch.equal(eff(b), before)
    assert b.seed == 7
