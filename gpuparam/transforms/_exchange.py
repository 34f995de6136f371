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


NAMES = ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2",
         "sent_count", "sent_mean", "sent_m2", "reset_unsent", "reset_pending")


def cmd(m, kind: str, data: torch.Tensor, key: tuple, tables) -> Replay:
    """The recorded pack / apply launch of module ``m`` for ``key`` (which must change
    whenever a buffer or the tables move), repointed at ``data``. ``tables``: ``(k, eps,
    float32 [3, ...])`` of ``m``'s engine, or ``None``."""
    cmds = _CMDS.setdefault(m, {})
    c = cmds.get(key)
    if c is None:
        init_warp()
        if len(cmds) > 8:  # buffers moved or replaced: drop stale launches
            cmds.clear()
        G, P = m.num_groups, math.prod(m.shape)
        a = [_flat(getattr(m, n)) for n in NAMES]
        if kind == "pack":
            args, slot = [P, *a[0:3], *a[6:10], _rows(data)], 8
            c = record(K.exchange_pack, G, args, m.device)
        else:
            W, stride = (data.shape[0], data.stride(0))
            if tables is None:
                none = torch.zeros(0, dtype=torch.float32, device=m.device)
                tables = (0, m.eps, (none, none, none))
            k, eps, tab = tables
            args = [_rows(data), stride, W, P, *a, k, wp.float64(eps),
                    *(_flat(t) for t in tab)]
            slot = 0
            c = record(K.exchange_apply, G, args, m.device)
        c.rebindable((slot, _rows))
        cmds[key] = c
    c.set_tensors((data,))
    return c
