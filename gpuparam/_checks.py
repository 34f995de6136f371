"""Input validation shared by the public API: clear errors that say expected vs got."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import torch

from gpuparam.spec import BoxSpec, DiscreteSpec


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


def check_env_ids(
    env_ids, num_envs: int, device: torch.device, validate: bool = True, distinct: bool = False
):
    """Validate env indices: an integer tensor ``[K]`` on ``device`` or a sequence of ints.

    Python sequences must hold ints (``bool`` and ``float`` entries are rejected: a bool
    selection is a ``mask``). With ``validate`` the range, and with ``distinct`` that no
    id repeats, are checked on the host (a sync); without it nothing is read back (the
    writes drop out-of-range ids on the device: :func:`ids_to_mask`). Returns int64 ``[K]``.
    """
    if not isinstance(env_ids, torch.Tensor):
        if isinstance(env_ids, (str, bytes)) or not isinstance(env_ids, Iterable):
            raise ValueError(
                f"env_ids: expected a sequence of ints or an integer tensor [K], "
                f"got {type(env_ids).__name__}"
            )
        env_ids = list(env_ids)
        bad = [i for i in env_ids if isinstance(i, bool) or not isinstance(i, numbers.Integral)]
        if bad:
            hint = " (a bool selection is a mask: pass mask=)" if isinstance(bad[0], bool) else ""
            raise ValueError(
                f"env_ids: expected ints, got {bad[0]!r} ({type(bad[0]).__name__}){hint}"
            )
        try:
            env_ids = torch.tensor([int(i) for i in env_ids], dtype=torch.int64, device=device)
        except (OverflowError, RuntimeError, ValueError):
            raise ValueError(
                f"env_ids: expected indices in [0, {num_envs}), got one beyond int64"
            ) from None
    if env_ids.dtype not in (torch.int64, torch.int32):
        hint = " (a bool selection is a mask: pass mask=)" if env_ids.dtype == torch.bool else ""
        raise ValueError(f"env_ids: expected an integer tensor (int64 or int32), got dtype "
                         f"{env_ids.dtype}{hint}")
    if env_ids.dim() != 1:
        raise ValueError(f"env_ids: expected shape (K,), got {tuple(env_ids.shape)}")
    if env_ids.device != device:
        raise ValueError(f"env_ids: expected device {device}, got {env_ids.device}")
    if validate and env_ids.numel() > 0:
        lo, hi = int(env_ids.min()), int(env_ids.max())  # host-ok: validated path only
        if lo < 0 or hi >= num_envs:
            raise ValueError(f"env_ids: expected indices in [0, {num_envs}), got [{lo}, {hi}]")
        if distinct and torch.unique(env_ids).numel() != env_ids.numel():  # host-ok
            raise ValueError("env_ids: expected distinct indices, got duplicates")
    return env_ids.to(torch.int64)


def ids_to_mask(env_ids: torch.Tensor, num_envs: int) -> torch.Tensor:
    """Bool mask ``[num_envs]`` with True at the in-range ``env_ids``, built on the device
    without a sync; ids outside ``[0, num_envs)`` are dropped (negative ids do not wrap)."""
    ok = (env_ids >= 0) & (env_ids < num_envs)
    hits = torch.zeros(num_envs, dtype=torch.int32, device=env_ids.device)
    hits.index_add_(0, env_ids.clamp(0, num_envs - 1), ok.to(torch.int32))
    return hits > 0


INT32_MAX = 2**31 - 1


def check_max_episode_steps(value, where: str = "") -> int:
    """``max_episode_steps``: an int in ``[1, 2**31 - 1]`` (the per-env step counters are
    int32); ``bool`` is rejected. ``where`` prefixes the error message."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not (
        1 <= value <= INT32_MAX
    ):
        raise ValueError(
            f"{where}max_episode_steps: expected an int in [1, {INT32_MAX}] (the step counters are "
            f"int32), got {value!r} ({type(value).__name__})"
        )
    return int(value)


