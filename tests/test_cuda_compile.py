"""GPU readiness without a GPU: every Warp module a step launches (ours, MuJoCo Warp's, and
the kernels MuJoCo Warp generates at run time for a model) compiles for CUDA ``sm_90``
through Warp's public ahead-of-time compile (NVRTC ships with warp-lang: no driver needed).

The modules are collected by recording, during eager CPU steps of a fully featured env
(randomization of every trigger class, a curriculum, normalization, pushes), the module of
every kernel launched: the same kernels a GPU would launch. Compiled artifacts land in
Warp's kernel cache, so a second run only checks them.
"""

from __future__ import annotations

import importlib
import pkgutil

import gpuparam.kernels
import pytest
import torch
import warp as wp

import gpuparam as gp

N = 4


def _launched_modules(build) -> dict[int, object]:
    """``{id: wp.Module}`` of every kernel launched while ``build()`` runs."""
    seen: dict[int, object] = {}
    launch, launch_tiled = wp.launch, wp.launch_tiled

    def rec(kernel, *a, **k):
        seen[id(kernel.module)] = kernel.module
        return launch(kernel, *a, **k)

    def rec_tiled(kernel, *a, **k):
        seen[id(kernel.module)] = kernel.module
        return launch_tiled(kernel, *a, **k)

    wp.launch, wp.launch_tiled = rec, rec_tiled
    try:
        build()
    finally:
        wp.launch, wp.launch_tiled = launch, launch_tiled
    return seen


def _classic(name: str):
    def build():
        env = gp.make(name, N, device="cpu", seed=1, capture=False)
        p = env.params.names[0]
        lo = env.params.spec[p].default
        env.randomize(
            gp.Uniform(p, 0.9, 1.1, op="scale", on="reset"),
            gp.Gaussian(p, 0.0, 1e-3, op="add", on="step"),
            gp.LogUniform(p, 0.9, 1.1, op="scale", on=gp.Every(2)),
            gp.Choice(p, [lo, lo], on=gp.Interval(0.01, 0.05)),
        )
        env.add_curriculum(gp.Curriculum(2, params={p: (lo, lo)}, promote=1.0, demote=-1.0))
        t = gp.TransformedEnv(env, gp.ObsNorm(env.observation_spec.shape), gp.RewardNorm())
        spec = env.action_spec
        a = torch.zeros((N, *spec.shape), dtype=spec.dtype)
        for _ in range(3):
            t.step(a)
        t.reset(torch.tensor([True, False, True, False]))
        env.params.set(p, lo, mask=torch.tensor([True, False, False, True]))

    return build


def _robot(name: str, **kw):
    def build():
        env = gp.make(name, N, device="cpu", seed=1, capture=False, **kw)
        env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"),
                      gp.Uniform("geom_friction", 0.8, 1.2, op="scale", on="step"))
        env.add_event(gp.Push(((-0.1, 0.1),) * 2, every=2))
        t = gp.TransformedEnv(env, gp.ObsNorm(env.observation_spec.shape))
        a = torch.zeros(N, *env.action_spec.shape)
        for _ in range(3):
            t.step(a)

    return build


CASES = [("CartPole-v1", _classic("CartPole-v1")), ("Pendulum-v1", _classic("Pendulum-v1"))]
ROBOTS = ["Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Humanoid-v5",
          "Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1", "Go1Terrain-v0",
          "G1JoystickFlatTerrain-v1", "G1JoystickRoughTerrain-v1"]
# the legged recipe switched on (kicks, latency, noise, commands are on by default; the
# terrain grid small)
ROBOT_KW = {"Go1JoystickFlatTerrain-v1": dict(kick_enable=1.0, action_delay=1.0),
            "Go1Terrain-v0": dict(terrain_rows=2, tile_size=4.0, kick_enable=1.0),
            "G1JoystickFlatTerrain-v1": dict(kick_enable=1.0, action_delay=1.0,
                                             push_interval=(0.04, 0.06))}


@pytest.mark.parametrize("name", [c[0] for c in CASES] + ROBOTS)
def test_every_launched_module_compiles_for_sm90(name):
    if name in ROBOTS:
        pytest.importorskip("mujoco_warp")
        build = _robot(name, **ROBOT_KW.get(name, {}))
    else:
        build = dict(CASES)[name]
    modules = _launched_modules(build)
    assert modules, "no kernel was launched"
    failed = []
    for m in modules.values():
        try:
            paths = wp.compile_aot_module(m, arch=90)
        except Exception as e:  # collect every failure, then report them together
            failed.append(f"{m.name}: {type(e).__name__}: {e}")
            continue
        if not paths or not all(p.exists() for p in paths):
            failed.append(f"{m.name}: no artifact")
    assert not failed, "modules that do not compile for sm_90:\n" + "\n".join(failed)


def _has_kernels(name: str) -> bool:
    module = importlib.import_module(f"gpuparam.kernels.{name}")
    return any(isinstance(v, wp.Kernel) for v in vars(module).values())


# (modules of functions only, e.g. kernels.rng, compile inside the modules that use them)
KERNEL_MODULES = sorted(m.name for m in pkgutil.iter_modules(gpuparam.kernels.__path__)
                        if _has_kernels(m.name))


@pytest.mark.parametrize("name", KERNEL_MODULES)
def test_every_kernel_module_compiles_whole_for_sm90(name):
    """Every kernel of ours, launched by the cases above or not (learner-side statistics,
    syncs, ...)."""
    module = importlib.import_module(f"gpuparam.kernels.{name}")
    paths = wp.compile_aot_module(module, arch=90)
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)
