"""Parameter writes reach the MuJoCo Warp model in one path: a write's copies run where the
write runs (inside the step's graph for a write inside a step), its worlds are marked in
``backend.changed`` when the copy feeds the derived constants, and the step's or reset's
``"model_writes"`` stage recomputes those worlds' constants (one masked launch). The
``gating`` option decides whether the reset's ``forward`` sits behind a conditional node
(``"graph"``) or runs at every step (``"mask"``): the same bits either way."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from warp import to_torch as wp_torch

import gpuparam as gp

N = 4


def _spoiled_subtree_mass(**kw):
    """A captured Ant with a reset-time mass term, its ``body_subtreemass`` (a torch view)
    overwritten with -1 after the capture, and the values it held."""
    env = gp.make("Ant-v5", N, device="cpu", seed=3, **kw)
    env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
    env.step(torch.zeros(N, 8))
    env.step(torch.zeros(N, 8))  # captured
    assert env.pipeline.captured
    sub = wp_torch(env.backend.m.body_subtreemass)
    good = sub.clone()
    sub.fill_(-1.0)
    return env, sub, good


@pytest.mark.parametrize("kw", [{}, {"gating": "graph"}, {"deterministic": True}])
def test_reset_time_mass_term_recomputes_exactly_the_reset_worlds(kw):
    """The constants are recomputed for the worlds a reset redrew, and only for them (seen
    by spoiling ``body_subtreemass`` between steps: a recomputed world is repaired)."""
    env, sub, good = _spoiled_subtree_mass(**kw)
    a = torch.zeros(N, 8)
    env.step(a)  # no env resets: nothing recomputed
    assert (sub == -1.0).all() and not env.backend.changed.any()
    hit = torch.tensor([True, False, True, False])
    env.episode_length = torch.where(hit, 999, 0).to(torch.int32)  # these truncate next
    env.step(a)
    masses = wp_torch(env.backend.m.body_mass)
    assert torch.allclose(sub[hit, 0], masses[hit].sum(1))  # the world body: everything
    assert (sub[~hit] == -1.0).all()  # not recomputed
    assert not env.backend.changed.any()  # consumed by the commit


def test_step_time_armature_term_recomputes_every_world_every_step():
    env = gp.make("Ant-v5", N, device="cpu", seed=3)
    env.randomize(gp.Uniform("dof_armature", 0.5, 1.5, op="scale", on="step"))
    a = torch.zeros(N, 8)
    env.step(a)
    inv = wp_torch(env.backend.m.dof_invweight0)
    for _ in range(3):
        before = inv.clone()
        env.step(a)
        assert (inv != before).any(1).all()  # every world's constants moved


@pytest.mark.parametrize("gating", ["mask", "graph"])
def test_captured_writes_equal_eager_writes(gating):
    graph = gp.make("Ant-v5", N, device="cpu", seed=3, gating=gating)
    eager = gp.make("Ant-v5", N, device="cpu", seed=3, capture=False, gating=gating)
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


def test_gating_modes_give_the_same_bits():
    """Go1 with reset-time mass, centre-of-mass and friction terms, forced resets: the
    ``"mask"`` and ``"graph"`` gatings give the same observations, state and model, captured
    and eager."""
    envs = [gp.make("Go1JoystickFlatTerrain-v1", N, device="cpu", seed=2, gating=g, capture=c)
            for g in ("mask", "graph") for c in (True, False)]
    for env in envs:
        env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"),
                      gp.Uniform("base_com_offset", -0.03, 0.03, on="reset"),
                      gp.Uniform("geom_friction", 0.5, 1.2, on="reset"))
    a = torch.linspace(-0.5, 0.5, N * 12).reshape(N, 12)
    for t in range(12):
        if t in (3, 8):
            for env in envs:
                env.episode_length = torch.tensor([999, 0, 999, 0], dtype=torch.int32)
        out = [env.step(a)["observation"].clone() for env in envs]
        for o in out[1:]:
            assert torch.equal(o, out[0]), t
    for f in ("body_ipos", "body_mass", "body_invweight0", "dof_invweight0"):
        ref = getattr(envs[0].backend.m, f).numpy()
        for env in envs[1:]:
            assert np.array_equal(getattr(env.backend.m, f).numpy(), ref), f
    for env in envs[1:]:
        assert torch.equal(env.state["qvel"], envs[0].state["qvel"])


def test_mask_gating_records_no_conditional_node():
    import warp as wp

    calls = []
    capture_if = wp.capture_if
    wp.capture_if = lambda *a, **k: (calls.append(1), capture_if(*a, **k))
    try:
        env = gp.make("Go1JoystickFlatTerrain-v1", N, device="cpu", seed=1)
        env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))
        for _ in range(3):
            env.step(torch.zeros(N, 12))
        assert env.pipeline.captured and env.backend.gating == "mask"
    finally:
        wp.capture_if = capture_if
    assert calls == []


def test_a_write_between_steps_is_committed_by_the_next_reset():
    """Between steps a write's copy reaches the model at once; the derived constants of its
    worlds follow at the next ``reset`` (or step), the other worlds' stay bit for bit."""
    env = gp.make("Ant-v5", N, device="cpu", seed=3)
    m = env.backend.m
    before = m.body_subtreemass.numpy().copy()
    hit = torch.tensor([False, True, False, True])
    env.params.set("body_mass", 2.0, mask=hit)
    assert (m.body_mass.numpy()[hit.numpy(), 1:] == 2.0).all()
    assert torch.equal(env.backend.changed, hit)
    env.reset()
    after = m.body_subtreemass.numpy()
    assert np.array_equal(after[~hit.numpy()], before[~hit.numpy()])
    assert np.allclose(after[hit.numpy(), 0], 2.0 * (m.nbody - 1), rtol=1e-6)
    assert not env.backend.changed.any()


def test_a_strided_mask_marks_its_own_worlds():
    env = gp.make("Ant-v5", N, device="cpu", seed=3)
    big = torch.zeros(N, 2, dtype=torch.bool)
    big[1, 0] = big[2, 1] = True
    env.params.set("dof_armature", 0.5, mask=big[:, 0])  # a view of stride 2
    assert env.backend.changed.tolist() == [False, True, False, False]


def test_gating_is_checked():
    with pytest.raises(ValueError, match="gating: expected one of"):
        gp.make("Ant-v5", N, device="cpu", gating="never")


def test_only_arena_calls_allocate_inside_a_capture_if_body():
    """CUDA forbids allocations (graph memory nodes) inside a conditional node's body. Every
    ``wp.capture_if`` branch a captured robot step records with ``gating="graph"`` (the
    reset-time ``forward``) allocates nothing outside ``backend.in_arena``, whose
    temporaries on CUDA come from the backend's arena (a custom allocator,
    ``test_gpu.py``). Checked here on the CPU by recording Warp's allocating calls while a
    branch is being captured; ``forward`` must have been captured inside a branch (gated),
    never outside one, and ``mjw.set_const`` never (the masked recompute replaces it)."""
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
            (lambda: gp.make("Ant-v5", N, device="cpu", seed=1, gating="graph"), (
                gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
                gp.Uniform("dof_armature", 0.8, 1.2, op="scale", on="reset"),
                gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="reset"))),
            (lambda: gp.make("Humanoid-v5", N, device="cpu", seed=1, gating="graph"), (
                gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"),)),
            (lambda: gp.make("Go1JoystickFlatTerrain-v1", N, device="cpu", seed=1,
                            gating="graph"), (
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
    assert where["set_const"] == []
    seen = where["forward"]  # Humanoid and Go1 run forward at reset
    assert seen and set(seen) == {"branch"}, seen



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
