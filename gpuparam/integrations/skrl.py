"""skrl (2.x, torch) over a gpuparam env: ``wrap`` / ``SkrlWrapper`` and ``ObsNormPreprocessor``.

Needs the ``skrl`` extra: ``pip install "gpuparam[skrl]"``.

Three lines to train::

    env = wrap(gp.make("Pendulum-v1", num_envs=1024))
    agent = PPO(models=models, memory=RandomMemory(memory_size=16, num_envs=env.num_envs),
                observation_space=env.observation_space, action_space=env.action_space,
                device=env.device, cfg={"observation_preprocessor": ObsNormPreprocessor,
                "observation_preprocessor_kwargs": {"size": env.observation_space}})
    SequentialTrainer(env=env, agents=agent, cfg={"timesteps": 10_000}).train()
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gpuparam.integrations._extras import require

require("skrl", "skrl", "gpuparam.integrations.skrl")
gym = require("gymnasium", "skrl", "gpuparam.integrations.skrl")

from skrl import config as skrl_config  # noqa: E402
from skrl.envs.wrappers.torch.base import Wrapper  # noqa: E402

from gpuparam.spec import BoxSpec, DiscreteSpec  # noqa: E402
from gpuparam.transforms import ObsNorm  # noqa: E402

__all__ = ["ObsNormPreprocessor", "SkrlWrapper", "wrap"]


def _box(spec: BoxSpec) -> gym.spaces.Box:
    low = np.broadcast_to(np.asarray(spec.low, dtype=np.float32), spec.shape)
    high = np.broadcast_to(np.asarray(spec.high, dtype=np.float32), spec.shape)
    return gym.spaces.Box(low, high, shape=spec.shape, dtype=np.float32)


class SkrlWrapper(Wrapper):
    """skrl's torch ``Wrapper`` over a gpuparam env or ``gp.TransformedEnv``, torch-native.

    Args:
        env: the gpuparam env; its public attributes (``params``, ``randomize``, ...) are
            reachable on the wrapper (skrl's ``Wrapper.__getattr__``).

    Spaces (single-env, Gymnasium): ``observation_space`` a ``Box`` of the observation shape,
    ``action_space`` a ``Box`` or ``Discrete``; ``state_space`` ``None``.

    ``step(actions)``: float ``[N, *action_shape]`` (``Box``) or integer ``[N, 1]`` / ``[N]``
    (``Discrete``, what skrl's categorical models give) on the env's device. Returns
    ``(obs, reward, terminated, truncated, info)``: float32 ``[N, *obs_shape]`` (after the
    env's same-step auto-reset, as skrl's vectorized trainers expect), float32 ``[N, 1]``,
    bool ``[N, 1]``, bool ``[N, 1]``, and ``{}``. Every output is a fresh tensor (skrl adds
    the time-limit bootstrap into the reward in place and keeps the observations), so no
    NumPy round trip and no copy-construct warning happen.

    ``reset()`` resets every env the first time and returns ``(obs, {})``. Later calls
    return the last step's observations without resetting (the envs reset themselves at
    episode ends), as skrl's own wrappers of vectorized envs do: skrl's trainers call
    ``reset()`` again after done steps of single-env runs and at every ``train()`` or
    ``eval()``. ``gp_env.reset()`` resets for real.
    """

    def __init__(self, env):
        super().__init__(env)
        self._n = int(env.num_envs)
        act = env.action_spec
        self._discrete = isinstance(act, DiscreteSpec)
        self._act_shape = tuple(act.shape)
        self._observation_space = _box(env.observation_spec)
        self._action_space = gym.spaces.Discrete(act.n) if self._discrete else _box(act)
        self._last_obs: torch.Tensor | None = None  # None: reset() has not reset yet

    @property
    def observation_space(self) -> gym.Space:
        """Single-env observation space (``Box``)."""
        return self._observation_space

    @property
    def action_space(self) -> gym.Space:
        """Single-env action space (``Box`` or ``Discrete``)."""
        return self._action_space

    @property
    def state_space(self) -> None:
        """No separate state: ``None``."""
        return None

    @property
    def num_envs(self) -> int:
        """N."""
        return self._n

    @property
    def params(self):
        """The wrapped env's ``ParamTable``."""
        return self._env.params

    @property
    def gp_env(self):
        """The wrapped gpuparam env."""
        return self._env

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every env the first time, later return the last observations (see the
        class docstring); returns ``(obs float32 [N, *obs_shape], {})``."""
        if self._last_obs is None:
            self._last_obs = self._env.reset()["observation"].clone()
        return self._last_obs, {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env; see the class docstring."""
        n = self._n
        if isinstance(actions, torch.Tensor):
            if self._discrete and tuple(actions.shape) == (n, 1):
                actions = actions.view(n)
            elif not self._discrete and actions.dim() == 2 and actions.shape[0] == n:
                actions = actions.view(n, *self._act_shape)
        td = self._env.step(actions)
        self._last_obs = td["observation"].clone()
        return (self._last_obs, td["reward"].view(n, 1).clone(),
                td["terminated"].view(n, 1).clone(), td["truncated"].view(n, 1).clone(), {})

    def state(self) -> None:
        """No separate state: ``None``."""
        return None

    def render(self, *args, **kwargs) -> None:
        """Nothing to render."""
        return None

    def close(self) -> None:
        """Nothing to release."""


def wrap(env) -> SkrlWrapper:
    """``SkrlWrapper(env)``: skrl's torch wrapper over a gpuparam env (see the class)."""
    return SkrlWrapper(env)


class ObsNormPreprocessor(nn.Module):
    """``gp.ObsNorm`` as skrl's ``observation_preprocessor`` (or ``state_preprocessor``).

    Args:
        size: the observation size: an int, a shape, or a Gymnasium ``Box`` (what skrl's
            ``RunningStandardScaler`` takes); ignored when ``norm`` is given.
        norm: an ``ObsNorm`` to use (e.g. to share it); default a new one-group
            ``ObsNorm(size, clip=clip, device=device)``.
        clip: output clip, as ``ObsNorm``'s.
        device: where the statistics live; default skrl's default device, as for its
            ``RunningStandardScaler`` (``cuda:0`` when CUDA is available), where skrl's
            agents keep the observations they pass.

    skrl calls ``preprocessor(x)`` when acting (normalize only) and ``preprocessor(x,
    train=True)`` on the first epoch's minibatches (merge them in, then normalize), with
    ``x`` float32 ``[B, *shape]`` of any B. ``inverse=True`` is not supported (observations
    are never mapped back). The norm is a submodule, so skrl's checkpoints hold its
    statistics; ``reset_stats(mask)`` is the norm's.
    """

    def __init__(
        self,
        size: int | tuple[int, ...] | gym.Space | None = None,
        *,
        norm: ObsNorm | None = None,
        clip: float | None = None,
        device: str | torch.device | None = None,
    ):
        super().__init__()
        if norm is None:
            if isinstance(size, gym.Space):
                size = size.shape
            if size is None:
                raise ValueError("ObsNormPreprocessor: expected size or norm, got neither")
            device = skrl_config.torch.parse_device(device)
            norm = ObsNorm(size, clip=clip, device=device)
        elif not isinstance(norm, ObsNorm):
            raise TypeError(
                f"ObsNormPreprocessor: expected a gp.ObsNorm, got {type(norm).__name__}"
            )
        self.norm = norm

    def reset_stats(self, mask: torch.Tensor | None = None, **kw) -> None:
        """``norm.reset_stats(mask, ...)``."""
        self.norm.reset_stats(mask, **kw)

    def forward(
        self, x: torch.Tensor | None, *, train: bool = False, inverse: bool = False,
        no_grad: bool = True,
    ) -> torch.Tensor | None:
        """Normalize ``x`` (float32 ``[B, *shape]`` on the norm's device; ``None`` passes
        through), merging it into the statistics first when ``train``."""
        if x is None:
            return None
        if inverse:
            raise ValueError("ObsNormPreprocessor: inverse=True is not supported")
        return self.norm(x, train=bool(train))
