"""The env runtime: static device buffers, a physics backend and a captured step pipeline."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam._checks import canonical_device, check_mask, check_max_episode_steps
from gpuparam._device import resolve_device
from gpuparam._env_stages import EnvStages
from gpuparam._env_state import EnvState
from gpuparam.backend import Backend, KernelBackend, Task
from gpuparam.distributed import Syncable, SyncSchedule
from gpuparam.params import ParamTable
from gpuparam.pipeline import Pipeline, Stage, StepContext
from gpuparam.randomization.manager import Randomization
from gpuparam.randomization.terms import Term
from gpuparam.spec import BoxSpec, DiscreteSpec, ParamSpec

Hook = Callable[["VecEnv", TensorDict], None]


class VecEnv(EnvStages, EnvState):
    """A batch of ``num_envs`` envs of one kind, stepped together on one device.

    An env is a physics :class:`~gpuparam.Backend` plus an optional
    :class:`~gpuparam.Task` (see ``gpuparam.backend``), run by a step pipeline
    (``env.pipeline``, see ``gpuparam.pipeline``) of stages: ``before_step`` hooks,
    step-time randomization, physics (``backend.step``, ``task.compute``), episode
    bookkeeping (step counters, truncation, done, returns), ``after_step`` hooks, curricula,
    reset-time randomization for the done envs, the global clock, the auto-reset
    (``backend.reset(done)``, ``task.observe``), then stages added with ``add_stage``
    (transforms). The pipeline is captured after one eager step and replayed: one CUDA
    graph on CUDA, Warp CPU graphs (with torch-op stages eager between them) on CPU.

    Subclasses declare ``name``, ``param_specs``, ``observation_spec``, ``action_spec``,
    ``max_episode_steps`` and either override ``make_backend`` (and ``make_task``) or, for
    a :class:`~gpuparam.backend.KernelBackend`, set ``step_kernel``, ``reset_kernel``,
    ``state_dtype``, ``obs_dtype`` and optionally ``kernel_params`` (the parameters the
    step kernel takes, in order; default all). Optional: ``time_step_param`` (the
    parameter holding the time step, used by ``gp.Interval``) and ``recompute_on``
    (parameter names whose change calls ``on_params_changed``).

    Every buffer is allocated once, here. ``step`` and ``reset`` return a ``TensorDict``
    (batch ``[num_envs]``) over those buffers: its tensors are overwritten by the next call,
    so ``clone()`` what you keep.

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
    listed_reset: bool = False  # reset_kernel has KernelBackend's listed signature

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
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs: expected a positive int, got {num_envs!r}")
        if not isinstance(env_offset, int) or isinstance(env_offset, bool) or env_offset < 0:
            raise ValueError(f"env_offset: expected an int >= 0, got {env_offset!r}")
        if env_offset + num_envs > 2**31:
            raise ValueError(
                f"env_offset + num_envs: expected at most 2**31 global env ids, "
                f"got {env_offset} + {num_envs}"
            )
        self.num_envs = num_envs
        self.env_offset = env_offset
        self.device = resolve_device(canonical_device(device))
        if max_episode_steps is not None:
            self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**31) <= seed < 2**31:
            raise ValueError(f"seed: expected an int32 value, got {seed!r}")
        if cuda_graph is not None:
            capture = bool(cuda_graph)
        self.validate_actions = bool(validate_actions)
        self._busy = threading.Lock()
        self._holder: int | None = None  # the thread holding the env through hold()
        self._in_call = False  # a step or reset of the holding thread is running
        self.params = ParamTable(self.param_specs, num_envs, self.device)
        if param_overrides:
            self.params.set(param_overrides)
        self.context = self._make_context()
        self.invalid_actions = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._seed_value = seed
        self.stepping = False  # True while step() runs its pipeline
        self._before_step: list[Hook] = []
        self._after_step: list[Hook] = []
        self._curricula: list = []
        self._extra_stages: list[Stage] = []
        self._first_stages: list[Stage] = []
        self._syncs: list[SyncSchedule] = []
        self.backend = self.make_backend()
        self.backend.bind(self, self.context)
        self.task = self.make_task()
        if self.task is not None:
            self.task.bind(self, self.context, self.backend)
        self.randomization = Randomization(self)
        key = self._listener_key
        self.pipeline = Pipeline(self.context, self._step_stages, capture=capture, key=key)
        self.reset_pipeline = Pipeline(self.context, self._reset_stages, capture=capture, key=key)
        self.randomization.on_rebuild(self._structure_changed)
        recompute = tuple(self.recompute_on) + tuple(self.backend.recompute_on)
        if recompute:
            unknown = [n for n in recompute if n not in self.params]
            if unknown:
                raise ValueError(f"{type(self).__name__}.recompute_on: unknown {unknown}")
            self._recompute = recompute
            # a subclass's on_params_changed may run torch ops: replayed on CPU only as Warp
            warp_only = self.backend.warp_only and (
                type(self).on_params_changed is VecEnv.on_params_changed
            )
            self.params.on_change(self._params_changed, warp_only=warp_only)
            self._params_changed(self.params.names, None)
        self.reset(seed=seed)

    # ------------------------------------------------------------------ buffers
    def _make_context(self) -> StepContext:
        n, dev = self.num_envs, self.device
        obs_shape = self.observation_spec.shape
        f32 = dict(dtype=torch.float32, device=dev)
        i32 = dict(dtype=torch.int32, device=dev)
        b = dict(dtype=torch.bool, device=dev)
        # done and reset masks live in storage padded to 8 bytes, read 8 envs per int64 word
        # by the randomization kernels
        pad = -(-n // 8) * 8
        done_store = torch.zeros(pad, **b)
        reset_store = torch.zeros(pad, **b)
        act = self.action_spec
        outputs = {
            "observation": torch.zeros(n, *obs_shape, **f32),
            "final_observation": torch.zeros(n, *obs_shape, **f32),
            "reward": torch.zeros(n, **f32),
            "terminated": torch.zeros(n, **b),
            "truncated": torch.zeros(n, **b),
            "done": done_store[:n],
            "episode_return": torch.zeros(n, **f32),
            "episode_length": torch.zeros(n, **i32),
        }
        ctx = StepContext(
            num_envs=n, device=dev, env_offset=self.env_offset,
            seed=torch.zeros(1, **i32),
            action=torch.zeros(n, *act.shape, dtype=act.dtype, device=dev),
            outputs=outputs, done=outputs["done"], done_words=done_store.view(torch.int64),
            reset_mask=reset_store[:n], reset_words=reset_store.view(torch.int64),
            step_count=torch.zeros(n, **i32), episode_count=torch.zeros(n, **i32),
            running_return=torch.zeros(n, **f32),
            clock=torch.zeros(1, dtype=torch.int64, device=dev),
        )
        # locked: these hold the env's own buffers, so ``td[key] = x`` would detach the key
        # from them for good (later steps would hand back the caller's tensor): it raises,
        # and writes go in place (``td[key].copy_(x)``, ``td[key] *= 0.1``)
        self._td = TensorDict(outputs, batch_size=[n], device=dev).lock_()
        self._reset_td = TensorDict(
            {"observation": outputs["observation"]}, batch_size=[n], device=dev
        ).lock_()
        self._hook_td = TensorDict(
            {**outputs, "action": ctx.action}, batch_size=[n], device=dev
        ).lock_()
        return ctx

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
            self.step_kernel, self.reset_kernel, self.state_dtype, self.obs_dtype, names,
            listed_reset=self.listed_reset,
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
        if isinstance(value, torch.Tensor):
            if tuple(value.shape) not in ((), (self.num_envs,)):
                raise ValueError(
                    f"episode_length: expected shape () or ({self.num_envs},), "
                    f"got {tuple(value.shape)}"
                )
            if value.is_floating_point() or value.dtype == torch.bool:
                raise ValueError(f"episode_length: expected an integer dtype, got {value.dtype}")
            if value.device != self.device:
                raise ValueError(
                    f"episode_length: expected device {self.device}, got {value.device}"
                )
        elif not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"episode_length: expected a tensor or an int, got {value!r}")
        value = torch.as_tensor(value, device=self.device).clamp(0, 2**31 - 1)
        self.context.step_count.copy_(value)

    @property
    def seed(self) -> int:
        """The seed of every random draw (with env index and per-env counters)."""
        return self._seed_value

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
            (new initial observations for masked envs, unchanged for the others).
        """
        with self._exclusive():
            return self._reset(mask, seed)

    def _reset(self, mask: torch.Tensor | None, seed: int | None) -> TensorDict:
        check_mask(mask, self.num_envs, self.device)
        if seed is not None:
            if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**31) <= seed < 2**31:
                raise ValueError(f"seed: expected an int32 value, got {seed!r}")
        ctx = self.context
        if seed is not None:
            self._seed_value = seed
            ctx.seed.fill_(seed)
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
        """
        took = self._enter()
        try:
            self._load_action(action)
            self.stepping = True
            self.pipeline()
        finally:
            self.stepping = False
            self._leave(took)
        for s in self._syncs:  # host-launched collectives, outside the captured step
            s.step()
        return self._td

    @contextlib.contextmanager
    def _exclusive(self):
        """One call at a time: a second thread stepping or resetting the same env while a
        call runs would interleave writes into the same buffers."""
        took = self._enter()
        try:
            yield
        finally:
            self._leave(took)

    def _enter(self) -> bool:
        """Claim the env for one step or reset; ``True`` when this call took the lock
        (``False``: the calling thread holds the env through ``hold()``)."""
        if self._holder == threading.get_ident() and not self._in_call:
            self._in_call = True
            return False
        if not self._busy.acquire(blocking=False):
            self._refuse()
        self._in_call = True
        return True

    def _leave(self, took: bool) -> None:
        self._in_call = False
        if took:
            self._busy.release()

    @contextlib.contextmanager
    def hold(self):
        """Hold this env for the calling thread over a block: ``with env.hold(): ...``.

        Inside the block this thread's ``step`` and ``reset`` calls run as usual, while any
        other call (another thread's, or a hook's inside a running step) raises the
        ``RuntimeError`` of concurrent use. Entering raises that error, before the block
        runs, when a call on the env is running or another thread holds it. For adapters
        that write the env's buffers (action, flags of their stages) before a step: a
        refused call then changes nothing."""
        if not self._busy.acquire(blocking=False):
            self._refuse()
        self._holder = threading.get_ident()
        try:
            yield self
        finally:
            self._holder = None
            self._busy.release()

    def _refuse(self) -> None:
        raise RuntimeError(
            f"{self!r}: step/reset called while another call on this env is running "
            "(two threads using one env, or a hook calling step): an env is not "
            "thread-safe; give each thread its own env or serialize the calls"
        )

    @property
    def outputs(self) -> TensorDict:
        """The TensorDict ``step`` returns (batch ``[num_envs]``, the env's own buffers,
        see ``step``), readable at any time, e.g. by a stage added with ``add_stage``."""
        return self._td

    def capture(self) -> Pipeline:
        """Capture the step at the next call (kept for code written for ``cuda_graph``):
        steps are captured by default; this turns capture on for an env built with
        ``capture=False``. Returns ``env.pipeline``."""
        self.pipeline.capture_enabled = self.reset_pipeline.capture_enabled = True
        self._structure_changed()
        return self.pipeline

    # ------------------------------------------------------------------ extensions
    def randomize(self, *terms: Term) -> Callable[[], None]:
        """Add randomization terms (``gp.Uniform``, ``gp.Gaussian``, ...); returns a
        function removing them. See ``env.randomization`` for the rest of the API."""
        return self.randomization.add(*terms)

    def before_step(self, fn: Hook) -> Callable[[], None]:
        """Call ``fn(env, td)`` at the start of every ``step``, after the action is loaded
        and before step-time randomization. ``td`` (batch ``[num_envs]``, on the device)
        holds ``"action"`` (writable in place, e.g. ``td["action"].copy_(a)``: that changes
        the action taken) and the previous step's outputs; the TensorDict is locked, so
        assigning a key raises. ``fn`` must only launch device work (no host sync) to keep
        the step capturable. Returns a function removing the hook."""
        return self._add_hook(self._before_step, fn)

    def after_step(self, fn: Hook) -> Callable[[], None]:
        """Call ``fn(env, td)`` after the env kernel and truncation, before curricula,
        reset-time randomization and auto-reset: ``td`` holds this step's ``"reward"``,
        ``"terminated"``, ``"truncated"``, ``"done"``, ``"episode_return"``, ...,
        ``"observation"`` (pre-reset here) and ``"action"``; writes in place (e.g. reward
        shaping, ``td["reward"].mul_(0.1)``) are seen by the caller; the TensorDict is
        locked, so assigning a key raises. Returns a function removing the hook."""
        return self._add_hook(self._after_step, fn)

    def _add_hook(self, hooks: list[Hook], fn: Hook) -> Callable[[], None]:
        hooks.append(fn)
        self._structure_changed()

        def remove() -> None:
            hooks.remove(fn)
            self._structure_changed()

        return remove

    def add_curriculum(self, curriculum) -> Callable[[], None]:
        """Bind a ``gp.Curriculum`` to this env; it updates at every step for the done envs,
        before reset-time randomization. Returns a function removing it."""
        curriculum.bind(self)
        self._curricula.append(curriculum)
        self._structure_changed()

        def remove() -> None:
            if curriculum in self._curricula:
                synced = [s for s in self._syncs if any(t is curriculum for t in s.targets)]
                if synced:  # its exchange would be applied to a curriculum bound to nothing
                    raise ValueError(f"remove {curriculum}: {synced[0]!r} syncs it; remove "
                                     "that schedule first (the function sync_every returned)")
                self._curricula.remove(curriculum)
                curriculum.unbind()
                self._structure_changed()

        return remove

    def sync_every(
        self, every: int, *targets: Syncable, group: object = None, overlap: bool = True
    ) -> Callable[[], None]:
        """Sync ``targets`` (``gp.ObsNorm``, ``gp.RewardNorm``, ``gp.Curriculum(...,
        sync=True)``: anything with a collective ``sync(group)``) over the
        ``torch.distributed`` ranks after every ``every``-th ``step``, outside the captured
        step, all in one collective (a ``gp.SyncSchedule``; see ``gpuparam.distributed``).
        With ``overlap=True`` (the default) the exchange packed after step ``j * every`` runs
        in the background during the next ``every`` steps and is applied after step
        ``(j + 1) * every``; with ``False`` it is applied at once (blocking). Every rank must
        make the same calls. Without an initialized process group the targets sync as a
        world of one, on the same schedule. ``group``: a ``torch.distributed`` process
        group, default the world. Returns a function removing the schedule (after settling
        its exchange in flight)."""
        for t in targets:  # one schedule per target: an exchange applied by one schedule
            for other in self._syncs:  # would clear what the other has in flight
                if any(x is t for x in other.targets):
                    raise ValueError(f"sync_every: {type(t).__name__} is already synced by "
                                     f"{other!r}; a target belongs to one schedule")
        sched = SyncSchedule(every, targets, group, overlap)
        self._syncs.append(sched)

        def remove() -> None:
            if sched in self._syncs:
                sched.settle()
                self._syncs.remove(sched)

        return remove

    @property
    def sync_schedules(self) -> tuple[SyncSchedule, ...]:
        """The schedules registered by :meth:`sync_every`, in order (their ``syncs``,
        ``host_seconds`` and ``wait_seconds`` say what syncing cost)."""
        return tuple(self._syncs)

    def sync_now(self) -> None:
        """Settle every schedule's exchange in flight and sync all their targets now
        (blocking, collective: every rank calls it). Afterwards every rank holds the same
        statistics: call it before reading or saving global statistics at the end of a
        run."""
        for s in self._syncs:
            s.sync()

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

    def _load_action(self, action: torch.Tensor) -> None:
        buf = self.context.action
        if (
            type(action) is torch.Tensor and action.shape == buf.shape
            and action.dtype == buf.dtype and action.device == buf.device
            and not self.validate_actions and not action.requires_grad
        ):  # the common case, checked in one pass
            buf.copy_(action)
            return
        spec = self.action_spec
        expected = (self.num_envs, *spec.shape)
        if not isinstance(action, torch.Tensor):
            raise ValueError(f"action: expected a tensor {expected}, got {type(action).__name__}")
        if tuple(action.shape) != expected:
            raise ValueError(f"action: expected shape {expected}, got {tuple(action.shape)}")
        if action.device != self.device:
            raise ValueError(f"action: expected device {self.device}, got {action.device}")
        discrete = isinstance(spec, DiscreteSpec)
        if action.dtype == torch.bool or action.is_floating_point() == discrete:
            kind = "an integer" if discrete else "a floating-point"
            raise ValueError(f"action: expected {kind} dtype, got {action.dtype}")
        if self.validate_actions:  # host check: synchronizes (validate_actions=True only)
            if discrete:
                bad = (action < 0) | (action >= spec.n)
                what = f"outside [0, {spec.n})"
            else:
                bad = torch.isnan(action).reshape(self.num_envs, -1).any(1)
                what = "NaN"
            if bool(bad.any()):  # host-ok: validate_actions=True is the synchronizing mode
                bad_envs = torch.nonzero(bad.reshape(self.num_envs, -1).any(1)).flatten()  # host-ok
                shown = bad_envs[:8].tolist()  # host-ok: validate_actions=True, raising
                more = " ..." if len(bad_envs) > 8 else ""
                raise ValueError(
                    f"action: expected actions in the action space, got {what} actions "
                    f"for envs {shown}{more}"
                )
        self.context.action.copy_(action.detach())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, {self.device})"
