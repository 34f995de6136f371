"""Reward scaling by the running std of the per-env discounted return, per env group."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpuparam._device import stream_for
from gpuparam.kernels import stats as kstats
from gpuparam.transforms.running_stats import GroupedRunningStats


class RewardNorm(GroupedRunningStats):
    """Scale rewards ``r / sqrt(var[g] + eps)`` by the variance of the discounted return.

    Like Stable-Baselines3's ``VecNormalize`` and Gymnasium's ``NormalizeReward``: no mean is
    subtracted. Each env keeps a discounted return ``returns`` (float64 ``[N]``, a persistent
    buffer). Per call: ``returns = returns * gamma + reward``; the statistics of group ``g``
    are updated with the ``returns`` of its envs (training and not frozen); the reward is
    scaled; then ``returns`` is cleared where ``done``. The returns are tracked even when
    frozen or in eval mode, so unfreezing resumes with correct returns.

    Args:
        gamma: discount in ``[0, 1]``, saved in ``state_dict()`` (a float64 scalar tensor):
            statistics saved with another ``gamma`` are refused (``ValueError`` naming both).
        group_ids, num_groups, num_envs, clip, eps, reset_on, device: as in ``ObsNorm``
            (statistics have shape ``[G]``).

    While updating, a return that is NaN or inf (after a NaN or inf reward) is left out of
    the statistics, counted in ``nonfinite`` (int64 ``[G]``) and cleared to 0, as at an
    episode end; that env's scaled reward is NaN or inf. Right after a reset a group's scale
    comes from the current batch (one env per group: var 0, so the first reward after a
    reset maps to ``r / sqrt(eps)`` unless clipped; use ``clip``); a group with count 0
    scales by ``1 / sqrt(1 + eps)``. ``forward`` is four Warp launches.
    """

    def __init__(self, gamma: float = 0.99, *, group_ids: torch.Tensor | None = None,
                 num_groups: int | None = None, num_envs: int | None = None,
                 clip: float | None = None, eps: float = 1e-8, reset_on: Sequence[str] = (),
                 device: str | torch.device | None = None):
        super().__init__((), group_ids=group_ids, num_groups=num_groups, num_envs=num_envs,
                         clip=clip, eps=eps, reset_on=reset_on, device=device)
        self.gamma = gamma  # validated; a device flag the kernels read

    per_env_buffers = ("returns",)
    saved_settings = ("gamma",)  # the statistics are of returns discounted by it

    def forward(
        self, reward: torch.Tensor, done: torch.Tensor, out: torch.Tensor | None = None, *,
        stream=None,
    ) -> torch.Tensor:
        """Scale ``reward`` and advance the discounted returns.

        Args:
            reward: float32 tensor ``[N]`` on the module's device.
            done: bool tensor ``[N]`` on the device (terminated or truncated): the return of
                these envs is cleared after this reward.
            out: optional float32 tensor ``[N]`` to write into (may be ``reward``).
            stream: the ``wp.Stream`` to launch on (None: torch's current stream; on CPU
                there is none).

        Returns:
            float32 tensor ``[N]`` on the device.
        """
        e, (reward, done, out) = self._env_batch("reward done out", reward, done, out)
        out = torch.empty(reward.shape, device=reward.device) if out is None else out
        stream = stream_for(self.device) if stream is None else stream
        # four launches up to 1024 envs per group: the returns, their update, the scaling
        e.bound(("returns",), kstats.returns_step, e.n, [reward, e.flags, 2, e.tick],
                [e.ret, e.stamp]).repoint(reward).launch(stream)
        e.update(e.none32, e.ret, 2, stream)
        e.bound(("scale",), kstats.scale_rewards, e.n, [reward, done, e.gid, e.flags, 2, e.tab],
                [out, e.ret]).repoint(reward, done, out).launch(stream)
        return out

    def reset_returns(self, mask: torch.Tensor | None = None) -> None:
        """Clear the discounted return of masked envs (statistics untouched).

        Args:
            mask: bool tensor ``[num_envs]`` on the module's device, or ``None`` for all.
        """
        if mask is not None:
            mask = self._bind_mask(mask, "RewardNorm: mask")  # may register returns (binds N)
            self.returns.masked_fill_(mask, 0.0)
        elif self.num_envs is not None:
            self.returns.zero_()

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, " + super().extra_repr()
