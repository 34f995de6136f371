"""Validation of env-to-group layouts and group selections for the running-statistics modules."""

from __future__ import annotations

import torch


def check_group_ids(name: str, gid, num_groups, num_envs, dev: torch.device) -> int:
    """Validate ``group_ids`` (long ``[N]`` on ``dev``, or ``None``) and return G.

    Reads the id range on the host: construction and checkpoint loading only.
    Raises ``ValueError`` naming ``name`` and what was expected.
    """
    if num_groups is not None and (isinstance(num_groups, bool) or int(num_groups) < 1):
        raise ValueError(f"{name}: num_groups must be an int >= 1, got {num_groups}")
    if num_envs is not None and int(num_envs) < 1:
        raise ValueError(f"{name}: num_envs must be >= 1, got {num_envs}")
    if gid is None:
        if num_groups not in (None, 1):
            raise ValueError(f"{name}: num_groups={num_groups} needs group_ids")
        return 1
    if not isinstance(gid, torch.Tensor) or gid.dtype != torch.int64 or gid.dim() != 1:
        got = f"{gid.dtype} {tuple(gid.shape)}" if isinstance(gid, torch.Tensor) else gid
        raise ValueError(f"{name}: group_ids expected a long tensor [N], got {got}")
    if gid.numel() == 0 or (num_envs is not None and gid.shape[0] != int(num_envs)):
        raise ValueError(f"{name}: group_ids expected shape ({num_envs},), got {gid.shape}")
    if gid.device != dev:
        raise ValueError(f"{name}: group_ids expected device {dev}, got {gid.device}")
    lo, hi = int(gid.min()), int(gid.max())  # host-ok: construction only
    G = int(num_groups) if num_groups is not None else hi + 1
    if lo < 0 or hi >= G:
        raise ValueError(f"{name}: group_ids expected values in [0, {G}), got [{lo}, {hi}]")
    return G


def groups_to_mask(name: str, groups, G: int, dev: torch.device) -> torch.Tensor:
    """``reset_stats(groups=)``: bool ``[G]`` as given, or long ``[K]`` indices as a bool
    ``[G]`` mask on ``dev`` (their range is checked on the host, a sync)."""
    what = f"{name}.reset_stats: groups expected"
    if not isinstance(groups, torch.Tensor) or groups.device != dev:
        got = getattr(groups, "device", type(groups).__name__)
        raise ValueError(f"{what} a tensor on {dev}, got {got}")
    if groups.dtype == torch.bool and tuple(groups.shape) == (G,):
        return groups
    if groups.dtype != torch.int64 or groups.dim() != 1:
        raise ValueError(f"{what} bool [{G}] or long [K], got {groups.dtype} {groups.shape}")
    if groups.numel() and not (0 <= int(groups.min()) and int(groups.max()) < G):  # host-ok
        raise ValueError(f"{what} indices in [0, {G})")
    return torch.zeros(G, dtype=torch.bool, device=dev).index_fill_(0, groups, 1)
