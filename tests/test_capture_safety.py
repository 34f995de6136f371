"""Capture safety by construction (issue 31): no torch memory is made while a ``"warp"``
segment is captured (its memory would be outside every graph pool: reused after the capture
on CUDA), and the backend's gated parameter writes, ``wp.capture_if`` bodies, sit in a
``"warp"`` stage of their own, never inside a torch graph. The rules are checked the same
way on the CPU as on CUDA."""

from __future__ import annotations

import pytest
import torch
import warp as wp

import gpuparam as gp
from gpuparam.pipeline import Pipeline, Stage, WarpSegmentGuard


def test_a_warp_stage_making_a_torch_temporary_is_refused_at_capture():
    env = gp.make("CartPole-v1", 8, device="cpu", seed=0)
    made = []
    env.add_stage(Stage("scratch", lambda c: made.append(c.running_return * 2.0), "warp"))
    a = torch.ones(8, dtype=torch.int64)
    env.step(a)  # eager warm-up: allowed
    with pytest.raises(RuntimeError, match=r"scratch.*made a tensor \(8,\).*outside any"):
        env.step(a)  # the capture
    assert not env.pipeline.captured
    # the step still completed eagerly: the stage ran again, outside the capture (the
    # captured attempt raised before its append)
    assert len(made) == 2


def test_views_and_metadata_pass_inside_a_warp_capture():
    env = gp.make("CartPole-v1", 8, device="cpu", seed=0)
    seen = []

    def stage(c):
        view = c.action.reshape(-1)[:4]  # a view: no new memory
        seen.append((view.shape, c.done.data_ptr(), wp.from_torch(c.done).shape))

    env.add_stage(Stage("views", stage, "warp"))
    a = torch.ones(8, dtype=torch.int64)
    for _ in range(3):
        env.step(a)
    assert env.pipeline.captured and len(seen) == 2  # warm-up and capture, not replays


def test_the_guard_refuses_writes_temporaries_and_host_reads_before_they_run():
    x = torch.zeros(4)
    with WarpSegmentGuard(("s",)):
        y = x.view(2, 2)  # views and metadata pass
        assert y.shape == (2, 2) and x.data_ptr() == y.data_ptr()
    for op, what in ((lambda: x.add_(1.0), "add_ writes"),
                     (lambda: torch.clamp(x, 0.0, 0.5, out=x), "clamp writes"),
                     (lambda: x.__setitem__(0, 1.0), "__setitem__ writes"),
                     (lambda: x.copy_(x + 0), "writes|made"),
                     (lambda: x + 1.0, r"made a tensor \(4,\) torch.float32"),
                     (lambda: x.sum().item(), "made|reads"),
                     (lambda: x.tolist(), "tolist reads"),
                     (lambda: bool(x[0]), "__bool__ reads")):
        with pytest.raises(RuntimeError, match=rf"warp segment \['s'\]: s: torch's .*({what})"):
            with WarpSegmentGuard(("s",)):
                op()
    assert torch.equal(x, torch.zeros(4))  # refused before running: nothing written


@pytest.mark.parametrize("kind", ["warp", "torch", "python"])
def test_a_warp_hook_with_a_torch_op_is_refused_and_other_kinds_replay_it(kind):
    """Issue 40: ``td["reward"].mul_(3)`` in a ``"warp"`` hook ran once at capture and was
    then dropped (rewards 3, 1, 1, 1 captured against 3, 3, 3, 3 eager). Now the capture
    refuses it, naming the hook and the fix, and the step completes eagerly; as a
    ``"torch"`` or ``"python"`` hook it runs at every step, captured or not."""
    env = gp.make("CartPole-v1", 4, device="cpu", seed=0)

    def triple(env, td):
        td["reward"].mul_(3.0)

    env.after_step(triple, kind=kind)
    a = torch.ones(4, dtype=torch.int64)
    rewards = []
    for t in range(4):
        if kind == "warp" and t % 2 == 1:  # every capture attempt is refused
            with pytest.raises(RuntimeError, match=r"'after_step' \(warp hooks .*triple at "
                                                   r".*mul_ writes.*kind='torch'"):
                env.step(a)
        else:
            env.step(a)
        rewards.append(env.outputs["reward"].tolist())
    assert rewards == [[3.0] * 4] * 4
    assert env.pipeline.captured == (kind != "warp")


def test_model_writes_sit_in_a_warp_stage_of_their_own():
    """A torch listener makes the randomization stages ``"torch"``; the backend's commits
    (the masked recompute of the derived constants) still run in ``"model_writes"``, a
    ``"warp"`` stage between the writers and the stages that read the model."""
    pytest.importorskip("mujoco_warp")
    env = gp.make("Ant-v5", 4, device="cpu", seed=1)
    env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
                  gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="step"))
    env.params.on_change(lambda names, mask: None, kind="torch")
    kinds = [(s.name, s.kind) for s in env.pipeline.stages]
    names = [n for n, _ in kinds]
    assert dict(kinds)["randomize_step"] == dict(kinds)["randomize_reset"] == "torch"
    writes = [i for i, (n, k) in enumerate(kinds) if n == "model_writes"]
    assert [kinds[i][1] for i in writes] == ["warp", "warp"]
    assert names.index("randomize_step") < writes[0] < names.index("physics")
    assert names.index("randomize_reset") < writes[1] < names.index("autoreset")


