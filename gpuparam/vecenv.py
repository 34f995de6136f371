"""The env runtime core: construction, ``step``, ``reset``, parameters and extension points.

``VecEnv`` holds one service per concern as an attribute, each in its own module
(``docs/pipeline.md``): step buffers (``_buffers``), stage lists, hooks and curricula
(``_stages.EnvStages``), one call at a time (``_lock.EnvLock``), checkpoints
(``_checkpoint.EnvCheckpoint``, files in ``files``) and syncs (``distributed.EnvSyncs``);
its public methods call them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam._buffers import device_bytes, step_buffers
from gpuparam._checkpoint import EnvCheckpoint
from gpuparam._checks import (
    check_env_slice,
    check_episode_length,
    check_mask,
    check_max_episode_steps,
    check_seed,
    load_action,
)
from gpuparam._device import resolve_device
from gpuparam._lock import EnvLock
from gpuparam._stages import EnvStages, Hook
from gpuparam.backend import Backend, BindContext, KernelBackend, Task
from gpuparam.distributed import EnvSyncs, Syncable, SyncSchedule
from gpuparam.files import load_state, save_state
from gpuparam.params import ParamTable
from gpuparam.pipeline import Pipeline, Stage
from gpuparam.randomization.manager import Randomization
from gpuparam.randomization.terms import Term
from gpuparam.spec import BoxSpec, DiscreteSpec, OutputSpec, ParamSpec


class VecEnv:
    """A batch of ``num_envs`` envs of one kind, stepped together on one device.

    A physics :class:`~gpuparam.Backend` plus an optional :class:`~gpuparam.Task`, run by
    a step pipeline (``env.pipeline``, ``docs/pipeline.md``) and a reset pipeline
    (``env.reset_pipeline``). What a subclass declares (``name``, ``param_specs``, spaces,
    ``max_episode_steps``, kernels or ``make_backend``, ...): ``docs/custom_envs.md``.
    Every buffer is allocated once, here; ``step`` and ``reset`` return locked TensorDicts
    (batch ``[num_envs]``) over them, overwritten by the next call: ``clone()`` what you keep.

    Args:
        num_envs: N, the number of envs in this process.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:i"``, or ``None`` for CUDA when present.
        seed: key of every random number the env draws (with env id and counters).
        max_episode_steps: truncation limit; default the Gymnasium registration's.
        capture: capture the step (and reset) pipeline after one eager call and replay it
            (default); False steps eagerly (for debugging).
        env_offset: global id of this process's env 0 (env ``i`` draws as global env
            ``env_offset + i``), for sharding one run over processes.
        validate_actions: check every action on the host before the step (synchronizes;
            a discrete action outside ``[0, n)``, a continuous one NaN, infinite or outside
            ``action_spec``'s ``[low, high]`` (as the float32 the env steps with) raises
            ``ValueError``, nothing stepped). Default off: discrete actions outside ``[0,
            n)`` and NaN actions are counted on the device in ``env.invalid_actions`` (int64
            ``[1]``); what each does: ``docs/guarantees.md``.
        **param_overrides: initial values for parameters, e.g. ``length=0.8`` (validated).
    """

    name: str
    param_specs: tuple[ParamSpec, ...]
    observation_spec: BoxSpec
    action_spec: BoxSpec | DiscreteSpec
    max_episode_steps: int
    state_dtype: type | None = None
    obs_dtype: type | None = None
    step_kernel: wp.Kernel | None = None
    reset_kernel: wp.Kernel | None = None
    kernel_params: tuple[str, ...] | None = None
    time_step_param: str | None = None
    recompute_on: tuple[str, ...] = ()
    _default_max_episode_steps: int = 0

    def __init_subclass__(cls, **kw) -> None:
        # a subclass declares its default limit as ``max_episode_steps = 500``: kept as the
        # default, so that ``env.max_episode_steps`` stays the validated property below
        super().__init_subclass__(**kw)
        v = cls.__dict__.get("max_episode_steps")
        if v is not None and not isinstance(v, property):
            cls._default_max_episode_steps = check_max_episode_steps(v)
            delattr(cls, "max_episode_steps")

    def __init__(self, num_envs: int, device: str | torch.device | None = None, seed: int = 0,
                 max_episode_steps: int | None = None, capture: bool = True,
                 env_offset: int = 0, validate_actions: bool = False, **param_overrides: object):
        check_env_slice(num_envs, env_offset)
        self.num_envs, self.env_offset = num_envs, env_offset
        self.device = resolve_device(device)
        limit = self._default_max_episode_steps if max_episode_steps is None else max_episode_steps
        check_seed(seed)
        self.validate_actions = bool(validate_actions)
        self._lock = EnvLock(self)  # one call at a time
        self.params = ParamTable(self.param_specs, num_envs, self.device)
        if param_overrides:
            self.params.set(param_overrides)
        self.context, self._td, self._reset_td = step_buffers(
            num_envs, self.device, env_offset, self.observation_spec, self.action_spec,
            self.output_specs(), type(self).__name__)
        self.max_episode_steps = limit
        self.invalid_actions = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._stages = EnvStages(self)  # the stage lists, hooks, curricula
        self._syncs = EnvSyncs()  # sync_every's schedules
        binding = BindContext(
            num_envs=num_envs, device=self.device, params=self.params, step=self.context,
            observation_spec=self.observation_spec, action_spec=self.action_spec)
        self.backend = self.make_backend()
        self.backend.bind(binding)
        self.task = self.make_task()
        if self.task is not None:
            self.task.bind(binding, self.backend)
        self.randomization = Randomization(self)
        self.pipeline, self.reset_pipeline = (
            Pipeline(self.context, build, capture=capture, key=lambda: self.params.listener_key)
            for build in (self._stages.step_stages, self._stages.reset_stages))
        self.randomization.on_rebuild(self._stages.changed)
        self._checkpoint = EnvCheckpoint(self, self._lock, self._stages.check_not_stepping)
        self._recompute_names = (*self.recompute_on, *self.backend.recompute_on)
        if self._recompute_names:
            unknown = [n for n in self._recompute_names if n not in self.params]
            if unknown:
                raise ValueError(f"{type(self).__name__}.recompute_on: unknown {unknown}")
            # an overridden on_params_changed may run torch ops: a "torch" listener
            own = type(self).on_params_changed is not VecEnv.on_params_changed
            self.params.on_change(self._params_written,
                                  warp_only=self.backend.warp_only and not own)
            self.on_params_changed(self.params.names, None)
            self.backend.params_initial(self.params.names)
        self.reset(seed=seed)

    def _params_written(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``params.on_change`` listener: recompute what derives from ``recompute_on``
        (the backend may defer to its ``commit``, the ``"model_writes"`` stage)."""
        if any(n in self._recompute_names for n in names):
            self.on_params_changed(names, mask)
            self.backend.params_changed(names, mask)

    # ------------------------------------------------------------------ extension points
    def output_specs(self) -> dict[str, OutputSpec]:
        """Extra output tensors, ``{key: gp.OutputSpec}`` (default none), allocated once
        beside the standard outputs and written by the task (``docs/custom_envs.md``)."""
        return {}

    def model_config(self) -> dict[str, object]:
        """Construction settings defining the model beyond its parameters, ``{name: value}``
        (default none), saved in checkpoints and compared on load (``docs/checkpoints.md``)."""
        return {}

    def make_backend(self) -> Backend:
        """The env's physics; default a ``KernelBackend`` of ``step_kernel``/``reset_kernel``."""
        if self.step_kernel is None or self.reset_kernel is None:
            raise TypeError(f"{type(self).__name__}: override make_backend() or set "
                            "step_kernel, reset_kernel, state_dtype and obs_dtype")
        names = self.kernel_params or tuple(s.name for s in self.param_specs)
        return KernelBackend(
            self.step_kernel, self.reset_kernel, self.state_dtype, self.obs_dtype, names)

    def make_task(self) -> Task | None:
        """The env's task, or None when the backend writes the task outputs itself."""
        return None

    def on_params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Recompute what the env derives from parameters for the envs of ``mask`` (bool
        ``[num_envs]`` on the device, or None: all), after every write touching one of
        ``recompute_on`` and once at construction. Device work only; override it."""

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> torch.Tensor | dict[str, torch.Tensor]:
        """The backend's state: its one array (classic envs: float32 ``[num_envs,
        state_size]``) or its dict of tensors ``[num_envs, ...]``, on the env's device. The
        env's own buffers: writing into them (``env.state[mask] = s``) sets the state the
        next step starts from; the observation buffer is not recomputed until then."""
        st = self.backend.state
        return next(iter(st.values())) if len(st) == 1 else st

    @property
    def episode_length(self) -> torch.Tensor:
        """Steps of each env's current episode, int32 ``[num_envs]`` on the device (0 after
        a reset); assign a tensor ``[num_envs]`` or an int to start episodes at other
        lengths (rsl_rl's ``init_at_random_ep_len``)."""
        return self.context.step_count

    @episode_length.setter
    def episode_length(self, value: torch.Tensor | int) -> None:
        value = check_episode_length(value, self.max_episode_steps, self.num_envs, self.device)
        self.context.step_count.copy_(value)

    @property
    def max_episode_steps(self) -> int:
        """The truncation limit; assigning an int in ``[1, 2**31 - 1]`` takes effect at the
        next step (a device value: no recapture); an env whose episode is already longer is
        truncated at its next step."""
        return self._max_episode_steps

    @max_episode_steps.setter
    def max_episode_steps(self, value: int) -> None:
        value = check_max_episode_steps(value)
        self.context.max_episode_steps.fill_(value)
        self._max_episode_steps = value

    @property
    def seed(self) -> int:
        """The seed of every random draw (with env index and per-env counters)."""
        return self._seed_value

    def restore_seed(self, seed: int) -> None:
        """Set the seed as a checkpoint holds it, without reseeding."""
        self._seed_value = seed
        self.context.seed.fill_(seed)

    # ------------------------------------------------------------------ step and reset
    def reset(self, mask: torch.Tensor | None = None, seed: int | None = None) -> TensorDict:
        """Start new episodes for the masked envs (reset-time terms draw for them first).

        Args:
            mask: bool tensor ``[num_envs]`` on the env's device; ``None`` resets all envs.
            seed: when given, reseed: episode counters, term counters and clocks restart,
                so the draws repeat those of a fresh env built with this seed (the global
                step of schedules keeps counting).

        Returns:
            TensorDict, batch ``[num_envs]``: ``"observation"`` float32 ``[N, *obs_shape]``
            (new for masked envs, unchanged for the others) and the outputs declared with
            ``reset=True`` (``output_specs``).
        """
        with self._lock.call("reset"):
            check_mask(mask, self.num_envs, self.device)
            if seed is not None:
                self.restore_seed(check_seed(seed))
                self.context.episode_count.zero_()
                self.randomization.reseed()
            if mask is None:
                self.context.reset_mask.fill_(True)
            else:
                self.context.reset_mask.copy_(mask)
            self.reset_pipeline()
        return self._reset_td

    def step(self, action: torch.Tensor) -> TensorDict:
        """Advance every env one step; envs whose episode ended are reset.

        Args:
            action: ``[num_envs, *action_spec.shape]`` on the env's device, an integer
                tensor for discrete actions, a float tensor for continuous ones.

        Returns:
            ``env.outputs``, batch ``[num_envs]`` on the env's device: ``"observation"``
            float32 ``[N, *obs_shape]`` (after auto-reset), ``"final_observation"`` (before
            it), ``"reward"`` float32 ``[N]``, ``"terminated"``, ``"truncated"``, ``"done"``
            bool ``[N]``, ``"episode_return"`` float32 and ``"episode_length"`` int32
            ``[N]`` (of the episode that ended, valid where ``done``; docs/pipeline.md).

        A raising hook or stage does not stop the step: it completes (counters, clock,
        auto-reset, syncs), then raises (``docs/pipeline.md``); its outputs are in
        ``env.outputs``. A refused action raises before anything runs.
        """
        with self._lock.call("step"):
            load_action(self.context.action, action, self.action_spec, self.validate_actions)
            runs = self.pipeline.runs
            try:
                self.pipeline()
            finally:
                # host-launched collectives, outside the captured step, for every step that
                # ran to its end (one a stage raised in too)
                if self.pipeline.runs != runs:
                    self._syncs.step()
        return self._td

    @property
    def stepping(self) -> bool:
        """True while ``step`` runs (hooks and stages run inside it)."""
        return self._lock.running == "step"

    def hold(self) -> contextlib.AbstractContextManager:
        """``with env.hold(): ...``: only this thread's ``step``/``reset`` calls run inside
        the block; any other call raises ``RuntimeError`` (``docs/pipeline.md``)."""
        return self._lock.call(hold=True)

    def capture(self) -> Pipeline:
        """Turn capture on for an env built with ``capture=False``; returns ``env.pipeline``."""
        self.pipeline.capture_enabled = self.reset_pipeline.capture_enabled = True
        self._stages.changed()
        return self.pipeline

    @property
    def outputs(self) -> TensorDict:
        """The TensorDict ``step`` returns (batch ``[num_envs]``, the env's own buffers)."""
        return self._td

    def randomize(self, *terms: Term) -> Callable[[], None]:
        """Add randomization terms (``gp.Uniform``, ...); returns their remover
        (``env.randomization`` has the rest). Refused from inside a step."""
        return self.randomization.add(*terms)

    def device_bytes(self) -> dict:
        """Device memory held: ``{"bytes_by_device": {device: bytes}, "bytes_by_attribute":
        {attribute: bytes}}``, each tensor and Warp array reachable counted once (host)."""
        return device_bytes(self)

    # ------------------------------------------------------------------ hooks and stages
    @property
    def hook_outputs(self) -> TensorDict:
        """The locked TensorDict hooks receive (batch ``[num_envs]``): the step's outputs
        and ``"action"``, the env's own buffers."""
        return self._stages.hook_outputs

    def before_step(self, fn: Hook, *, kind: str = "python") -> Callable[[], None]:
        """Call ``fn(env, td)`` at the start of every ``step``, after the action is loaded
        and before step-time randomization. ``td`` (batch ``[num_envs]``, on the device,
        locked: assigning a key raises) holds ``"action"`` (writable in place, e.g.
        ``td["action"].copy_(a)``: that changes the action taken) and the previous step's
        outputs. ``kind``: ``"python"`` (default) runs ``fn`` at every step; ``"torch"`` or
        ``"warp"`` declares that ``fn`` only launches device work (``docs/pipeline.md``),
        recorded once into the step's graphs. Returns a function removing the hook. Refused
        from inside a step."""
        return self._stages.add_hook(self._stages.before, fn, kind)

    def after_step(self, fn: Hook, *, kind: str = "python") -> Callable[[], None]:
        """Call ``fn(env, td)`` after the env kernel and truncation, before curricula,
        reset-time randomization and auto-reset: ``td`` holds this step's ``"reward"``,
        ``"terminated"``, ``"truncated"``, ``"done"``, ``"episode_return"``, ...,
        ``"observation"`` (pre-reset here) and ``"action"``; writes in place (e.g. reward
        shaping, ``td["reward"].mul_(0.1)``) are seen by the caller. ``td`` and ``kind`` as
        in :meth:`before_step`. Returns a function removing the hook."""
        return self._stages.add_hook(self._stages.after, fn, kind)

    @property
    def curricula(self) -> tuple:
        """The curricula added with :meth:`add_curriculum`, in order."""
        return tuple(self._stages.curricula)

    def add_curriculum(self, curriculum) -> Callable[[], None]:
        """Bind a ``gp.Curriculum`` to this env; it updates at every step for the done envs,
        before reset-time randomization. Returns a function removing it (refused while a
        sync schedule of ``sync_every`` syncs it)."""
        return self._stages.add_curriculum(curriculum, self._syncs.schedule_of)

    def add_stage(self, stage: Stage, first: bool = False) -> Callable[[], None]:
        """Append ``stage`` to every step, after the auto-reset (transforms use this), or
        with ``first=True`` put it before every other stage (where an adapter turns a
        library's actions into ``context.action``); returns a function removing it. The
        capture is redone. Refused from inside a step."""
        if not isinstance(stage, Stage):
            raise TypeError(f"add_stage: expected a gp.Stage, got {type(stage).__name__}")
        where = self._stages.first if first else self._stages.extra
        return self._stages.add(where, stage, f"stage {stage.name!r}")

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """Everything needed to continue bit for bit (checked on load as
        ``gpuparam._checkpoint`` says): seed, parameters (nominal and effective), the env's
        state, counters and output buffers, randomization and curricula. Tensors are
        clones; synchronizes. In a sharded run each rank saves its own envs; normalization
        statistics are saved by their modules. Refused (``RuntimeError``) from inside a
        step (a half-done step would not continue as the run does) and while another
        thread's call on the env runs."""
        return self._checkpoint.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()`` of an env of the same kind and size holding the same
        randomization terms and curricula (add them first), and the same global envs
        (``env_offset``). Everything is validated first; a rejected load raises
        ``ValueError`` and changes nothing. Synchronizes. Refused (``RuntimeError``) from
        inside a step and while another thread's call on the env runs."""
        self._checkpoint.load_state_dict(state)

    def check_state_dict(self, state: dict) -> None:
        """Raise ``ValueError`` unless ``load_state_dict(state)`` would load it (the same
        checks; writes nothing). Synchronizes."""
        self._checkpoint.check(state)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``state_dict()`` to the file ``path`` atomically, with a digest
        (``gpuparam.files.save_state``). Synchronizes."""
        save_state(self.state_dict(), path)

    def load(self, path: str | os.PathLike) -> None:
        """Restore a file written by :meth:`save` (refused, ``ValueError``, when it is not
        one, truncated or altered), validated whole by ``load_state_dict``."""
        self.load_state_dict(load_state(path))

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"{type(self).__name__} cannot be pickled (it holds Warp kernels and device "
            "buffers); save it with env.save(path) (env.state_dict() in memory) and restore "
            "it with env.load(path) (env.load_state_dict(state)) into an env built by "
            "gp.make with the same arguments, terms and curricula"
        )

    # ------------------------------------------------------------------ syncs
    def sync_every(self, every: int, *targets: Syncable, group: object = None,
                   overlap: bool = True) -> Callable[[], None]:
        """Sync ``targets`` (``gp.ObsNorm``, ``gp.RewardNorm``, ``gp.Curriculum(...,
        sync=True)``) over the ``torch.distributed`` ranks after every ``every``-th
        ``step``, all in one collective: a ``gp.SyncSchedule`` (its docstring says what
        ``group`` and ``overlap`` do). Every rank must make the same calls. Returns a
        function removing the schedule (after settling its exchange in flight)."""
        return self._syncs.add(every, targets, group, overlap)

    @property
    def sync_schedules(self) -> tuple[SyncSchedule, ...]:
        """The schedules registered by :meth:`sync_every`, in order."""
        return tuple(self._syncs.schedules)

    def sync_now(self) -> None:
        """Settle every schedule's exchange in flight and sync all their targets now
        (blocking, collective: every rank calls it)."""
        self._syncs.sync()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, {self.device})"
