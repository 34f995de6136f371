"""The hot path of the running-statistics modules: scratch, float32 tables, recorded launches.

An ``Engine`` is built once N is known (and again after the module moves or loads a
checkpoint). It owns every per-step buffer, so a step allocates no tensor storage, and it
runs the batch reduction as a few torch ops over ``[N, *shape]`` followed by one Warp launch
(``kernels.stats``) that merges the batch into the float64 statistics and rewrites the
float32 tables. Nothing here reads a device value on the host.

Every torch layout leaves envs whose sample holds NaN or inf out of the batch (their rows
zeroed in the float64 scratch, the per-group batch counts computed on the device, see
``_finite``) and adds them to the module's ``nonfinite`` counters; the fused kernels do the
same in a second pass that runs only when the first pass's sums are not finite.

On CPU each torch op costs a few microseconds whatever its size, and more right after an env
step has flushed the caches, so the layouts below use as few ops as their numerics allow.
``P`` is the numel of the per-env shape.

- ``tiled`` (one group, float32 data: ``ObsNorm``): ``[N, *shape]`` is viewed as rows
  ``[N // k, k * P]`` (k = 1 on CUDA) and the tables hold the group's row k times, so every
  elementwise op broadcasts a row of up to 256 elements (a ``[N, 4] - [4]`` broadcast is
  about 6x slower on CPU). The batch is copied to float64 (so nothing overflows, not even
  ``(3e38 - -3e38)^2``); two passes: per-column sums give the batch mean ``c`` (the tables'
  center, rounded to float32), then one sum over ``[d, d * d]`` with ``d = x - c``, which
  the kernel folds into ``M2 = sum(d^2) - sum(d)^2 / N``. The output is ``(x - c) * s + b``
  in float32.
- ``single`` (one group, float64 ``[N]`` data: ``RewardNorm``): one pass in float64 around
  the running mean (the first batch of an engine: around its own mean), both sums from one
  ``mv`` of ``[d, 1]`` with ``d``. The relative error of M2 is about
  ``1e-16 * (1 + (batch mean - running mean)^2 / batch var)``.
- ``grouped`` (several groups): float64 segment sums (``index_add``), two passes; per-env
  tables are gathered from the group tables after every change.
- ``identity`` (``group_ids == arange(N)``): each env's sample is its own batch mean.

``fused`` (Warp's CPU device, one group, ``N`` filling whole 16-float vectors): ``tiled``
and ``single`` run as one launch per call instead (``kernels.stats_cpu``): a single thread
reduces the batch in float64 around the running mean (the first env's values after a reset),
merges it and writes the output, in SIMD lanes of 16 floats; k is then ``lcm(16, P) / P``.
On CPU this is about 3x faster than the torch ops, which cost a few microseconds each
whatever their size; on CUDA the torch reductions are the fast way.
"""

from __future__ import annotations

import math
import weakref

import torch
import warp as wp

from gpuparam._device import Replay, init_warp, record, wp_device
from gpuparam.kernels import stats as K
from gpuparam.kernels import stats_cpu as KC
from gpuparam.transforms._finite import FiniteMask
from gpuparam.transforms._moments import F64

ROW = 256  # widest row of the tiled layout on CPU (tests set 1 to run CUDA's layout)
FUSED = True  # one-launch CPU kernels where they apply (tests set False for the torch path)
# the fused launches are repointed per call (Replay.rebindable, Warp's public
# Launch.set_param_at_index): a Warp without it takes the torch path
_CAN_REBIND = hasattr(getattr(wp, "Launch", None), "set_param_at_index")


def _wp(t: torch.Tensor) -> wp.array:
    return wp.from_torch(t.view(-1))


def _wp16(t: torch.Tensor, dtype=KC.vec16) -> wp.array:
    """``t`` (contiguous, numel a multiple of 16) as an array of 16-lane vectors."""
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    return wp.from_torch(t.view(-1, 16), dtype=dtype)


