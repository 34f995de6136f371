"""Derived model quantities: after a write to one of an env's ``recompute_on`` parameters
(``params.set``, randomization, curricula, checkpoints), the env's ``on_params_changed`` and
its backend's ``params_changed`` recompute what derives from them, for the written envs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class EnvRecompute:
    """Listens to ``env.params`` for ``names`` (the env class's and its backend's
    ``recompute_on``) and recomputes once at construction; ``warp_only``: the recomputation
    only launches Warp kernels (its listener joins the step's Warp graphs). ``ValueError``
    for a name that is not a parameter, before anything is registered. What a backend
    defers to its ``commit`` runs at the next ``"model_writes"`` stage."""

    def __init__(self, env: Any, names: tuple[str, ...], warp_only: bool):
        unknown = [n for n in names if n not in env.params]
        if unknown:
            raise ValueError(f"{type(env).__name__}.recompute_on: unknown {unknown}")
        self._env, self.names = env, names
        env.params.on_change(self.changed, warp_only=warp_only)
        env.on_params_changed(env.params.names, None)
        env.backend.params_initial(env.params.names)

    @classmethod
    def of(cls, env: Any, default: Callable) -> EnvRecompute | None:
        """The recomputation of ``env``, or None when nothing derives from its parameters;
        an ``on_params_changed`` overriding ``default`` may run torch ops (a "torch" listener)."""
        names = (*env.recompute_on, *env.backend.recompute_on)
        own = type(env).on_params_changed is not default
        return cls(env, names, env.backend.warp_only and not own) if names else None

    def changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``params.on_change`` listener: ``names`` written for the envs of ``mask`` (bool
        ``[num_envs]`` on the device, or None: all)."""
        if any(n in self.names for n in names):
            self._env.on_params_changed(names, mask)
            self._env.backend.params_changed(names, mask)
