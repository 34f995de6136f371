"""Moments math shared by the running-statistics modules: Chan et al.'s merge and its inverse.

Per-group moments are a count ``[G]``, a mean ``[G, *S]`` and M2 ``[G, *S]`` (the sum of
squared deviations from the mean), all float64. Merging two sets is exact up to rounding and
never forms ``E[x^2] - E[x]^2``, so data like 10000, 10001, 10002 keeps its variance. The hot
path runs the same merge as a Warp kernel (``kernels/stats.py``); these torch forms serve
``sync`` and tests.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
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


def all_reduce_moments(
    stats: tuple[Tensor, Tensor, Tensor],
    synced: tuple[Tensor, Tensor, Tensor],
    reset_pending: Tensor,
    group: dist.ProcessGroup | None = None,
) -> None:
    """Merge per-group moments over ``torch.distributed`` ranks, in place (``sync``).

    Args:
        stats: this rank's ``(count, mean, m2)``: its ``synced`` baseline plus its own data.
        synced: ``(count, mean, m2)`` at the last sync, identical on all ranks.
        reset_pending: bool ``[G]``: groups reset on this rank since the last sync.
        group: the process group; without an initialized one, a world of one.

    The deltas over the baseline are gathered from every rank in one collective
    (``all_gather_into_tensor``) and merged exactly on each (counts, count-weighted means,
    M2 plus the between-rank term around the merged mean), then into the baseline, which
    drops on every rank the groups any rank reset; the result becomes both ``stats`` and
    ``synced``, and ``reset_pending`` is cleared.
    """
    G = stats[0].shape[0]
    n_d, mean_d, m2_d = unmerge_moments(*stats, *synced)
    S = mean_d[0].numel()
    pack = torch.cat([n_d[:, None], mean_d.reshape(G, S), m2_d.reshape(G, S),
                      reset_pending[:, None].to(F64)], 1)  # [G, 2S + 2]
    if dist.is_available() and dist.is_initialized():
        # one collective: every rank gathers every rank's deltas and merges them the same
        # way (same data, same ops in the same order: the same bits on every rank)
        everyone = pack.new_empty(dist.get_world_size(group) * G, pack.shape[1])
        dist.all_gather_into_tensor(everyone, pack, group=group)  # ranks along dim 0
        everyone = everyone.view(-1, *pack.shape)
    else:
        everyone = pack[None]
    n_w, flags = everyone[:, :, 0], everyone[:, :, -1].sum(0) > 0  # [W, G], [G]
    mean_w, m2_w = everyone[:, :, 1 : 1 + S], everyone[:, :, 1 + S : 1 + 2 * S]
    n_t = n_w.sum(0)
    mean_t = (mean_w * n_w[..., None]).sum(0) / n_t.clamp(min=1.0)[:, None]
    m2_t = (m2_w + (mean_w - mean_t).square() * n_w[..., None]).sum(0)
    mean_t, m2_t = mean_t.reshape(mean_d.shape), m2_t.reshape(mean_d.shape)
    keep = col(~flags, mean_t)  # a reset on any rank drops the shared baseline
    base = (synced[0] * ~flags, synced[1] * keep, synced[2] * keep)
    merge_moments(*base, n_t, mean_t, m2_t, inplace=True)
    for now, then, v in zip(stats, synced, base, strict=True):
        now.copy_(v)
        then.copy_(v)
    reset_pending.zero_()
