"""skrl (2.x, torch) over a gpuparam env: ``wrap`` / ``SkrlWrapper``, ``ObsNormPreprocessor``
and the agent mixin ``FinalObservation`` (a tested training example: ``docs/training.md``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from gpuparam.integrations._extras import Adapter, base_env, gym_spaces, held, require

require("skrl", "skrl", "gpuparam.integrations.skrl")
gym = require("gymnasium", "skrl", "gpuparam.integrations.skrl")

from skrl import config as skrl_config  # noqa: E402
from skrl.envs.wrappers.torch.base import Wrapper  # noqa: E402

from gpuparam.spec import DiscreteSpec  # noqa: E402
from gpuparam.transforms import ObsNorm  # noqa: E402

__all__ = ["FinalObservation", "ObsNormPreprocessor", "SkrlWrapper", "wrap"]

PRIVILEGED = "privileged_observation"  # the env output skrl's "state" is


class SkrlWrapper(Adapter, Wrapper):
    """skrl's torch ``Wrapper`` over a gpuparam env or ``gp.TransformedEnv``, torch-native.

    Args:
        env: the gpuparam env; its public attributes (``params``, ``randomize``, ...) are
            reachable on the wrapper (skrl's ``Wrapper.__getattr__``).

    Spaces are single-env Gymnasium ones. ``state_space``: over an env that declares a
    ``"privileged_observation"`` output (the legged tasks: the critic's noise-free state), a
    ``Box`` of its shape, and ``state()`` returns it, float32 ``[N, *state_shape]`` (a fresh
    copy, of the last ``step`` or first ``reset``: after the auto-reset, as the
    observations), for skrl's agents that give their critic ``states`` (e.g. PPO's
    ``value`` model with ``state_preprocessor``); otherwise ``None`` and ``state()``
    returns ``None``.

    Truncated episodes: build the agent with :class:`FinalObservation` (``class
    Agent(FinalObservation, PPO)``). A plain skrl agent bootstraps a truncated episode from
    the next episode's first observation (skrl reads one observation tensor for both, see
    :class:`FinalObservation`), which no wrapper can change.
    """

    def __init__(self, env):
        super().__init__(env)
        self.gp_env = env
        n = int(env.num_envs)
        self._observation_space, self._action_space = gym_spaces(env)
        # each action shape taken (see step) to the one the env takes
        act = env.action_spec
        view, flat = (n, *act.shape), (n, int(np.prod(act.shape, dtype=np.int64)))
        self._shapes = dict.fromkeys([flat, view], view)
        self._want = " or ".join(map(str, self._shapes)) + (
            f" (Discrete({act.n}))" if isinstance(act, DiscreteSpec) else "")
        # the last observations, a buffer of this wrapper's (what later reset() calls copy)
        self._last_obs = torch.zeros(n, *env.observation_spec.shape,
                                     dtype=torch.float32, device=torch.device(env.device))
        self._started = False  # reset() has reset once
        # the critic's state: the env's "privileged_observation" output, if it declares one
        specs = base_env(env).output_specs()
        priv = specs.get(PRIVILEGED)
        self._state_space, self._last_state = None, None
        if priv is not None:
            self._state_space = gym.spaces.Box(-np.inf, np.inf, shape=tuple(priv.shape),
                                               dtype=np.float32)
            self._last_state = torch.zeros(n, *priv.shape, dtype=torch.float32,
                                           device=torch.device(env.device))

    @property
    def state_space(self) -> gym.Space | None:
        """``Box`` of the ``"privileged_observation"`` shape, or ``None`` (see the class
        docstring)."""
        return self._state_space

    @property
    def observation_space(self) -> gym.Space:
        """``Box`` of the observation shape."""
        return self._observation_space

    @property
    def action_space(self) -> gym.Space:
        """``Box`` of the action shape, or ``Discrete(n)``."""
        return self._action_space

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every env the first time; returns ``(obs float32 [N, *obs_shape], {})``.

        Later calls return (a copy of) the last step's observations without resetting, as
        skrl's own wrappers of vectorized envs do (skrl's trainers call ``reset()`` at every
        ``train()`` or ``eval()``). ``gp_env.reset()`` resets for real."""
        with held(self.gp_env):  # until the env's buffers are read
            if not self._started:
                td = self.gp_env.reset()
                self._last_obs.copy_(td["observation"])
                if self._last_state is not None:
                    self._last_state.copy_(td[PRIVILEGED])
                self._started = True
            return self._last_obs.clone(), {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env; returns fresh tensors ``(obs, reward, terminated, truncated, info)``.

        ``actions``: float ``[N, *action_shape]`` or ``[N, prod(action_shape)]`` (``Box``) or
        integer ``[N, 1]`` / ``[N]`` (``Discrete``, what skrl's categorical models give) on
        the env's device; another shape raises ``ValueError`` (dtypes and devices are checked
        by the env). Returns float32 ``[N, *obs_shape]`` (after the env's same-step
        auto-reset, as skrl's vectorized trainers expect), float32 ``[N, 1]``, bool ``[N,
        1]``, bool ``[N, 1]``, and ``info`` with ``"final_observation"`` float32 ``[N,
        *obs_shape]``: the observations the step reached (before the auto-reset), what
        ``FinalObservation`` bootstraps from."""
        if isinstance(actions, torch.Tensor):
            shape = self._shapes.get(tuple(actions.shape))
            if shape is None:
                raise ValueError(f"SkrlWrapper: actions expected shape {self._want}, "
                                 f"got {tuple(actions.shape)}")
            actions = actions.reshape(shape)
        with held(self.gp_env):  # until the env's buffers are read
            td = self.gp_env.step(actions)
            obs = td["observation"]
            self._last_obs.copy_(obs)
            if self._last_state is not None:
                self._last_state.copy_(td[PRIVILEGED])
            return (obs.clone(), td["reward"].view(-1, 1).clone(),
                    td["terminated"].view(-1, 1).clone(), td["truncated"].view(-1, 1).clone(),
                    {"final_observation": td["final_observation"].clone()})

    def state(self) -> torch.Tensor | None:
        """The critic's state, float32 ``[N, *state_shape]`` (a fresh copy), or ``None``
        where the env declares no ``"privileged_observation"``."""
        return None if self._last_state is None else self._last_state.clone()

    def render(self, *args, **kwargs) -> None:
        """Nothing to render."""

    def close(self) -> None:
        """Nothing to release."""


class FinalObservation:
    """Mixin for a skrl (torch) agent, first in its bases: ``class Agent(FinalObservation,
    PPO): pass``, then build ``Agent`` as the agent it extends.

    skrl's ``time_limit_bootstrap`` adds ``discount * V(next_observations) * truncated`` to
    the reward; a vectorized env's next observations are post-reset, so a plain agent
    bootstraps from the *next* episode's first state. This mixin's ``record_transition``
    passes ``infos["final_observation"]`` (``SkrlWrapper``'s pre-reset observations) as
    ``next_observations`` (what the agent bootstraps from and off-policy agents store); the
    trainer still acts on the reset ones. Without that key it changes nothing. One agent
    per env batch (``num_simultaneous_agents == 1``): another batch size raises
    ``ValueError``.

    It also turns on the agent's ``cfg.time_limit_bootstrap`` (skrl's default is off) where
    the agent has it (PPO, A2C, RPO, TRPO, AMP): off, skrl does not end a truncated episode
    at all, and its advantages run on into the next episode's first value, which is the
    post-reset bootstrap this mixin exists to avoid. Off-policy agents (SAC, TD3, ...)
    store ``next_observations`` and take the final ones as they are.

    Without this mixin a skrl agent cannot get the final observation from any env wrapper:
    skrl's trainers hand the same tensor to ``record_transition`` as ``next_observations``
    and to the next ``act`` as ``observations``, with no call to the env in between.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cfg = getattr(self, "cfg", None)
        if getattr(cfg, "time_limit_bootstrap", None) is False:
            cfg.time_limit_bootstrap = True

    def record_transition(self, **kwargs) -> None:
        infos = kwargs.get("infos")
        final = infos.get("final_observation") if isinstance(infos, dict) else None
        if final is not None:
            nxt = kwargs["next_observations"]
            if final.shape != nxt.shape:
                raise ValueError(
                    "FinalObservation: infos['final_observation'] expected the shape of "
                    f"next_observations {tuple(nxt.shape)}, got {tuple(final.shape)} "
                    "(one agent per env batch only)"
                )
            kwargs["next_observations"] = final
        super().record_transition(**kwargs)


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

    The norm is a submodule, so skrl's checkpoints hold its statistics.
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
            size = size.shape if isinstance(size, gym.Space) else size
            if size is None:
                raise ValueError("ObsNormPreprocessor: expected size or norm, got neither")
            norm = ObsNorm(size, clip=clip, device=skrl_config.torch.parse_device(device))
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
        """Normalize ``x`` (float32 ``[B, *shape]``, any B, on the norm's device; ``None``
        passes through), merging it into the statistics first when ``train``: skrl calls
        ``preprocessor(x)`` when acting and ``preprocessor(x, train=True)`` on the first
        epoch's minibatches. ``inverse=True`` is not supported (raises ``ValueError``)."""
        if x is None:
            return None
        if inverse:
            raise ValueError("ObsNormPreprocessor: inverse=True is not supported")
        return self.norm(x, train=bool(train))
