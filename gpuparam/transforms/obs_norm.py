"""Observation normalization with per-group running statistics and a masked reset."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpuparam.transforms._engine import Engine
from gpuparam.transforms.running_stats import GroupedRunningStats


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

    Precision: the statistics are float64 and merged with Chan et al.'s formula. Each batch
    is reduced in float64, so no float32 value overflows it: with one group on CUDA (and on
    CPU when N does not fill whole 16-float vectors) around the batch mean, on CPU otherwise
    around the running mean (the first env's values after a reset), in one Warp launch that
    also writes the output.

    Non-finite input: an env whose sample holds a NaN or inf is left out of its group's
    statistics for that batch and counted in ``nonfinite`` (int64 ``[G]`` on the device,
    persistent, not cleared by ``reset_stats``); its output is NaN or inf, so the caller
    sees it; every other env is normalized with the statistics of the finite samples. The
    same on every path, with device work only.

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

    _f32_data = True

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

    def _prepare(self, x: torch.Tensor, out: torch.Tensor | None) -> tuple[Engine, torch.Tensor]:
        """Validate, fix N; return the engine and ``x`` contiguous (a copy only if it is not)."""
        e, f32 = self._engine, torch.float32
        if e is None or not (
            e.matches(x, f32) and (out is None or (e.matches(out, f32) and out.is_contiguous()))
        ):
            self._check(x, "x")  # raises the precise error, or passes on the first call
            if out is not None:
                self._check(out, "out")
                if not out.is_contiguous():
                    raise ValueError("ObsNorm: out expected a contiguous tensor")
            self._ensure_bound(x.shape[0])
            e = self._eng()
        return e, x.detach().contiguous()  # the statistics never join an autograd graph

    def forward(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Update the statistics with ``x`` (training and not frozen), then normalize it.

        Args:
            x: float32 tensor ``[N, *shape]`` on the module's device.
            out: optional float32 tensor ``[N, *shape]`` on the device to write into (may be
                ``x`` itself); otherwise a new tensor is returned.

        Returns:
            float32 tensor ``[N, *shape]`` on the device.
        """
        e, x = self._prepare(x, out)
        updated = self.training and not self._frozen
        if e.fused:
            return self._fused(e, x, out, updated)
        if updated:
            if e.layout == "tiled":
                e.update_f32(x)
            else:
                e.data64.copy_(x)
                e.update_f64()
        return self._normalize(e, x, out, updated)

    def normalize(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Normalize ``x`` without touching the statistics; arguments as in :meth:`forward`."""
        e, x = self._prepare(x, out)
        if e.fused:
            return self._fused(e, x, out, False)
        return self._normalize(e, x, out, False)

    def forward_pair(
        self, x: torch.Tensor, out: torch.Tensor, x2: torch.Tensor, out2: torch.Tensor
    ) -> None:
        """``forward(x, out=out)`` then ``normalize(x2, out=out2)`` with the same statistics,
        in one launch on CPU (what ``TransformedEnv`` does with ``final_observation`` and
        ``observation``). All four float32 ``[N, *shape]`` on the device; ``out`` and
        ``out2`` contiguous; ``out`` may be ``x`` and ``out2`` may be ``x2``, but ``out``
        must not be ``x2``."""
        if out is None or out2 is None:
            raise ValueError("ObsNorm.forward_pair: expected output tensors out and out2, got None")
        e, x = self._prepare(x, out)
        _, x2 = self._prepare(x2, out2)
        if not e.fused:
            self(x, out=out)
            self.normalize(x2, out=out2)
            return
        e.obs_fused(x, out, x2, out2, self.training and not self._frozen, self.clip)

    def _fused(self, e: Engine, x: torch.Tensor, out, update: bool) -> torch.Tensor:
        """One launch: merge ``x`` in (``update``) and normalize it into ``out``."""
        out = torch.empty(x.shape, device=x.device) if out is None else out
        e.obs_fused(x, out, None, None, update, self.clip)
        return out

    def _normalize(self, e: Engine, x: torch.Tensor, out, updated: bool) -> torch.Tensor:
        out = torch.empty(x.shape, device=x.device) if out is None else out
        e.normalize(x, out, updated)
        if self.clip is not None:
            out.clamp_(-self.clip, self.clip)
        return out
