"""The physics plug-in point: an env is a :class:`Backend` (physics) plus a :class:`Task`.

``VecEnv`` runs them inside its step pipeline (see ``gpuparam.pipeline``)::

    physics stage:   backend.step(ctx); task.compute(ctx)
    episode stage:   step counters, truncation, done, returns (``gpuparam.kernels.episode``)
    auto-reset:      backend.reset(ctx, ctx.done); task.observe(ctx, ctx.done)

and ``env.reset(mask)`` runs ``backend.reset(ctx, ctx.reset_mask); task.observe(ctx,
ctx.reset_mask)``. Every method launches device work only (no host sync, no allocation,
no Python branch on tensor values): the pipeline captures it once and replays it.

Classic control envs use :class:`KernelBackend`: one fused Warp kernel computes the
physics and the task outputs (a tiny env is faster in one pass), so their task is None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import warp as wp

from gpuparam.pipeline import StepContext
from gpuparam.spec import DiscreteSpec

if TYPE_CHECKING:
    from gpuparam.vecenv import VecEnv


class Backend:
    """Physics of one batch of envs.

    Subclasses implement :meth:`bind`, :meth:`step` and :meth:`reset`, and may override
    :meth:`params_changed`.

    Attributes:
        state: ``dict[str, torch.Tensor]``, the physical state, each ``[num_envs, ...]`` on
            the env's device (filled by :meth:`bind`). Writing into it sets the state the
            next step starts from.
        warp_only: True when every method only launches Warp kernels (so the stages that
            call them replay inside a Warp CPU graph); False if they run torch ops.
        recompute_on: parameter names whose writes call :meth:`params_changed`.
    """

    warp_only: bool = True
    recompute_on: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.state: dict[str, torch.Tensor] = {}

    def bind(self, env: VecEnv, ctx: StepContext) -> None:
        """Allocate the state and keep what ``step``/``reset`` read: views of the
        parameter table rows (``env.params.effective_table[c0:c0 + size]``, float32
        ``[size, N]``, see ``env.params.columns(name)``), the context's buffers. Called
        once, after the parameter table and the context exist."""
        raise NotImplementedError

    def step(self, ctx: StepContext) -> None:
        """Advance every env by one env step (all substeps) from ``ctx.action``."""
        raise NotImplementedError

    def reset(self, ctx: StepContext, mask: torch.Tensor) -> None:
        """Start a new episode in the envs of ``mask`` (``ctx.done`` or ``ctx.reset_mask``,
        bool ``[N]``): draw their initial state keyed by ``(ctx.seed, ctx.env_offset + i,
        ctx.episode_count[i])`` and increment ``ctx.episode_count[i]`` (see
        ``kernels.episode.begin_episode``). Other envs stay bit-identical."""
        raise NotImplementedError

    def params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Recompute derived model quantities after a write of ``recompute_on`` names, for
        ``mask`` (bool ``[N]``) or all envs (``None``). Device work only."""


class Task:
    """Observation, reward and termination computed from a backend's state.

    Attributes:
        warp_only: as :attr:`Backend.warp_only`.
    """

    warp_only: bool = True

    def bind(self, env: VecEnv, ctx: StepContext, backend: Backend) -> None:
        """Keep what ``compute``/``observe`` read (backend state, parameter rows)."""

    def compute(self, ctx: StepContext) -> None:
        """After ``backend.step``: write ``ctx.outputs`` ``"observation"`` and
        ``"final_observation"`` (both the reached observation), ``"reward"`` and
        ``"terminated"`` for every env."""
        raise NotImplementedError

    def observe(self, ctx: StepContext, mask: torch.Tensor) -> None:
        """After ``backend.reset(ctx, mask)``: write ``ctx.outputs["observation"]`` of the
        envs in ``mask``."""
        raise NotImplementedError


