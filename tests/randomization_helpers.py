"""Shared pieces of the randomization, curriculum and hook tests (CPU, small N)."""

from __future__ import annotations

import torch

import gpuparam as gp

N = 64


class WindyCartPole(gp.CartPoleEnv):
    """CartPole plus a vector parameter the kernel ignores (for per-component ranges)."""

    name = "WindyCartPole-test"
    param_specs = gp.CartPoleEnv.param_specs + (
        gp.ParamSpec("wind", (0.0, 0.0, 0.0), -10.0, 10.0, shape=(3,), unit="N"),
    )
    kernel_params = tuple(s.name for s in gp.CartPoleEnv.param_specs)


class StepCountedCartPole(gp.CartPoleEnv):
    """CartPole without a time-step parameter: ``gp.Interval`` counts steps."""

    name = "StepCountedCartPole-test"
    time_step_param = None


def cartpole(n: int = N, seed: int = 0, cls=gp.CartPoleEnv, **kw) -> gp.VecEnv:
    return cls(n, device="cpu", seed=seed, **kw)


def pendulum(n: int = N, seed: int = 0, **kw) -> gp.VecEnv:
    return gp.make("Pendulum-v1", n, device="cpu", seed=seed, **kw)


def actions(env: gp.VecEnv, steps: int, seed: int = 1) -> list[torch.Tensor]:
    """A fixed action sequence ``[steps]`` of ``[num_envs, ...]`` tensors, row i of each
    depending only on the env index (so batches of different sizes agree on shared envs)."""
    g = torch.Generator().manual_seed(seed)
    n = env.num_envs
    if isinstance(env.action_spec, gp.DiscreteSpec):
        full = torch.randint(0, 2, (steps, 4096), generator=g)
        return [full[t, :n].clone() for t in range(steps)]
    full = torch.rand(steps, 4096, 1, generator=g) * 4 - 2
    return [full[t, :n].clone() for t in range(steps)]


def eff(env: gp.VecEnv) -> torch.Tensor:
    """A clone of the effective table ``[C, N]``."""
    return env.params.effective_table.clone()
