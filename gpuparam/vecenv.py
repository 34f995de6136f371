"""The env runtime core: construction, ``step``, ``reset``, parameters, extension points, and
one service per concern held as an attribute (``docs/pipeline.md``): ``_stages.EnvStages``
(stage lists, hooks, curricula), ``_lock.EnvLock``, ``_checkpoint.EnvCheckpoint`` and
``distributed.EnvSyncs``; public methods call them (derived quantities:
``backend.recompute_on_writes``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam import _checks as chk
from gpuparam._buffers import device_bytes, step_buffers
from gpuparam._checkpoint import EnvCheckpoint
from gpuparam._device import resolve_device
from gpuparam._lock import EnvLock
from gpuparam._stages import EnvStages, Hook
from gpuparam.backend import Backend, BindContext, KernelBackend, Task, recompute_on_writes
from gpuparam.distributed import EnvSyncs, Syncable, SyncSchedule
from gpuparam.files import load_state, save_state
from gpuparam.params import ParamTable
from gpuparam.pipeline import Pipeline, Stage
from gpuparam.randomization.manager import Randomization
from gpuparam.randomization.terms import Term
from gpuparam.spec import BoxSpec, DiscreteSpec, OutputSpec, ParamSpec


class VecEnv:
    """A batch of ``num_envs`` envs of one kind, stepped together on one device.

    A :class:`~gpuparam.Backend` plus an optional :class:`~gpuparam.Task` run by
    ``env.pipeline`` and ``env.reset_pipeline`` (``docs/pipeline.md``, ``docs/custom_envs.md``);
    ``step`` and ``reset`` return locked TensorDicts over buffers allocated once.

    Args:
        num_envs: N, the number of envs in this process.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:i"``, or ``None`` for CUDA when present.
        seed: key of every random number the env draws (with env id and counters).
        max_episode_steps: truncation limit; default the Gymnasium registration's.
        capture: capture the step and reset pipelines after one eager call (default); False:
            eager (for debugging).
        env_offset: global id of this process's env 0 (env ``i`` draws as global env
            ``env_offset + i``), for sharding a run.
        validate_actions: check every action on the host first (synchronizes): one outside
            ``action_spec`` or NaN raises ``ValueError``, nothing stepped. Default off: the
            invalid ones are counted in ``env.invalid_actions`` (int64 ``[1]``, device;
            ``docs/guarantees.md``).
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
        # a subclass's ``max_episode_steps = 500`` is its default (the property stays)
        super().__init_subclass__(**kw)
        v = cls.__dict__.get("max_episode_steps")
        if v is not None and not isinstance(v, property):
            cls._default_max_episode_steps = chk.check_max_episode_steps(v)
            delattr(cls, "max_episode_steps")

    def __init__(self, num_envs: int, device: str | torch.device | None = None, seed: int = 0,
                 max_episode_steps: int | None = None, capture: bool = True,
                 env_offset: int = 0, validate_actions: bool = False, **param_overrides: object):
        chk.check_env_slice(num_envs, env_offset)
        self.num_envs, self.env_offset = num_envs, env_offset
        self.device = resolve_device(device)
        chk.check_seed(seed)
        self.validate_actions = bool(validate_actions)
        self._lock = EnvLock(self)  # one call at a time
        self.params = ParamTable(self.param_specs, num_envs, self.device)
        if param_overrides:
            self.params.set(param_overrides)
        self.context, self._td, self._reset_td = step_buffers(self)
        self.max_episode_steps = (self._default_max_episode_steps if max_episode_steps is None
                                  else max_episode_steps)
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
        recompute_on_writes(self, type(self).on_params_changed is not VecEnv.on_params_changed)
        self.reset(seed=seed)

    def output_specs(self) -> dict[str, OutputSpec]:
        """Extra output tensors written by the task, ``{key: gp.OutputSpec}`` (default none)."""
        return {}

    def model_config(self) -> dict[str, object]:
        """Settings defining the model beyond its parameters (saved, compared on load)."""
        return {}

    def make_backend(self) -> Backend:
        """The env's physics; default a ``KernelBackend`` of ``step_kernel``/``reset_kernel``."""
        return KernelBackend.declared_by(self)

    def make_task(self) -> Task | None:
        """The env's task, or None when the backend writes the task outputs itself."""
        return None

    def on_params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Recompute what derives from ``recompute_on`` parameters for the envs of ``mask``
        (bool ``[num_envs]`` on the device, None: all). Device work only; override it."""

    @property
    def state(self) -> torch.Tensor | dict[str, torch.Tensor]:
        """The backend's state, on the device: its one array (classic envs: float32 ``[num_envs,
        state_size]``) or its dict of tensors ``[num_envs, ...]``; writable in place."""
        st = self.backend.state
        return next(iter(st.values())) if len(st) == 1 else st

    @property
    def episode_length(self) -> torch.Tensor:
        """Steps of each env's current episode, int32 ``[num_envs]`` on the device; assign a
        tensor ``[num_envs]`` or an int (rsl_rl's ``init_at_random_ep_len``)."""
        return self.context.step_count

    @episode_length.setter
    def episode_length(self, value: torch.Tensor | int) -> None:
        self.context.step_count.copy_(chk.check_episode_length(
            value, self.max_episode_steps, self.num_envs, self.device))

    @property
    def max_episode_steps(self) -> int:
        """The truncation limit; one assigned takes effect at the next step (no recapture)."""
        return self._max_episode_steps

    @max_episode_steps.setter
    def max_episode_steps(self, value: int) -> None:
        value = chk.check_max_episode_steps(value)
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

    def reset(self, mask: torch.Tensor | None = None, seed: int | None = None) -> TensorDict:
        """Start new episodes for the envs of ``mask`` (bool ``[num_envs]`` on the device;
        None: all); ``seed`` reseeds. Returns a TensorDict, batch ``[num_envs]``:
        ``"observation"`` float32 ``[N, *obs_shape]`` and the outputs with ``reset=True``."""
        with self._lock.call("reset"):
            chk.check_mask(mask, self.num_envs, self.device)
            if seed is not None:
                self.restore_seed(chk.check_seed(seed))
                self.context.episode_count.zero_()
                self.randomization.reseed()
            self.context.reset_mask[:] = True if mask is None else mask
            self.reset_pipeline()
        return self._reset_td

    def step(self, action: torch.Tensor) -> TensorDict:
        """Advance every env one step (``action``: ``[num_envs, *action_spec.shape]`` on the
        device); ended episodes are reset. Returns ``env.outputs``, batch ``[num_envs]``:
        float32 ``"observation"`` ``[N, *obs_shape]`` (after auto-reset) and
        ``"final_observation"`` (before it), ``"reward"``, ``"episode_return"``; bool
        ``"terminated"``, ``"truncated"``, ``"done"``; int32 ``"episode_length"``."""
        with self._lock.call("step"):
            chk.load_action(self.context.action, action, self.action_spec, self.validate_actions)
            runs = self.pipeline.runs
            try:
                self.pipeline()
            finally:  # host collectives after every step that ran to its end
                if self.pipeline.runs != runs:
                    self._syncs.step()
        return self._td

    @property
    def stepping(self) -> bool:
        """True while ``step`` runs (hooks and stages run inside it)."""
        return self._lock.running == "step"

    def hold(self) -> contextlib.AbstractContextManager:
        """``with env.hold():`` only this thread's calls run in the block (``EnvLock``)."""
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
        """Add randomization terms (``gp.Uniform``, ...); returns their remover."""
        return self.randomization.add(*terms)

    def device_bytes(self) -> dict:
        """Device memory held, by device and by attribute (``_buffers.device_bytes``)."""
        return device_bytes(self)

    @property
    def hook_outputs(self) -> TensorDict:
        """The locked TensorDict hooks receive (batch ``[num_envs]``): outputs and action."""
        return self._stages.hook_outputs

    def before_step(self, fn: Hook, *, kind: str = "python") -> Callable[[], None]:
        """Call ``fn(env, td)`` at the start of every step (``EnvStages.add_hook``)."""
        return self._stages.add_hook(self._stages.before, fn, kind)

    def after_step(self, fn: Hook, *, kind: str = "python") -> Callable[[], None]:
        """Call ``fn(env, td)`` after the physics, before the auto-reset (``add_hook``)."""
        return self._stages.add_hook(self._stages.after, fn, kind)

    @property
    def curricula(self) -> tuple:
        """The curricula added with :meth:`add_curriculum`, in order."""
        return tuple(self._stages.curricula)

    def add_curriculum(self, curriculum) -> Callable[[], None]:
        """Bind a ``gp.Curriculum`` to every step (``EnvStages.add_curriculum``)."""
        return self._stages.add_curriculum(curriculum, self._syncs.schedule_of)

    def add_stage(self, stage: Stage, first: bool = False) -> Callable[[], None]:
        """Append ``stage`` to every step (``EnvStages.add_stage``); returns its remover."""
        return self._stages.add_stage(stage, first)

    def state_dict(self) -> dict[str, object]:
        """Everything needed to continue bit for bit (``EnvCheckpoint.state_dict``)."""
        return self._checkpoint.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()``, checked whole first (``EnvCheckpoint.load_state_dict``)."""
        self._checkpoint.load_state_dict(state)

    def check_state_dict(self, state: dict) -> None:
        """Raise ``ValueError`` unless ``load_state_dict(state)`` would load it."""
        self._checkpoint.check(state)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``state_dict()`` to ``path`` atomically, with a digest (``gpuparam.files``)."""
        save_state(self.state_dict(), path)

    def load(self, path: str | os.PathLike) -> None:
        """Restore a file of :meth:`save`; one truncated or altered raises ``ValueError``."""
        self.load_state_dict(load_state(path))

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"{type(self).__name__} cannot be pickled (it holds Warp kernels and device "
            "buffers); save it with env.save(path) (env.state_dict() in memory) and restore "
            "it with env.load(path) (env.load_state_dict(state)) into an env built by "
            "gp.make with the same arguments, terms and curricula")

    def sync_every(self, every: int, *targets: Syncable, group: object = None,
                   overlap: bool = True) -> Callable[[], None]:
        """Sync ``targets`` over the ranks every ``every`` steps (``EnvSyncs.add``)."""
        return self._syncs.add(every, targets, group, overlap)

    @property
    def sync_schedules(self) -> tuple[SyncSchedule, ...]:
        """The schedules of :meth:`sync_every`, in order."""
        return tuple(self._syncs.schedules)

    def sync_now(self) -> None:
        """Settle every schedule and sync all their targets now (collective)."""
        self._syncs.sync()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, {self.device})"
