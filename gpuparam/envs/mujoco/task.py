"""What the locomotion tasks share: binding parameter rows and the backend's arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import warp as wp

from gpuparam.backend import Task
from gpuparam.pipeline import StepContext

if TYPE_CHECKING:
    from gpuparam.envs.mujoco.backend import MjwBackend
    from gpuparam.vecenv import VecEnv


class LocomotionTask(Task):
    """A task of one kernel (``kernels.locomotion``) run in two modes: after a step for
    every env (``observe`` = 0) and after a reset for the masked envs (``observe`` = 1).

    Subclasses set ``kernel`` and implement ``arrays(env, ctx, backend)``: the kernel's
    arguments between ``mask`` and the outputs (model/data arrays, parameter rows, the
    task's own buffers), given ``row(name)`` for a scalar parameter's row ``[N]``.
    """

    kernel: wp.Kernel
    prefix: tuple = ()

    def bind(self, env: VecEnv, ctx: StepContext, backend: MjwBackend) -> None:
        p = env.params

        def row(name: str) -> wp.array:
            c0, _ = p.columns(name)
            return wp.from_torch(p.effective_table[c0])

        self.backend = backend
        n = ctx.num_envs
        out = ctx.outputs
        self._middle = self.arrays(env, ctx, backend, row)
        self._tail = [
            wp.from_torch(out["observation"]), wp.from_torch(out["final_observation"]),
            wp.from_torch(out["reward"]), wp.from_torch(out["terminated"]),
        ]
        self._all = wp.from_torch(torch.ones(n, dtype=torch.bool, device=env.device))

    def arrays(self, env: VecEnv, ctx: StepContext, backend: MjwBackend, row) -> list:
        raise NotImplementedError

    def _launch(self, ctx: StepContext, observe: int, mask: wp.array) -> None:
        wp.launch(self.kernel, ctx.num_envs,
                  [observe, *self.prefix, mask, *self._middle, *self._tail],
                  device=ctx.wp_device, stream=ctx.stream)

    def compute(self, ctx: StepContext) -> None:
        self._launch(ctx, 0, self._all)

    def observe(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self._launch(ctx, 1, self.backend.wp_mask(mask))
