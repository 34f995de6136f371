"""Input validation shared by the public API: clear errors that say expected vs got."""

from __future__ import annotations

import torch


def check_mask(mask: torch.Tensor | None, num_envs: int, device: torch.device, what: str = "mask"):
    """Validate a bool mask ``[num_envs]`` on ``device``; ``None`` passes through."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"{what}: expected a bool tensor [{num_envs}], got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"{what}: expected dtype torch.bool, got {mask.dtype}")
    if tuple(mask.shape) != (num_envs,):
        raise ValueError(f"{what}: expected shape ({num_envs},), got {tuple(mask.shape)}")
    if mask.device != device:
        raise ValueError(f"{what}: expected device {device}, got {mask.device}")
    return mask


def check_env_ids(env_ids, num_envs: int, device: torch.device, validate: bool = True):
    """Validate env indices: long tensor ``[K]`` on ``device`` or a sequence of ints.

    Range checks synchronize with the host when ``validate`` is true.
    """
    if not isinstance(env_ids, torch.Tensor):
        env_ids = torch.as_tensor(env_ids, dtype=torch.int64)
        if env_ids.device != device:
            env_ids = env_ids.to(device)
    if env_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"env_ids: expected an integer tensor, got dtype {env_ids.dtype}")
    if env_ids.dim() != 1:
        raise ValueError(f"env_ids: expected shape (K,), got {tuple(env_ids.shape)}")
    if env_ids.device != device:
        raise ValueError(f"env_ids: expected device {device}, got {env_ids.device}")
    if validate and env_ids.numel() > 0:
        lo, hi = int(env_ids.min()), int(env_ids.max())  # host-ok: validated path only
        if lo < 0 or hi >= num_envs:
            raise ValueError(f"env_ids: expected indices in [0, {num_envs}), got [{lo}, {hi}]")
    return env_ids.to(torch.int64)


def ids_to_mask(env_ids: torch.Tensor, num_envs: int) -> torch.Tensor:
    """Bool mask ``[num_envs]`` with True at ``env_ids``, built on the device."""
    mask = torch.zeros(num_envs, dtype=torch.bool, device=env_ids.device)
    mask[env_ids] = True
    return mask
