"""The non-finite policy of the torch reductions: envs whose sample holds NaN or inf are
left out of a batch's statistics and counted, with device ops only (no host sync).

The policy is the same on every path (``kernels.stats_cpu`` applies it in its fused
launches): an env's sample (all ``P`` values of its observation, or its discounted return)
that holds a NaN or inf is excluded from the batch, the group's ``nonfinite`` counter
grows by one, and the normalized output of that env is whatever the formula gives (NaN or
inf: the caller sees the bad value). The other envs' statistics are those of the finite
samples alone.
"""

from __future__ import annotations

import torch


class FiniteMask:
    """Scratch for one engine: per-env finiteness of a float64 batch ``[N, P]``.

    After :meth:`apply`: ``good`` / ``bad`` bool ``[N]``, ``good64`` float64 ``[N]`` (1 for
    finite samples), ``nb`` float64 ``[1]`` (their number); the bad rows of the batch are
    set to 0 in place.
    """

    def __init__(self, n: int, P: int, device: torch.device):
        f64 = dict(dtype=torch.float64, device=device)
        self.n, self.P = n, P
        self.env_sum = torch.zeros(n, **f64)
        self.good = torch.zeros(n, dtype=torch.bool, device=device)
        self.bad = torch.zeros(n, dtype=torch.bool, device=device)
        self.good64 = torch.zeros(n, **f64)
        self.bad64 = torch.zeros(n, dtype=torch.int64, device=device)
        self.nb = torch.zeros(1, **f64)

    def apply(self, x64: torch.Tensor) -> torch.Tensor:
        """Classify the rows of ``x64`` (contiguous float64, ``N * P`` values) and zero the
        bad ones; returns ``bad`` viewed ``[N, 1]`` for masking other ``[N, P]`` data."""
        rows = x64.view(self.n, self.P)
        # float64 sums of float32 or float64-finite data: inf or NaN only from a bad value
        # (a float64 return near 1e308 could overflow: it is then counted as not finite)
        torch.sum(rows, 1, out=self.env_sum)
        torch.sub(self.env_sum, self.env_sum, out=self.env_sum)  # 0, or NaN where bad
        torch.eq(self.env_sum, 0.0, out=self.good)
        torch.logical_not(self.good, out=self.bad)
        self.good64.copy_(self.good)
        torch.sum(self.good64, 0, keepdim=True, out=self.nb)
        badcol = self.bad.view(self.n, 1)
        rows.masked_fill_(badcol, 0.0)
        return badcol

    def count(self, nonfinite: torch.Tensor, gid: torch.Tensor) -> None:
        """Add the bad envs of the last :meth:`apply` to ``nonfinite`` (int64 ``[G]``) by
        group ``gid`` (long ``[N]``)."""
        self.bad64.copy_(self.bad)
        nonfinite.index_add_(0, gid, self.bad64)
