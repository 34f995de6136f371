"""The recorded Warp launches behind ``GroupedRunningStats.exchange_pack`` /
``exchange_apply`` (``kernels/stats_sync.py``): one launch each, so a sync costs the host
a few microseconds beyond its collective."""

from __future__ import annotations

import math
import weakref

import torch
import warp as wp

from gpuparam._device import Replay, init_warp, record, wp_device
from gpuparam.kernels import stats_sync as K

_CMDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> {key: Replay}


def _flat(t: torch.Tensor) -> wp.array:
    return wp.from_torch(t.view(torch.uint8) if t.dtype == torch.bool else t.view(-1))


def _rows(t: torch.Tensor) -> wp.array:
    """``t`` float64 ``[W, K]`` (rows ``stride(0)`` apart, unit inner stride) as a flat
    array from ``t[0, 0]``; not holding ``t`` (repointed at every call)."""
    extent = (t.shape[0] - 1) * t.stride(0) + t.shape[1] if t.dim() == 2 else t.numel()
    return wp.array(ptr=t.data_ptr(), dtype=wp.float64, shape=(extent,),
                    device=wp_device(t.device))


def _cmd(m, kind: str, data: torch.Tensor) -> Replay:
    names = ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2",
             "sent_count", "sent_mean", "sent_m2", "reset_unsent", "reset_pending")
    bufs = [getattr(m, n) for n in names]
    W, stride = (data.shape[0], data.stride(0)) if data.dim() == 2 else (1, 0)
    key = (kind, W, stride, *(b.data_ptr() for b in bufs))
    cmds = _CMDS.setdefault(m, {})
    cmd = cmds.get(key)
    if cmd is None:
        init_warp()
        if len(cmds) > 8:  # buffers moved or replaced: drop stale launches
            cmds.clear()
        G, P = m.num_groups, math.prod(m.shape)
        a = [_flat(b) for b in bufs]
        if kind == "pack":
            args, slot = [P, *a[0:3], *a[6:10], _rows(data)], 8
            cmd = record(K.exchange_pack, G, args, m.device)
        else:
            args, slot = [_rows(data), stride, W, P, *a], 0
            cmd = record(K.exchange_apply, G, args, m.device)
        cmd.rebindable((slot, _rows))
        cmds[key] = cmd
    cmd.set_tensors((data,))
    return cmd


def pack(m, out: torch.Tensor) -> None:
    """``m``'s data since the last pack into ``out`` (float64 ``[exchange_size()]``)."""
    _cmd(m, "pack", out)()


def apply(m, rows: torch.Tensor) -> None:
    """Merge ``rows`` (float64 ``[W, exchange_size()]``, unit inner stride) into ``m``."""
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    _cmd(m, "apply", rows)()