def test_listener_kind_sets_the_writers_stage_kind():
    """One name for a stage's kind (issue 46): ``on_change(kind=)`` listeners of kind
    ``"warp"`` keep the writing stages ``"warp"``; one ``"torch"`` listener makes them
    ``"torch"``; any other kind is refused before it is registered."""
    env = gp.make("CartPole-v1", 4, device="cpu", seed=0)
    env.randomize(gp.Uniform("masspole", 0.05, 0.2, on="step"))

    def stage_kind():
        return {s.name: s.kind for s in env.pipeline.stages}["randomize_step"]

    env.params.on_change(lambda names, mask: None, kind="warp")
    assert env.params.listeners_kind == stage_kind() == "warp"
    with pytest.raises(ValueError, match="kind expected 'warp' or 'torch', got 'python'"):
        env.params.on_change(lambda names, mask: None, kind="python")
    assert stage_kind() == "warp"
    env.params.on_change(lambda names, mask: None, kind="torch")
    env.step(torch.zeros(4, dtype=torch.int64))  # the list is rebuilt at the next call
    assert env.params.listeners_kind == stage_kind() == "torch"


@pytest.mark.parametrize("name", ["Humanoid-v5", "Go1JoystickFlatTerrain-v1"])
def test_every_captured_capture_if_is_in_a_warp_segment(name):
    """Every ``wp.capture_if`` recorded while a step is captured (with ``gating="graph"``:
    the reset's ``forward``) is recorded while a ``"warp"`` segment is captured."""
    pytest.importorskip("mujoco_warp")
    env = gp.make(name, 4, device="cpu", seed=1, gating="graph")
    env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
                  gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="step"))
    segment, calls = [None], []
    capture_segment, capture_if = Pipeline._capture_segment, wp.capture_if

    def rec_segment(self, kind, stages):
        segment[0] = kind
        try:
            return capture_segment(self, kind, stages)
        finally:
            segment[0] = None

    def rec_if(*a, **k):
        calls.append(segment[0])
        return capture_if(*a, **k)

    Pipeline._capture_segment, wp.capture_if = rec_segment, rec_if
    try:
        for _ in range(3):
            env.step(torch.zeros(4, *env.action_spec.shape))
    finally:
        Pipeline._capture_segment, wp.capture_if = capture_segment, capture_if
    assert env.pipeline.captured
    captured = [k for k in calls if k is not None]
    assert captured and set(captured) == {"warp"}, calls


def test_gated_writes_with_a_torch_listener_equal_eager_writes():
    pytest.importorskip("mujoco_warp")
    envs = [gp.make("Ant-v5", 4, device="cpu", seed=3, capture=c) for c in (True, False)]
    for env in envs:
        env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
        env.params.on_change(lambda names, mask: None, kind="torch")
    a = torch.zeros(4, 8)
    for t in range(12):
        if t in (3, 8):
            for env in envs:
                env.episode_length = torch.tensor([999, 0, 999, 0], dtype=torch.int32)
        outs = [env.step(a)["observation"].clone() for env in envs]
        assert torch.equal(*outs), t
    for f in ("body_mass", "body_subtreemass", "body_invweight0"):
        got = [torch.as_tensor(getattr(env.backend.m, f).numpy()) for env in envs]
        assert torch.equal(*got), f


SYNCS = ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event")


@pytest.mark.parametrize("name", ["CartPole-v1", "Go1JoystickFlatTerrain-v1"])
def test_replayed_steps_make_no_warp_host_sync(name):
    """Warp-side host syncs are invisible to torch's sync debug mode: none of Warp's
    synchronize calls, no ``wp.array.numpy()`` (a copy to the host) and no eager
    ``wp.capture_if`` (a read of its flag) runs during replayed steps, unvalidated
    parameter writes between them included (the robots' ungated commits)."""
    if name.startswith("Go1"):
        pytest.importorskip("mujoco_warp")
    env = gp.make(name, 4, device="cpu", seed=0)
    if name.startswith("Go1"):
        env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"),
                      gp.Uniform("kp", 30.0, 40.0, on="step"))
        write = ("kd", 0.6)
    else:
        env.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
        write = ("force_mag", 9.0)
    target = gp.TransformedEnv(env, gp.ObsNorm(env.observation_spec.shape), gp.RewardNorm())
    a = torch.zeros(4, *env.action_spec.shape, dtype=env.context.action.dtype)
    mask = torch.tensor([True, False, True, False])
    for _ in range(3):  # warm-ups and capture
        target.step(a)
    assert env.pipeline.captured
    calls = []
    saved = {n: getattr(wp, n) for n in (*SYNCS, "capture_if")}
    numpy = wp.array.numpy

    def spy(n):
        def f(*args, **kw):
            calls.append(n)
            return saved[n](*args, **kw)
        return f

    def spy_numpy(self):
        calls.append("numpy")
        return numpy(self)

    for n in saved:
        setattr(wp, n, spy(n))
    wp.array.numpy = spy_numpy
    try:
        for _ in range(4):
            target.step(a)
            env.params.set(*write, mask=mask, validate=False)
    finally:
        for n, f in saved.items():
            setattr(wp, n, f)
        wp.array.numpy = numpy
    assert calls == [], calls
