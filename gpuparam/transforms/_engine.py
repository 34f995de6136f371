"""The device side of the running-statistics modules: envs listed by group, scratch, float32
tables and recorded Warp launches (``kernels.stats``), the same on CPU and CUDA.

An ``Engine`` is built for a module's buffers (again whenever one is replaced: ``.to()``, a
checkpoint load, a copy). It lists each group's envs once (:class:`Layout`, the only place
that reads a device value on the host), owns every per-step buffer, so a step allocates
nothing, and replays launches recorded once (``Replay``), repointed at the caller's
tensors when their addresses change.

Per update, over ``M`` rows of ``P`` values: ``flag_rows`` (ObsNorm) or ``returns_step``
(RewardNorm) reads the data once, ``partial`` once more, ``merge`` reads only the partials
(``K * P`` per slice, ``K`` about ``sqrt(N)``), and the normalization reads it a last time.
No pass is in float64 over the data: the float64 scratch is the partials, 16 bytes per
chunk and feature, about ``16 / C`` bytes per value (C envs per chunk), plus one int64
stamp per row.
"""

from __future__ import annotations

import math

import torch
import warp as wp

from gpuparam._device import Replay, init_warp, record, stream_for, wp_device
from gpuparam.kernels import stats as K
from gpuparam.kernels import stats_sync as KS

F64 = torch.float64
MODES = {None: 2, True: 1, False: 0}  # forward's ``train`` -> the kernels' ``mode``


def chunk_size(largest: int) -> int:
    """Envs per chunk: the power of two (at least 8) nearest above ``sqrt(largest)``, so a
    partial thread reduces about as many rows as a merge thread folds partials."""
    c = 8
    while c * c < largest:
        c *= 2
    return c


def _wp(t: torch.Tensor) -> wp.array:
    return wp.from_torch(t.view(-1))


def _ptr(t: torch.Tensor, dtype=wp.float32) -> wp.array:
    """A flat array over ``t``'s memory that does not hold ``t``: for launch arguments
    repointed at every call (``Replay.set_tensors`` compares data pointers)."""
    return wp.array(ptr=t.data_ptr(), dtype=dtype, shape=(t.numel(),),
                    device=wp_device(t.device))


def _ptrb(t: torch.Tensor) -> wp.array:
    return _ptr(t, wp.bool)


def _ptr64(t: torch.Tensor) -> wp.array:
    return _ptr(t, wp.float64)


def _rows(t: torch.Tensor) -> wp.array:
    """``t`` float64 ``[W, S]`` (rows ``stride(0)`` apart, unit inner stride) as a flat
    array from ``t[0, 0]``, not holding ``t``."""
    extent = (t.shape[0] - 1) * t.stride(0) + t.shape[1]
    return wp.array(ptr=t.data_ptr(), dtype=wp.float64, shape=(extent,),
                    device=wp_device(t.device))