def _ptr16(t: torch.Tensor, dtype=KC.vec16) -> wp.array:
    """Like ``_wp16`` but not holding ``t``: for a launch argument repointed at every call
    (``Replay.set_tensors`` compares data pointers), so no caller tensor is kept alive."""
    return wp.array(ptr=t.data_ptr(), dtype=dtype, shape=(t.numel() // 16,),
                    device=wp_device(t.device))


def _ptr16b(t: torch.Tensor) -> wp.array:
    return _ptr16(t, KC.vec16b)


def _ptr(t: torch.Tensor, dtype=wp.float32) -> wp.array:
    """``_ptr16`` for the scalar kernels: a flat array over ``t``, not holding it."""
    return wp.array(ptr=t.data_ptr(), dtype=dtype, shape=(t.numel(),),
                    device=wp_device(t.device))


def _ptrb(t: torch.Tensor) -> wp.array:
    return _ptr(t, wp.bool)


class Engine:
    """Per-step state of one ``GroupedRunningStats`` bound to N envs.

    Args:
        m: the module: its ``count``, ``mean``, ``m2`` and ``group_ids`` buffers are bound.
        data64: the module's own float64 data buffer ``[N, *shape]`` (``RewardNorm``'s
            returns), or ``None`` to allocate one if the layout needs it (``ObsNorm``).
        f32: the module reduces float32 batches, so one group uses ``tiled``.
        env_mean: also gather per-env centers in the ``grouped`` layout (``RewardNorm``
            only scales).

    Tables (float32, on the device): ``center``, ``scale``, ``offset``, broadcasting against
    :meth:`view` of a batch; ``scale_flat`` is ``scale`` as ``[1]`` or ``[N]`` (``P == 1``).
    """

    def __init__(self, m, data64: torch.Tensor | None, f32: bool, env_mean: bool):
        init_warp()
        dev, G, S, gid = m.device, m.num_groups, m.shape, m.group_ids
        n, P = gid.shape[0], math.prod(S)
        self.n, self.P, self.device, self.full_shape = n, P, dev, (n, *S)
        z, z64 = dict(device=dev), dict(dtype=F64, device=dev)
        identity = G == n and torch.equal(gid, torch.arange(n, device=dev))  # host-ok: setup
        if f32 and G == 1:
            self.layout = "tiled"
        elif G == 1 and P == 1 and data64 is not None:  # (N = 1 too: one group)
            self.layout = "single"
        elif identity:
            self.layout = "identity"
        else:
            self.layout = "grouped"
        k = 1
        k16 = 16 // math.gcd(P, 16)  # envs per whole number of 16-float vectors
        self.fused = (
            FUSED and _CAN_REBIND and ROW > 1 and dev.type == "cpu"
            and self.layout in ("tiled", "single")
        )
        # whole 16-float vectors: the SIMD kernels; otherwise their scalar versions (_any)
        self.lanes16 = n % k16 == 0
        self._cmds: dict[tuple, Replay] = {}  # fused launches per flags, repointed per call
        self.last = None  # (launch, data pointers) of the last fused call
        if self.layout == "tiled" and self.fused:
            k = k16 if self.lanes16 else 1
        elif self.layout == "tiled" and dev.type == "cpu":
            while 2 * k * P <= ROW and n % (2 * k) == 0:
                k *= 2
        self.k, W, eps = k, k * P, wp.float64(m.eps)
        self.tab = torch.zeros(3, G * W, **z)  # float32 centers, scales, offsets
        stats = [_wp(m.count), _wp(m.mean), _wp(m.m2)]
        tabs = [_wp(self.tab[0]), _wp(self.tab[1]), _wp(self.tab[2])]
        self._refresh = record(K.refresh, G, [P, k, eps, *stats, *tabs], dev)
        self.center, self.scale, self.offset = (t.view(G, W) for t in self.tab)
        self._gid, self._gather, self._views = gid, (), {}
        if self.layout == "tiled" and self.fused and not self.lanes16:
            self.placeholder = torch.zeros(n * P, **z)
            self.feat = torch.zeros(2 * P, **z64)
            self._fused_args = [P, k, wp.float64(n), eps, *stats, *tabs, _wp(self.feat),
                                _wp(m.nonfinite)]
        elif self.layout == "tiled" and self.fused:
            Q = W // 16
            self.acc = torch.zeros(3 * Q, 16, **z64)  # batch sums of d and d * d, the shift
            self.placeholder = torch.zeros(n * P, **z)  # what the fused launch is recorded with
            self.feat = torch.zeros(2 * P, **z64)
            self._fused_args = [
                P, Q, wp.float64(n), eps, *stats,
                *(_wp16(t) for t in self.tab), *tabs, _wp16(self.acc, KC.vec16d), _wp(self.feat),
                _wp(m.nonfinite),
            ]
        else:
            self.fin = FiniteMask(n, P, dev)  # NaN / inf samples: left out and counted
            self._nonfinite = m.nonfinite
            nb = _wp(self.fin.nb)
        if self.layout == "tiled" and not self.fused:  # float64 sums: nothing overflows
            self.x64 = torch.zeros(n // k, W, **z64)
            self.col_sum = torch.zeros(W, **z64)
            self.dsq = torch.zeros(2, n // k, W, **z64)  # d = x - center, d * d
            self.d, self.dd = self.dsq[0], self.dsq[1]
            self.sums = torch.zeros(2, W, **z64)
            self.center64 = torch.zeros(1, W, **z64)  # the centers in float64 (no promotion)
            args = [_wp(self.col_sum), nb, P, k, _wp(m.mean), tabs[0], _wp(self.center64)]
            self._center = record(K.batch_center64, 1, args, dev)
            args = [_wp(self.sums), nb, wp.float64(n), P, k, eps, *stats, *tabs,
                    _wp(m.nonfinite)]
            self._merge = record(K.merge_shifted_n, 1, args, dev)
        elif self.layout == "single":
            self.data64, self.primed = data64, False
            self.shift = torch.zeros(1, **z64)  # the running mean, kept through resets
            if self.fused:  # shift by the running mean (a loaded one too), from the start
                self.shift.copy_(m.mean.reshape(1))
                self._fused_args = [wp.float64(n), eps, _wp(self.shift), *stats, *tabs,
                                    _wp(m.nonfinite)]
                self.r32 = torch.zeros(n, **z)  # placeholders the fused launch is recorded with
                self.d8 = torch.zeros(n, dtype=torch.bool, device=dev)  # (reward/out, done)
            else:
                self.dm = torch.ones(2, n, **z64)  # [d = x - shift, 1]: one mv sums d^2, d
                self.d, self.sums = self.dm[0], torch.zeros(2, **z64)
                args = [_wp(self.sums), nb, wp.float64(n), 1, eps, _wp(self.shift), *stats,
                        *tabs, _wp(m.nonfinite)]
                self._merge = record(K.merge_shifted64, 1, args, dev)
        elif self.layout in ("grouped", "identity"):
            self.data64 = torch.zeros(n, *S, **z64) if data64 is None else data64
            self.bcount = torch.zeros(G, **z64)  # finite samples per group, per batch
            self.bdiv = torch.ones(G, **z64).view(G, *([1] * len(S)))  # bcount, empty: 1
            self.bmean = self.data64 if identity else torch.zeros(G, *S, **z64)
            self.bm2, self.zeros = torch.zeros(G, *S, **z64), torch.zeros(G, *S, **z64)
            self.zeros_g = torch.zeros(G, **z64)
            self.resid = torch.zeros(n, *S, **z64)  # x - its group's batch mean
            batch = [_wp(self.bcount), _wp(self.bmean), _wp(self.bm2)]
            self._merge = record(K.merge, G, [*batch, P, k, eps, *stats, *tabs], dev)
            if self.layout == "grouped":
                self.scale = torch.zeros(n, P, **z)
                self._gather = ((self.tab[1].view(G, P), self.scale),)
                if env_mean:
                    self.center = torch.zeros(n, P, **z)
                    self._gather += ((self.tab[0].view(G, P), self.center),)
        self.scale_flat = self.scale.view(-1)
        self.refresh()

    def matches(self, t, dtype: torch.dtype) -> bool:
        """The hot-path check: ``t`` is a ``dtype`` tensor ``[N, *shape]`` on the device."""
        return (
            type(t) is torch.Tensor
            and t.dtype == dtype
            and t.shape == self.full_shape
            and t.device == self.device
        )

    def view(self, t: torch.Tensor, as_bytes: bool = False) -> torch.Tensor:
        """``t`` ``[N, *shape]`` (contiguous) viewed as the rows the tables broadcast over,
        or (``as_bytes``) a bool tensor viewed as uint8.

        Views are cached (a wrapper passes the same env buffers every step, and making a view
        costs about 1 us of host time) for as long as their tensor lives, at most 8."""
        key = (id(t), as_bytes)
        hit = self._views.get(key)
        if hit is not None and hit[0]() is t and hit[1] == t.data_ptr():
            return hit[2]
        v = t.view(torch.uint8) if as_bytes else t.view(self.n // self.k, self.k * self.P)
        v = v.detach()  # shares the storage without holding ``t``: its death evicts ``v``
        views = self._views
        if len(views) >= 8:
            views.clear()
        gone = weakref.ref(t, lambda _, key=key, views=views: views.pop(key, None))
        views[key] = (gone, t.data_ptr(), v)
        return v

    def refresh(self) -> None:
        """Rewrite the tables after the statistics changed outside an update."""
        self._refresh()
        self._gather_tables()

    def _gather_tables(self) -> None:
        for src, dst in self._gather:
            torch.index_select(src, 0, self._gid, out=dst)

    def normalize(self, x: torch.Tensor, out: torch.Tensor, updated: bool) -> None:
        """``out = (x - mean) * scale`` per env (``x``, ``out`` contiguous ``[N, *shape]``);
        ``updated``: ``x`` is the batch the last :meth:`update_f32` reduced."""
        xr, o = self.view(x), self.view(out)
        if self.layout != "tiled":
            torch.sub(xr, self.center, out=o)
            o.mul_(self.scale)
            return
        d = torch.sub(xr, self.center, out=o)
        torch.addcmul(self.offset, d, self.scale, out=o)

    def update_f32(self, x: torch.Tensor) -> None:
        """Merge the float32 batch ``x`` (contiguous ``[N, *shape]``) in (``tiled``), in
        float64 around the batch mean of its finite samples (NaN / inf ones counted)."""
        x64, d = self.x64, self.d
        x64.copy_(self.view(x))
        bad = self.fin.apply(x64)
        torch.sum(x64, 0, out=self.col_sum)
        self._center()
        torch.sub(x64, self.center64, out=d)  # the kernel wrote the centers in float64 too
        d.view(self.n, self.P).masked_fill_(bad, 0.0)
        torch.mul(d, d, out=self.dd)
        torch.sum(self.dsq, 1, out=self.sums)
        self._merge()  # also counts the samples left out

    def _run(self, flags: tuple, make, tensors: tuple) -> None:
        """Run the fused launch recorded for ``flags`` (made once by ``make()`` over the
        engine's own buffers) with its array arguments pointed at ``tensors``: no tensor is
        kept, nothing is recorded per call."""
        cmd = self._cmds.get(flags)
        if cmd is None:
            cmd = self._cmds[flags] = make()
        cmd.set_tensors(tensors)
        cmd()
        self.last = cmd

    def obs_fused(self, x, out, x2, out2, update: bool, clip: float | None) -> None:
        """``fused`` ``tiled``: with ``update`` merge ``x`` in, then write ``out`` from ``x``
        and (unless ``x2`` is None) ``out2`` from ``x2`` in one launch; all four contiguous
        float32 ``[N, *shape]`` (``out`` may be ``x``)."""
        pair = x2 is not None

        def make_any() -> Replay:
            a = self._fused_args
            ph = _wp(self.placeholder)
            args = [ph, ph, ph, ph, int(pair), int(update), *a[:4],
                    wp.float32(clip or 0.0), *a[4:]]
            return record(KC.obs_step_any, 1, args, self.device).rebindable(
                (0, _ptr), (1, _ptr), (2, _ptr), (3, _ptr)
            )

        def make() -> Replay:
            if not self.lanes16:
                return make_any()
            a = self._fused_args
            ph = _wp16(self.placeholder)  # set_data points these at the caller's tensors
            args = [ph, ph, ph, ph, int(pair), int(update), *a[:4],
                    wp.float32(clip or 0.0), *a[4:]]
            return record(KC.obs_step, 1, args, self.device).rebindable(
                (0, _ptr16), (1, _ptr16), (2, _ptr16), (3, _ptr16)
            )

        tensors = (x, out, x2, out2) if pair else (x, out, x, out)
        self._run(("obs", pair, update, clip), make, tensors)

    def reward_fused(self, reward, done, out, gamma: float, update: bool,
                     clip: float | None) -> None:
        """``fused`` ``single``: advance the returns in ``data64`` with ``reward``, merge them
        in (``update``), write ``out = reward * scale`` and clear the returns where ``done``,
        in one launch (``reward``, ``out`` float32 and ``done`` bool ``[N]``, contiguous)."""

        def make() -> Replay:
            a = self._fused_args
            if not self.lanes16:
                args = [_wp(self.r32), _wp(self.d8), _wp(self.data64), _wp(self.r32),
                        wp.float64(gamma), int(update), a[0], a[1], wp.float32(clip or 0.0),
                        *a[2:]]
                return record(KC.reward_step_any, 1, args, self.device).rebindable(
                    (0, _ptr), (1, _ptrb), (3, _ptr)
                )
            args = [_wp16(self.r32), _wp16(self.d8, KC.vec16b), _wp16(self.data64, KC.vec16d),
                    _wp16(self.r32), wp.float64(gamma), int(update), a[0], a[1],
                    wp.float32(clip or 0.0), *a[2:]]
            return record(KC.reward_step, 1, args, self.device).rebindable(
                (0, _ptr16), (1, _ptr16b), (3, _ptr16)
            )

        self._run(("reward", gamma, update, clip), make, (reward, done, out))

    def update_f64(self) -> None:
        """Merge the float64 batch in ``data64`` in (``single``, ``grouped``, ``identity``)."""
        x, gid, fin = self.data64, self._gid, self.fin
        bad = fin.apply(x)  # NaN / inf samples (returns: cleared) left out, counted below
        if self.layout == "single":
            if not self.primed:  # the first batch: around its own (finite) mean
                torch.sum(x, 0, keepdim=True, out=self.shift)
                self.shift.div_(fin.nb.clamp(min=1.0))
                self.primed = True
            torch.sub(x, self.shift, out=self.d)
            self.d.masked_fill_(bad.view(-1), 0.0)
            torch.mv(self.dm, self.d, out=self.sums)
        else:
            torch.index_add(self.zeros_g, 0, gid, fin.good64, out=self.bcount)
            torch.clamp(self.bcount, min=1.0, out=self.bdiv.view(-1))
        if self.layout == "grouped":
            torch.index_add(self.zeros, 0, gid, x, out=self.bmean)
            torch.div(self.bmean, self.bdiv, out=self.bmean)
            torch.index_select(self.bmean, 0, gid, out=self.resid)
            torch.sub(x, self.resid, out=self.resid).square_()
            self.resid.view(self.n, self.P).masked_fill_(bad, 0.0)
            torch.index_add(self.zeros, 0, gid, self.resid, out=self.bm2)
        self._merge()
        if self.layout != "single":  # (the single merge counts them itself)
            fin.count(self._nonfinite, gid)
        self._gather_tables()


# tensors engines bind
_BOUND = frozenset({"count", "mean", "m2", "group_ids", "returns", "nonfinite"})


class EngineOwner:
    """The module side of an ``Engine`` (mixed into ``GroupedRunningStats``, before
    ``nn.Module``): builds it when first needed and drops it whenever a bound tensor may have
    been replaced (buffer assignment, ``.to()`` and friends, checkpoint loading, copies)."""

    _f32_data = False  # ObsNorm: float32 batches, reduced in the ``tiled`` layout for G = 1
    _env_mean_table = True  # RewardNorm only scales: no per-env mean table

    def _engine_data(self) -> torch.Tensor | None:
        """Subclass hook: the module's own float64 data buffer ``[N, *shape]``, if any."""
        return None

    def _eng(self, refresh: bool = False) -> Engine:
        """The engine (built, which fills the tables, if there is none); ``refresh``
        rewrites the tables of an existing one."""
        e = self._engine
        if e is None:
            args = (self._engine_data(), self._f32_data, self._env_mean_table)
            e = self._engine = Engine(self, *args)
            self._engine_extra(e)
        elif refresh:
            e.refresh()
        return e

    def _engine_extra(self, e: Engine) -> None:
        """Subclass hook: add per-step scratch to a new engine."""

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

    def _refresh(self) -> None:
        """Rewrite the float32 tables; empty groups normalize with mean 0, var 1."""
        if self.group_ids is not None:
            self._eng(refresh=True)

    def _apply(self, fn, recurse=True):
        """``.to()``, ``.cuda()``, ``.half()``, ...: buffers move, dtypes (float64) stay."""
        before = dict(self._buffers)
        super()._apply(fn, recurse)
        for name, old in before.items():
            new = self._buffers[name]
            if old is not None and new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(new.device)
        self._engine = None
        self._refresh()
        return self

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_engine"] = None  # recorded launches point at this instance's buffers
        return state
