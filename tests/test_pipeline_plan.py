"""The one capture plan: computed without a device, the same kinds on CPU and CUDA; hooks
run their Python at every step; settings kernels read from device memory need no
recapture; structural changes inside a step are refused; a stage that raises while its
segment is captured still lets the step complete."""

from __future__ import annotations

import pickle

import pytest
import torch
import warp as wp

import gpuparam as gp
from gpuparam.pipeline import Stage, plan

N = 8


def cartpole(**kw):
    return gp.make("CartPole-v1", N, device="cpu", seed=3, **kw)


def ones():
    return torch.ones(N, dtype=torch.int64)


def test_plan_is_device_independent_and_groups_runs_by_kind():
    def stage(name, kind):
        return Stage(name, lambda c: None, kind)

    stages = [stage("a", "warp"), stage("b", "warp"), stage("h", "python"),
              stage("c", "torch"), stage("d", "torch"), stage("e", "warp")]
    got = [(kind, tuple(s.name for s in st)) for kind, st in plan(stages)]
    assert got == [("warp", ("a", "b")), ("python", ("h",)), ("torch", ("c", "d")),
                   ("warp", ("e",))]


def test_bare_step_is_one_warp_graph_before_and_after_capture():
    env = cartpole()
    want = (("warp", ("physics", "episode", "clock", "autoreset")),)
    assert env.pipeline.plan == want  # known before any step: no device needed
    for _ in range(3):
        env.step(ones())
    assert env.pipeline.captured and env.pipeline.plan == want


def test_a_python_hook_runs_at_every_step_a_device_hook_is_recorded_once():
    env, twin = cartpole(), cartpole()
    calls = {"python": 0, "warp": 0}

    def py_hook(e, td):
        calls["python"] += 1

    def device_hook(e, td):  # declared device work: its Python runs at capture only
        calls["warp"] += 1
        td["action"].fill_(1)  # (a torch op: fine on CPU, where "warp" runs it eagerly
        # at capture; this test only counts the Python calls)

    env.before_step(py_hook)
    env.after_step(device_hook, kind="torch")
    kinds = [k for k, _ in env.pipeline.plan]
    assert kinds == ["python", "warp", "torch", "warp"]
    for _ in range(6):
        a = env.step(ones())["observation"].clone()
        b = twin.step(ones())["observation"]
        assert torch.equal(a, b)
    assert calls["python"] == 6  # every step, captured or not
    assert calls["warp"] == 6  # a "torch" stage runs eagerly on the CPU (captured on CUDA)


def test_max_episode_steps_changes_take_effect_without_recapture():
    env = cartpole(max_episode_steps=50)
    env.step(ones())
    env.step(ones())
    captures = env.pipeline.captures
    env.reset()
    env.max_episode_steps = 3
    done = [bool(env.step(torch.zeros(N, dtype=torch.int64))["truncated"].all())
            for _ in range(3)]
    assert done == [False, False, True]
    assert env.pipeline.captures == captures and env.pipeline.captured
    with pytest.raises(ValueError, match="max_episode_steps"):
        env.max_episode_steps = 0
    assert env.max_episode_steps == 3


@pytest.mark.parametrize(
    "bad", [2**31 - 1, 2**70, -5, 500, torch.full((N,), 500, dtype=torch.int32)]
)
def test_episode_length_out_of_range_raises_and_changes_nothing(bad):
    env = cartpole()
    env.step(ones())
    before = env.episode_length.clone()
    with pytest.raises(ValueError, match=r"episode_length: expected steps in \[0, 500\)"):
        env.episode_length = bad
    assert torch.equal(env.episode_length, before)
    env.episode_length = 499
    assert bool(env.step(ones())["truncated"].all())


def test_structural_changes_inside_a_step_raise_and_change_nothing():
    env = cartpole()
    term = gp.Uniform("length", 0.4, 0.6, on="reset")
    errors = []

    def hook(e, td):
        for change in (lambda: e.randomize(term), lambda: e.before_step(hook),
                       lambda: e.add_stage(Stage("x", lambda c: None, "warp")),
                       lambda: e.add_curriculum(gp.Curriculum(1))):
            try:
                change()
            except RuntimeError as err:
                errors.append(str(err))

    remove = env.after_step(hook)
    names = env.pipeline.names
    env.step(ones())
    assert len(errors) == 4 and all("during a step" in m for m in errors)
    assert env.pipeline.names == names and env.randomization.terms == ()
    remove()
    assert "after_step" not in env.pipeline.names


def test_removing_a_hook_from_inside_a_step_raises():
    env = cartpole()
    removers = []
    seen = []

    def hook(e, td):
        try:
            removers[0]()
        except RuntimeError as err:
            seen.append(str(err))

    removers.append(env.before_step(hook))
    env.step(ones())
    assert seen and "during a step" in seen[0]
    assert "before_step" in env.pipeline.names


def test_a_stage_raising_while_captured_still_completes_the_step():
    env = cartpole()
    raise_now = {"on": False}

    def flaky(ctx):
        if raise_now["on"]:
            raise RuntimeError("flaky stage")

    env.add_stage(Stage("flaky", flaky, "warp"))
    env.step(ones())  # eager warm-up
    clock = int(env.randomization.global_step)
    count = env.episode_length.clone()
    raise_now["on"] = True
    with pytest.raises(RuntimeError, match="flaky stage"):
        env.step(ones())  # the capture step: the stage raises while being recorded
    # the step completed: the clock and the episode counters advanced
    assert int(env.randomization.global_step) == clock + 1
    assert torch.equal(env.episode_length, (count + 1) % 500)
    assert not env.pipeline.captured
    raise_now["on"] = False
    for _ in range(3):
        env.step(ones())
    assert env.pipeline.captured


def test_stage_validates_its_arguments():
    with pytest.raises(TypeError, match="run expected a callable"):
        Stage("x", None)
    with pytest.raises(ValueError, match="kind expected one of"):
        Stage("x", lambda c: None, "cuda")
    with pytest.raises(TypeError, match="name expected"):
        Stage("", lambda c: None)
    env = cartpole()
    with pytest.raises(TypeError, match="expected a gp.Stage"):
        env.add_stage(lambda c: None)


def test_params_refuse_pickling_with_a_type_error():
    env = cartpole()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(env.params)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(env)


def test_a_warp_hook_replays_inside_the_graph():
    env = cartpole()
    counter = torch.zeros(1, dtype=torch.int32)

    @wp.kernel
    def bump(c: wp.array(dtype=wp.int32)):
        c[0] = c[0] + 1

    def hook(e, td):
        wp.launch(bump, 1, [wp.from_torch(counter)], device="cpu")

    env.before_step(hook, kind="warp")
    for _ in range(5):
        env.step(ones())
    assert int(counter) == 5
    assert env.pipeline.plan[0] == ("warp", ("before_step", "physics", "episode", "clock",
                                             "autoreset"))


def test_a_callable_curriculum_metric_is_called_at_every_step():
    env = cartpole()
    calls = []

    def metric(e):
        calls.append(1)
        return e.outputs["episode_return"]

    env.add_curriculum(gp.Curriculum(2, params={"length": (0.5, 0.6)}, metric=metric,
                                     promote=10.0))
    for _ in range(5):
        env.step(ones())
    assert len(calls) == 5 and env.pipeline.captured
    assert ("python", ("curriculum",)) in env.pipeline.plan
