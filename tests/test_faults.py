"""Faults inside a step and misuse of the step API: a raising stage still completes the step
(no done env left un-reset), bad actions are defined, two threads on one env are refused."""

from __future__ import annotations

import threading

import pytest
import torch

import gpuparam as gp

N = 32


def _cartpole(**kw):
    return gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3, **kw)


def _acts(steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (steps, N), generator=g)


@pytest.mark.parametrize("capture", [True, False])
def test_a_raising_hook_still_completes_the_step(capture):
    """The step raises, but the done envs are reset and the env goes on exactly like a
    twin whose hook did not raise."""
    a, b = _cartpole(capture=capture), _cartpole(capture=capture)
    calls = {"n": 0}

    def flaky(env, td):
        calls["n"] += 1
        if calls["n"] in (12, 13):
            raise RuntimeError("hook failed")

    a.after_step(flaky)
    b.after_step(lambda env, td: None)
    raised = 0
    for t, act in enumerate(_acts(40)):
        try:
            ta = a.step(act)
        except RuntimeError as e:
            assert "hook failed" in str(e)
            raised += 1
            ta = a.outputs
        tb = b.step(act)
        for k in ("observation", "done", "episode_length", "reward"):
            assert torch.equal(ta[k], tb[k]), (t, k)
        assert torch.equal(a.episode_length, b.episode_length), t
    assert raised == 2  # hooks run eagerly (Python) in a captured step too


def test_a_raising_curriculum_metric_leaves_no_done_env_unreset():
    a, b = _cartpole(), _cartpole()
    state = {"n": 0}

    def metric(env):
        state["n"] += 1
        if state["n"] == 5:
            return torch.zeros(3)  # wrong shape: the library's own error
        return env.outputs["episode_return"]

    for env in (a, b):
        env.add_curriculum(gp.Curriculum(3, params={"masspole": (0.1, 0.3)},
                                         metric=metric if env is a else "episode_return",
                                         promote=1e9))
    for t, act in enumerate(_acts(30)):
        try:
            ta = a.step(act)
        except ValueError as e:
            assert "metric must give a tensor" in str(e)
            ta = a.outputs
        tb = b.step(act)
        assert torch.equal(ta["observation"], tb["observation"]), t
        assert not bool((a.episode_length > 500).any())


def test_nan_pendulum_torque_propagates_and_is_counted():
    env = gp.make("Pendulum-v1", num_envs=4, device="cpu", seed=0)
    act = torch.zeros(4, 1)
    act[1] = float("nan")
    td = env.step(act)
    assert torch.isnan(td["observation"][1]).all() and torch.isnan(td["reward"][1])
    assert torch.isfinite(td["observation"][[0, 2, 3]]).all()
    assert int(env.invalid_actions) == 1
    env.step(act)
    assert int(env.invalid_actions) == 2


def test_out_of_range_discrete_actions_are_counted():
    env = _cartpole()
    act = torch.ones(N, dtype=torch.long)
    act[0], act[1] = 7, -1
    for _ in range(3):
        env.step(act)
    assert int(env.invalid_actions) == 6


def test_validated_mode_rejects_bad_actions_and_steps_nothing():
    env = _cartpole(validate_actions=True)
    before = env.state.clone()
    act = torch.ones(N, dtype=torch.long)
    act[5] = 2
    with pytest.raises(ValueError, match=r"outside \[0, 2\) actions for envs \[5\]"):
        env.step(act)
    assert torch.equal(env.state, before)
    p = gp.make("Pendulum-v1", num_envs=4, device="cpu", validate_actions=True)
    with pytest.raises(ValueError, match=r"NaN actions for envs \[2\]"):
        p.step(torch.tensor([[0.0], [1.0], [float("nan")], [0.0]]))


