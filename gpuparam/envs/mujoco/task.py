"""What the locomotion tasks share: binding parameter rows and the backend's arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import warp as wp

from gpuparam.backend import BindContext, Task
from gpuparam.pipeline import StepContext

if TYPE_CHECKING:
    from gpuparam.envs.mujoco.backend import MjwBackend


class LocomotionTask(Task):
    """A task of one kernel (``kernels.locomotion``) run in two modes: after a step for
    every env (``observe`` = 0) and after a reset for the masked envs (``observe`` = 1).

    Subclasses set ``kernel`` and implement ``arrays(b, backend, row)``: the kernel's
    arguments between ``mask`` and the outputs (model/data arrays, parameter rows, the
    task's own buffers), given ``row(name)`` for a scalar parameter's row ``[N]``.
    """

    kernel: wp.Kernel
    prefix: tuple = ()

    def bind(self, b: BindContext, backend: MjwBackend) -> None:
        def row(name: str) -> wp.array:
            return wp.from_torch(b.param_rows(name))

        self.backend = backend
        n = b.num_envs
        out = b.step.outputs
        self._middle = self.arrays(b, backend, row)
        self._tail = [
            wp.from_torch(out["observation"]), wp.from_torch(out["final_observation"]),
            wp.from_torch(out["reward"]), wp.from_torch(out["terminated"]),
        ]
        self._all = wp.from_torch(torch.ones(n, dtype=torch.bool, device=b.device))

    def arrays(self, b: BindContext, backend: MjwBackend, row) -> list:
        raise NotImplementedError

    def _launch(self, ctx: StepContext, observe: int, mask: wp.array) -> None:
        wp.launch(self.kernel, ctx.num_envs,
                  [observe, *self.prefix, mask, *self._middle, *self._tail],
                  device=ctx.wp_device, stream=ctx.stream)

    def compute(self, ctx: StepContext) -> None:
        self._launch(ctx, 0, self._all)

    def observe(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self._launch(ctx, 1, self.backend.wp_mask(mask))
