"""Reward scaling by the running std of the per-env discounted return, per env group."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpuparam._checks import check_mask
from gpuparam.transforms._engine import Engine
from gpuparam.transforms._moments import F64
from gpuparam.transforms.running_stats import GroupedRunningStats


class RewardNorm(GroupedRunningStats):
    """Scale rewards ``r / sqrt(var[g] + eps)`` by the variance of the discounted return.

    Like Stable-Baselines3's ``VecNormalize`` and Gymnasium's ``NormalizeReward``: no mean is
    subtracted. Each env keeps a discounted return ``returns`` (float64 ``[N]``, a persistent
    buffer). Per call: ``returns = returns * gamma + reward``; the statistics of group ``g``
    are updated with the ``returns`` of its envs (training and not frozen); the reward is
    scaled; then ``returns`` is cleared where ``done``. The return buffer is tracked even
    when frozen or in eval mode, so unfreezing resumes with correct returns.

    Args:
        gamma: discount in ``[0, 1]``.
        group_ids, num_groups, num_envs, clip, eps, reset_on, device: as in ``ObsNorm``
            (statistics have shape ``[G]``).

    Non-finite input: while updating, a return that is NaN or inf (after a NaN or inf
    reward) is left out of the statistics, counted in ``nonfinite`` (int64 ``[G]``) and
    cleared to 0, as at an episode end; that env's scaled reward is NaN or inf.

    Right after a reset a group's scale comes from the current batch (one env per group:
    var 0, so the first reward after a reset maps to ``r / sqrt(eps)`` unless clipped; use
    ``clip``); a group with count 0 scales by ``1 / sqrt(1 + eps)``.
    """

    def __init__(
        self,
        gamma: float = 0.99,
        *,
        group_ids: torch.Tensor | None = None,
        num_groups: int | None = None,
        num_envs: int | None = None,
        clip: float | None = None,
        eps: float = 1e-8,
        reset_on: Sequence[str] = (),
        device: str | torch.device | None = None,
    ):
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"RewardNorm: gamma must be in [0, 1], got {gamma}")
        super().__init__(
            (),
            group_ids=group_ids,
            num_groups=num_groups,
            num_envs=num_envs,
            clip=clip,
            eps=eps,
            reset_on=reset_on,
            device=device,
        )
        self.gamma = float(gamma)

    _env_mean_table = False
    per_env_buffers = ("returns",)

    def _bind_extra(self, n: int) -> None:
        self.register_buffer("returns", torch.zeros(n, dtype=F64, device=self.device))

    def _engine_data(self) -> torch.Tensor | None:
        return self.returns

    def _engine_extra(self, e: Engine) -> None:
        if e.fused:  # the fused launch needs none of the scratch below
            return
        i64 = dict(dtype=torch.int64, device=e.device)
        e.r64 = torch.zeros(e.n, dtype=F64, device=e.device)  # the reward in float64
        e.keep = torch.zeros(e.n, **i64)  # bit mask: 0 where done, all ones elsewhere
        e.minus_one = torch.full((), -1, **i64)
        e.ret_bits = e.data64.view(torch.int64)

    def _check(self, t: torch.Tensor, what: str, dtype: torch.dtype) -> None:
        n, dev = self.num_envs, self.device
        if not isinstance(t, torch.Tensor):
            raise ValueError(
                f"RewardNorm: {what} expected a {dtype} tensor [N], got {type(t).__name__}"
            )
        if t.dtype != dtype:
            raise ValueError(f"RewardNorm: {what} expected dtype {dtype}, got {t.dtype}")
        if t.device != dev:
            raise ValueError(f"RewardNorm: {what} expected device {dev}, got {t.device}")
        if t.dim() != 1 or t.shape[0] == 0 or (n is not None and t.shape[0] != n):
            raise ValueError(
                f"RewardNorm: {what} expected shape ({n or 'N'},), got {tuple(t.shape)}"
            )

    def forward(
        self, reward: torch.Tensor, done: torch.Tensor, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Scale ``reward`` and advance the discounted returns.

        Args:
            reward: float32 tensor ``[N]`` on the module's device.
            done: bool tensor ``[N]`` on the device (terminated or truncated): the return of
                these envs is cleared after this reward.
            out: optional float32 tensor ``[N]`` to write into (may be ``reward``).

        Returns:
            float32 tensor ``[N]`` on the device.
        """
        e = self._engine
        if e is None or not (
            e.matches(reward, torch.float32)
            and e.matches(done, torch.bool)
            and (out is None or (e.matches(out, torch.float32) and out.is_contiguous()))
        ):
            self._check_all(reward, done, out)
            self._ensure_bound(reward.shape[0])
            e = self._eng()
        reward = reward.detach()  # the returns never join an autograd graph
        if e.fused:
            out = torch.empty(reward.shape, device=reward.device) if out is None else out
            update = self.training and not self._frozen
            e.reward_fused(reward, done.contiguous(), out, self.gamma, update, self.clip)
            return out
        ret = e.data64
        torch.add(e.r64.copy_(reward), ret, alpha=self.gamma, out=ret)  # ret * gamma + reward
        if self.training and not self._frozen:
            e.update_f64()
        out = torch.empty(reward.shape, device=reward.device) if out is None else out
        torch.mul(reward, e.scale_flat, out=out)
        if self.clip is not None:
            out.clamp_(-self.clip, self.clip)
        # returns[done] = 0 without branches (where / masked_fill_ mispredict on CPU): AND
        # the bits with a mask that is 0 where done; exact, even for inf and nan
        e.keep.copy_(e.view(done, as_bytes=True)).add_(e.minus_one)
        e.ret_bits.bitwise_and_(e.keep)
        return out

    def _check_all(self, reward, done, out) -> None:
        self._check(reward, "reward", torch.float32)
        self._check(done, "done", torch.bool)
        if done.shape != reward.shape:
            raise ValueError(
                f"RewardNorm: done expected shape {tuple(reward.shape)}, got {tuple(done.shape)}"
            )
        if out is not None:
            self._check(out, "out", torch.float32)
            if not out.is_contiguous():
                raise ValueError("RewardNorm: out expected a contiguous tensor")

    def reset_returns(self, mask: torch.Tensor | None = None) -> None:
        """Clear the discounted return of masked envs (statistics untouched).

        Args:
            mask: bool tensor ``[num_envs]`` on the module's device, or ``None`` for all.
        """
        if mask is None:
            if self.num_envs is not None:
                self.returns.zero_()
            return
        n = self.num_envs
        if n is None:
            n = mask.shape[0] if isinstance(mask, torch.Tensor) and mask.dim() == 1 else 0
        check_mask(mask, n, self.device, "RewardNorm: mask")
        self._ensure_bound(n)
        self.returns.masked_fill_(mask, 0.0)

    def _after_reset(self, mask: torch.Tensor | None, groups_hit: torch.Tensor | None) -> None:
        """``reset_stats`` also clears the returns of masked envs and of envs in ``groups``."""
        if self.num_envs is None:
            return
        if mask is None and groups_hit is None:
            self.returns.zero_()
            return
        env = torch.zeros_like(self.returns, dtype=torch.bool)
        if mask is not None:
            env |= mask
        if groups_hit is not None:
            env |= groups_hit[self.group_ids]
        self.returns.masked_fill_(env, 0.0)

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, " + super().extra_repr()
