"""MuJoCo Warp's buffers: what does not fit (constraint rows per world, contacts dropped in
the broadphase or the narrowphase) is counted on the device (``env.overflows``), once per env
step, the sizes can be raised, bad sizes are refused."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

N = 4
MASK = torch.tensor([False, True, False, True])


def _run(**kw):
    env = gp.make("Ant-v5", N, device="cpu", seed=0, **kw)
    env.params.set("gravity", torch.tensor([0.0, 0.0, -1000.0]), mask=MASK)  # in its range
    for _ in range(10):
        env.step(torch.zeros(N, 8))
    return env


def test_dropped_constraint_rows_are_counted_for_exactly_the_worlds_that_dropped_them():
    env = _run()
    c = env.overflows["constraints"]
    assert c.shape == (N,) and c.dtype == torch.int32
    assert bool((c[MASK] > 0).all()) and bool((c[~MASK] == 0).all())
    assert bool((c <= 10).all())  # env steps, not physics substeps (frame_skip 5)
    assert int(env.overflows["contacts"]) == 0


def test_larger_buffers_drop_nothing():
    env = _run(njmax=256)
    assert int(env.overflows["constraints"].sum()) == 0


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, 2**31])
def test_bad_buffer_sizes_are_refused(bad):
    with pytest.raises(ValueError, match=r"njmax: expected an int in \[1, 2147483632\] or None "
                                         r"\(MuJoCo Warp's sizes are int32\), got"):
        gp.make("Ant-v5", N, device="cpu", njmax=bad)


def test_sizes_beyond_int32_with_the_model_or_num_envs_are_refused():
    with pytest.raises(ValueError, match=r"njmax: expected at most 153391688 for a model of 14 "
                                         r"dofs \(the constraint Jacobian"):
        gp.make("Ant-v5", N, device="cpu", njmax=2**30)
    with pytest.raises(ValueError, match="nconmax: expected at most 536870908 with num_envs=4"):
        gp.make("Ant-v5", N, device="cpu", nconmax=2**30)


# ------------------------------------------------------------------ every drop, once per step
STEPS = 12
GO1 = "Go1JoystickFlatTerrain-v1"


def _go1(name: str = GO1, **kw):
    """A Go1 task stepped ``STEPS`` zero actions (4 envs)."""
    env = gp.make(name, N, device="cpu", seed=0, **kw)
    for _ in range(STEPS):
        env.step(torch.zeros(N, 12))
    return env


@pytest.fixture(scope="module")
def go1_default():
    pytest.importorskip("mujoco_warp")
    return _go1()


def _counts(env) -> tuple[list[int], int]:
    o = env.overflows
    assert o["constraints"].shape == (N,) and o["contacts"].shape == (1,)
    return o["constraints"].tolist(), int(o["contacts"])


def test_default_sizes_drop_nothing(go1_default):
    assert _counts(go1_default) == ([0] * N, 0)


def test_contacts_the_broadphase_drops_are_counted_once_per_env_step(go1_default):
    # 4 feet x 4 worlds = 16 collision pairs for a shared buffer of 4 contacts: MuJoCo Warp
    # drops pairs in its broadphase (nacon stays within the buffer), at every step
    env = _go1(nconmax=1)
    assert int(env.backend.d.ncollision.numpy()[0]) > env.backend.d.naconmax
    assert _counts(env) == ([0] * N, STEPS)
    # and it matters: the physics is not the default-size run's
    assert not torch.equal(env.state["qpos"], go1_default.state["qpos"])


def test_constraint_rows_dropped_are_counted_once_per_env_step_not_per_substep():
    env = _go1(njmax=1)  # every world needs more rows at every step (frame_skip 5)
    assert _counts(env) == ([STEPS] * N, 0)


@pytest.mark.parametrize("name, kw", [
    ("Go1JoystickRoughTerrain-v1", {}),  # heightfield contacts beyond the buffer: narrowphase
    ("Go1Terrain-v0", dict(terrain_rows=1, tile_size=4.0)),  # more pairs: broadphase
])
def test_contacts_dropped_on_terrain_are_counted(name, kw):
    constraints, contacts = _counts(_go1(name, nconmax=6, **kw))
    assert constraints == [0] * N and 0 < contacts <= STEPS
