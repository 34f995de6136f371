"""Settings that decide how the step's stages are built (e.g. whether every parameter
listener is Warp-only) are checked from the moment the stage list is built, not only once
the step is captured: a listener registered between the warm-up step and the capture is
called at every later step."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp


@pytest.mark.parametrize("register_before_step", [0, 1, 2])
def test_a_listener_registered_at_any_step_runs_at_every_later_step(register_before_step):
    env = gp.make("CartPole-v1", num_envs=8, device="cpu", seed=0)
    env.randomize(gp.Uniform("length", 0.4, 0.6, on="reset"))
    calls = []
    a = torch.zeros(8, dtype=torch.int64)
    for step in range(10):
        if step == register_before_step:
            env.params.on_change(lambda names, mask: calls.append(names))  # not Warp-only
        env.step(a)
    assert len(calls) == 10 - register_before_step


@pytest.mark.parametrize("attach_before_step", [0, 1, 3])
def test_obs_norm_attached_after_the_first_step_resets_on_every_redraw(attach_before_step):
    # every env ends and redraws masscart at every step: its statistics start over each time
    env = gp.make("CartPole-v1", num_envs=8, device="cpu", seed=0, max_episode_steps=1)
    env.randomize(gp.Uniform("masscart", 0.5, 2.0))
    norm = None
    a = torch.zeros(8, dtype=torch.int64)
    for step in range(6):
        if step == attach_before_step:
            norm = gp.ObsNorm(4, reset_on=("masscart",)).attach(env)
        td = env.step(a)
        if norm is not None:
            norm(td["final_observation"])
    assert norm.count.tolist() == [8.0]
    assert env.pipeline.captured


@pytest.mark.parametrize("register_in_call", [1, 2])
def test_a_listener_registered_by_a_hook_while_the_step_is_captured_runs_later(
        register_in_call):
    # the capture recorded the segments as built before the hook ran (the Warp-only
    # randomization stage): it must not be kept for the settings the hook left behind
    env = gp.make("CartPole-v1", num_envs=8, device="cpu", seed=0)
    env.randomize(gp.Uniform("length", 0.4, 0.6, on="step"))
    calls, n = [], []

    def hook(e, td):
        n.append(1)
        if len(n) == register_in_call:  # the warm-up call, the capturing call
            e.params.on_change(lambda names, mask: calls.append(names))  # not Warp-only

    env.before_step(hook)
    for _ in range(8):
        env.step(torch.zeros(8, dtype=torch.int64))
    assert len(calls) == 9 - register_in_call  # from that call on (the hook runs first)


def test_a_new_engine_of_an_attached_norm_drops_the_captured_step():
    # the randomization stage that calls the norm's listener records its reset launch into
    # the norm's engine (tables, env lists); .to() or a load builds a new engine and frees
    # the old one: a replay of that recording (a torch graph on CUDA) would write freed
    # memory and never reset the new tables
    env = gp.make("CartPole-v1", num_envs=8, device="cpu", seed=0, max_episode_steps=1)
    env.randomize(gp.Uniform("masscart", 0.5, 2.0))
    norm = gp.ObsNorm(4, reset_on=("masscart",)).attach(env)
    a = torch.zeros(8, dtype=torch.int64)
    for _ in range(3):
        norm(env.step(a)["final_observation"])
    assert env.pipeline.captured
    captures = env.pipeline.captures
    norm.load_state_dict(norm.state_dict())  # a new engine
    for _ in range(3):
        norm(env.step(a)["final_observation"])
    assert env.pipeline.captures == captures + 1
    assert norm.count.tolist() == [8.0]
