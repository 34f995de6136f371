"""The physics plug-in point: an env is a :class:`Backend` (physics) plus a :class:`Task`,
both bound to a :class:`BindContext` (the guide: ``docs/custom_envs.md``). Every method
launches device work only (no host sync, no allocation, no Python branch on tensor values):
the pipeline captures it once and replays it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import warp as wp

from gpuparam._launch import BoundLaunch
from gpuparam.params import ParamTable
from gpuparam.pipeline import StepContext
from gpuparam.spec import BoxSpec, DiscreteSpec


@dataclass(frozen=True, eq=False)
class BindContext:
    """What a :class:`Backend` or :class:`Task` binds to (not the whole env).

    Attributes:
        num_envs: N.
        device: the torch device of every buffer.
        params: the env's ``ParamTable``: ``params.effective_table`` float32 ``[C, N]``
            (rows of a parameter: ``params.columns(name)``) is what kernels read.
        step: the env's ``StepContext`` (action, outputs, seed, counters, stream).
        observation_spec, action_spec: the env's spaces.
    """

    num_envs: int
    device: torch.device
    params: ParamTable
    step: StepContext
    observation_spec: BoxSpec
    action_spec: BoxSpec | DiscreteSpec

    def param_rows(self, name: str) -> torch.Tensor:
        """The effective-table rows of parameter ``name``: float32 ``[N]`` for a scalar
        parameter, ``[size, N]`` for a vector one (a view: kernels see every write)."""
        c0, size = self.params.columns(name)
        rows = self.params.effective_table[c0 : c0 + size]
        return rows[0] if self.params.spec[name].shape == () else rows


class Backend:
    """Physics of one batch of envs.

    Subclasses implement :meth:`bind`, :meth:`step` and :meth:`reset`, and may override
    :meth:`params_changed`.

    Attributes:
        state: ``dict[str, torch.Tensor]``, the physical state, each ``[num_envs, ...]`` on
            the env's device (filled by :meth:`bind`). Writing into it sets the state the
            next step starts from.
        kind: ``"warp"`` when every method only launches Warp kernels (the stages that call
            them replay inside a Warp CPU graph), ``"torch"`` if they run torch ops (their
            stages are ``"torch"`` stages: a CUDA graph on CUDA, eager on CPU).
        recompute_on: parameter names whose writes call :meth:`params_changed`.
        commits: True when the step has ``"model_writes"`` stages calling :meth:`commit`
            (before the physics, before the auto-reset, and before an explicit reset).
        state_bounds: ``{key: (low, high)}``: the integer state entries (a ring buffer's
            slot, counters) whose values a checkpoint load must find in ``[low, high]``
            (a ``ValueError`` naming the entry, nothing loaded); filled by :meth:`bind`
            (a task adding state adds its bounds).
    """

    kind: str = "warp"
    recompute_on: tuple[str, ...] = ()
    commits: bool = False

    def __init__(self) -> None:
        self.state: dict[str, torch.Tensor] = {}
        self.state_bounds: dict[str, tuple[int, int]] = {}

    def bind(self, b: BindContext) -> None:
        """Allocate the state and keep what ``step``/``reset`` read: views of the
        parameter table rows (``b.param_rows(name)``), the step context's buffers
        (``b.step``). Called once, after the parameter table and the context exist."""
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

    def params_initial(self, names: tuple[str, ...]) -> None:
        """At construction, every parameter ``names`` as first written (default:
        :meth:`params_changed` for all envs). Device work only."""
        self.params_changed(names, None)

    def params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """After a write of ``recompute_on`` names for ``mask`` (bool ``[N]``) or all envs
        (``None``): update what derives from them, or mark it for :meth:`commit`. Device
        work only (it runs inside the step's graph for a write inside a step)."""

    def commit(self, ctx: StepContext) -> None:
        """A ``"model_writes"`` stage (``commits`` backends): apply what
        :meth:`params_changed` marked (e.g. recompute derived model constants for the marked
        envs). Device work only, the same at every step (masks act inside kernels)."""


class Task:
    """Observation, reward and termination computed from a backend's state.

    Attributes:
        kind: as :attr:`Backend.kind`.
    """

    kind: str = "warp"

    def bind(self, b: BindContext, backend: Backend) -> None:
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
    the action an int64 array ``[N]`` (discrete) or a float array ``[N, A]``. With
    ``params_type`` (a ``wp.struct`` with one field per name of ``kernel_params``, named
    as the parameter) the parameters travel as one argument of that type instead:
    ``step_kernel(params, action, state, ...)``.

    ``reset_kernel(mask, seed, env_offset, episode_count, state, obs_out)``: masked reset,
    one thread per env, keyed with ``gpuparam.kernels.episode.begin_episode``.

    Args:
        state_dtype, obs_dtype: Warp vector types of one env's state and observation.
        kernel_params: the parameters ``step_kernel`` takes, in order.
        params_type: the struct bundling them, or None (one argument each).
    """

    def __init__(self, step_kernel, reset_kernel, state_dtype, obs_dtype, kernel_params,
                 params_type=None):
        super().__init__()
        self.step_kernel, self.reset_kernel = step_kernel, reset_kernel
        self.state_dtype, self.obs_dtype = state_dtype, obs_dtype
        self.kernel_params = tuple(kernel_params)
        self.params_type = params_type

    @classmethod
    def declared_by(cls, env) -> KernelBackend:
        """The backend of an env class declaring ``step_kernel``, ``reset_kernel``,
        ``state_dtype``, ``obs_dtype`` and ``kernel_params`` (default: every parameter)."""
        if env.step_kernel is None or env.reset_kernel is None:
            raise TypeError(f"{type(env).__name__}: override make_backend() or set "
                            "step_kernel, reset_kernel, state_dtype and obs_dtype")
        names = env.kernel_params or tuple(s.name for s in env.param_specs)
        return cls(env.step_kernel, env.reset_kernel, env.state_dtype, env.obs_dtype, names)

    def bind(self, b: BindContext) -> None:
        n, ctx = b.num_envs, b.step
        state = torch.zeros(n, self.state_dtype._length_, dtype=torch.float32, device=b.device)
        self.state = {"state": state}
        # views of buffers allocated once (the parameter table, the step context, the
        # state above): bound here, never rebound
        params = [wp.from_torch(b.param_rows(name)) for name in self.kernel_params]
        if self.params_type is not None:
            view = self.params_type()
            for name, rows in zip(self.kernel_params, params, strict=True):
                setattr(view, name, rows)
            params = [view]
        discrete = isinstance(b.action_spec, DiscreteSpec)
        action = wp.from_torch(ctx.action if discrete else ctx.action.reshape(n, -1))
        out = ctx.outputs
        s = wp.from_torch(state, dtype=self.state_dtype)
        obs = wp.from_torch(out["observation"], dtype=self.obs_dtype)
        step_outputs = [
            s, obs, wp.from_torch(out["final_observation"], dtype=self.obs_dtype),
            wp.from_torch(out["reward"]), wp.from_torch(out["terminated"]),
        ]
        self._step = BoundLaunch(self.step_kernel, n, inputs=[*params, action],
                                 outputs=step_outputs, device=b.device)
        # one reset launch per mask the stages reset with (static buffers), and one for
        # another mask, repointed at it
        keys = [wp.from_torch(ctx.seed), ctx.env_offset]
        outputs = [wp.from_torch(ctx.episode_count), s, obs]
        self._resets = tuple(
            (m, BoundLaunch(self.reset_kernel, n, inputs=[view, *keys], outputs=outputs,
                            device=b.device))
            for m, view in ((ctx.done, wp.from_torch(ctx.done)),
                            (ctx.reset_mask, wp.from_torch(ctx.reset_mask)), (None, ctx.done)))

    def step(self, ctx: StepContext) -> None:
        self._step.launch(ctx.stream)

    def reset(self, ctx: StepContext, mask: torch.Tensor) -> None:
        launch = next(c for m, c in self._resets if m is mask or m is None)
        if launch.repointable:  # another mask than the stages' two
            mask = mask.contiguous()  # (held until launched: the view does not hold it)
            launch.repoint(mask)
        launch.launch(ctx.stream)


def recompute_on_writes(env: Any, own_hook: bool) -> None:
    """Derived model quantities: after a write to one of the ``recompute_on`` parameters of
    ``env`` and of its backend (``params.set``, randomization, curricula, checkpoints),
    ``env.on_params_changed`` and the backend's :meth:`Backend.params_changed` recompute
    what derives from them for the written envs (what a backend defers to its ``commit``
    runs at the next ``"model_writes"`` stage); both run once now. ``ValueError`` for a
    name that is not a parameter, before anything is registered. ``own_hook``: the env
    class overrides ``on_params_changed``, which may run torch ops (a "torch" listener);
    else the listener is Warp-only when the backend is. Nothing without such names."""
    names = (*env.recompute_on, *env.backend.recompute_on)
    if not names:
        return
    unknown = [n for n in names if n not in env.params]
    if unknown:
        raise ValueError(f"{type(env).__name__}.recompute_on: unknown {unknown}")

    def changed(written: tuple[str, ...], mask: torch.Tensor | None) -> None:
        if any(n in names for n in written):
            env.on_params_changed(written, mask)
            env.backend.params_changed(written, mask)

    env.params.on_change(changed, kind="torch" if own_hook else env.backend.kind)
    env.on_params_changed(env.params.names, None)
    env.backend.params_initial(env.params.names)
