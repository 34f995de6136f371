"""The device side of the running-statistics modules: envs listed by group, scratch, float32
tables and recorded Warp launches (``kernels.stats``), the same on CPU and CUDA.

An ``Engine`` is built for a module's buffers (again whenever one is replaced: ``.to()``, a
checkpoint load, a copy). It lists each group's envs once (:class:`Layout`, the only place
that reads a device value on the host), owns every per-step buffer, so a step allocates
nothing, and replays launches recorded once (``Replay``), repointed at the caller's
tensors when their addresses change.

Launches per update (``kernels.stats``): 3 up to 1024 envs per group, one more per factor
of 32. No pass over the data is in float64; the float64 scratch is the partials, 16 bytes
per chunk of 32 envs and feature (about 0.5 byte per value), plus an int64 stamp per row.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import warp as wp

from gpuparam._device import Replay, init_warp, record, stream_for, wp_device
from gpuparam.kernels import stats as K

F64 = torch.float64
MODES = {None: 2, True: 1, False: 0}  # forward's ``train`` -> the kernels' ``mode``


CHUNK = 32  # items a thread folds, at every level of the tree
RESET_CHUNK = 1024  # envs a ``reset`` block scans (``kernels.stats.RESET_LANES`` lanes)
# the statistics' buffers, in ``kernels.stats.exchange_apply``'s order
NAMES = ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2", "sent_count",
         "sent_mean", "sent_m2", "reset_unsent", "reset_pending")


def _wp(t: torch.Tensor) -> wp.array:
    return wp.from_torch(t.view(-1))


def _ptr(t: torch.Tensor) -> wp.array:
    """A flat array over ``t``'s memory, of its dtype, from its first element to its last
    (any strides), that does not hold ``t``: for launch arguments repointed at every call
    (``Replay.set_tensors`` compares data pointers)."""
    extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))
    return wp.array(ptr=t.data_ptr(), dtype=wp.dtype_from_torch(t.dtype), shape=(extent,),
                    device=wp_device(t.device))


class Level:
    """One level of the tree: chunks of at most ``size`` items of one group, from the
    groups' item counts. Chunk ``c`` covers items ``bounds[c] .. bounds[c + 1] - 1`` (level
    0: positions in ``order``) of group ``grp[c]``; group ``g`` owns chunks ``first[g] ..
    first[g + 1] - 1`` (int32 Warp arrays on the device); ``per``: chunks per group."""

    def __init__(self, counts: np.ndarray, device: torch.device, size: int = CHUNK):
        self.per = -(-counts // size)
        first = np.concatenate([[0], np.cumsum(self.per)])
        self.K = int(first[-1])
        grp = np.repeat(np.arange(len(counts)), self.per)
        lo = (np.cumsum(counts) - counts)[grp] + (np.arange(self.K) - first[grp]) * size
        bounds = np.append(lo, counts.sum())
        self.bounds, self.grp, self.first = (
            _wp(torch.as_tensor(a.astype(np.int32)).to(device)) for a in (bounds, grp, first))


class Layout:
    """``n`` rows listed by group (``order``, int32 on the device), the tree of chunks
    over them (``levels``) and the larger chunks ``reset`` scans (``resets``), built from
    the group sizes (host ints).

    Args:
        gid: long ``[n]`` group of each row on ``device``, or ``None`` for one group.
        G: number of groups. n: rows. device: torch device.

    With groups, reads their sizes on the host (bind time only).
    """

    def __init__(self, gid: torch.Tensor | None, G: int, n: int, device: torch.device):
        if gid is None:
            order, counts = torch.arange(n, device=device), np.array([n] * G)
        else:
            order = torch.argsort(gid, stable=True)
            counts = torch.bincount(gid, minlength=G).cpu().numpy()  # host-ok: bind time
        self.order = order.to(torch.int32)
        self.resets = Level(counts, device, RESET_CHUNK)
        self.levels = [Level(counts, device)]
        while self.levels[-1].per.max(initial=0) > CHUNK:
            self.levels.append(Level(self.levels[-1].per, device))


class Scratch:
    """Per-update float64 moments of every level's chunks (``B`` slices at level 0) and a
    stamp per row (int64, 0: never stamped)."""

    def __init__(self, B: int, L: Layout, P: int, rows: int, device: torch.device):
        f64, i64 = dict(dtype=F64, device=device), dict(dtype=torch.int64, device=device)
        self.parts = []
        for i, lev in enumerate(L.levels):
            k = lev.K * (B if i == 0 else 1)
            t = (torch.zeros(k, **f64), torch.zeros(k, **i64), torch.zeros(k * P, **f64),
                 torch.zeros(k * P, **f64))
            self.parts.append([_wp(a) for a in t])
        self.stamp = torch.zeros(max(rows, 1), **i64)


class Engine:
    """Device state of one ``GroupedRunningStats`` (bound to N envs, or not yet: N = 0).

    Attributes: ``tab`` float32 ``[3, G * P]`` (center, scale, offset per group and
    feature), ``layout`` (the envs by group), ``full_shape`` ``(N, *shape)``.
    """

    def __init__(self, m):
        init_warp()
        dev, G, P, n = m.device, m.num_groups, math.prod(m.shape), m.num_envs or 0
        self.device, self.G, self.P, self.n, self.full_shape = dev, G, P, n, (n, *m.shape)
        self.eps = wp.float64(m.eps)
        gid = m.group_ids
        self.layout = Layout(None if gid is None or G == 1 else gid, G, n, dev)
        self.scratch = Scratch(1, self.layout, P, n, dev)
        self.gid = gid if gid is not None else torch.zeros(1, dtype=torch.int64, device=dev)
        self.n_mod = n if gid is not None else 1  # row r normalizes with group gid[r % n_mod]
        self.tab = torch.zeros(3, G * P, dtype=torch.float32, device=dev)
        self.n_old = torch.zeros(G, dtype=F64, device=dev)
        self.tick = torch.ones(1, dtype=torch.int64, device=dev)
        self.none_b = torch.zeros(max(n, G, 1), dtype=torch.bool, device=dev)  # unused masks
        self.none32 = wp.empty(0, dtype=wp.float32, device=wp_device(dev))  # unused data
        self.none64 = wp.empty(0, dtype=wp.float64, device=wp_device(dev))
        self.none_i64 = wp.empty(0, dtype=wp.int64, device=wp_device(dev))
        self.none_tab = wp.empty((0, 0), dtype=wp.float32, device=wp_device(dev))
        self.a = {k: _wp(getattr(m, k)) for k in (*NAMES, "nonfinite", "flags")}
        ret = getattr(m, "returns", None)  # RewardNorm's, [N]
        self.ret = self.none64 if ret is None else _wp(ret)
        self.wtab = wp.from_torch(self.tab)
        self._cmds: dict[tuple, Replay] = {}
        self._rows_layout: tuple[int, Layout] | None = None
        a = self.a  # the tables from the statistics (loaded, moved or copied ones too)
        wp.launch(K.refresh, (G, P), [P, self.eps, a["count"], a["mean"], a["m2"], self.wtab],
                  device=wp_device(dev), stream=stream_for(dev))

    # ------------------------------------------------------------------ launch helpers
    def _run(self, key: tuple, make, tensors: tuple, stream) -> None:
        """Launch the command recorded under ``key`` (by ``make()`` on first use) on
        ``stream``, its rebindable arguments pointed at ``tensors``."""
        c = self._cmds.get(key)
        if c is None:
            c = self._cmds[key] = make()
        c.set_tensors(tensors)
        c.launch(stream)

    def _tree(self, x32: wp.array, x64: wp.array, n_env: int, L: Layout, s: Scratch,
              B: int, mode: int) -> list[tuple]:
        """``(kernel, dim, args)`` of the update from ``B`` slices of ``n_env`` rows (``x32``
        or ``x64``) over layout ``L``: ``flag_rows`` (``x32`` data only), ``partial``, a
        ``combine`` per level above the first and one at the top. ``x32`` is argument 0 of
        the first two."""
        a, lv, pt, P, flags = self.a, L.levels, s.parts, self.P, self.a["flags"]
        t, stamp, none = _wp(self.tick), _wp(s.stamp), self.none64
        out = []
        if x32.shape[0]:
            out.append((K.flag_rows, (B * n_env, P), [x32, P, flags, mode, t, stamp]))
        out.append((K.partial, (B, lv[0].K, P), [
            x32, x64, P, n_env, _wp(L.order), lv[0].bounds, lv[0].grp, lv[0].first, flags,
            mode, t, stamp, a["count"], _wp(self.n_old), *pt[0]]))
        for i in range(1, len(lv) + 1):  # the levels above the first, then the top
            top = i == len(lv)
            bounds = lv[-1].first if top else lv[i].bounds
            outs = ([a[k] for k in ("count", "nonfinite", "mean", "m2")] + [t, self.wtab] if top
                    else [*pt[i], self.none_i64, self.none_tab])
            out.append((K.combine, (self.G if top else lv[i].K, P), [
                P, B if i == 1 else 1, lv[i - 1].K, bounds, *pt[i - 1],
                _wp(self.n_old) if top else none, flags, mode, self.eps, *outs]))
        return out

    def _run_tree(self, kind: str, x32, x64, rebind: tuple, mode: int, stream) -> None:
        """The recorded launches of ``_tree`` for the env batch; with ``rebind`` (float32
        data, ``x32``) the first two repointed at its tensor."""
        specs = None
        for i in range(len(self.layout.levels) + (2 if rebind else 1)):
            def make(i=i):
                nonlocal specs
                specs = specs or self._tree(x32, x64, self.n, self.layout, self.scratch, 1,
                                            mode)
                c = record(*specs[i], self.device)
                return c.rebindable((0, _ptr)) if (i < 2 and rebind) else c
            self._run((kind, i, mode), make, rebind if i < 2 else (), stream)

    def _normalize_args(self, x, out, x2, out2, pair: bool, gid, n_mod: int) -> list:
        return [x, out, x2, out2, int(pair), self.P, n_mod, _wp(gid), self.a["flags"],
                self.wtab]

    # ------------------------------------------------------------------ env batches
    def matches(self, t, dtype: torch.dtype) -> bool:
        """``t`` is a contiguous ``dtype`` tensor ``[N, *shape]`` on the device."""
        return (type(t) is torch.Tensor and t.dtype == dtype and t.shape == self.full_shape
                and t.device == self.device and t.is_contiguous())

    def update(self, x: torch.Tensor, mode: int, stream) -> None:
        """Merge the float32 env batch ``x`` (contiguous ``[N, *shape]``) into the
        statistics when ``mode`` says so (``_tree``: three launches up to 1024 envs per
        group, one more per 32 times more); rows with a NaN or inf are left out and
        counted."""
        self._run_tree("obs", _ptr(x), self.none64, (x,), mode, stream)

    def normalize(self, x, out, x2, out2, stream) -> None:
        """``out = normalize(x)`` and, unless ``x2`` is None, ``out2 = normalize(x2)``: one
        launch (all float32 contiguous ``[N, *shape]``)."""
        pair = x2 is not None
        t = (x, out, x2, out2) if pair else (x, out, x, out)

        def make():
            args = self._normalize_args(*(_ptr(v) for v in t), pair, self.gid, self.n_mod)
            return record(K.normalize, (self.n, self.P), args, self.device).rebindable(
                (0, _ptr), (1, _ptr), (2, _ptr), (3, _ptr))

        self._run(("normalize", pair), make, t, stream)

    def reward(self, reward, done, out, mode: int, stream) -> None:
        """RewardNorm's step (four launches up to 1024 envs per group): advance the returns
        with ``reward``, merge them in (``mode``), write ``out`` and clear the returns where
        ``done`` (``reward``, ``out`` float32, ``done`` bool, all contiguous ``[N]``)."""
        s, n, dev, a = self.scratch, self.n, self.device, self.a

        def ret():
            args = [_ptr(reward), a["flags"], mode, _wp(self.tick), self.ret, _wp(s.stamp)]
            return record(K.returns_step, n, args, dev).rebindable((0, _ptr))

        def scale():
            args = [_ptr(reward), _ptr(done), _wp(self.gid), a["flags"], mode, self.wtab,
                    _ptr(out), self.ret]
            return record(K.scale_rewards, n, args, dev).rebindable((0, _ptr), (1, _ptr),
                                                                    (6, _ptr))

        self._run(("returns", mode), ret, (reward,), stream)
        self._run_tree("ret", self.none32, self.ret, (), mode, stream)
        self._run(("scale", mode), scale, (reward, done, out), stream)

    # ------------------------------------------------------------------ resets, tables
    def reset(self, mask: torch.Tensor | None, groups: torch.Tensor | None, stream) -> None:
        """Clear the groups holding a ``mask``-ed env (bool ``[N]``) or selected by
        ``groups`` (bool ``[G]``); both None: all. One launch (RewardNorm: the returns of the
        selected envs too)."""
        L, a, dev = self.layout, self.a, self.device
        um, ug = mask is not None, groups is not None
        t = (mask if um else self.none_b, groups if ug else self.none_b)

        def make():
            args = [self.P, _wp(L.order), L.resets.bounds, L.resets.grp, _ptr(t[0]), int(um),
                    _ptr(t[1]), int(ug), self.eps,
                    *(a[k] for k in ("count", "mean", "m2", "sent_count", "sent_mean", "sent_m2",
                                     "reset_pending", "reset_unsent")), self.wtab, self.ret]
            cmd = wp.launch_tiled(K.reset, dim=[L.resets.K + self.G], inputs=args,
                                  device=wp_device(dev),
                                  block_dim=K.RESET_LANES, record_cmd=True)
            return Replay(cmd, dev, args).rebindable((4, _ptr), (6, _ptr))

        self._run(("reset", um, ug), make, t, stream)

    # ------------------------------------------------------------------ exchange
    def pack(self, out: torch.Tensor) -> None:
        """``kernels.stats.exchange_pack`` into ``out`` (float64 ``[G * (2P + 2)]``)."""
        a = self.a

        def make():
            args = [self.P, *(a[k] for k in ("count", "mean", "m2", "sent_count", "sent_mean",
                                             "sent_m2", "reset_unsent")), _ptr(out)]
            return record(K.exchange_pack, self.G, args, self.device).rebindable((8, _ptr))

        self._run(("pack",), make, (out,), stream_for(self.device))

    def apply(self, rows: torch.Tensor) -> None:
        """``kernels.stats.exchange_apply`` of ``rows`` (float64 ``[W, G * (2P + 2)]``,
        unit inner stride); rewrites the tables."""
        a, W, stride = self.a, rows.shape[0], rows.stride(0)

        def make():
            args = [_ptr(rows), stride, W, self.P, *(a[k] for k in NAMES), self.eps, self.wtab]
            return record(K.exchange_apply, self.G, args, self.device).rebindable((0, _ptr))

        self._run(("apply", W, stride), make, (rows,), stream_for(self.device))

    # ------------------------------------------------------------------ any batch shape
    def batch(self, x: torch.Tensor, update: bool, out: torch.Tensor | None) -> torch.Tensor:
        """Learner side: ``x`` float32 contiguous ``[M, *shape]``, rows of one group
        (G = 1) or ``M // N`` slices of the N envs: merge it in (``update``), then normalize
        it into ``out`` (or a new tensor). The same kernels as the env path, with scratch
        allocated per call."""
        M, P, dev, G = x.shape[0], self.P, self.device, self.G
        stream = stream_for(dev)
        out = torch.empty(x.shape, dtype=torch.float32, device=dev) if out is None else out
        xw = _wp(x)
        if update:
            if G == 1:
                if self._rows_layout is None or self._rows_layout[0] != M:
                    self._rows_layout = (M, Layout(None, 1, M, dev))
                L, B, n_env = self._rows_layout[1], 1, M
            else:
                L, B, n_env = self.layout, M // self.n, self.n
            s = Scratch(B, L, P, M, dev)
            for kernel, dim, args in self._tree(xw, self.none64, n_env, L, s, B, 1):
                wp.launch(kernel, dim, args, device=wp_device(dev), stream=stream)
        args = self._normalize_args(xw, _wp(out), xw, _wp(out), False, self.gid, self.n_mod)
        wp.launch(K.normalize, (M, P), args, device=wp_device(dev), stream=stream)
        return out