def test_validated_mode_refuses_inf_and_out_of_range_and_checks_the_float32_cast():
    """Issue 43 item 5: ``validate_actions=True`` refuses NaN, infinite and out-of-range
    continuous actions (as the float32 values the env steps with), stepping nothing; a
    float64 action is cast to float32 in both modes."""
    p = gp.make("Pendulum-v1", num_envs=4, device="cpu", seed=0, validate_actions=True)
    before = p.state.clone()
    for act, what in (([0.0, float("inf"), 0.0, 0.0], r"infinite actions for envs \[1\]"),
                      ([0.0, 0.0, 0.0, -float("inf")], r"infinite actions for envs \[3\]"),
                      ([2.5, 0.0, -2.01, 0.0], r"outside \[-2.0, 2.0\] actions for envs "
                                               r"\[0, 2\]"),
                      ([0.0, 0.0, 1e39, 0.0], r"infinite actions for envs \[2\]")):
        for dtype in (torch.float32, torch.float64):
            a = torch.tensor(act, dtype=torch.float64)[:, None].to(dtype)
            if dtype == torch.float32 and abs(act[2]) == 1e39:
                continue  # (float32 holds no 1e39: that case is float64's)
            with pytest.raises(ValueError, match=what):
                p.step(a)
    assert torch.equal(p.state, before) and int(p.episode_length.sum()) == 0
    # accepted: the bounds, and float64 values whose float32 cast is inside them
    q = gp.make("Pendulum-v1", num_envs=4, device="cpu", seed=0)
    a64 = torch.tensor([[2.0], [-2.0], [2.0000000001], [0.1]], dtype=torch.float64)
    got, want = p.step(a64), q.step(a64.float())
    assert torch.equal(got["observation"], want["observation"])
    assert torch.equal(got["reward"], want["reward"])


def test_two_threads_on_one_env_are_refused():
    env = _cartpole()
    errors = []

    def other_thread(e, td):
        def call():
            try:
                e.step(torch.zeros(N, dtype=torch.long))
            except RuntimeError as err:
                errors.append(str(err))

        t = threading.Thread(target=call)
        t.start()
        t.join()

    env.before_step(other_thread)
    env.step(torch.zeros(N, dtype=torch.long))
    assert len(errors) == 1 and "not thread-safe" in errors[0]
    env2 = _cartpole()
    env2.before_step(lambda e, td: e.reset())  # re-entrant call from a hook
    with pytest.raises(RuntimeError, match="another call on this env is running"):
        env2.step(torch.zeros(N, dtype=torch.long))


def test_a_load_from_inside_a_step_or_another_thread_changes_nothing():
    # the randomization part of a load can only be refused once the rest is written (its
    # uids moved): the whole load is refused before anything is written
    source = _cartpole()
    drop = source.randomize(gp.Uniform("masspole", 0.05, 0.2, on="reset"))
    drop()  # the term below gets uid 1 here, uid 0 in the target
    source.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
    source.params.set("gravity", 5.0)
    source.step(torch.zeros(N, dtype=torch.long))
    state = source.state_dict()
    env = _cartpole()
    env.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
    before = env.state_dict()
    errors = []

    def load(e, td):
        try:
            e.load_state_dict(state)
        except RuntimeError as err:
            errors.append(str(err))

    remove = env.before_step(load)
    env.step(torch.zeros(N, dtype=torch.long))
    remove()
    assert len(errors) == 1 and "during a step" in errors[0]
    assert env.seed == before["seed"]
    assert torch.equal(env.params.nominal_table, before["params"]["nominal"])

    def other_thread(e, td):  # another thread loads while this one steps
        t = threading.Thread(target=load, args=(e, td))
        t.start()
        t.join()

    env.before_step(other_thread)
    nominal = env.params.nominal_table.clone()
    env.step(torch.zeros(N, dtype=torch.long))
    assert len(errors) == 2
    assert torch.equal(env.params.nominal_table, nominal)
    env.load_state_dict(state)  # between steps: loads
    assert env.seed == state["seed"]


