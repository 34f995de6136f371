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

    The kernel's arguments: ``observe``, ``prefix``, the mask, ``dt``, ``data(backend)``
    (model/data arrays), the action, the rows ``[N]`` of the scalar parameters ``params``
    (a name of ``optional`` the env lacks, never read by its kernel for that env, stands
    in as the first; any other missing name raises ``KeyError``), the task's
    previous position ``[N, *prev_shape(mjm)]`` (``backend.state["task_prev_position"]``,
    checkpointed with the env), then the outputs.
    """

    kernel: wp.Kernel
    prefix: tuple = ()
    params: tuple[str, ...]
    optional: tuple[str, ...] = ()

    def data(self, backend: MjwBackend) -> list:
        raise NotImplementedError

    def prev_shape(self, mjm) -> tuple[int, ...]:
        raise NotImplementedError

    def bind(self, b: BindContext, backend: MjwBackend) -> None:
        def row(name: str) -> wp.array:
            stand_in = name not in b.params and name in self.optional
            return wp.from_torch(b.param_rows(self.params[0] if stand_in else name))

        self.backend = backend
        n, out = b.num_envs, b.step.outputs
        prev = torch.zeros(n, *self.prev_shape(backend.mjm), dtype=torch.float32,
                           device=b.device)
        backend.state["task_prev_position"] = prev
        self._args = [
            backend.dt, *self.data(backend), wp.from_torch(b.step.action),
            *(row(p) for p in self.params), wp.from_torch(prev),
            wp.from_torch(out["observation"]), wp.from_torch(out["final_observation"]),
            wp.from_torch(out["reward"]), wp.from_torch(out["terminated"]),
        ]
        self._all = wp.from_torch(torch.ones(n, dtype=torch.bool, device=b.device))

    def _launch(self, ctx: StepContext, observe: int, mask: wp.array) -> None:
        wp.launch(self.kernel, ctx.num_envs, [observe, *self.prefix, mask, *self._args],
                  device=ctx.wp_device, stream=ctx.stream)

    def compute(self, ctx: StepContext) -> None:
        self._launch(ctx, 0, self._all)

    def observe(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self._launch(ctx, 1, self.backend.wp_mask(mask))
