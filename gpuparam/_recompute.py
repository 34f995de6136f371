"""Derived model quantities: after a write to one of an env's ``recompute_on`` parameters
(``params.set``, randomization, curricula, checkpoints), the env's ``on_params_changed`` and
its backend's ``params_changed`` recompute what derives from them, for the written envs."""

from __future__ import annotations

from typing import Any

import torch


class EnvRecompute:
    """Listens to ``env.params`` for the parameters ``names`` (the env class's and its
    backend's ``recompute_on``; an object a ``VecEnv`` holds when there are some) and
    recomputes once at construction (the env's ``on_params_changed`` for all envs, the
    backend's ``params_initial``); ``warp_only``: the recomputation only launches Warp
    kernels (its listener then joins the step's Warp graphs). ``ValueError`` for a name
    that is not a parameter, before anything is registered.

    A write's device work runs where the write runs (inside the step's graph for a write
    inside a step, at once for one between steps); what a backend defers to its
    ``commit`` (the MuJoCo robots' derived constants) runs at the next step's or reset's
    ``"model_writes"`` stage, before anything reads it."""

    def __init__(self, env: Any, names: tuple[str, ...], warp_only: bool):
        unknown = [n for n in names if n not in env.params]
        if unknown:
            raise ValueError(f"{type(env).__name__}.recompute_on: unknown {unknown}")
        self._env, self.names = env, names
        env.params.on_change(self.changed, warp_only=warp_only)
        env.on_params_changed(env.params.names, None)
        env.backend.params_initial(env.params.names)

    def changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``params.on_change`` listener: ``names`` written for the envs of ``mask`` (bool
        ``[num_envs]`` on the device, or None: all)."""
        env = self._env
        if not any(n in self.names for n in names):
            return
        env.on_params_changed(names, mask)
        env.backend.params_changed(names, mask)
