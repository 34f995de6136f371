"""MuJoCo C references for the robot tests: Gymnasium's own v5 envs (as users run them),
with the friction cone set to elliptic like the gpuparam env under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

# the test modules importing these references skip without them
gymnasium = pytest.importorskip("gymnasium")
mujoco = pytest.importorskip("mujoco")


def gym_env(name: str, qpos: torch.Tensor, qvel: torch.Tensor):
    """Gymnasium's ``name`` (MuJoCo C, float64), elliptic cone, at state (qpos, qvel)."""
    g = gymnasium.make(name).unwrapped
    g.model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    g.reset(seed=0)
    g.set_state(qpos.double().numpy(), qvel.double().numpy())
    return g


def sync(env, i: int, g) -> None:
    """Set world ``i`` of ``env`` to the state of MuJoCo C env ``g`` (qpos, qvel and the
    solver's warm start, rounded to float32)."""
    env.state["qpos"][i] = torch.from_numpy(g.data.qpos)
    env.state["qvel"][i] = torch.from_numpy(g.data.qvel)
    wp.to_torch(env.backend.d.qacc_warmstart)[i] = torch.from_numpy(g.data.qacc_warmstart)


def actions(env, steps: int, seed: int = 0) -> list[torch.Tensor]:
    """Uniform random actions over the action range, float32 ``[N, nu]`` per step."""
    rng = np.random.default_rng(seed)
    lo, hi = env.action_spec.low, env.action_spec.high
    return [torch.from_numpy(rng.uniform(lo, hi, size=(env.num_envs, env.mjm.nu))
                             .astype(np.float32)) for _ in range(steps)]
