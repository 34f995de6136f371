"""Observation normalization with per-group running statistics and a masked reset."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gpuparam.transforms._engine import Engine
from gpuparam.transforms._moments import F64, merge_moments
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

    Learner side: ``forward`` and ``normalize`` also take any other leading batch shape, e.g.
    a minibatch ``[64, *shape]`` or a rollout ``[T, N, *shape]`` (with several groups the
    last leading dimension must be N, so each row finds its env's group). Such batches are
    normalized in float64 torch ops from the float64 statistics (equal to the env path up to
    float32 rounding), and merged into them only when asked: ``forward(x, train=True)``, the
    keyword skrl's preprocessor call passes (``train=False`` only normalizes).
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

    def _want(self) -> str:
        """The expected ``[N, *shape]`` as text, e.g. ``(8, 3)`` or ``(N, 3)``."""
        n = self.num_envs
        return "(" + ", ".join(["N" if n is None else str(n), *map(str, self.shape)]) + ")"

    def _check_tensor(self, x: torch.Tensor, what: str, want: str) -> None:
        name = type(self).__name__
        if not isinstance(x, torch.Tensor):
            raise ValueError(
                f"{name}: {what} expected a float32 tensor {want}, got {type(x).__name__}"
            )
        if x.dtype != torch.float32:
            raise ValueError(f"{name}: {what} expected dtype torch.float32, got {x.dtype}")
        if x.device != self.device:
            raise ValueError(f"{name}: {what} expected device {self.device}, got {x.device}")

    def _check(self, x: torch.Tensor, what: str) -> None:
        name, S, n, want = type(self).__name__, self.shape, self.num_envs, self._want()
        self._check_tensor(x, what, want)
        if (
            x.dim() != 1 + len(S)
            or tuple(x.shape[1:]) != S
            or x.shape[0] == 0
            or (n is not None and x.shape[0] != n)
        ):
            raise ValueError(f"{name}: {what} expected shape {want}, got {tuple(x.shape)}")

    def _is_env_batch(self, x) -> bool:
        """Whether ``x`` is (or may become, while N is unknown) the ``[N, *shape]`` batch."""
        if not isinstance(x, torch.Tensor) or tuple(x.shape[1:]) != self.shape:
            return False
        n = self.num_envs
        return x.dim() == 1 + len(self.shape) and x.shape[0] == (x.shape[0] if n is None else n)

    def _prepare(
        self, x: torch.Tensor, out: torch.Tensor | None
    ) -> tuple[Engine | None, torch.Tensor]:
        """Validate, fix N; return the engine and ``x`` contiguous (a copy only if it is not),
        or ``(None, x)`` when ``x`` is not an ``[N, *shape]`` batch (see :meth:`forward`)."""
        e, f32 = self._engine, torch.float32
        if e is None or not (
            e.matches(x, f32) and (out is None or (e.matches(out, f32) and out.is_contiguous()))
        ):
            if not self._is_env_batch(x):
                return None, x
            self._check(x, "x")  # raises the precise error, or passes on the first call
            if out is not None:
                self._check(out, "out")
                if not out.is_contiguous():
                    raise ValueError("ObsNorm: out expected a contiguous tensor")
            self._ensure_bound(x.shape[0])
            e = self._eng()
        return e, x.detach().contiguous()  # the statistics never join an autograd graph

    def _update_flag(self, train: bool | None) -> bool:
        if train is None:
            return self.training and not self._frozen
        if not isinstance(train, bool):
            raise ValueError(f"ObsNorm: train expected a bool or None, got {train!r}")
        return train and not self._frozen

    def forward(
        self, x: torch.Tensor, out: torch.Tensor | None = None, *, train: bool | None = None
    ) -> torch.Tensor:
        """Update the statistics with ``x`` (see ``train``), then normalize it.

        Args:
            x: float32 tensor on the module's device: ``[N, *shape]`` (the env batch, the
                hot path), or any leading batch shape (see :meth:`normalize_batch`):
                ``[*B, *shape]`` with one group, ``[*B, N, *shape]`` with several.
            out: optional float32 tensor of ``x``'s shape on the device to write into (may
                be ``x`` itself); otherwise a new tensor is returned.
            train: ``None`` updates in training mode unless frozen; ``True`` updates unless
                frozen (whatever the mode); ``False`` only normalizes. skrl's preprocessor
                call passes it.

        Returns:
            float32 tensor of ``x``'s shape on the device.
        """
        updated = self._update_flag(train)
        e, x = self._prepare(x, out)
        if e is None:
            return self._forward_batch(x, out, updated)
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
        """Normalize ``x`` without touching the statistics; arguments as in :meth:`forward`
        (any leading batch shape, e.g. a learner's minibatch ``[64, *shape]``)."""
        e, x = self._prepare(x, out)
        if e is None:
            return self._forward_batch(x, out, False)
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
        if e is None:
            self._check(x, "x")
        e2, x2 = self._prepare(x2, out2)
        if e2 is None:
            self._check(x2, "x2")
        if not e.fused:
            self(x, out=out)
            self.normalize(x2, out=out2)
            return
        e.obs_fused(x, out, x2, out2, self.training and not self._frozen, self.clip)

    # ------------------------------------------------------------------ any batch shape
    def _check_batch(self, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        """Validate a batch of another leading shape; return the group of each of its
        ``[M, prod(shape)]`` rows, long ``[M]``."""
        name, S, G, n = type(self).__name__, self.shape, self.num_groups, self.num_envs
        dims = ", ".join(map(str, S))
        want = f"(*batch, {dims})" if G == 1 else f"(*batch, {'N' if n is None else n}, {dims})"
        self._check_tensor(x, "x", want)
        k = len(S)
        lead = tuple(x.shape[: x.dim() - k])
        ok = len(lead) >= 1 and tuple(x.shape[len(lead):]) == S and x.numel() > 0
        if ok and G > 1:
            ok = n is not None and lead[-1] == n
        if not ok:
            raise ValueError(f"{name}: x expected shape {want}, got {tuple(x.shape)}")
        if out is not None:
            self._check_tensor(out, "out", str(tuple(x.shape)))
            if out.shape != x.shape:
                raise ValueError(f"{name}: out expected shape {tuple(x.shape)} (that of x), "
                                 f"got {tuple(out.shape)}")
        m = x.numel() // max(1, math.prod(S))
        if G == 1:
            return torch.zeros(m, dtype=torch.int64, device=x.device)
        return self.group_ids.expand(*lead).reshape(m)

    def _forward_batch(self, x: torch.Tensor, out, update: bool) -> torch.Tensor:
        """Learner side: ``x`` ``[*B, *shape]`` (one group) or ``[*B, N, *shape]``; merge it
        into the statistics (``update``), then normalize it, in float64 torch ops (each call
        allocates; not the env's hot path)."""
        gid = self._check_batch(x, out)
        G, m = self.num_groups, gid.shape[0]
        xf = x.reshape(m, -1).to(F64)
        mean, m2 = self.mean.view(G, -1), self.m2.view(G, -1)
        if update:
            n_b = torch.zeros(G, dtype=F64, device=x.device)
            n_b.index_add_(0, gid, torch.ones(m, dtype=F64, device=x.device))
            mean_b = torch.zeros_like(mean).index_add_(0, gid, xf) / n_b.clamp(min=1.0)[:, None]
            d = xf - mean_b[gid]
            m2_b = torch.zeros_like(m2).index_add_(0, gid, d * d)
            merge_moments(self.count, mean, m2, n_b, mean_b, m2_b, inplace=True)
            self._refresh()
        empty = (self.count == 0)[:, None]
        mu = torch.where(empty, 0.0, mean)
        var = torch.where(empty, 1.0, m2 / self.count.clamp(min=1.0)[:, None])
        y = ((xf - mu[gid]) * torch.rsqrt(var + self.eps)[gid]).to(torch.float32)
        if self.clip is not None:
            y.clamp_(-self.clip, self.clip)
        y = y.view(x.shape)
        if out is None:
            return y
        out.copy_(y)
        return out

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
