"""Observation normalization with per-group running statistics and a masked reset."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpuparam.transforms.running_stats import F64, GroupedRunningStats


class ObsNorm(GroupedRunningStats):
    """Normalize observations ``(x - mean[g]) / sqrt(var[g] + eps)`` per env group ``g``.

    Args:
        shape: per-env observation shape (``int`` or tuple), e.g. ``4`` or ``(4,)``.
        group_ids: long tensor ``[N]`` on ``device``: the group of each env. ``None``: one
            group shared by all envs (G=1). ``torch.arange(N)`` gives per-env statistics.
        num_groups: G (default ``group_ids.max() + 1``), to allow groups with no env yet.
        num_envs: N when ``group_ids`` is ``None`` (else learnt from the first batch).
        clip: clip outputs to ``[-clip, clip]`` (``> 0``) or ``None``.
        eps: added to the variance.
        reset_on: parameter names; when attached to an env (:meth:`attach` or
            ``TransformedEnv``), a masked write of one of them resets the groups of the
            written envs.
        device: device of every buffer (default ``group_ids.device``, else CPU).

    Statistics (see ``GroupedRunningStats``): ``count`` float64 ``[G]``, ``mean`` float64
    ``[G, *shape]``, ``std`` / ``var`` float64 ``[G, *shape]`` (population), all on the device.

    In training mode and not frozen, ``forward`` first merges the batch into the statistics
    and then normalizes with them; so right after a reset a group is normalized with the
    statistics of the current batch. A group with count 0 (after a reset without update, in
    eval mode, or a group with no env) normalizes with mean 0 and var 1: the output is
    ``x / sqrt(1 + eps)``, finite. A group holding one sample normalizes it to 0.

    ``forward`` and ``normalize`` never synchronize with the host; their ``[N, *shape]``
    scratch is allocated once, when N is known.
    """

    def __init__(
        self,
        shape: int | Sequence[int],
        *,
        group_ids: torch.Tensor | None = None,
        num_groups: int | None = None,
        num_envs: int | None = None,
        clip: float | None = None,
        eps: float = 1e-8,
        reset_on: Sequence[str] = (),
        device: str | torch.device | None = None,
    ):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        super().__init__(
            shape,
            group_ids=group_ids,
            num_groups=num_groups,
            num_envs=num_envs,
            clip=clip,
            eps=eps,
            reset_on=reset_on,
            device=device,
        )

    def _bind_extra(self, n: int) -> None:
        self.register_buffer(
            "_x64", torch.empty(n, *self.shape, dtype=F64, device=self.device), persistent=False
        )

    def _check(self, x: torch.Tensor, what: str) -> None:
        name, S, n = type(self).__name__, self.shape, self.num_envs
        want = f"({'N' if n is None else n}, *{S})"
        if not isinstance(x, torch.Tensor):
            raise ValueError(
                f"{name}: {what} expected a float32 tensor {want}, got {type(x).__name__}"
            )
        if x.dtype != torch.float32:
            raise ValueError(f"{name}: {what} expected dtype torch.float32, got {x.dtype}")
        if x.device != self.device:
            raise ValueError(f"{name}: {what} expected device {self.device}, got {x.device}")
        if (
            x.dim() != 1 + len(S)
            or tuple(x.shape[1:]) != S
            or x.shape[0] == 0
            or (n is not None and x.shape[0] != n)
        ):
            raise ValueError(f"{name}: {what} expected shape {want}, got {tuple(x.shape)}")

    def _prepare(self, x: torch.Tensor, out: torch.Tensor | None) -> None:
        self._check(x, "x")
        if out is not None:
            self._check(out, "out")
            if not out.is_contiguous():
                raise ValueError("ObsNorm: out expected a contiguous tensor")
        self._ensure_bound(x.shape[0])

    def forward(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Update the statistics with ``x`` (training and not frozen), then normalize it.

        Args:
            x: float32 tensor ``[N, *shape]`` on the module's device.
            out: optional float32 tensor ``[N, *shape]`` on the device to write into (may be
                ``x`` itself); otherwise a new tensor is returned.

        Returns:
            float32 tensor ``[N, *shape]`` on the device.
        """
        self._prepare(x, out)
        if self.updating:
            self._update64(self._x64.copy_(x))
        return self._normalize(x, out)

    def normalize(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Normalize ``x`` without touching the statistics; arguments as in :meth:`forward`."""
        self._prepare(x, out)
        return self._normalize(x, out)

    def _normalize(self, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        out = torch.empty(x.shape, device=x.device) if out is None else out
        rows = self._rows(out)
        torch.sub(self._rows(x.contiguous()), self._env_mean, out=rows)
        rows.mul_(self._env_scale)
        if self.clip is not None:
            out.clamp_(-self.clip, self.clip)
        return out
