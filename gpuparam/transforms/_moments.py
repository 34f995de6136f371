"""Moments math shared by the running-statistics modules: Chan et al.'s merge and its inverse.

Per-group moments are a count ``[G]``, a mean ``[G, *S]`` and M2 ``[G, *S]`` (the sum of
squared deviations from the mean), all float64. Merging two sets is exact up to rounding and
never forms ``E[x^2] - E[x]^2``, so data like 10000, 10001, 10002 keeps its variance. The hot
path runs the same merge as a Warp kernel (``kernels/stats.py``); these torch forms serve
``sync`` and tests.
"""

from __future__ import annotations

import torch
from torch import Tensor

F64 = torch.float64


def col(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """View ``v`` ``[G]`` as ``[G, 1, ...]`` to broadcast against ``like`` ``[G, *S]``."""
    return v.view(v.shape[0], *([1] * (like.dim() - 1)))


def merge_moments(
    n_a: Tensor,
    mean_a: Tensor,
    m2_a: Tensor,
    n_b: Tensor,
    mean_b: Tensor,
    m2_b: Tensor,
    *,
    inplace: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Chan et al.'s parallel merge of two sets of per-group moments.

    Args:
        n_a, n_b: float64 tensors ``[G]`` (counts; a group may have 0).
        mean_a, mean_b, m2_a, m2_b: float64 tensors ``[G, *S]``; all on one device.
        inplace: write the result into ``n_a``, ``mean_a``, ``m2_a`` (the hot-path form).

    Returns:
        ``(n, mean, m2)``: float64 tensors ``[G]``, ``[G, *S]``, ``[G, *S]``: the moments of
        the union. Groups empty on both sides keep ``mean_a`` (0 after a reset).
    """
    n = n_a + n_b
    w_b = col(n_b / n.clamp(min=1.0), mean_a)
    delta = mean_b - mean_a
    corr = delta.square().mul_(col(n_a, mean_a)).mul_(w_b)  # between-set term of M2
    if not inplace:
        return n, mean_a + delta * w_b, m2_a + m2_b + corr
    n_a.copy_(n)
    return n_a, mean_a.addcmul_(delta, w_b), m2_a.add_(m2_b).add_(corr)


def unmerge_moments(
    n: Tensor, mean: Tensor, m2: Tensor, n_a: Tensor, mean_a: Tensor, m2_a: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Inverse of :func:`merge_moments`: the moments of B given those of A∪B and of A.

    Shapes and dtypes as in :func:`merge_moments`. Groups where B is empty get 0s.
    """
    n_b = n - n_a
    has = col(n_b > 0, mean)
    w = col(n / n_b.clamp(min=1.0), mean)  # exactly 1 where A is empty
    mean_b = torch.where(has, mean_a + (mean - mean_a) * w, 0.0)
    corr = (mean_b - mean_a).square() * col(n_a * n_b / n.clamp(min=1.0), mean)
    m2_b = torch.where(has, (m2 - m2_a - corr).clamp(min=0.0), 0.0)
    return n_b, mean_b, m2_b
