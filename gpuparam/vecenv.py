"""The env runtime: static device buffers, a physics backend and a captured step pipeline.

The core (construction, ``step``, ``reset``, parameters, extension points) lives here; it
composes one service per concern, each in its own module: the step buffers
(``_buffers.step_buffers``), the stage lists, hooks and curricula (``_stages.EnvStages``),
one call at a time (``_lock.EnvLock``), checkpoints (``_checkpoint.EnvCheckpoint``) and the
sync schedules (``distributed.EnvSyncs``). Public methods delegate to them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam._buffers import device_bytes, step_buffers
from gpuparam._checkpoint import EnvCheckpoint
from gpuparam._checks import (
    check_action,
    check_env_slice,
    check_episode_length,
    check_mask,
    check_max_episode_steps,
    check_seed,
)
from gpuparam._device import capturing, resolve_device
from gpuparam._lock import EnvLock
from gpuparam._stages import EnvStages, Hook
from gpuparam.backend import Backend, BindContext, KernelBackend, Task
from gpuparam.distributed import EnvSyncs, Syncable, SyncSchedule
from gpuparam.files import SavesState
from gpuparam.params import ParamTable
from gpuparam.pipeline import Pipeline, Stage
from gpuparam.randomization.manager import Randomization
from gpuparam.randomization.terms import Term
from gpuparam.spec import BoxSpec, DiscreteSpec, OutputSpec, ParamSpec


class VecEnv(SavesState):
    """A batch of ``num_envs`` envs of one kind, stepped together on one device.

    An env is a physics :class:`~gpuparam.Backend` plus an optional
    :class:`~gpuparam.Task`, run by a step pipeline (``env.pipeline``: its stages, in
    order, and how they are captured are in ``docs/pipeline.md``) and a reset pipeline
    (``env.reset_pipeline``: ``randomize_reset``, ``reset``).

    Subclasses declare ``name``, ``param_specs``, ``observation_spec``, ``action_spec``,
    ``max_episode_steps`` (the default limit, an int) and either override ``make_backend``
    (and ``make_task``) or, for a :class:`~gpuparam.backend.KernelBackend`, set
    ``step_kernel``, ``reset_kernel``, ``state_dtype``, ``obs_dtype`` and optionally
    ``kernel_params`` (the parameters the step kernel takes, in order; default all).
    Optional: ``time_step_param`` (the parameter holding the time step, used by
    ``gp.Interval``) and ``recompute_on`` (parameter names whose change calls
    ``on_params_changed``).

    Every buffer is allocated once, here. ``step`` and ``reset`` return a locked
    ``TensorDict`` (batch ``[num_envs]``) over those buffers: its tensors are overwritten by
    the next call, so ``clone()`` what you keep; write in place (``td[key].copy_(x)``).

    Args:
        num_envs: N, the number of envs in this process.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:i"``, or ``None`` for CUDA when present.
        seed: key of every random number the env draws (with env id and counters).
        max_episode_steps: truncation limit; default the Gymnasium registration's.
        capture: capture the step (and reset) pipeline after one eager call and replay it
            (default). False steps eagerly (for debugging).
        env_offset: global id of this process's env 0 (env ``i`` draws as global env
            ``env_offset + i``), for sharding one run over processes.
        cuda_graph: older name of ``capture``.
        validate_actions: check every action on the host before the step (synchronizes):
            a discrete action outside ``[0, n)`` or a NaN continuous action raises
            ``ValueError`` and nothing is stepped. Default off: such actions are counted
            on the device in ``env.invalid_actions`` (a NaN torque propagates to NaN
            observations, never clipped; an out-of-range discrete action acts as the
            nearest valid one, as the kernels compare).
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

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device | None = None,
        seed: int = 0,
        max_episode_steps: int | None = None,
        capture: bool = True,
        env_offset: int = 0,
        cuda_graph: bool | None = None,
        validate_actions: bool = False,
        **param_overrides: object,
    ):
        check_env_slice(num_envs, env_offset)
        self.num_envs = num_envs
        self.env_offset = env_offset
        self.device = resolve_device(device)
        limit = self._default_max_episode_steps if max_episode_steps is None else max_episode_steps
        check_seed(seed)
        if cuda_graph is not None:
            capture = bool(cuda_graph)
        self.validate_actions = bool(validate_actions)
        self._lock = EnvLock(self)  # one call at a time
        self.params = ParamTable(self.param_specs, num_envs, self.device)
        if param_overrides:
            self.params.set(param_overrides)
        ctx, self._td, self._reset_td = step_buffers(
            num_envs, self.device, env_offset, self.observation_spec, self.action_spec,
            self.output_specs(), type(self).__name__)
        self.context = ctx
        self.max_episode_steps = limit
        self.invalid_actions = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.stepping = False  # True while step() runs its pipeline
        self._stages = EnvStages(self)  # the stage lists, hooks, curricula
        self._syncs = EnvSyncs()  # sync_every's schedules
        binding = BindContext(
            num_envs=num_envs, device=self.device, params=self.params, step=self.context,
            observation_spec=self.observation_spec, action_spec=self.action_spec,
        )
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
        recompute = tuple(self.recompute_on) + tuple(self.backend.recompute_on)
        if recompute:
            unknown = [n for n in recompute if n not in self.params]
            if unknown:
                raise ValueError(f"{type(self).__name__}.recompute_on: unknown {unknown}")
            self._recompute = recompute
            # a subclass's on_params_changed may run torch ops: a "torch" stage then
            warp_only = self.backend.warp_only and (
                type(self).on_params_changed is VecEnv.on_params_changed
            )
            self.params.on_change(self._params_changed, warp_only=warp_only)
            self._params_changed(self.params.names, None)
        self.reset(seed=seed)

    # ------------------------------------------------------------------ buffers
    def output_specs(self) -> dict[str, OutputSpec]:
        """Extra output tensors of this env class, ``{key: gp.OutputSpec}`` (default none),
        allocated once beside the standard outputs: in the TensorDict ``step`` returns (and
        ``reset`` too for specs with ``reset=True``), in the hooks' TensorDict and in
        checkpoints. The env's task writes them (``ctx.outputs[key]``). Called once, while
        the buffers are allocated (the spaces exist by then)."""
        return {}

    def model_config(self) -> dict[str, object]:
        """The construction settings that define this env's model beyond its parameters
        (e.g. a robot's contact bodies, a terrain's seed): ``{name: value}``, values
        strings, numbers, bools or tuples of them; default none. Saved in checkpoints
        (``"config"``, only when there are some): loading one into an env built with
        another value raises ``ValueError`` naming the setting, the saved value and this
        env's; a checkpoint without a setting (an older one) loads."""
        return {}

    def make_backend(self) -> Backend:
        """The env's physics. Default: a ``KernelBackend`` of the class's ``step_kernel``
        and ``reset_kernel``."""
        if self.step_kernel is None or self.reset_kernel is None:
            raise TypeError(
                f"{type(self).__name__}: override make_backend() or set step_kernel, "
                "reset_kernel, state_dtype and obs_dtype"
            )
        names = self.kernel_params or tuple(s.name for s in self.param_specs)
        return KernelBackend(
            self.step_kernel, self.reset_kernel, self.state_dtype, self.obs_dtype, names
        )

    def make_task(self) -> Task | None:
        """The env's task, or None when the backend writes the task outputs itself."""
        return None

    # ------------------------------------------------------------------ API
    @property
    def state(self) -> torch.Tensor | dict[str, torch.Tensor]:
        """The backend's physical state (``env.backend.state``): for a backend with one
        array (classic envs: float32 ``[num_envs, state_size]``) that tensor, else the dict
        of tensors ``[num_envs, ...]``, on the env's device.

        The env's own buffers: writing into them (e.g. ``env.state[mask] = s``) sets the
        state the next step starts from; the observation buffer is not recomputed until then.
        """
        st = self.backend.state
        return next(iter(st.values())) if len(st) == 1 else st

    @property
    def episode_length(self) -> torch.Tensor:
        """Steps taken in each env's current episode, int32 ``[num_envs]`` on the env's
        device (0 right after a reset). The env's own counter: truncation happens when it
        reaches ``max_episode_steps``. Assign to it (``env.episode_length = t``, a tensor
        ``[num_envs]`` or a scalar) to start episodes at other lengths, as rsl_rl's
        ``init_at_random_ep_len`` does."""
        return self.context.step_count

    @episode_length.setter
    def episode_length(self, value: torch.Tensor | int) -> None:
        value = check_episode_length(value, self.max_episode_steps, self.num_envs, self.device)
        self.context.step_count.copy_(value)

    @property
    def max_episode_steps(self) -> int:
        """The truncation limit: an episode is truncated when its step count reaches it.
        Assigning an int in ``[1, 2**31 - 1]`` takes effect at the next step (the episode
        kernel reads it from device memory: no recapture); an env whose episode is already
        longer is truncated at its next step."""
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
        """Set the seed as a checkpoint holds it, without reseeding (``reset(seed=...)``
        reseeds)."""
        self._seed_value = seed
        self.context.seed.fill_(seed)

    def reset(self, mask: torch.Tensor | None = None, seed: int | None = None) -> TensorDict:
        """Start new episodes for the masked envs.

        Args:
            mask: bool tensor ``[num_envs]`` on the env's device; ``None`` resets all envs.
            seed: when given, reseed: every env's episode counter restarts at 0, so the
                draws repeat those of a fresh env built with this seed; randomization
                terms get new keys and their counters and clocks restart too (the global
                step of schedules keeps counting).

        Reset-time randomization terms draw for the masked envs first.

        Returns:
            TensorDict, batch ``[num_envs]``: ``"observation"`` float32 ``[N, *obs_shape]``
            (new initial observations for masked envs, unchanged for the others), and the
            extra outputs declared with ``reset=True`` (``output_specs``), e.g. Go1's
            ``"privileged_observation"``.
        """
        with self._lock.call():
            check_mask(mask, self.num_envs, self.device)
            ctx = self.context
            if seed is not None:
                self.restore_seed(check_seed(seed))
                ctx.episode_count.zero_()
                self.randomization.reseed()
            if mask is None:
                ctx.reset_mask.fill_(True)
            else:
                ctx.reset_mask.copy_(mask)
            self.reset_pipeline()
        return self._reset_td

    def step(self, action: torch.Tensor) -> TensorDict:
        """Advance every env one step; envs whose episode ended are reset.

        Args:
            action: ``[num_envs, *action_spec.shape]`` on the env's device; an integer
                tensor for discrete actions, a float tensor for continuous ones.

        Returns:
            TensorDict, batch ``[num_envs]``, on the env's device:
            ``"observation"`` float32 ``[N, *obs_shape]`` (after auto-reset),
            ``"final_observation"`` (the observation the step reached, before auto-reset),
            ``"reward"`` float32 ``[N]``, ``"terminated"``, ``"truncated"``, ``"done"``
            bool ``[N]``, ``"episode_return"`` float32 ``[N]`` and ``"episode_length"``
            int32 ``[N]`` of the episode that ended at this step, valid where ``done``
            (elsewhere they hold the env's previous finished episode, 0 before the first).

        A hook or stage that raises (``KeyboardInterrupt`` too) does not stop the step: it
        runs to its end (counters, clock, auto-reset, syncs), then raises that error; its
        outputs are in ``env.outputs``. A refused action raises before anything runs.
        """
        with self._lock.call():
            self._load_action(action)
            runs, self.stepping = self.pipeline.runs, True
            try:
                self.pipeline()
            finally:
                self.stepping = False
                # host-launched collectives, outside the captured step; counted for every
                # step that ran to its end, also one a stage raised in (gp.Stage)
                if self.pipeline.runs != runs:
                    self._syncs.step()
        return self._td

    def hold(self) -> contextlib.AbstractContextManager:
        """Hold this env for the calling thread over a block: ``with env.hold(): ...``.

        Inside the block this thread's ``step`` and ``reset`` calls run as usual; any other
        call (another thread's, or a hook's inside a running step), and entering while a
        call runs or another thread holds the env, raise the ``RuntimeError`` of concurrent
        use, before anything changes (for adapters that write the env's buffers before a
        step). Re-entrant between the holder's calls, not from inside its steps (hooks)."""
        return self._lock.call(hold=True)

    def capture(self) -> Pipeline:
        """Capture the step at the next call (kept for code written for ``cuda_graph``):
        steps are captured by default; this turns capture on for an env built with
        ``capture=False``. Returns ``env.pipeline``."""
        self.pipeline.capture_enabled = self.reset_pipeline.capture_enabled = True
        self._stages.changed()
        return self.pipeline

    # ------------------------------------------------------------------ extensions
    def randomize(self, *terms: Term) -> Callable[[], None]:
        """Add randomization terms (``gp.Uniform``, ``gp.Gaussian``, ...); returns a
        function removing them. See ``env.randomization`` for the rest of the API. Refused
        from inside a step (by ``randomization.add``)."""
        return self.randomization.add(*terms)

    @property
    def outputs(self) -> TensorDict:
        """The TensorDict ``step`` returns (batch ``[num_envs]``, the env's own buffers,
        see ``step``), readable at any time, e.g. by a stage added with ``add_stage``."""
        return self._td

    @property
    def hook_outputs(self) -> TensorDict:
        """The locked TensorDict hooks receive (batch ``[num_envs]``): the step's outputs
        and ``"action"``, the env's own buffers."""
        return self._stages.hook_outputs

    def before_step(self, fn: Hook, *, kind: str = "python") -> Callable[[], None]:
        """Call ``fn(env, td)`` at the start of every ``step``, after the action is loaded
        and before step-time randomization. ``td`` (batch ``[num_envs]``, on the device)
        holds ``"action"`` (writable in place, e.g. ``td["action"].copy_(a)``: that changes
        the action taken) and the previous step's outputs; the TensorDict is locked, so
        assigning a key raises.

        ``kind``: ``"python"`` (default) runs ``fn`` at every step; ``"torch"`` or ``"warp"``
        declares that ``fn`` only launches device work (``docs/pipeline.md``), recorded once
        into the step's graphs. Returns a function removing the hook. Refused from inside a
        step."""
        return self._stages.add_hook(self._stages.before, fn, kind)

    def after_step(self, fn: Hook, *, kind: str = "python") -> Callable[[], None]:
        """Call ``fn(env, td)`` after the env kernel and truncation, before curricula,
        reset-time randomization and auto-reset: ``td`` holds this step's ``"reward"``,
        ``"terminated"``, ``"truncated"``, ``"done"``, ``"episode_return"``, ...,
        ``"observation"`` (pre-reset here) and ``"action"``; writes in place (e.g. reward
        shaping, ``td["reward"].mul_(0.1)``) are seen by the caller. ``td`` (locked) and
        ``kind`` as in :meth:`before_step`. Returns a function removing the hook."""
        return self._stages.add_hook(self._stages.after, fn, kind)

    @property
    def curricula(self) -> tuple:
        """The curricula added with :meth:`add_curriculum`, in order."""
        return tuple(self._stages.curricula)

    def add_curriculum(self, curriculum) -> Callable[[], None]:
        """Bind a ``gp.Curriculum`` to this env; it updates at every step for the done envs,
        before reset-time randomization. Returns a function removing it."""
        return self._stages.add_curriculum(curriculum, self._syncs.schedule_of)

    def add_stage(self, stage: Stage, first: bool = False) -> Callable[[], None]:
        """Append ``stage`` to every step, after the auto-reset (transforms use this), or
        with ``first=True`` put it before every other stage of the step (where an adapter
        turns a library's actions into ``context.action``); returns a function removing
        it. The capture is redone. Refused from inside a step."""
        if not isinstance(stage, Stage):
            raise TypeError(f"add_stage: expected a gp.Stage, got {type(stage).__name__}")
        where = self._stages.first if first else self._stages.extra
        return self._stages.add(where, stage, f"stage {stage.name!r}")

    # ------------------------------------------------------------------ distributed
    def sync_every(
        self, every: int, *targets: Syncable, group: object = None, overlap: bool = True
    ) -> Callable[[], None]:
        """Sync ``targets`` (``gp.ObsNorm``, ``gp.RewardNorm``, ``gp.Curriculum(...,
        sync=True)``) over the ``torch.distributed`` ranks after every ``every``-th
        ``step``, all in one collective: a ``gp.SyncSchedule`` (its docstring says what
        ``group`` and ``overlap`` do). Every rank must make the same calls. Returns a
        function removing the schedule (after settling its exchange in flight)."""
        return self._syncs.add(every, targets, group, overlap)

    @property
    def sync_schedules(self) -> tuple[SyncSchedule, ...]:
        """The schedules registered by :meth:`sync_every`, in order (their ``syncs``,
        ``host_seconds`` and ``wait_seconds`` say what syncing cost)."""
        return tuple(self._syncs.schedules)

    def sync_now(self) -> None:
        """Settle every schedule's exchange in flight and sync all their targets now
        (blocking, collective: every rank calls it). Afterwards every rank holds the same
        statistics: call it before reading or saving global statistics at the end of a
        run."""
        self._syncs.sync()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """Everything needed to continue bit for bit (checked on load as
        ``gpuparam._checkpoint`` says): seed, parameters (nominal and effective), the env's
        state, counters and output buffers, randomization and curricula. Tensors are
        clones; synchronizes. In a sharded run each rank saves its own envs; normalization
        statistics are saved by their modules.

        Refused (``RuntimeError``) from inside a step (a hook or stage: the step is half
        done, e.g. the global step of schedules not yet advanced, so the state would not
        continue as the run does) and while another thread's call on the env runs, as
        ``load_state_dict`` is; ``save(path)`` goes through here."""
        return self._checkpoint.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()`` of an env of the same kind and size holding the same
        randomization terms and curricula (add them first), and the same global envs
        (``env_offset``). Everything is validated first; a rejected load raises
        ``ValueError`` and changes nothing. Synchronizes. Refused (``RuntimeError``,
        nothing changed) from inside a step and while another thread's call on the env
        runs, as ``step`` and ``reset`` are."""
        self._checkpoint.load_state_dict(state)

    def check_state_dict(self, state: dict) -> None:
        """Raise ``ValueError`` unless ``load_state_dict(state)`` would load it (the same
        checks; writes nothing). Synchronizes."""
        self._checkpoint.check(state)

    def device_bytes(self) -> dict:
        """Device memory held: ``{"bytes_by_device": {device: bytes}, "bytes_by_attribute":
        {attribute: bytes}}``, every torch tensor and Warp array reachable from this object
        counted once. Host-side accounting, not for the step path."""
        return device_bytes(self)

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"{type(self).__name__} cannot be pickled (it holds Warp kernels and device "
            "buffers); save it with env.save(path) (env.state_dict() in memory) and restore "
            "it with env.load(path) (env.load_state_dict(state)) into an env built by "
            "gp.make with the same arguments, terms and curricula"
        )

    def on_params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Recompute what the env derives from parameters, for the envs in ``mask`` (bool
        tensor ``[num_envs]`` on the device, or None for all). Called after every write
        (``params.set``, randomization, curricula, checkpoints) that touches one of
        ``recompute_on``, and once at construction. Subclasses override it; it must only
        launch device work (masked writes, no host sync). The backend's
        ``params_changed`` is called with it."""

    def _params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        if any(n in self._recompute for n in names):
            self.on_params_changed(names, mask)
            self.backend.params_changed(names, mask)
            if self.backend.defers_writes and not capturing(self.device):
                # applied now; a captured write waits for the step's "model_writes" stage
                in_step = self.pipeline.running or self.reset_pipeline.running
                self.backend.commit_writes(None, gated=in_step)

    def _load_action(self, action: torch.Tensor) -> None:
        buf = self.context.action
        if not (
            type(action) is torch.Tensor and action.shape == buf.shape
            and action.dtype == buf.dtype and action.device == buf.device
            and not self.validate_actions and not action.requires_grad
        ):  # the common case, checked in one pass; else every check, one by one
            check_action(action, self.action_spec, self.num_envs, self.device,
                         self.validate_actions)
            action = action.detach()
        buf.copy_(action)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, {self.device})"

