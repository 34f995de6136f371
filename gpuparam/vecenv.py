"""The env runtime: static device buffers, one fused step kernel and one masked reset kernel."""

from __future__ import annotations

from collections.abc import Callable

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam._checkpoint import check_env_state
from gpuparam._checks import canonical_device, check_mask, check_max_episode_steps
from gpuparam._device import record, resolve_device, to_wp
from gpuparam.graph import StepGraph
from gpuparam.params import ParamTable
from gpuparam.randomization.manager import Randomization
from gpuparam.randomization.terms import Term
from gpuparam.spec import BoxSpec, DiscreteSpec, ParamSpec

Hook = Callable[["VecEnv", TensorDict], None]


class VecEnv:
    """A batch of ``num_envs`` envs of one kind, stepped together on one device.

    Subclasses declare the env (``name``, ``param_specs``, ``observation_spec``,
    ``action_spec``, ``state_dtype``/``obs_dtype`` as Warp vector types,
    ``max_episode_steps``) and its two kernels: ``step_kernel(*params, action,
    max_episode_steps, state, step_count, running_return, obs_out, final_obs_out,
    reward_out, terminated_out, truncated_out, done_out, episode_return_out,
    episode_length_out)`` and ``reset_kernel(mask, seed, episode_count, state, step_count,
    running_return, obs_out)``.

    Optional class attributes: ``kernel_params`` (the parameters ``step_kernel`` takes, in
    order; default all of ``param_specs``, which must then be scalars), ``time_step_param``
    (the parameter holding the time step, used by ``gp.Interval``) and ``recompute_on``
    (parameter names whose change calls ``on_params_changed``).

    Every buffer is allocated once, here. ``step`` and ``reset`` return a ``TensorDict``
    (batch ``[num_envs]``) over those buffers: its tensors are overwritten by the next call,
    so ``clone()`` what you keep.

    One step runs: ``before_step`` hooks, step-class randomization, the env kernel (with
    truncation), ``after_step`` hooks, curricula and reset-class randomization for the done
    envs, the auto-reset kernel.

    Args:
        num_envs: N, the number of envs.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:i"``, or ``None`` for CUDA when present.
        seed: key of every random number the env draws (with env index and counters).
        max_episode_steps: truncation limit; default the Gymnasium registration's.
        cuda_graph: on CUDA, capture the whole step in one CUDA graph after two warm-up
            steps and replay it (see ``capture``). On CPU: one log line, eager stepping.
        **param_overrides: initial values for parameters, e.g. ``length=0.8`` (validated).
    """

    name: str
    param_specs: tuple[ParamSpec, ...]
    observation_spec: BoxSpec
    action_spec: BoxSpec | DiscreteSpec
    state_dtype: type
    obs_dtype: type
    max_episode_steps: int
    step_kernel: wp.Kernel
    reset_kernel: wp.Kernel
    kernel_params: tuple[str, ...] | None = None
    time_step_param: str | None = None
    recompute_on: tuple[str, ...] = ()

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device | None = None,
        seed: int = 0,
        max_episode_steps: int | None = None,
        cuda_graph: bool = False,
        **param_overrides: object,
    ):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs: expected a positive int, got {num_envs!r}")
        self.num_envs = num_envs
        self.device = resolve_device(canonical_device(device))
        if max_episode_steps is not None:
            self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**31) <= seed < 2**31:
            raise ValueError(f"seed: expected an int32 value, got {seed!r}")
        self.params = ParamTable(self.param_specs, num_envs, self.device)
        if param_overrides:
            self.params.set(param_overrides)
        self._allocate()
        self._seed = torch.tensor([0], dtype=torch.int32, device=self.device)
        self._before_step: list[Hook] = []
        self._after_step: list[Hook] = []
        self._curricula: list = []
        self.randomization = Randomization(self)
        if self.recompute_on:
            unknown = [n for n in self.recompute_on if n not in self.params]
            if unknown:
                raise ValueError(f"{type(self).__name__}.recompute_on: unknown {unknown}")
            self.params.on_change(self._params_changed)
            self.on_params_changed(self.params.names, None)
        self._cmd_step = record(self.step_kernel, num_envs, self._step_inputs(), self.device)
        self._cmd_autoreset = record(
            self.reset_kernel, num_envs, self._reset_inputs(self._bufs["done"]), self.device
        )
        self._cmd_reset = record(
            self.reset_kernel, num_envs, self._reset_inputs(self._reset_mask), self.device
        )
        self.reset(seed=seed)
        self._graph: StepGraph | None = None
        if cuda_graph:
            self.capture()

    # ------------------------------------------------------------------ buffers
    def _allocate(self) -> None:
        n, dev = self.num_envs, self.device
        obs_shape = self.observation_spec.shape
        f32 = dict(dtype=torch.float32, device=dev)
        i32 = dict(dtype=torch.int32, device=dev)
        b = dict(dtype=torch.bool, device=dev)
        self._state = torch.zeros(n, self.state_dtype._length_, **f32)
        self._step_count = torch.zeros(n, **i32)
        self._episode_count = torch.zeros(n, **i32)
        self._running_return = torch.zeros(n, **f32)
        # done and reset masks live in storage padded to 8 bytes, read 8 envs per int64 word
        # by the randomization kernels
        pad = -(-n // 8) * 8
        self._done_store = torch.zeros(pad, **b)
        self._reset_store = torch.zeros(pad, **b)
        self._done_words = self._done_store.view(torch.int64)
        self._reset_words = self._reset_store.view(torch.int64)
        self._reset_mask = self._reset_store[:n]
        act = self.action_spec
        self._action = torch.zeros(n, *act.shape, dtype=act.dtype, device=dev)
        self._bufs = {
            "observation": torch.zeros(n, *obs_shape, **f32),
            "final_observation": torch.zeros(n, *obs_shape, **f32),
            "reward": torch.zeros(n, **f32),
            "terminated": torch.zeros(n, **b),
            "truncated": torch.zeros(n, **b),
            "done": self._done_store[:n],
            "episode_return": torch.zeros(n, **f32),
            "episode_length": torch.zeros(n, **i32),
        }
        self._td = TensorDict(self._bufs, batch_size=[n], device=dev)
        self._reset_td = TensorDict(
            {"observation": self._bufs["observation"]}, batch_size=[n], device=dev
        )
        self._hook_td = TensorDict(
            {**self._bufs, "action": self._action}, batch_size=[n], device=dev
        )

    def _step_inputs(self) -> list:
        p = self.params
        names = self.kernel_params or tuple(s.name for s in self.param_specs)
        for name in names:
            if p.spec[name].shape != ():
                raise ValueError(
                    f"{type(self).__name__}: kernel parameter {name!r} is not a scalar; "
                    "list the kernel's parameters in kernel_params"
                )
        params = [to_wp(p.effective_table[p.columns(name)[0]]) for name in names]
        bufs = self._bufs
        return [
            *params,
            to_wp(self._action.reshape(self.num_envs)),
            self.max_episode_steps,
            to_wp(self._state, dtype=self.state_dtype),
            to_wp(self._step_count),
            to_wp(self._running_return),
            to_wp(bufs["observation"], dtype=self.obs_dtype),
            to_wp(bufs["final_observation"], dtype=self.obs_dtype),
            *(to_wp(bufs[k]) for k in ("reward", "terminated", "truncated", "done")),
            to_wp(bufs["episode_return"]),
            to_wp(bufs["episode_length"]),
        ]

    def _reset_inputs(self, mask: torch.Tensor) -> list:
        return [
            to_wp(mask),
            to_wp(self._seed),
            to_wp(self._episode_count),
            to_wp(self._state, dtype=self.state_dtype),
            to_wp(self._step_count),
            to_wp(self._running_return),
            to_wp(self._bufs["observation"], dtype=self.obs_dtype),
        ]

    # ------------------------------------------------------------------ API
    @property
    def state(self) -> torch.Tensor:
        """Physical state, float32 ``[num_envs, state_size]`` on the env's device.

        The env's own buffer: writing into it (e.g. ``env.state[mask] = s``) sets the state
        the next step starts from; the observation buffer is not recomputed until then.
        """
        return self._state

    @property
    def episode_length(self) -> torch.Tensor:
        """Steps taken in each env's current episode, int32 ``[num_envs]`` on the env's
        device (0 right after a reset). The env's own counter: truncation happens when it
        reaches ``max_episode_steps``. Assign to it (``env.episode_length = t``, a tensor
        ``[num_envs]`` or a scalar) to start episodes at other lengths, as rsl_rl's
        ``init_at_random_ep_len`` does."""
        return self._step_count

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
        self._step_count.copy_(torch.as_tensor(value, device=self.device).clamp(0, 2**31 - 1))

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
        check_mask(mask, self.num_envs, self.device)
        if seed is not None:
            if not isinstance(seed, int) or not -(2**31) <= seed < 2**31:
                raise ValueError(f"seed: expected an int32 value, got {seed!r}")
            self._seed_value = seed
            self._seed.fill_(seed)
            self._episode_count.zero_()
            self.randomization._reseed()
        if mask is None:
            self._reset_mask.fill_(True)
        else:
            self._reset_mask.copy_(mask)
        stream = self._stream()
        if self.randomization.reset_active:
            self.randomization._launch_reset("reset", stream)
        self._cmd_reset.launch(stream)
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
        self._load_action(action)
        if self._graph is not None:
            return self._graph()
        return self._step_body()

    def _step_body(self) -> TensorDict:
        """One step from the action buffer: device work only, so it can be captured."""
        stream = self._stream()
        for fn in self._before_step:
            fn(self, self._hook_td)
        rz = self.randomization
        if rz.step_active:
            rz._launch_step(stream)
        self._cmd_step.launch(stream)
        for fn in self._after_step:
            fn(self, self._hook_td)
        for cur in self._curricula:
            cur._update(stream)
        if rz.reset_active:
            rz._launch_reset("done", stream)
        rz._tick()
        self._cmd_autoreset.launch(stream)
        return self._td

    def capture(self) -> StepGraph:
        """Step through one CUDA graph from now on (``cuda_graph=True`` does this at build).

        After two eager warm-up steps (which load every Warp module), the next ``step``
        captures hooks, randomization, the env kernel, curricula and auto-reset into one
        graph on a dedicated stream shared by Warp and torch; later steps copy the action
        into the static action buffer and replay it. Masked parameter writes between steps
        act on the same static tables, so they take effect in the replay. Adding or removing
        randomization terms, hooks or curricula recaptures. On CPU steps stay eager and one
        log line says so.
        """
        if self._graph is None:
            self._graph = StepGraph(self._step_body, self.device)
            self.randomization.on_rebuild(self._structure_changed)
            self._structure_changed()
        return self._graph

    def _structure_changed(self) -> None:
        """The step's work changed: capture again; the schedule clock must tick inside."""
        if self._graph is None:
            return
        self._graph.invalidate()
        rz = self.randomization
        rz._flush_pending()
        rz._clock_on = True  # a host-side step count would not advance in a replay

    # ------------------------------------------------------------------ extensions
    def randomize(self, *terms: Term) -> Callable[[], None]:
        """Add randomization terms (``gp.Uniform``, ``gp.Gaussian``, ...); returns a
        function removing them. See ``env.randomization`` for the rest of the API."""
        return self.randomization.add(*terms)

    def before_step(self, fn: Hook) -> Callable[[], None]:
        """Call ``fn(env, td)`` at the start of every ``step``, after the action is loaded
        and before step-time randomization. ``td`` (batch ``[num_envs]``, on the device)
        holds ``"action"`` (writable: changing it changes the action taken) and the
        previous step's outputs. ``fn`` must only launch device work (no host sync) to keep
        the step capturable. Returns a function removing the hook."""
        return self._add_hook(self._before_step, fn)

    def after_step(self, fn: Hook) -> Callable[[], None]:
        """Call ``fn(env, td)`` after the env kernel and truncation, before curricula,
        reset-time randomization and auto-reset: ``td`` holds this step's ``"reward"``,
        ``"terminated"``, ``"truncated"``, ``"done"``, ``"episode_return"``, ...,
        ``"observation"`` (pre-reset here) and ``"action"``; writes (e.g. reward shaping)
        are seen by the caller. Returns a function removing the hook."""
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
        curriculum._bind(self)
        self._curricula.append(curriculum)
        self._structure_changed()

        def remove() -> None:
            if curriculum in self._curricula:
                self._curricula.remove(curriculum)
                curriculum._unbind()
                self._structure_changed()

        return remove

    def on_params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Recompute what the env derives from parameters, for the envs in ``mask`` (bool
        tensor ``[num_envs]`` on the device, or None for all). Called after every write
        (``params.set``, randomization, curricula, checkpoints) that touches one of
        ``recompute_on``, and once at construction. Subclasses override it; it must only
        launch device work (masked writes, no host sync)."""

    def _params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        if any(n in self.recompute_on for n in names):
            self.on_params_changed(names, mask)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """Everything needed to continue bit for bit: seed, parameters (nominal and
        effective), the env's state and counters and output buffers, randomization
        (counters, clocks, ranges, global step) and curricula (levels, statistics).
        Tensors are clones; synchronizes."""
        tensors = {
            "state": self._state, "step_count": self._step_count,
            "episode_count": self._episode_count, "running_return": self._running_return,
            "action": self._action, **self._bufs,
        }
        return {
            "env": self.name,
            "num_envs": self.num_envs,
            "seed": self._seed_value,
            "params": self.params.state_dict(),
            "tensors": {k: v.clone() for k, v in tensors.items()},
            "randomization": self.randomization.state_dict(),
            "curricula": [c.state_dict() for c in self._curricula],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()`` of an env of the same kind and size holding the same
        randomization terms and curricula (add them first).

        Everything is validated first (``gpuparam._checkpoint``: structure, shapes, dtypes,
        finite in-range parameter tables, counters, curriculum levels); a rejected load
        raises ``ValueError`` and changes nothing. Synchronizes."""
        check_env_state(
            state, self.state_dict(), self.params, [c.num_levels for c in self._curricula]
        )
        self.randomization.check_state(state["randomization"])  # (their own checks too)
        for cur, s in zip(self._curricula, state["curricula"], strict=True):
            cur.check_state(s)
        tensors = state["tensors"]
        mine = {
            "state": self._state, "step_count": self._step_count,
            "episode_count": self._episode_count, "running_return": self._running_return,
            "action": self._action, **self._bufs,
        }
        self._seed_value = int(state["seed"])
        self._seed.fill_(self._seed_value)
        self.params.load_state_dict(state["params"])
        for k, t in mine.items():
            t.copy_(tensors[k])
        self.randomization.load_state_dict(state["randomization"])
        for cur, s in zip(self._curricula, state["curricula"], strict=True):
            cur.load_state_dict(s)

    def _stream(self):
        return None if self.device.type == "cpu" else wp.stream_from_torch(self.device)

    def _load_action(self, action: torch.Tensor) -> None:
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
        self._action.copy_(action.detach())  # never join the caller's autograd graph

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"{type(self).__name__} cannot be pickled (it holds Warp kernels and device "
            "buffers); save env.state_dict() with torch.save, and restore it with "
            "env.load_state_dict(torch.load(path)) into an env built by gp.make with the same "
            "arguments, terms and curricula"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, {self.device})"
