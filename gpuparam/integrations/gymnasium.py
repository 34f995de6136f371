"""Gymnasium 1.x vector API over a gpuparam env: ``GymnasiumVectorEnv``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gpuparam.integrations._extras import (
    Adapter,
    after_failed_step,
    env_seed,
    gym_spaces,
    held,
    require,
)

require("gymnasium", "gymnasium", "gpuparam.integrations.gymnasium")

from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

__all__ = ["GymnasiumVectorEnv"]


class GymnasiumVectorEnv(Adapter, VectorEnv):
    """A ``gymnasium.vector.VectorEnv`` over a gpuparam env.

    Args:
        env: a gpuparam env or ``gp.TransformedEnv``; its public attributes (``params``,
            ``randomize``, ...) are reachable on this wrapper.
        autoreset_mode: ``AutoresetMode.SAME_STEP`` (default; or ``"same_step"``) or
            ``AutoresetMode.NEXT_STEP`` (``"next_step"``), see ``step``. Gymnasium's
            ``NormalizeObservation`` / ``TransformObservation`` need ``NEXT_STEP``.
        numpy: return NumPy arrays (outputs and info arrays) instead of torch tensors on
            the env's device, as Gymnasium's vector wrappers (``RecordEpisodeStatistics``,
            ``NormalizeReward``, ...) and NumPy-based loops expect: one device-to-host
            copy of every output a step.
        episode_info: add ``info["episode"] = {"r": float32 [N], "l": int32 [N]}`` and
            ``info["_episode"]`` (bool ``[N]``, the envs whose episode ended at this step),
            as envpool / IsaacGym-style loops read; leave it off under Gymnasium's
            ``RecordEpisodeStatistics``, which writes that key itself.

    Outputs (fresh copies: torch tensors on the env's device, or NumPy arrays): observations
    float32 ``[N, *obs_shape]``, rewards float32 ``[N]``, terminations and truncations bool
    ``[N]``. The spaces give shapes, dtypes and the nominal bounds (parameters such as
    Pendulum's ``max_speed`` can move observations past them); ``space.contains`` expects
    NumPy arrays.
    """

    def __init__(
        self,
        env,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        numpy: bool = False,
        episode_info: bool = False,
    ):
        modes = {"same_step": AutoresetMode.SAME_STEP, "next_step": AutoresetMode.NEXT_STEP}
        mode = modes.get(autoreset_mode, autoreset_mode) if isinstance(autoreset_mode, str) \
            else autoreset_mode
        if mode not in (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP):
            raise ValueError("GymnasiumVectorEnv: autoreset_mode expected AutoresetMode."
                             f"SAME_STEP or NEXT_STEP, got {autoreset_mode!r}")
        self.__dict__["gp_env"] = env
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self._next_step = mode == AutoresetMode.NEXT_STEP
        self._numpy, self._episode_info = bool(numpy), bool(episode_info)
        self.num_envs = int(env.num_envs)
        self.device = torch.device(env.device)
        self.single_observation_space, self.single_action_space = gym_spaces(env)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        # NEXT_STEP: envs whose episode ended at the last step (their new one starts now)
        self._autoreset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        # NEXT_STEP: the observations last returned (the caller got copies of them)
        self._last_obs = torch.zeros(self.num_envs, *env.observation_spec.shape,
                                     dtype=torch.float32, device=self.device)
        # NEXT_STEP: what a step that raised would have returned for the envs it ended
        # (mask, observation, reward, terminated, truncated, return, length), returned at
        # the next step; None while no such step is pending (kept on failure only)
        self._late: tuple[torch.Tensor, ...] | None = None

    def __getattr__(self, name: str):
        env = self.__dict__.get("gp_env")
        if env is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(env, name)

    def _out(self, t: torch.Tensor):
        """A copy the caller owns: a tensor on the device, or a NumPy array."""
        return t.to("cpu", copy=True).numpy() if self._numpy else t.clone()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor | np.ndarray, dict[str, Any]]:
        """Reset every env; returns ``(obs float32 [N, *obs_shape], {})``.

        ``seed`` reseeds and resets every env; ``options={"reset_mask": mask}`` (bool
        ``[N]``, NumPy or torch) resets only masked envs (the others keep their observation);
        a seed is global even with a mask."""
        super().reset(seed=seed)
        mask = (options or {}).get("reset_mask")
        if isinstance(mask, np.ndarray):
            mask = torch.from_numpy(mask).to(self.device)
        with held(self.gp_env):
            obs = self.gp_env.reset(mask, seed=env_seed(seed))["observation"]
            if mask is None:
                self._autoreset.zero_()
                self._late = None  # a step that raised: its episode ends are dropped too
            else:
                # NEXT_STEP: envs outside the mask whose episode ended keep the (final)
                # observation last returned, as Gymnasium's; their new episode starts next step
                pending = self._autoreset & ~mask
                if self._late is not None:  # (as do envs whose end is still to be returned)
                    pending |= self._late[0] & ~mask
                    self._late = (self._late[0] & ~mask, *self._late[1:])
                obs = torch.where(pending.view(-1, *[1] * (obs.dim() - 1)), self._last_obs, obs)
                self._autoreset &= ~mask
            return self._out(obs), {}

    def step(self, actions: torch.Tensor | np.ndarray) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every env; returns ``(obs, reward, terminated, truncated, info)``.

        ``actions``: a torch tensor on the device, or a NumPy array / list (copied there), of
        shape ``[N, *action_shape]``: integers for ``Discrete`` actions (``action_space`` is
        ``MultiDiscrete``), floats for ``Box`` actions. Wrong shapes, dtypes or devices raise
        the core env's ``ValueError``.

        ``SAME_STEP``: an env whose episode ends at a step is reset inside that step, so the
        returned observation is the new episode's first one. The info dict of every step
        holds (always, to avoid a host sync; valid where the mask is True): ``"final_obs"``
        float32 ``[N, *obs_shape]``, the observation the step reached, with ``"_final_obs"``
        bool ``[N]`` (``terminated | truncated``), and ``"final_info"``: ``{"episode": {"r":
        float32 [N], "l": int32 [N]}, "_episode": bool [N]}``, return and length of the
        episode that ended, with ``"_final_info"`` bool ``[N]``.

        ``NEXT_STEP`` (Gymnasium's default): a step that ends an episode returns the
        observation it reached; at the next step that env ignores its action and returns
        the first observation of a new episode with reward 0 and both flags False. Every
        step runs one masked ``reset`` for the envs that finished at the previous step (the
        step the core ran for them is discarded): reset-time randomization draws twice for
        each new episode (the second draw counts), and a ``gp.ObsNorm`` inside a
        ``TransformedEnv`` still sees the observations of the discarded step. A step that
        raises after running to its end (a raising hook: the env completes the step,
        ``gp.Stage``) loses nothing: the next step returns, for the envs it ended, what it
        would have returned (final observation, reward, flags, episode info) instead of
        their own results, and they start anew at the step after. In ``SAME_STEP`` mode
        the envs such a step ended have started their new episodes and no later step
        reports those ends: read them from ``gp_env.outputs`` (``"done"``,
        ``"final_observation"``, ``"episode_return"``, ...) before the next step.
        """
        if isinstance(actions, (np.ndarray, list, tuple)):
            actions = torch.as_tensor(np.asarray(actions), device=self.device)
        with held(self.gp_env):  # until the env's buffers are read
            with after_failed_step(self.gp_env, self._keep_late):
                td = self.gp_env.step(actions)
            if not self._next_step:
                done = self._out(td["done"])
                info: dict[str, Any] = {"final_obs": self._out(td["final_observation"]),
                                        "_final_obs": done, "final_info": self._episode(td, done),
                                        "_final_info": done}
                if self._episode_info:
                    info.update(info["final_info"])
                out = (td[k] for k in ("observation", "reward", "terminated", "truncated"))
                return (*map(self._out, out), info)
            prev = self._autoreset
            keep = ~prev
            final = td["final_observation"].clone()  # the next reset rewrites the env's buffers
            reward = td["reward"] * keep
            terminated, truncated = td["terminated"] & keep, td["truncated"] & keep
            ep = {k: td[k] for k in ("episode_return", "episode_length")}
            if self._late is not None:  # a step raised: return what it ended now (this step
                late, self._late = self._late, None  # of those envs is discarded)
                row = late[0].view(-1, *[1] * (final.dim() - 1))
                final = torch.where(row, late[1], final)
                reward, terminated, truncated, ep["episode_return"], ep["episode_length"] = (
                    torch.where(late[0], x, y) for x, y in zip(
                        late[2:], (reward, terminated, truncated, *ep.values()), strict=True))
            done = terminated | truncated
            info = self._episode(ep, self._out(done)) if self._episode_info else {}
            fresh = self.gp_env.reset(prev)["observation"]
            obs = torch.where(prev.view(-1, *[1] * (final.dim() - 1)), fresh, final)
            self._autoreset = done
            self._last_obs.copy_(obs)
            out = (obs, reward, terminated, truncated)  # fresh tensors
            return (*(map(self._out, out) if self._numpy else out), info)

    def _keep_late(self, td) -> None:
        """NEXT_STEP: a step that raised (it ran to its end, see ``step``): keep what it
        would have returned for the envs it ended (not those it started anew) for the next
        step, which returns it instead of its own results for them; they start their new
        episode at the step after, as usual. Earlier ends not yet returned are kept."""
        if not self._next_step:
            return
        ended = td["done"] & ~self._autoreset
        new = (ended, td["final_observation"], td["reward"], td["terminated"], td["truncated"],
               td["episode_return"], td["episode_length"])
        if self._late is None:
            self._late = tuple(t.clone() for t in new)
            return
        old = self._late[0]
        self._late = (old | ended, *(
            torch.where(old.view(-1, *[1] * (x.dim() - 1)), x, y)
            for x, y in zip(self._late[1:], new[1:], strict=True)))

    def _episode(self, td, done) -> dict[str, Any]:
        """``{"episode": {"r": return, "l": length}, "_episode": done}`` of ``td``."""
        return {"episode": {"r": self._out(td["episode_return"]),
                            "l": self._out(td["episode_length"])}, "_episode": done}