class Layout:
    """``n`` rows listed by group and cut into chunks of at most ``C`` rows of one group
    (int32 tensors on ``device``; see ``kernels.stats``).

    Args:
        gid: long ``[n]`` group of each row, or ``None`` for one group.
        G: number of groups. n: rows. device: torch device.

    Attributes: ``order [n]``, ``lo``, ``hi``, ``grp [K]``, ``first [G + 1]``, ``K``, ``C``.
    Built with device ops; reads the largest group size and ``K`` on the host (bind time).
    """

    def __init__(self, gid: torch.Tensor | None, G: int, n: int, device: torch.device):
        i64 = dict(dtype=torch.int64, device=device)
        if gid is None:
            self.C = chunk_size(n)
            self.K = -(-n // self.C)
            order = torch.arange(n, **i64)
            lo = torch.arange(self.K, **i64) * self.C
            hi, grp = (lo + self.C).clamp(max=n), torch.zeros(self.K, **i64)
            first = torch.tensor([0, self.K], **i64)
        else:
            cnt = torch.bincount(gid, minlength=G)
            self.C = chunk_size(int(cnt.max()))  # host-ok: bind time
            first = torch.cat([torch.zeros(1, **i64), ((cnt + self.C - 1) // self.C).cumsum(0)])
            self.K = int(first[-1])  # host-ok: bind time
            start = cnt.cumsum(0) - cnt
            c = torch.arange(self.K, **i64)
            grp = torch.searchsorted(first[1:], c, right=True)
            lo = start[grp] + (c - first[grp]) * self.C
            hi = torch.minimum(lo + self.C, start[grp] + cnt[grp])
            order = torch.argsort(gid, stable=True)
        self.order, self.lo, self.hi, self.grp, self.first = (
            t.to(torch.int32) for t in (order, lo, hi, grp, first))
        self.wp = [_wp(t) for t in (self.order, self.lo, self.hi, self.grp, self.first)]


class Scratch:
    """Per-update float64 partials for ``B`` slices of a layout's ``K`` chunks and a stamp
    per row (``rows`` int64, 0: no row stamped yet)."""

    def __init__(self, B: int, K_: int, P: int, rows: int, device: torch.device):
        f64 = dict(dtype=F64, device=device)
        self.n, self.mean, self.m2 = (torch.zeros(B * K_, **f64), torch.zeros(B * K_ * P, **f64),
                                      torch.zeros(B * K_ * P, **f64))
        self.bad = torch.zeros(B * K_, dtype=torch.int64, device=device)
        self.stamp = torch.zeros(max(rows, 1), dtype=torch.int64, device=device)
        self.wp = [_wp(t) for t in (self.n, self.bad, self.mean, self.m2)]


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
        self.scratch = Scratch(1, self.layout.K, P, n, dev)
        self.gid = gid if gid is not None else torch.zeros(1, dtype=torch.int64, device=dev)
        self.n_mod = n if gid is not None else 1  # row r normalizes with group gid[r % n_mod]
        self.tab = torch.zeros(3, G * P, dtype=torch.float32, device=dev)
        self.n_old = torch.zeros(G, dtype=F64, device=dev)
        self.tick = torch.ones(1, dtype=torch.int64, device=dev)
        self.none_b = torch.zeros(max(n, G, 1), dtype=torch.bool, device=dev)  # unused masks
        self.none32 = wp.empty(0, dtype=wp.float32, device=wp_device(dev))  # unused data
        self.none64 = wp.empty(0, dtype=wp.float64, device=wp_device(dev))
        names = ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2",
                 "sent_count", "sent_mean", "sent_m2", "reset_unsent", "reset_pending",
                 "nonfinite", "flags")
        self.a = {k: _wp(getattr(m, k)) for k in names}
        ret = getattr(m, "returns", None)
        self.has_returns = ret is not None
        self.ret = _wp(ret if ret is not None else torch.zeros(1, dtype=F64, device=dev))
        self.wtab = wp.from_torch(self.tab)
        self._cmds: dict[tuple, Replay] = {}
        self._rows_layout: tuple[int, Layout] | None = None
        self.refresh()

    # ------------------------------------------------------------------ launch helpers
    def _cmd(self, key: tuple, make) -> Replay:
        c = self._cmds.get(key)
        if c is None:
            c = self._cmds[key] = make()
        return c

    def _run(self, key: tuple, make, tensors: tuple, stream) -> None:
        c = self._cmd(key, make)
        c.set_tensors(tensors)
        c.launch(stream)

    def _partial_args(self, x32: wp.array, x64: wp.array, n_env: int, L: Layout, s: Scratch,
                      mode: int) -> list:
        a = self.a
        return [x32, x64, self.P, n_env, *L.wp[:5], a["flags"], mode, _wp(self.tick), _wp(s.stamp),
                a["count"], _wp(self.n_old), *s.wp]

    def _merge_args(self, B: int, L: Layout, s: Scratch, mode: int) -> list:
        a = self.a
        return [self.P, B, L.K, L.wp[4], *s.wp, _wp(self.n_old), a["flags"], mode, self.eps,
                a["count"], a["mean"], a["m2"], a["nonfinite"], _wp(self.tick), self.wtab]

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
        statistics when ``mode`` says so (three launches); rows with a NaN or inf are
        left out and counted."""
        L, s, n, P, dev = self.layout, self.scratch, self.n, self.P, self.device

        def flag():
            args = [_ptr(x), P, self.a["flags"], mode, _wp(self.tick), _wp(s.stamp)]
            return record(K.flag_rows, (n, P), args, dev).rebindable((0, _ptr))

        def part():
            args = self._partial_args(_ptr(x), self.none64, n, L, s, mode)
            return record(K.partial, (1, L.K, P), args, dev).rebindable((0, _ptr))

        self._run(("flag", mode), flag, (x,), stream)
        self._run(("partial", mode), part, (x,), stream)
        self._run(("merge", mode), lambda: record(K.merge, (self.G, P),
                                                  self._merge_args(1, L, s, mode), dev), (), stream)

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
        """RewardNorm's step (four launches): advance the returns with ``reward``, merge them
        in (``mode``), write ``out`` and clear the returns where ``done`` (``reward``,
        ``out`` float32, ``done`` bool, all contiguous ``[N]``)."""
        L, s, n, dev, a = self.layout, self.scratch, self.n, self.device, self.a

        def ret():
            args = [_ptr(reward), a["flags"], mode, _wp(self.tick), self.ret, _wp(s.stamp)]
            return record(K.returns_step, n, args, dev).rebindable((0, _ptr))

        def scale():
            args = [_ptr(reward), _ptrb(done), _wp(self.gid), a["flags"], mode, self.wtab,
                    _ptr(out), self.ret]
            return record(K.scale_rewards, n, args, dev).rebindable((0, _ptr), (1, _ptrb),
                                                                    (6, _ptr))

        self._run(("returns", mode), ret, (reward,), stream)
        self._run(("partial", mode), lambda: record(K.partial, (1, L.K, 1), self._partial_args(
            self.none32, self.ret, n, L, s, mode), dev), (), stream)
        self._run(("merge", mode), lambda: record(K.merge, (self.G, 1),
                                                  self._merge_args(1, L, s, mode), dev), (), stream)
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
            args = [self.P, *L.wp[:4], _ptrb(t[0]), int(um), _ptrb(t[1]), int(ug),
                    int(not (um or ug)), int(self.has_returns), self.eps,
                    *(a[k] for k in ("count", "mean", "m2", "sent_count", "sent_mean", "sent_m2",
                                     "reset_pending", "reset_unsent")), self.wtab, self.ret]
            return record(K.reset, (L.K + self.G, self.P), args, dev).rebindable(
                (5, _ptrb), (7, _ptrb))

        self._run(("reset", um, ug), make, t, stream)

    def refresh(self) -> None:
        """Rewrite the tables from the statistics (after they changed outside an update)."""
        a = self.a
        self._run(("refresh",), lambda: record(K.refresh, (self.G, self.P), [
            self.P, self.eps, a["count"], a["mean"], a["m2"], self.wtab], self.device), (),
            stream_for(self.device))

    # ------------------------------------------------------------------ exchange
    def pack(self, out: torch.Tensor) -> None:
        """``kernels.stats_sync.exchange_pack`` into ``out`` (float64 ``[G * (2P + 2)]``)."""
        a = self.a

        def make():
            args = [self.P, *(a[k] for k in ("count", "mean", "m2", "sent_count", "sent_mean",
                                             "sent_m2", "reset_unsent")), _ptr64(out)]
            return record(KS.exchange_pack, self.G, args, self.device).rebindable((8, _ptr64))

        self._run(("pack",), make, (out,), stream_for(self.device))

    def apply(self, rows: torch.Tensor) -> None:
        """``kernels.stats_sync.exchange_apply`` of ``rows`` (float64 ``[W, G * (2P + 2)]``,
        unit inner stride); rewrites the tables."""
        a, W, stride = self.a, rows.shape[0], rows.stride(0)

        def make():
            args = [_rows(rows), stride, W, self.P, *(a[k] for k in NAMES), self.eps, self.wtab]
            return record(KS.exchange_apply, self.G, args, self.device).rebindable((0, _rows))

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
            s = Scratch(B, L.K, P, M, dev)
            launch = dict(device=wp_device(dev), stream=stream)
            wp.launch(K.flag_rows, (M, P), [xw, P, self.a["flags"], 1, _wp(self.tick),
                                            _wp(s.stamp)], **launch)
            args = self._partial_args(xw, self.none64, n_env, L, s, 1)
            wp.launch(K.partial, (B, L.K, P), args, **launch)
            wp.launch(K.merge, (G, P), self._merge_args(B, L, s, 1), **launch)
        gid, n_mod = (self.gid, self.n_mod) if G > 1 else (self.gid[:1], 1)
        args = self._normalize_args(xw, _wp(out), xw, _wp(out), False, gid, n_mod)
        wp.launch(K.normalize, (M, P), args, device=wp_device(dev), stream=stream)
        return out


NAMES = ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2", "sent_count",
         "sent_mean", "sent_m2", "reset_unsent", "reset_pending")

# buffers an engine binds: replacing one drops the engine
_BOUND = frozenset({*NAMES, "nonfinite", "flags", "group_ids", "returns"})


class EngineOwner:
    """The module side of an ``Engine`` (mixed into ``GroupedRunningStats`` before
    ``nn.Module``): builds it when first needed and drops it whenever a bound tensor may have
    been replaced (buffer assignment, ``.to()`` and friends, checkpoint loading, copies)."""

    def _eng(self) -> Engine:
        """The engine (built, which fills the tables, if there is none)."""
        e = self.__dict__.get("_engine")
        if e is None:
            e = self._engine = Engine(self)
        return e

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in _BOUND:  # the engine's launches point at the replaced tensor
            self.__dict__["_engine"] = None
        if name in _BOUND or name == "_engine":
            # a new engine, or none: new buffers. A count, not ``id(engine)``: a new engine
            # often takes the freed one's address
            self.__dict__["_engine_gen"] = self.__dict__.get("_engine_gen", 0) + 1

    @property
    def engine_generation(self) -> int:
        """Counts the engines built and dropped: a captured step that launched into an
        engine's buffers is stale once this changes (``replay_key``)."""
        return self.__dict__.get("_engine_gen", 0)

    def _apply(self, fn, recurse=True):
        """``.to()``, ``.cuda()``, ``.half()``, ...: buffers move, dtypes stay."""
        before = dict(self._buffers)
        super()._apply(fn, recurse)
        for name, old in before.items():
            new = self._buffers[name]
            if old is not None and new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(new.device)
        self._engine = None
        return self

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_engine"] = None  # recorded launches point at this instance's buffers
        return state
