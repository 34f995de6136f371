"""The env runtime: static device buffers, one fused step kernel and one masked reset kernel."""

from __future__ import annotations

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam._checks import check_mask
from gpuparam._device import launch, resolve_device, to_wp
from gpuparam.params import ParamTable
from gpuparam.spec import BoxSpec, DiscreteSpec, ParamSpec


class VecEnv:
    """A batch of ``num_envs`` envs of one kind, stepped together on one device.

    Subclasses declare the env (``name``, ``param_specs``, ``observation_spec``,
    ``action_spec``, ``state_dtype``/``obs_dtype`` as Warp vector types,
    ``max_episode_steps``) and its two kernels: ``step_kernel(*params, action,
    max_episode_steps, state, step_count, running_return, obs_out, final_obs_out,
    reward_out, terminated_out, truncated_out, done_out, episode_return_out,
    episode_length_out)`` and ``reset_kernel(mask, seed, episode_count, state, step_count,
    running_return, obs_out)``.

    Every buffer is allocated once, here. ``step`` and ``reset`` return a ``TensorDict``
    (batch ``[num_envs]``) over those buffers: its tensors are overwritten by the next call,
    so ``clone()`` what you keep.

    Args:
        num_envs: N, the number of envs.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:i"``, or ``None`` for CUDA when present.
        seed: key of every random number the env draws (with env index and counters).
        max_episode_steps: truncation limit; default the Gymnasium registration's.
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

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device | None = None,
        seed: int = 0,
        max_episode_steps: int | None = None,
        **param_overrides: object,
    ):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs: expected a positive int, got {num_envs!r}")
        self.num_envs = num_envs
        self.device = resolve_device(device)
        if max_episode_steps is not None:
            if not isinstance(max_episode_steps, int) or max_episode_steps < 1:
                raise ValueError(
                    f"max_episode_steps: expected a positive int, got {max_episode_steps!r}"
                )
            self.max_episode_steps = max_episode_steps
        self.params = ParamTable(self.param_specs, num_envs, self.device)
        if param_overrides:
            self.params.set(param_overrides)
        self._allocate()
        self._seed = torch.tensor([0], dtype=torch.int32, device=self.device)
        self._cmd_step = launch(self.step_kernel, num_envs, self._step_inputs(), self.device, True)
        self._cmd_autoreset = launch(
            self.reset_kernel, num_envs, self._reset_inputs(self._bufs["done"]), self.device, True
        )
        self._cmd_reset = launch(
            self.reset_kernel, num_envs, self._reset_inputs(self._reset_mask), self.device, True
        )
        self.reset(seed=seed)

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
        self._reset_mask = torch.zeros(n, **b)
        act = self.action_spec
        self._action = torch.zeros(n, *act.shape, dtype=act.dtype, device=dev)
        self._bufs = {
            "observation": torch.zeros(n, *obs_shape, **f32),
            "final_observation": torch.zeros(n, *obs_shape, **f32),
            "reward": torch.zeros(n, **f32),
            "terminated": torch.zeros(n, **b),
            "truncated": torch.zeros(n, **b),
            "done": torch.zeros(n, **b),
            "episode_return": torch.zeros(n, **f32),
            "episode_length": torch.zeros(n, **i32),
        }
        self._td = TensorDict(self._bufs, batch_size=[n], device=dev)
        self._reset_td = TensorDict(
            {"observation": self._bufs["observation"]}, batch_size=[n], device=dev
        )

    def _step_inputs(self) -> list:
        p = self.params
        params = [to_wp(p.effective_table[p.columns(s.name)[0]]) for s in self.param_specs]
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
    def seed(self) -> int:
        """The seed of every random draw (with env index and per-env counters)."""
        return self._seed_value

    def reset(self, mask: torch.Tensor | None = None, seed: int | None = None) -> TensorDict:
        """Start new episodes for the masked envs.

        Args:
            mask: bool tensor ``[num_envs]`` on the env's device; ``None`` resets all envs.
            seed: when given, reseed: every env's episode counter restarts at 0, so the
                draws repeat those of a fresh env built with this seed.

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
        if mask is None:
            self._reset_mask.fill_(True)
        else:
            self._reset_mask.copy_(mask)
        self._cmd_reset.launch(self._stream())
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
        stream = self._stream()
        self._cmd_step.launch(stream)
        self._cmd_autoreset.launch(stream)
        return self._td

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
        self._action.copy_(action)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, {self.device})"
