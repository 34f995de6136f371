"""Stable-Baselines3 ``VecEnv`` over a gpuparam env: ``SB3VecEnv`` (a tested training
example: ``docs/training.md``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from gpuparam.integrations._extras import (
    Adapter,
    after_failed_step,
    base_env,
    env_seed,
    gym_spaces,
    held,
    require,
)

require("stable_baselines3", "sb3", "gpuparam.integrations.sb3")

from stable_baselines3.common.vec_env.base_vec_env import VecEnv  # noqa: E402

from gpuparam.spec import DiscreteSpec  # noqa: E402

__all__ = ["SB3VecEnv"]


class SB3VecEnv(Adapter, VecEnv):
    """Stable-Baselines3's ``VecEnv`` over a gpuparam env or ``gp.TransformedEnv``.

    Args:
        env: the gpuparam env.

    NumPy in and out (SB3's API): every step copies observations, rewards and flags to the
    host and builds one info dict per env. ``step`` returns ``(obs float32 [N,
    *obs_shape], rewards float32 [N], dones bool [N], infos)``, with same-step auto-reset:
    for an env whose episode ended, ``infos[i]`` holds ``"terminal_observation"`` (float32
    ``[*obs_shape]``), ``"TimeLimit.truncated"`` (truncated and not terminated) and
    ``"episode"``: ``{"r": return (raw, before any ``gp.RewardNorm``), "l": length, "t":
    seconds since this adapter was built}`` (what SB3's ``Monitor`` writes, so
    ``ep_info_buffer`` and the ``rollout/ep_rew_mean`` log work); the other envs get ``{}``.

    Parameters through SB3's attribute API: ``set_attr``, ``get_attr``, ``env_method``
    (``indices``: an int, a list of ints or ``None`` for all envs; negative ones count from
    the end, as in SB3's ``DummyVecEnv``; others outside ``[-N, N)`` raise ``ValueError``).

    Seeding: ``seed(s)`` then ``reset()`` reseeds with ``s`` (SB3's ``s + i`` per env is not
    used). Works under ``VecNormalize``, ``VecMonitor`` and the other ``VecEnvWrapper``.
    """

    def __init__(self, env):
        self.gp_env = env
        self.device = torch.device(env.device)
        self._discrete = isinstance(env.action_spec, DiscreteSpec)
        super().__init__(int(env.num_envs), *gym_spaces(env))
        self._actions: torch.Tensor | None = None
        self._t0 = time.perf_counter()
        # (env index, "episode" info) of episodes that ended at a step that raised
        self._late: list[tuple[int, dict[str, float]]] = []

    def reset(self) -> np.ndarray:
        """Reset every env (reseeding with the seed of a preceding ``seed(s)`` call); returns
        the observations, float32 ``[N, *obs_shape]``."""
        with held(self.gp_env):  # until the env's buffers are read
            td = self.gp_env.reset(seed=env_seed(self._seeds[0]))
            obs = td["observation"].to("cpu", copy=True).numpy()
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray | torch.Tensor) -> None:
        """Load actions: integers ``[N]`` (Discrete) or floats ``[N, *action_shape]`` (Box),
        NumPy or torch (a torch tensor without data, on the meta device or sparse, raises
        ``ValueError``)."""
        if isinstance(actions, torch.Tensor) and (
            actions.is_meta or actions.layout != torch.strided
        ):
            raise ValueError(f"SB3VecEnv.step_async: actions expected a NumPy array or a dense "
                             f"torch tensor, got a {actions.layout} tensor on {actions.device}")
        a = torch.as_tensor(actions, device=self.device)
        if self._discrete:
            if a.dim() == 2 and a.shape[1] == 1:
                a = a.view(-1)
            if not a.is_floating_point():
                a = a.to(torch.int64)
        elif a.dtype == torch.float64:  # SB3's NumPy policies may hand float64
            a = a.to(torch.float32)
        self._actions = a

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step with the loaded actions; see the class docstring.

        A step that raises after running to its end (a raising hook: the env completes the
        step, ``gp.Stage``) loses its outputs, but not its episodes: the ``"episode"`` info
        of each episode it ended comes with the next step's infos (SB3 logs the
        ``"episode"`` of every info), without a done flag for that step."""
        if self._actions is None:
            raise RuntimeError("SB3VecEnv.step_wait: call step_async(actions) first")
        with held(self.gp_env):  # until the env's buffers are read
            with after_failed_step(self.gp_env, self._keep_episodes):
                td = self.gp_env.step(self._actions)
            self._actions = None
            host = {k: td[k].to("cpu", copy=True).numpy() for k in (
                "observation", "reward", "done", "terminated", "truncated")}
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            ended = np.flatnonzero(host["done"])
            if ended.size:
                final = td["final_observation"].to("cpu", copy=True).numpy()
                timeout = host["truncated"] & ~host["terminated"]
                for i, episode in self._episodes(td, ended):
                    infos[i] = {"terminal_observation": final[i],
                                "TimeLimit.truncated": bool(timeout[i]), "episode": episode}
        late, self._late = self._late, []
        for i, episode in late:  # SB3 logs the "episode" of every info, done or not
            if "episode" in infos[i]:
                self._late.append((i, episode))  # this env ended again: at the next step
            else:
                infos[i]["episode"] = episode
        return host["observation"], host["reward"], host["done"], infos

    def _episodes(self, td, ended: np.ndarray) -> list[tuple[int, dict[str, float]]]:
        """``(i, {"r": return, "l": length, "t": seconds})`` of the ``ended`` envs."""
        ret, length = (td[k].to("cpu", copy=True).numpy() for k in (
            "episode_return", "episode_length"))
        t = round(time.perf_counter() - self._t0, 6)
        return [(i, {"r": float(ret[i]), "l": int(length[i]), "t": t}) for i in ended.tolist()]

    def _keep_episodes(self, td) -> None:
        """A step that raised (it ran to its end, see ``step_wait``): keep the ``"episode"``
        infos of the episodes it ended for the next step's infos."""
        ended = np.flatnonzero(td["done"].to("cpu", copy=True).numpy())
        self._late += self._episodes(td, ended)

    def close(self) -> None:
        """Nothing to release (no worker processes)."""

    def get_images(self) -> Sequence[np.ndarray | None]:
        """No rendering: ``[None] * N``."""
        return [None] * self.num_envs

    def _ids(self, indices, what: str) -> list[int]:
        """SB3's ``indices`` (None: every env, an int, or ints) as env indices in ``[0, N)``:
        negative ones count from the end, as SB3's ``DummyVecEnv`` (a list) indexes its
        envs; anything else raises ``ValueError`` naming ``what`` asked."""
        n = self.num_envs
        if indices is None:
            return list(range(n))
        items = [indices] if isinstance(indices, (int, np.integer)) else indices
        want = f"ints in [-{n}, {n}) (negative ones count from the end)"
        try:
            items = list(items)
        except TypeError:
            raise ValueError(f"SB3VecEnv.{what}: indices expected None, an int or {want}, "
                             f"got {type(indices).__name__}") from None
        for i in items:
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
                raise ValueError(f"SB3VecEnv.{what}: indices expected {want}, got {i!r} in "
                                 f"{indices!r}")
            if not -n <= i < n:
                raise ValueError(f"SB3VecEnv.{what}: indices expected {want} (num_envs {n}), "
                                 f"got {int(i)}")
        return [int(i) % n for i in items]

    def _check_all(self, what: str, indices) -> None:
        if indices is not None:
            raise ValueError(f"SB3VecEnv.{what}: per-env indices only apply to parameters "
                             f"({', '.join(self.params.names)}), got indices={indices!r}")

    def get_attr(self, attr_name: str, indices: Iterable[int] | int | None = None) -> list[Any]:
        """A parameter's per-env values (one NumPy value per index), else the gpuparam env's
        attribute repeated once per index."""
        if attr_name in self.params.names:
            values = self.params[attr_name].to("cpu", copy=True).numpy()
            return [values[i] for i in self._ids(indices, f"get_attr({attr_name!r})")]
        # render_mode: asked by VecEnv.__init__; nothing renders
        ids = self._ids(indices, f"get_attr({attr_name!r})")
        value = None if attr_name == "render_mode" else getattr(self.gp_env, attr_name)
        return [value for _ in ids]

    _SETTINGS = ("max_episode_steps", "episode_length", "validate_actions")

    def set_attr(
        self, attr_name: str, value: Any, indices: Iterable[int] | int | None = None
    ) -> None:
        """With a parameter name, write ``value`` to the indexed envs (``params.set(name,
        value, env_ids=indices)``). Otherwise (``indices`` must then be ``None``) one of the
        env's settings, validated as the env validates them and in effect from the next
        step: ``"max_episode_steps"`` (an int in ``[1, 2**31 - 1]``), ``"episode_length"``
        or ``"validate_actions"`` (a bool). Any other name (``num_envs``, ...) raises
        ``ValueError``, changing nothing: nothing else of the env may change."""
        if attr_name in self.params.names:
            if isinstance(value, np.ndarray):
                value = torch.as_tensor(value, dtype=torch.float32, device=self.device)
            ids = None if indices is None else self._ids(indices, f"set_attr({attr_name!r})")
            self.params.set(attr_name, value, env_ids=ids)
            return
        self._check_all(f"set_attr({attr_name!r})", indices)
        if attr_name not in self._SETTINGS:
            raise ValueError(
                f"SB3VecEnv.set_attr: {attr_name!r} cannot be set; expected a parameter "
                f"({', '.join(self.params.names)}) or one of {', '.join(self._SETTINGS)}"
            )
        if attr_name == "validate_actions" and not isinstance(value, bool):
            raise ValueError(f"SB3VecEnv.set_attr('validate_actions'): expected a bool, "
                             f"got {value!r}")
        setattr(base_env(self.gp_env), attr_name, value)  # the env's setters validate

    def env_method(
        self, method_name: str, *method_args, indices: Iterable[int] | int | None = None,
        **method_kwargs,
    ) -> list[Any]:
        """``"set_<param>"`` (one value) writes like ``set_attr``; ``"get_<param>"`` reads;
        any other method of the gpuparam env is called once for all envs (``indices`` must
        be ``None``) and its result repeated."""
        prefix, name = method_name[:4], method_name[4:]
        if prefix == "get_" and name in self.params.names:
            return self.get_attr(name, self._ids(indices, f"env_method({method_name!r})"))
        if prefix == "set_" and name in self.params.names:
            if len(method_args) != 1 or method_kwargs:
                raise ValueError(f"SB3VecEnv.env_method({method_name!r}): expected one "
                                 f"value, got args={method_args!r} kwargs={method_kwargs!r}")
            ids = self._ids(indices, f"env_method({method_name!r})")
            self.set_attr(name, method_args[0], None if indices is None else ids)
            return [None for _ in ids]
        self._check_all(f"env_method({method_name!r})", indices)
        result = getattr(self.gp_env, method_name)(*method_args, **method_kwargs)
        return [result for _ in range(self.num_envs)]

    def env_is_wrapped(self, wrapper_class, indices: Iterable[int] | int | None = None) -> list:
        """No Gymnasium wrappers inside: ``[False]`` per index."""
        return [False for _ in self._ids(indices, "env_is_wrapped")]
