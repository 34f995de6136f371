"""Inside a captured step, parameter copies into the model and ``set_const`` run only at
steps whose writes hit some env (a device flag and ``wp.capture_if``): a reset-time mass
term costs nothing at steps where no env was reset."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from warp import to_torch as wp_torch

import gpuparam as gp

N = 4


def _writes(env) -> int:
    return int(env.backend.model_writes.numpy()[0])


def _step(env, k: int, twin=None) -> list[int]:
    """Writes counted at each of ``k`` steps (zero actions)."""
    counts = []
    a = torch.zeros(N, 8)
    for _ in range(k):
        before = _writes(env)
        env.step(a)
        if twin is not None:
            twin.step(a)
        counts.append(_writes(env) - before)
    return counts


def test_reset_time_mass_term_writes_the_model_only_at_steps_with_a_reset():
    env = gp.make("Ant-v5", N, device="cpu", seed=3)
    env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
    env.step(torch.zeros(N, 8))  # eager warm-up: writes unconditionally
    env.step(torch.zeros(N, 8))  # capture
    assert env.pipeline.captured
    counts = _step(env, 5)
    assert counts == [0] * 5  # nobody done: no copy, no set_const
    env.episode_length = 999  # every env truncates at the next step
    assert _step(env, 1) == [1]  # one gated write (copy + set_const) for the reset envs
    assert _step(env, 2) == [0, 0]


def test_gated_writes_equal_unconditional_eager_writes():
    graph = gp.make("Ant-v5", N, device="cpu", seed=3)
    eager = gp.make("Ant-v5", N, device="cpu", seed=3, capture=False)
    for env in (graph, eager):
        env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
                      gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="step"))
    a = torch.zeros(N, 8)
    for t in range(30):
        if t in (5, 17):
            m = torch.tensor([True, False, True, False])
            lengths = torch.where(m, 999, 0).to(torch.int32)
            graph.episode_length = lengths
            eager.episode_length = lengths
        og = graph.step(a)["observation"].clone()
        oe = eager.step(a)["observation"]
        assert torch.equal(og, oe), t
    for f in ("body_mass", "body_subtreemass", "body_invweight0", "geom_friction"):
        assert torch.equal(torch.as_tensor(getattr(graph.backend.m, f).numpy()),
                           torch.as_tensor(getattr(eager.backend.m, f).numpy())), f


def test_step_time_term_writes_every_step():
    env = gp.make("Ant-v5", N, device="cpu", seed=3)
    env.randomize(gp.Uniform("dof_damping", 0.5, 1.5, op="scale", on="step"))
    env.step(torch.zeros(N, 8))
    assert _step(env, 4) == [1, 1, 1, 1]


def test_only_arena_calls_allocate_inside_a_capture_if_body():
    """CUDA forbids allocations (graph memory nodes) inside a conditional node's body. Every
    ``wp.capture_if`` branch a captured robot step records (gated model copies and
    ``set_const``, the reset-time ``forward``) allocates nothing outside
    ``backend.in_arena``, whose temporaries on CUDA come from the backend's arena (a custom
    allocator, ``test_gpu.py``). Checked here on the CPU by recording Warp's allocating
    calls while a branch is being captured; ``set_const`` and ``forward`` must have been
    captured inside a branch (gated), never outside one."""
    import mujoco_warp as mjw
    import warp as wp

    from gpuparam.envs.mujoco.backend import MjwBackend

    allocs: list[str] = []
    depth = [0]
    in_arena = [0]
    where: dict[str, list[str]] = {"set_const": [], "forward": []}
    orig = {name: getattr(wp, name) for name in ("zeros", "empty", "full", "clone",
                                                  "zeros_like", "empty_like", "full_like")}
    capture_if, arena_call = wp.capture_if, MjwBackend.in_arena
    calls = {name: getattr(mjw, name) for name in where}

    def branch(fn):
        def run(*a, **k):
            depth[0] += 1
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= 1
        return run

    def rec_if(cond, on_true=None, on_false=None, **k):
        return capture_if(cond, on_true=on_true and branch(on_true),
                          on_false=on_false and branch(on_false), **k)

    def rec_arena(self, call):
        in_arena[0] += 1
        try:
            return arena_call(self, call)
        finally:
            in_arena[0] -= 1

    def rec_call(name):
        def f(*a, **k):
            if wp.get_device("cpu").is_capturing:
                where[name].append("branch" if depth[0] else "outside")
            return calls[name](*a, **k)
        return f

    def alloc(name):
        def f(*a, **k):
            if depth[0] and not in_arena[0]:
                allocs.append(name)
            return orig[name](*a, **k)
        return f

    for name in orig:
        setattr(wp, name, alloc(name))
    for name in calls:
        setattr(mjw, name, rec_call(name))
    wp.capture_if, MjwBackend.in_arena = rec_if, rec_arena
    try:
        for make, terms in (
            (lambda: gp.make("Ant-v5", N, device="cpu", seed=1), (
                gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
                gp.Uniform("dof_armature", 0.8, 1.2, op="scale", on="reset"),
                gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="reset"))),
            (lambda: gp.make("Humanoid-v5", N, device="cpu", seed=1), (
                gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"),)),
            (lambda: gp.make("Go1JoystickFlatTerrain-v1", N, device="cpu", seed=1), (
                gp.Uniform("kp", 30.0, 40.0, on="reset"),
                gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))),
        ):
            env = make()
            env.randomize(*terms)
            a = torch.zeros(N, *env.action_spec.shape)
            for _ in range(3):  # warm-up, capture, replay
                env.step(a)
            assert env.pipeline.captured
    finally:
        for name, fn in orig.items():
            setattr(wp, name, fn)
        for name, fn in calls.items():
            setattr(mjw, name, fn)
        wp.capture_if, MjwBackend.in_arena = capture_if, arena_call
    assert allocs == [], f"allocations inside capture_if bodies: {allocs}"
    for name, seen in where.items():  # Humanoid and Go1 run forward at reset
        assert seen and set(seen) == {"branch"}, (name, seen)


def _spoiled_subtree_mass(**kw):
    """A captured Ant with a reset-time mass term, its ``body_subtreemass`` (a torch view)
    overwritten with -1 after the capture, and the values it held."""
    env = gp.make("Ant-v5", N, device="cpu", seed=3, **kw)
    env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
    env.step(torch.zeros(N, 8))
    env.step(torch.zeros(N, 8))  # captured
    sub = wp_torch(env.backend.m.body_subtreemass)
    good = sub.clone()
    sub.fill_(-1.0)
    return env, sub, good


def test_set_const_runs_only_at_replays_whose_mass_write_hit_an_env():
    """A reset-time mass term: the derived constants are recomputed at a step with a reset
    and left alone at steps without one (seen by spoiling ``body_subtreemass`` between
    steps: a replay that ran ``set_const`` would repair it)."""
    env, sub, good = _spoiled_subtree_mass()
    assert _step(env, 1) == [0]  # no env resets: no copy, no set_const
    assert (sub == -1.0).all()
    env.episode_length = 999  # every env truncates, is reset and redrawn
    assert _step(env, 1) == [1]
    masses = wp_torch(env.backend.m.body_mass)
    assert torch.allclose(sub[:, 0], masses.sum(1))  # the world body's subtree: everything
    assert not torch.equal(sub, good)  # new masses, new subtree masses


def test_deterministic_runs_set_const_at_every_replay():
    """With MuJoCo Warp's deterministic option ``set_const`` stays outside the branch (its
    deterministic launches keep buffers for the graph's lifetime): a replay without a
    reset recomputes the constants too, and the copies are still gated."""
    env, sub, good = _spoiled_subtree_mass(deterministic=True)
    assert _step(env, 1) == [0]  # no copy
    assert torch.equal(sub, good)  # set_const ran


def test_arena_hands_out_aligned_slices_and_refuses_to_overflow():
    import warp as wp

    from gpuparam.envs.mujoco.backend import ALIGN, Arena

    arena = Arena(wp.get_device("cpu"), 3 * ALIGN)
    base = arena.buffer.ptr
    assert [arena.allocate(n) for n in (1, ALIGN, 7)] == [base, base + ALIGN, base + 2 * ALIGN]
    arena.deallocate(base, 1)  # nothing: the next capture starts again at 0
    with pytest.raises(RuntimeError, match=f"expected at most {3 * ALIGN} bytes"):
        arena.allocate(1)
    arena.used = 0
    assert arena.allocate(3 * ALIGN) == base


def test_vector_field_copies_write_only_their_first_component():
    """Friction and gear are copied into the first component of MuJoCo Warp's vector fields
    (through strided views): torsional/rolling friction and the gear's other components
    keep the model's values, in every world."""
    env = gp.make("Hopper-v5", 2, device="cpu")
    m0 = {f: getattr(env.backend.m, f).numpy().copy() for f in ("geom_friction", "actuator_gear")}
    env.params.set("geom_friction", 0.25)
    env.params.set("actuator_gear", 7.0)
    for f, v in (("geom_friction", 0.25), ("actuator_gear", 7.0)):
        got = getattr(env.backend.m, f).numpy()
        assert (got[..., 0] == np.float32(v)).all(), f
        assert np.array_equal(got[..., 1:], m0[f][..., 1:]), f