def test_hold_is_reentrant_for_its_thread_between_its_calls_only():
    env = _cartpole()
    a = torch.zeros(N, dtype=torch.long)
    with env.hold():
        with env.hold():  # e.g. an adapter called inside the caller's own block
            env.step(a)
        env.step(a)
        errors = []

        def other():
            try:
                env.step(a)
            except RuntimeError as err:
                errors.append(str(err))

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and "not thread-safe" in errors[0]

    def hook(e, td):  # from inside a step of the holding thread: refused
        with e.hold():
            pass

    env.before_step(hook)
    with env.hold(), pytest.raises(RuntimeError, match="another call on this env is running"):
        env.step(a)
    assert env._lock.holder is None and not env._lock.busy.locked()


def test_a_save_or_state_dict_from_inside_a_step_or_another_thread_is_refused(tmp_path):
    # issue 33 (5): a save from an after_step hook wrote a half-done step (the global step
    # of schedules one behind), which continued differently from the run it was taken from
    env = _cartpole()
    env.randomize(gp.Uniform("length", 0.3, 1.0, on=gp.Every(3)))
    errors = []

    def save(e, td):
        for call in (lambda: e.save(tmp_path / "in_step.pt"), e.state_dict):
            try:
                call()
            except RuntimeError as err:
                errors.append(str(err))

    remove = env.after_step(save)
    env.step(torch.zeros(N, dtype=torch.long))
    remove()
    assert len(errors) == 2 and all("save): called during a step" in m for m in errors)
    assert not (tmp_path / "in_step.pt").exists()

    def other_thread(e, td):  # another thread saves while this one steps
        t = threading.Thread(target=save, args=(e, td))
        t.start()
        t.join()

    remove = env.after_step(other_thread)
    env.step(torch.zeros(N, dtype=torch.long))
    remove()
    assert len(errors) == 4 and all("during a step" in m for m in errors[2:])
    assert not (tmp_path / "in_step.pt").exists()
    env.save(tmp_path / "between.pt")  # between steps: saves, and continues as the run does
    twin = _cartpole()
    twin.randomize(gp.Uniform("length", 0.3, 1.0, on=gp.Every(3)))
    twin.load(tmp_path / "between.pt")
    for act in _acts(7):
        assert torch.equal(env.step(act)["observation"], twin.step(act)["observation"])
        assert torch.equal(env.params["length"], twin.params["length"])


@pytest.mark.parametrize("capture", [True, False])
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_hook_still_completes_the_step(capture, interrupt):
    # issue 33 (16): a KeyboardInterrupt (not an Exception) left the step half done: the
    # clock (randomization's global step) one behind for the rest of the run, done envs
    # not reset, sync schedules one step short
    def build():
        env = _cartpole(capture=capture)
        env.randomize(gp.Uniform("length", 0.3, 1.0, on=gp.Every(3)))
        norm = gp.ObsNorm(4)
        env.sync_every(2, norm)  # a world of one
        return env

    a, b = build(), build()
    calls = {"n": 0}

    def flaky(env, td):
        calls["n"] += 1
        if calls["n"] in (5, 9):
            raise ValueError("first")  # an ordinary error of the same step ...

    def interrupting(env, td):
        if calls["n"] in (5, 9, 10):
            raise interrupt()  # ... is outranked by the interrupt

    a.after_step(flaky)
    a.after_step(interrupting)
    b.after_step(lambda env, td: None)
    raised = 0
    for t, act in enumerate(_acts(40)):
        try:
            ta = a.step(act)
        except interrupt:
            raised += 1
            ta = a.outputs
        tb = b.step(act)
        for k in ("observation", "done", "truncated", "episode_length", "reward"):
            assert torch.equal(ta[k], tb[k]), (t, k)
        assert torch.equal(a.params["length"], b.params["length"]), t
        assert torch.equal(a.randomization.global_step, b.randomization.global_step), t
    assert raised == 3
    assert a.sync_schedules[0].steps == b.sync_schedules[0].steps == 40
    assert a.pipeline.runs == b.pipeline.runs