class KernelBackend(Backend):
    """A backend of two Warp kernels over one flat state vector per env.

    ``step_kernel(*params, action, state, obs_out, final_obs_out, reward_out,
    terminated_out)``: physics and task in one pass. Each parameter is a float array
    ``[N]`` (scalar parameter) or ``[size, N]`` (vector parameter, one row per component);
    the action an int64 array ``[N]`` (discrete) or a float array ``[N, A]``.

    ``reset_kernel(mask, seed, env_offset, episode_count, state, obs_out)``: masked reset,
    keyed with ``gpuparam.kernels.episode.begin_episode``, one thread per env. Or, with
    ``listed_reset``, ``reset_kernel(mask, mask_words, block, seed, env_offset,
    episode_count, state, obs_out, scratch, scratch_f)``: a thread resets the masked envs
    of its block of ``block`` envs (CPUs: all of them; GPUs: one), listed first
    (``gpuparam.kernels.index.list_masked``) into ``scratch`` int32 ``[2 * npad]``, with
    ``scratch_f`` float32 ``[state length * npad]`` (one region per state component;
    ``npad``: N rounded up to 8) for its draws: on a CPU the draws of the few resetting envs
    then run in one loop over contiguous memory instead of one long serial chain of hashes
    per env (``kernels/cartpole.py``).

    Args:
        step_kernel, reset_kernel: the kernels.
        state_dtype, obs_dtype: Warp vector types of one env's state and observation.
        kernel_params: the parameters ``step_kernel`` takes, in order.
        listed_reset: ``reset_kernel`` takes the listed signature.
    """

    def __init__(self, step_kernel, reset_kernel, state_dtype, obs_dtype, kernel_params,
                 listed_reset: bool = False):
        super().__init__()
        self.step_kernel, self.reset_kernel = step_kernel, reset_kernel
        self.state_dtype, self.obs_dtype = state_dtype, obs_dtype
        self.kernel_params = tuple(kernel_params)
        self.listed_reset = bool(listed_reset)

    def bind(self, env: VecEnv, ctx: StepContext) -> None:
        n, dev = env.num_envs, env.device
        self.state = {
            "state": torch.zeros(n, self.state_dtype._length_, dtype=torch.float32, device=dev)
        }
        p = env.params
        params = []
        for name in self.kernel_params:
            c0, size = p.columns(name)
            rows = p.effective_table[c0 : c0 + size]
            params.append(wp.from_torch(rows[0] if p.spec[name].shape == () else rows))
        if isinstance(env.action_spec, DiscreteSpec):
            action = wp.from_torch(ctx.action)
        else:
            action = wp.from_torch(ctx.action.reshape(n, -1))
        out = ctx.outputs
        s = wp.from_torch(self.state["state"], dtype=self.state_dtype)
        obs = wp.from_torch(out["observation"], dtype=self.obs_dtype)
        self._step_args = [
            *params, action, s, obs, wp.from_torch(out["final_observation"], dtype=self.obs_dtype),
            wp.from_torch(out["reward"]), wp.from_torch(out["terminated"]),
        ]
        self._reset_tail = [
            wp.from_torch(ctx.seed), ctx.env_offset, wp.from_torch(ctx.episode_count), s, obs,
        ]
        if self.listed_reset:
            npad = (n + 7) // 8 * 8
            self._scratch = (
                torch.zeros(2 * npad, dtype=torch.int32, device=dev),
                torch.zeros(self.state_dtype._length_ * npad, dtype=torch.float32, device=dev),
            )
            self._reset_tail += [wp.from_torch(t) for t in self._scratch]
        self._masks = {}
        self._no_words = None

    def step(self, ctx: StepContext) -> None:
        wp.launch(self.step_kernel, ctx.num_envs, self._step_args, device=ctx.wp_device,
                  stream=ctx.stream)

    def reset(self, ctx: StepContext, mask: torch.Tensor) -> None:
        m = self._masks.get(id(mask))
        if m is None:
            m = self._masks[id(mask)] = (mask, *self._mask_args(ctx, mask))
        if not self.listed_reset:
            wp.launch(self.reset_kernel, ctx.num_envs, [m[1], *self._reset_tail],
                      device=ctx.wp_device, stream=ctx.stream)
            return
        dim, args = m[2]
        wp.launch(self.reset_kernel, dim, [*args, *self._reset_tail], device=ctx.wp_device,
                  stream=ctx.stream)

    def _mask_args(self, ctx: StepContext, mask: torch.Tensor) -> tuple:
        """``(wp mask, (launch dim, listed-kernel mask arguments))``: one thread walking
        every env on a CPU when the mask's 8-env words are known (the done and reset
        masks), else one thread per env."""
        wmask = wp.from_torch(mask)
        words = {id(ctx.done): ctx.done_words, id(ctx.reset_mask): ctx.reset_words}.get(id(mask))
        n = ctx.num_envs
        if ctx.device.type == "cpu" and words is not None:
            return wmask, (1, [wmask, wp.from_torch(words), (n + 7) // 8 * 8])
        if self._no_words is None:  # kept: a Warp view does not keep its tensor alive
            self._no_words = torch.zeros(1, dtype=torch.int64, device=ctx.device)
        return wmask, (n, [wmask, wp.from_torch(self._no_words), 1])
