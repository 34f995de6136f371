"""Gymnasium 1.x vector API over a gpuparam env: ``GymnasiumVectorEnv``.

Needs the ``gymnasium`` extra: ``pip install "gpuparam[gymnasium]"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gpuparam.integrations._extras import require

gym = require("gymnasium", "gymnasium", "gpuparam.integrations.gymnasium")

from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

from gpuparam.spec import BoxSpec, DiscreteSpec  # noqa: E402

__all__ = ["GymnasiumVectorEnv"]


def _box(spec: BoxSpec) -> gym.spaces.Box:
    low = np.broadcast_to(np.asarray(spec.low, dtype=np.float32), spec.shape)
    high = np.broadcast_to(np.asarray(spec.high, dtype=np.float32), spec.shape)
    return gym.spaces.Box(low, high, shape=spec.shape, dtype=np.float32)


class GymnasiumVectorEnv(VectorEnv):
    """A ``gymnasium.vector.VectorEnv`` over a gpuparam env, with same-step auto-reset.

    Args:
        env: a gpuparam env (``gp.make(...)`` or a gpuparam ``TransformedEnv``). Its
            ``params``, ``randomize`` and other public attributes are reachable on this
            wrapper (``envs.params.set(...)``), and the env itself as ``envs.gp_env``.

    Every array this env returns is a **torch tensor on the env's device**, not a NumPy array
    (converting would copy device data to the host every step): observations float32
    ``[N, *obs_shape]``, rewards float32 ``[N]``, terminations and truncations bool ``[N]``.
    They are fresh copies, safe to keep. The spaces describe shapes, dtypes and the nominal
    bounds (parameters such as Pendulum's ``max_speed`` can move observations past them);
    ``space.contains`` expects NumPy arrays, so test ``.cpu().numpy()`` of a tensor.

    ``step(actions)``: a torch tensor on the device, or a NumPy array / list (copied there),
    of shape ``[N, *action_shape]``: integers for ``Discrete`` actions (``action_space`` is
    ``MultiDiscrete``), floats for ``Box`` actions. Wrong shapes, dtypes or devices raise the
    core env's ``ValueError``.

    Auto-reset (``metadata["autoreset_mode"] == AutoresetMode.SAME_STEP``): an env whose
    episode ends at a step is reset inside that step, so the returned observation is the new
    episode's first one. The info dict of every step holds (always present, to avoid a host
    synchronization; valid where the mask is True):

    - ``"final_obs"``: float32 ``[N, *obs_shape]``, the observation the step reached;
      ``"_final_obs"``: bool ``[N]``, ``terminated | truncated``;
    - ``"final_info"``: ``{"episode": {"r": float32 [N], "l": int32 [N]}, "_episode": bool
      [N]}``, return and length of the episode that ended; ``"_final_info"``: bool ``[N]``.

    ``reset(seed=None, options=None)``: ``seed`` (int) reseeds and resets every env;
    ``options={"reset_mask": mask}`` (bool ``[N]``, NumPy or torch) resets only masked envs
    (the others keep their observation). Returns ``(obs, {})``.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env):
        self.__dict__["gp_env"] = env
        self.num_envs = int(env.num_envs)
        self.device = torch.device(env.device)
        self.single_observation_space = _box(env.observation_spec)
        act = env.action_spec
        if isinstance(act, DiscreteSpec):
            self.single_action_space = gym.spaces.Discrete(act.n)
        else:
            self.single_action_space = _box(act)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    @property
    def params(self):
        """The wrapped env's ``ParamTable``."""
        return self.gp_env.params

    def __getattr__(self, name: str):
        env = self.__dict__.get("gp_env")
        if env is None or name.startswith("_"):
            raise AttributeError(name)
        return getattr(env, name)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every env, or the envs of ``options["reset_mask"]``; see the class docstring.

        Returns:
            ``(obs, {})``: obs float32 ``[N, *obs_shape]`` on the env's device.
        """
        super().reset(seed=seed)
        mask = None
        if options and "reset_mask" in options:
            mask = options["reset_mask"]
            if isinstance(mask, np.ndarray):
                mask = torch.from_numpy(mask).to(self.device)
        td = self.gp_env.reset(mask) if seed is None else self.gp_env.reset(mask, seed=seed)
        return td["observation"].clone(), {}

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env; see the class docstring for shapes and the info dict.

        Returns:
            ``(obs, reward, terminated, truncated, info)``, torch tensors on the env's device.
        """
        if isinstance(actions, (np.ndarray, list, tuple)):
            actions = torch.as_tensor(np.asarray(actions), device=self.device)
        td = self.gp_env.step(actions)
        done = td["done"].clone()
        info = {
            "final_obs": td["final_observation"].clone(),
            "_final_obs": done,
            "final_info": {
                "episode": {"r": td["episode_return"].clone(), "l": td["episode_length"].clone()},
                "_episode": done,
            },
            "_final_info": done,
        }
        return (td["observation"].clone(), td["reward"].clone(), td["terminated"].clone(),
                td["truncated"].clone(), info)

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.gp_env!r})"