def check_seed(seed) -> int:
    """A seed: an int32 value (``bool`` is rejected)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not -(2**31) <= seed < 2**31:
        raise ValueError(f"seed: expected an int32 value, got {seed!r}")
    return seed


def check_env_slice(num_envs, env_offset) -> None:
    """``num_envs`` (an int >= 1) envs at global ids from ``env_offset`` (an int >= 0),
    all below ``2**31``."""
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ValueError(f"num_envs: expected a positive int, got {num_envs!r}")
    if not isinstance(env_offset, int) or isinstance(env_offset, bool) or env_offset < 0:
        raise ValueError(f"env_offset: expected an int >= 0, got {env_offset!r}")
    if env_offset + num_envs > 2**31:
        raise ValueError(
            f"env_offset + num_envs: expected at most 2**31 global env ids, "
            f"got {env_offset} + {num_envs}"
        )


def check_episode_length(value, limit: int, num_envs: int, device: torch.device) -> torch.Tensor:
    """``env.episode_length = value``: a tensor ``[num_envs]`` or ``()`` of an integer dtype
    on ``device``, or an int, all in ``[0, limit)``; returns it as a tensor. Synchronizes."""
    want = f"steps in [0, {limit}) (max_episode_steps {limit})"
    if not isinstance(value, torch.Tensor):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"episode_length: expected a tensor or an int, got {value!r}")
        if not 0 <= value < limit:  # (before torch, which cannot hold every int)
            raise ValueError(f"episode_length: expected {want}, got {value}")
        value = torch.tensor(value, device=device)
    if tuple(value.shape) not in ((), (num_envs,)):
        raise ValueError(f"episode_length: expected shape () or ({num_envs},), "
                         f"got {tuple(value.shape)}")
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"episode_length: expected an integer dtype, got {value.dtype}")
    if value.device != device:
        raise ValueError(f"episode_length: expected device {device}, got {value.device}")
    if bool(((value < 0) | (value >= limit)).any()):  # host-ok: setter
        lo, hi = int(value.min()), int(value.max())  # host-ok: error path
        raise ValueError(f"episode_length: expected {want}, got values in [{lo}, {hi}]")
    return value


def check_action(
    action, spec: BoxSpec | DiscreteSpec, num_envs: int, device: torch.device, validate: bool
) -> None:
    """An action for ``env.step``: a tensor ``[num_envs, *spec.shape]`` on ``device``, an
    integer dtype for a ``DiscreteSpec``, floating point otherwise (any floating dtype: the
    env steps with its float32 cast, ``torch``'s rounding). With ``validate``
    (``validate_actions=True``, which synchronizes) the values too: discrete ones in
    ``[0, n)``; continuous ones, as the float32 values the env steps with, not NaN, not
    infinite, and inside ``[spec.low, spec.high]`` (so a float64 value beyond float32's
    range, infinite once cast, is refused)."""
    expected = (num_envs, *spec.shape)
    if not isinstance(action, torch.Tensor):
        raise ValueError(f"action: expected a tensor {expected}, got {type(action).__name__}")
    if tuple(action.shape) != expected:
        raise ValueError(f"action: expected shape {expected}, got {tuple(action.shape)}")
    if action.device != device:
        raise ValueError(f"action: expected device {device}, got {action.device}")
    discrete = isinstance(spec, DiscreteSpec)
    if action.dtype == torch.bool or action.is_floating_point() == discrete:
        kind = "an integer" if discrete else "a floating-point"
        raise ValueError(f"action: expected {kind} dtype, got {action.dtype}")
    if not validate:
        return
    # host checks: synchronize (validate_actions=True only)
    if discrete:
        checks = [(f"outside [0, {spec.n})", (action < 0) | (action >= spec.n))]
    else:
        a = action.detach().to(torch.float32)  # the values the env steps with
        low = torch.as_tensor(spec.low, dtype=torch.float32, device=device)
        high = torch.as_tensor(spec.high, dtype=torch.float32, device=device)
        scalar = isinstance(spec.low, (int, float)) and isinstance(spec.high, (int, float))
        bounds = f"[{spec.low}, {spec.high}]" if scalar else "action_spec's [low, high]"
        checks = [("NaN", torch.isnan(a)), ("infinite", torch.isinf(a)),
                  (f"outside {bounds}", (a < low) | (a > high))]
    for what, bad in checks:
        if bool(bad.any()):  # host-ok: validate_actions=True is the synchronizing mode
            bad_envs = torch.nonzero(bad.reshape(num_envs, -1).any(1)).flatten()  # host-ok
            shown = bad_envs[:8].tolist()  # host-ok: validate_actions=True, raising
            more = " ..." if len(bad_envs) > 8 else ""
            raise ValueError(
                f"action: expected actions in the action space, got {what} actions "
                f"for envs {shown}{more}"
            )


def load_action(buf: torch.Tensor, action, spec: BoxSpec | DiscreteSpec, validate: bool) -> None:
    """Copy ``action`` into ``buf`` (the env's action buffer ``[N, *spec.shape]``) once
    :func:`check_action` accepts it; nothing is written when it raises. The common case (a
    tensor of ``buf``'s shape, dtype and device, not validated on the host) is checked in
    one pass; an action requiring grad is detached."""
    if not (
        type(action) is torch.Tensor and action.shape == buf.shape
        and action.dtype == buf.dtype and action.device == buf.device
        and not validate and not action.requires_grad
    ):
        check_action(action, spec, buf.shape[0], buf.device, validate)
        action = action.detach()
    buf.copy_(action)
