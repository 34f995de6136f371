"""Per-group running count / mean / M2 on the device, the base of ``ObsNorm`` and
``RewardNorm``: settings, masked resets, checkpoints and ``sync``. The arithmetic is in
``kernels.stats``; counts stay exact up to 2**53, and float64 whatever ``.to(dtype)`` does.

A module's device state is an :class:`Engine`, built for its buffers (again whenever one is
replaced: ``.to()``, a checkpoint load, a copy): the envs by group (:class:`Layout`, the only
host read of a device value), every per-step buffer (a step allocates nothing) and the
launches, bound at their first call and repointed at the caller's tensors (``BoundLaunch``).
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist
import warp as wp
from torch import nn

from gpuparam._checkpoint import state_kind
from gpuparam._checks import check_mask
from gpuparam._device import init_warp, stream_for, wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.distributed import exchange
from gpuparam.files import load_state, save_state
from gpuparam.kernels import stats as kstats
from gpuparam.params import ParamTable

__all__ = ["F64", "GroupedRunningStats"]


F64 = torch.float64
CHUNK = 32  # items a thread folds, at every level of the tree
RESET_CHUNK = 1024  # envs a ``reset`` block scans (``kernels.stats.RESET_LANES`` lanes)
STATS = ("", "synced_", "sent_")  # the live statistics, the baseline, as of the last pack


def _wp(t: torch.Tensor) -> wp.array:
    return wp.from_torch(t.view(-1))


def _stats(*ts: torch.Tensor) -> kstats.Stats:
    """A ``kernels.stats.Stats`` over count, mean, M2 and ``bad`` tensors."""
    st = kstats.Stats()
    st.count, st.mean, st.m2, st.bad = (_wp(t) for t in ts)
    return st


def chunks(counts: np.ndarray, device: torch.device, size: int = CHUNK,
           order: wp.array | None = None) -> tuple[kstats.Chunks, np.ndarray]:
    """One level of the tree (``kernels.stats``): the ``kernels.stats.Chunks`` of at most
    ``size`` items of one group (over ``order`` at level 0; None above) for groups of
    ``counts`` items (numpy ``[G]``), and the number of chunks of each group."""
    per = -(-counts // size)
    first = np.concatenate([[0], np.cumsum(per)])
    grp = np.repeat(np.arange(len(counts)), per)
    lo = (np.cumsum(counts) - counts)[grp] + (np.arange(len(grp)) - first[grp]) * size
    c = kstats.Chunks()
    c.order = wp.empty(0, dtype=wp.int32, device=wp_device(device)) if order is None else order
    c.bounds, c.grp, c.first = (_wp(torch.as_tensor(a.astype(np.int32)).to(device))
                                for a in (np.append(lo, counts.sum()), grp, first))
    return c, per


def group_counts(gid: torch.Tensor, G: int) -> np.ndarray:
    """The number of rows of each of ``G`` groups in ``gid`` (long ``[n]``), numpy ``[G]``:
    a read on the host (construction and loading only)."""
    return torch.bincount(gid, minlength=G).cpu().numpy()  # host-ok: setup


class Layout:
    """``n`` rows listed by group ``gid`` (long ``[n]``, or ``None``: one group) of ``G``
    (``order``), the tree of chunks over them (``levels``) and the larger chunks ``reset``
    scans (``resets``). ``counts``: the group sizes (numpy ``[G]``), read from ``gid`` on
    the host if not given."""

    def __init__(self, gid: torch.Tensor | None, G: int, n: int, device: torch.device,
                 counts: np.ndarray | None = None):
        if gid is None:
            order, counts = torch.arange(n, device=device), np.array([n])
        else:
            order = torch.argsort(gid, stable=True)
            counts = group_counts(gid, G) if counts is None else counts
        order = _wp(order.to(torch.int32))
        self.resets = chunks(counts, device, RESET_CHUNK, order)[0]
        level, per = chunks(counts, device, order=order)
        self.levels = [level]  # kernels.stats.Chunks, K = grp.shape[0] each
        while per.max(initial=0) > CHUNK:
            level, per = chunks(per, device)
            self.levels.append(level)

    def scratch(self, B: int, P: int, device: torch.device) -> list[kstats.Stats]:
        """Per-update float64 moments (count, mean, M2, stamped rows (int64)) of every
        level's chunks (``B`` slices at level 0)."""
        parts = []
        for i, lev in enumerate(self.levels):
            k = lev.grp.shape[0] * (B if i == 0 else 1)
            parts.append(_stats(*(torch.zeros(s, dtype=F64, device=device)
                                  for s in (k, k * P, k * P)),
                                torch.zeros(k, dtype=torch.int64, device=device)))
        return parts


class Engine:
    """Device state of one ``GroupedRunningStats`` (bound to N envs, or not yet: N = 0):
    ``tab`` float32 ``[3, G * P]`` (center, scale, offset per group and feature)."""

    def __init__(self, m):
        init_warp()
        dev, G, P, n = m.device, m.num_groups, math.prod(m.shape), m.num_envs or 0
        self.device, self.G, self.P, self.n, self.full_shape = dev, G, P, n, (n, *m.shape)
        self.eps, wdev = wp.float64(m.eps), wp_device(dev)
        # the group sizes were read when the ids were set: no host read at a first forward
        counts = m.__dict__.get("_counts")
        self.layout = Layout(None if G == 1 else m.group_ids, G, n, dev, counts)
        self.parts = self.layout.scratch(1, P, dev)
        self.stamp = _wp(torch.zeros(max(n, 1), dtype=torch.int64, device=dev))  # 0: never
        gid = torch.zeros(1, dtype=torch.int64, device=dev) if m.group_ids is None else m.group_ids
        self.gid, self.n_mod = _wp(gid), gid.shape[0]  # row r: group gid[r % n_mod]
        self.n_old = _wp(torch.zeros(G, dtype=F64, device=dev))
        self.tick = _wp(torch.ones(1, dtype=torch.int64, device=dev))
        self.none_b, self.none32, self.none64, self.none_i64 = (  # unused arguments
            wp.empty(0, dtype=d, device=wdev) for d in (wp.bool, wp.float32, wp.float64, wp.int64))
        self.none_tab = wp.empty((0, 0), dtype=wp.float32, device=wdev)
        self.flags, self.unsent, self.pending = (
            _wp(getattr(m, k)) for k in ("flags", "reset_unsent", "reset_pending"))
        bad = (m.nonfinite, *[torch.zeros(0, dtype=torch.int64, device=dev)] * 2)
        self.live, self.synced, self.sent = (
            _stats(*(getattr(m, p + k) for k in ("count", "mean", "m2")), b)
            for p, b in zip(STATS, bad, strict=True))
        ret = getattr(m, "returns", None)  # RewardNorm's, [N]
        self.ret = self.none64 if ret is None else _wp(ret)
        self.tab = wp.from_torch(torch.zeros(3, G * P, dtype=torch.float32, device=dev))
        self._launches: dict[tuple, BoundLaunch] = {}
        self.rows: tuple[int, Layout | None] = (0, None)  # a learner batch's: M, its layout
        # the tables from the statistics (loaded, moved or copied ones too)
        wp.launch(kstats.refresh, dim=(G, P), inputs=[P, self.eps, self.live], outputs=[self.tab],
                  device=wdev, stream=stream_for(dev))

    def bound(self, key: tuple, kernel, dim, inputs: list, outputs: list = (),
              block_dim: int = 0) -> BoundLaunch:
        """The launch this module makes under ``key``, bound at the first call; the torch
        tensors among its arguments are the caller's, repointed at every call."""
        c = self._launches.get(key)
        if c is None:
            c = self._launches[key] = BoundLaunch(kernel, dim, inputs=inputs, outputs=outputs,
                                                  device=self.device, block_dim=block_dim)
        return c

    def tree(self, x32, x64: wp.array, n_env: int, layout: Layout, parts: list,
             stamp: wp.array, B: int, mode: int) -> list[tuple]:
        """``(kernel, dim, inputs, outputs)`` of the update from ``B`` slices of ``n_env``
        rows (``x32``, a float32 tensor or Warp array, or ``x64``) over ``layout`` with
        scratch ``parts`` (:meth:`Layout.scratch`) and a ``stamp`` per row."""
        lv, P, flags, tick = layout.levels, self.P, self.flags, self.tick
        K = [c.grp.shape[0] for c in lv]
        out = []
        if x32.shape[0]:
            out.append((kstats.flag_rows, (B * n_env, P), [x32, P, flags, mode, tick], [stamp]))
        out.append((kstats.partial, (B, K[0], P), [
            x32, x64, P, n_env, lv[0], flags, mode, tick, stamp, self.live.count,
        ], [self.n_old, parts[0]]))
        for i in range(1, len(lv) + 1):  # the levels above the first, then the top
            top = i == len(lv)
            bounds = lv[-1].first if top else lv[i].bounds
            outs = [self.live, tick, self.tab] if top else [parts[i], self.none_i64, self.none_tab]
            out.append((kstats.combine, (self.G if top else K[i], P), [
                P, B if i == 1 else 1, K[i - 1], bounds, parts[i - 1],
                self.n_old if top else self.none64, flags, mode, self.eps], outs))
        return out

    def matches(self, t, dtype: torch.dtype, shape: tuple | None = None) -> bool:
        """``t`` is a contiguous ``dtype`` tensor ``[N, *shape]`` (or of ``shape``) on the
        device."""
        return (type(t) is torch.Tensor and t.dtype == dtype
                and t.shape == (self.full_shape if shape is None else shape)
                and t.device == self.device and t.is_contiguous())

    def update(self, x, x64: wp.array, mode: int, stream) -> None:
        """Merge the env batch, float32 ``x`` (contiguous ``[N, *shape]``) or else ``x64``,
        into the statistics when ``mode`` says so."""
        specs = self.tree(x, x64, self.n, self.layout, self.parts, self.stamp, 1, mode)
        caller = (x,) if isinstance(x, torch.Tensor) else ()  # the launches reading x repoint
        for i, (kernel, dim, inputs, outputs) in enumerate(specs):
            c = self.bound(("update", i, mode), kernel, dim, inputs, outputs)
            c.repoint(*caller[:len(c.repointable)]).launch(stream)

    def normalize(self, x, out, x2, out2, stream) -> None:
        """``out = normalize(x)`` and, unless ``x2`` is None, ``out2 = normalize(x2)``: one
        launch (all float32 contiguous ``[M, *shape]``, M: N, or rows of a learner batch)."""
        pair = x2 is not None
        x2, out2 = (x2, out2) if pair else (x, out)
        args = [x, out, x2, out2, int(pair), self.P, self.n_mod, self.gid, self.flags, self.tab]
        c = self.bound(("normalize", pair, x.shape[0]), kstats.normalize, (x.shape[0], self.P),
                       args)
        c.repoint(*args[:4]).launch(stream)

    def reset(self, mask, groups, stream) -> None:
        """The masked reset (``kernels.stats.reset``) of checked ``mask`` and ``groups``
        (contiguous bool tensors ``[N]`` and ``[G]``, or None)."""
        r, masked, by_group = self.layout.resets, mask is not None, groups is not None
        args = [self.P, r, mask if masked else self.none_b,
                groups if by_group else self.none_b, self.eps, self.live, self.sent,
                self.pending, self.unsent, self.tab, self.ret]
        c = self.bound(("reset", masked, by_group), kstats.reset, [r.grp.shape[0] + self.G], args,
                       block_dim=kstats.RESET_LANES)
        c.repoint(*(t for t in (mask, groups) if t is not None)).launch(stream)


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def check_group_ids(name: str, gid, num_groups, num_envs, dev: torch.device) -> int:
    """Validate ``group_ids`` (long ``[N]`` on ``dev``, or ``None``) and return G; reads the
    id range on the host (construction and checkpoint loading only)."""
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


def check_stats_state(m, state: Mapping, prefix: str, strict: bool) -> None:
    """The checks of ``GroupedRunningStats.load_state_dict`` on the entries of ``state``
    under ``prefix``, all before any write (``nn.Module.load_state_dict`` copies buffer by
    buffer, so a bad ``m2`` would leave ``count`` loaded). Synchronizes."""
    name = type(m).__name__

    def fail(key: str, expected: str, got: object) -> None:
        raise ValueError(f"{name}.load_state_dict: {key!r} expected {expected}, got {got}")

    own = {k: v for k, v in m.state_dict(keep_vars=True).items() if "." not in k}
    expected = set(own) | {"group_ids", *m.per_env_buffers}
    keys = {k[len(prefix):] for k in state if k.startswith(prefix) and "." not in k[len(prefix):]}
    missing, unexpected = sorted(set(own) - keys), sorted(keys - expected)
    if strict and (missing or unexpected):
        # a file of another kind (an env's) is named; a module's lists the keys
        kind = None if prefix or "count" in state else state_kind(state)
        fail("keys", f"{sorted(expected)}", kind or f"missing {missing}, unexpected {unexpected}")
    for key in keys & expected:  # dense tensors holding data: their copies cannot fail
        t = state[prefix + key]
        if isinstance(t, torch.Tensor) and (t.layout != torch.strided or t.is_meta):
            fail(key, "a dense tensor holding data", f"a {t.layout} tensor on {t.device}")
    gid, n = state.get(prefix + "group_ids"), m.num_envs
    if gid is not None:
        if not isinstance(gid, torch.Tensor):
            fail("group_ids", "a long tensor [N]", type(gid).__name__)
        check_group_ids(name, gid.to(m.device), m.num_groups, n, m.device)
        n = gid.shape[0]
    for key in keys & expected - {"group_ids"}:
        t, ref = state[prefix + key], own.get(key)
        want = (ref.dtype if ref is not None else F64,
                (n,) if key in m.per_env_buffers else tuple(ref.shape))
        if not isinstance(t, torch.Tensor):
            fail(key, "a {} tensor {}".format(*want), type(t).__name__)
        if (t.dtype, t.shape) != want:
            fail(key, "a {} tensor {}".format(*want), f"a {t.dtype} tensor {tuple(t.shape)}")
        if key in m.saved_settings and float(t) != float(getattr(m, key)):  # host-ok: a load
            fail(key, f"{getattr(m, key)!r} (this module's {key}, a setting that defines its "
                 "statistics)", f"{float(t)!r} (the saved module's); build it with "
                 f"{key}={float(t)!r} to load them")
        base = key.removeprefix("synced_")
        if base not in ("count", "mean", "m2", "nonfinite") or t.numel() == 0:
            continue
        # host-ok below: checkpoint loading
        if not bool(torch.isfinite(t).all()):
            fail(key, "finite values", "NaN or inf")
        if base != "mean" and bool((t < 0).any()):
            fail(key, "values >= 0", f"minimum {t.min().item()}")  # host-ok: load error
        if base in ("count", "nonfinite") and not bool((t == t.round()).all()):
            fail(key, "whole numbers", "a fraction")


class GroupedRunningStats(nn.Module):
    """Base module: per-group statistics of ``[N, *shape]`` batches, one group per env.

    Buffers (persistent, float64 on the module's device): ``count`` ``[G]``, ``mean`` and
    ``m2`` ``[G, *shape]``; the shared baseline as of the last applied :meth:`sync`
    (``synced_count``, ``synced_mean``, ``synced_m2``; identical on every rank);
    ``reset_pending`` bool ``[G]`` (groups reset on this rank, not yet dropped from the
    baseline); ``nonfinite`` int64 ``[G]`` (samples left out because they held NaN or inf;
    per rank, never reset); ``group_ids`` long ``[N]`` (absent until N is known). Not saved
    (per rank, for overlapped syncs): ``sent_count`` / ``sent_mean`` / ``sent_m2`` (as of the
    last exchange pack) and ``reset_unsent`` bool ``[G]``; ``flags`` float64 ``[4]``:
    ``training``, ``frozen`` (True after :meth:`freeze`), ``clip`` (or 0) and ``gamma``,
    written by their setters and read by the kernels, so changing one never re-records a
    captured step. Subclasses add ``forward``, which never synchronizes with the host.

    ``N`` is taken from ``group_ids``, else ``num_envs``, else the first batch, mask or
    :meth:`attach` that shows it.
    """

    per_env_buffers: tuple[str, ...] = ()  # float64 buffers ``[N]``, registered once N is known
    # settings that define the statistics, saved as float64 scalars and compared on load
    saved_settings: tuple[str, ...] = ()

    def __init__(self, shape: int | Sequence[int], *, group_ids: torch.Tensor | None = None,
                 num_groups: int | None = None, num_envs: int | None = None,
                 clip: float | None = None, eps: float = 1e-8, reset_on: Sequence[str] = (),
                 device: str | torch.device | None = None):
        super().__init__()
        name = type(self).__name__
        # a tuple of ints >= 1 (``()`` for scalars): a batch ``[N, 0]`` has nothing to normalize
        dims = (shape,) if isinstance(shape, numbers.Integral) else shape
        dims = tuple(dims) if isinstance(dims, Iterable) else (None,)
        if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 for d in dims):
            raise ValueError(
                f"{name}: shape expected an int or a tuple of ints >= 1, got {shape!r}")
        if not (_is_real(eps) and 0 < eps < math.inf):
            raise ValueError(f"{name}: eps must be > 0 and finite (a number), got {eps!r}")
        self.shape, self.eps = tuple(int(d) for d in dims), float(eps)
        self.reset_on = (reset_on,) if isinstance(reset_on, str) else tuple(reset_on)
        if device is None:
            device = group_ids.device if isinstance(group_ids, torch.Tensor) else "cpu"
        dev = torch.empty(0, device=device).device  # canonical form, e.g. cuda -> cuda:0
        self.num_groups = check_group_ids(name, group_ids, num_groups, num_envs, dev)
        G, S = self.num_groups, self.shape
        # live, baseline, and (per rank, not saved) as of the last exchange pack
        for prefix in STATS:
            for k, shape in (("count", (G,)), ("mean", (G, *S)), ("m2", (G, *S))):
                self.register_buffer(prefix + k, torch.zeros(shape, dtype=F64, device=dev),
                                     persistent=prefix != "sent_")
        self.register_buffer("reset_pending", torch.zeros(G, dtype=torch.bool, device=dev))
        self.register_buffer("reset_unsent", torch.zeros(G, dtype=torch.bool, device=dev),
                             persistent=False)
        self.register_buffer("nonfinite", torch.zeros(G, dtype=torch.int64, device=dev))
        self.register_buffer("group_ids", None)
        self.register_buffer("flags", torch.zeros(4, dtype=F64, device=dev), persistent=False)
        self.exchange_epoch, self._detach, self._engine = 0, None, None
        self.training, self.frozen, self.clip = self.training, False, clip  # -> flags
        if group_ids is not None or num_envs is not None:
            self._bind(group_ids.shape[0] if group_ids is not None else int(num_envs), group_ids)

    # ------------------------------------------------------------------ setup
    def _bind(self, n: int, group_ids: torch.Tensor | None = None) -> None:
        """Fix N, unless known: store ``group_ids`` (one shared group by default) and the
        per-env buffers."""
        if self.group_ids is not None:
            return
        if group_ids is None:
            group_ids = torch.zeros(n, dtype=torch.int64, device=self.device)
        self.group_ids = group_ids.clone()  # (drops the engine: a bound buffer)
        self._counts = group_counts(group_ids, self.num_groups) if self.num_groups > 1 else None
        for k in self.per_env_buffers:
            self.register_buffer(k, torch.zeros(n, dtype=F64, device=self.device))

    @property
    def device(self) -> torch.device:
        """The device of every buffer."""
        return self.count.device

    @property
    def num_envs(self) -> int | None:
        """N, or ``None`` while not yet known."""
        return None if self.group_ids is None else self.group_ids.shape[0]

    def _bind_mask(self, mask, what: str) -> torch.Tensor:
        """Validate the bool mask ``[N]`` (``what`` names it in errors) and return it; while
        N is not known, a valid bool ``[K]`` mask fixes it."""
        n = self.num_envs
        if n is None:  # any N >= 1 (an empty mask would bind N = 0)
            n = mask.shape[0] if isinstance(mask, torch.Tensor) and mask.dim() == 1 else 0
            if n == 0:
                got = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
                raise ValueError(f"{what}: expected a bool tensor (N,), N >= 1, got {got}")
        check_mask(mask, n, self.device, what)
        self._bind(n)
        return mask

    def _check_tensor(self, t, what: str, dtype: torch.dtype, want: str | None = None,
                      hint: str = "", n: int | None = None) -> None:
        """Raise unless ``t`` is a ``dtype`` tensor on the module's device and, without
        ``want`` (another expected shape, for the message; the caller checks it), the env
        batch ``[N, *shape]`` (N: ``n``, else ``num_envs``, else any N >= 1; ``hint``: added
        to that error)."""
        name, n = type(self).__name__, self.num_envs if n is None else n
        env = want is None
        want = str(("N" if n is None else n, *self.shape)).replace("'", "") if env else want
        if not isinstance(t, torch.Tensor):
            raise ValueError(
                f"{name}: {what} expected a {dtype} tensor {want}, got {type(t).__name__}")
        if t.dtype != dtype:
            raise ValueError(f"{name}: {what} expected dtype {dtype}, got {t.dtype}")
        if t.device != self.device:
            raise ValueError(f"{name}: {what} expected device {self.device}, got {t.device}")
        if env and (t.dim() != 1 + len(self.shape) or tuple(t.shape[1:]) != self.shape
                    or t.numel() == 0 or t.shape[0] != (n or t.shape[0])):
            raise ValueError(f"{name}: {what} expected shape {want}{hint}, got {tuple(t.shape)}")

    def _env_batch(self, names: str, *ts) -> tuple[Engine, tuple]:
        """The engine for a call's env-batch tensors ``ts`` (or None), named by ``names``
        (space-separated): ``done`` bool ``[N]``, the others float32 ``[N, *shape]``, the
        outputs (``out*``) contiguous. Unless the engine matches them all, all are validated
        (the first fixes N while it is unknown) and inputs made contiguous."""
        e, keys = self.__dict__.get("_engine"), names.split()
        types = [torch.bool if k == "done" else torch.float32 for k in keys]
        if e is not None and all(t is None or e.matches(t, d)
                                 for t, d in zip(ts, types, strict=True)):
            return e, ts
        n = self.num_envs
        for t, k, d in zip(ts, keys, types, strict=True):
            if t is not None:
                self._check_tensor(t, k, d, n=n)
                if k.startswith("out") and not t.is_contiguous():
                    raise ValueError(f"{type(self).__name__}: {k} expected a contiguous tensor")
                n = t.shape[0]
        self._bind(n)
        ts = tuple(t if t is None or k.startswith("out") else t.detach().contiguous()
                   for t, k in zip(ts, keys, strict=True))
        return self._eng(), ts

    # ------------------------------------------------------------------ statistics
    @property
    def var(self) -> torch.Tensor:
        """Population variance, float64 ``[G, *shape]`` on the device (0 for empty groups)."""
        return self.m2 / self.count.clamp(min=1.0).view(-1, *([1] * len(self.shape)))

    @property
    def std(self) -> torch.Tensor:
        """Population std, float64 ``[G, *shape]`` on the device (0 for empty groups)."""
        return self.var.sqrt()

    # ------------------------------------------------------------------ modes
    _FLAG_SLOTS = {"training": kstats.TRAINING, "frozen": kstats.FROZEN, "clip": kstats.CLIP,
                   "gamma": kstats.GAMMA}

    def __setattr__(self, name, value):
        slot = self._FLAG_SLOTS.get(name)
        cls = type(self).__name__  # a setting is validated, then stored on the device:
        if name == "clip" and not (value is None or (_is_real(value) and value > 0)):
            raise ValueError(f"{cls}: clip must be > 0 or None (a number), got {value!r}")
        if name == "gamma" and not (_is_real(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"{cls}: gamma must be in [0, 1], got {value}")
        if name in ("training", "frozen"):  # (outside any replay)
            value = bool(value)
        elif slot is not None and value is not None:
            value = float(value)
        super().__setattr__(name, value)
        bufs = self.__dict__.get("_buffers", {})
        if slot is not None and bufs.get("flags") is not None:
            bufs["flags"][slot] = float(value or 0.0)
        if name in bufs:  # the engine binds every buffer: its launches point at this one
            self._set_engine(None)

    def _set_engine(self, e: Engine | None) -> Engine | None:
        """Install ``e`` (None: forget the engine; the next binds the current buffers) and
        count it: a new engine often takes the freed one's address, so ``id()`` cannot tell."""
        self.__dict__["_engine"] = e
        self.__dict__["_engine_gen"] = self.engine_generation + 1
        return e

    def _eng(self) -> Engine:
        """The :class:`Engine`, built if there is none."""
        e = self.__dict__.get("_engine")
        return self._set_engine(Engine(self)) if e is None else e

    @property
    def engine_generation(self) -> int:
        """Counts the engines built and dropped: a captured step that launched into an
        engine's buffers is stale once this changes (``replay_key``)."""
        return self.__dict__.get("_engine_gen", 0)

    def replay_key(self) -> tuple:
        """What a recorded (captured) call depends on that is not a device value: which
        buffers are bound (``engine_generation``); the settings are device flags."""
        return (self.engine_generation,)

    def freeze(self, frozen: bool = True) -> GroupedRunningStats:
        """Stop updates (``.eval()`` also does); ``freeze(False)`` resumes. Returns self."""
        self.frozen = bool(frozen)
        return self

    def unfreeze(self) -> GroupedRunningStats:
        """Same as ``freeze(False)``."""
        return self.freeze(False)

    @property
    def updating(self) -> bool:
        """Whether ``forward`` updates the statistics: ``self.training and not self.frozen``."""
        return self.training and not self.frozen

    def frozen_copy(self) -> GroupedRunningStats:
        """A frozen deep copy (same device, detached from any env's ``on_change``)."""
        return copy.deepcopy(self).freeze()

    def _apply(self, fn, recurse=True):
        """``.to()``, ``.cuda()``, ``.half()``, ...: buffers move, dtypes stay."""
        before = dict(self._buffers)
        super()._apply(fn, recurse)
        for name, old in before.items():
            new = self._buffers[name]
            if old is not None and new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(new.device)
        self._set_engine(None)
        return self

    def __getstate__(self):
        # recorded launches point at this instance's buffers; a copy listens to no env
        return {**super().__getstate__(), "_engine": None, "_detach": None}

    # ------------------------------------------------------------------ masked reset
    def reset_stats(
        self, mask: torch.Tensor | None = None, *, groups: torch.Tensor | None = None,
        stream=None,
    ) -> None:
        """Reset the statistics of every group holding a masked env and/or listed in groups.

        Args:
            mask: bool tensor ``[num_envs]`` on the module's device, or ``None``.
            groups: bool tensor ``[G]`` or long tensor ``[K]`` of group indices, on the
                device, or ``None``. The long form checks its range on the host (a sync);
                the bool and mask forms never synchronize.
            stream: the ``wp.Stream`` to launch on (None: torch's current stream; on CPU
                there is none).

        With both ``None`` every group is reset. Other groups stay bit-identical. One Warp
        launch over the chunks of envs and the groups (``kernels.stats.reset``; RewardNorm
        also clears the returns of the masked envs and of the envs in ``groups``).
        """
        e = self.__dict__.get("_engine")
        stream = stream_for(self.device) if stream is None else stream
        if e is not None and e.n and groups is None and e.matches(mask, torch.bool, (e.n,)):
            e.reset(mask, None, stream)  # a mask that fits the bound engine: checked
            return
        name, G, dev = type(self).__name__, self.num_groups, self.device
        if mask is not None:
            mask = self._bind_mask(mask, f"{name}.reset_stats: mask").contiguous()
        what = f"{name}.reset_stats: groups expected"
        if groups is not None and (not isinstance(groups, torch.Tensor) or groups.device != dev):
            got = getattr(groups, "device", type(groups).__name__)
            raise ValueError(f"{what} a tensor on {dev}, got {got}")
        if groups is not None and (groups.dtype != torch.bool or groups.shape != (G,)):
            if groups.dtype != torch.int64 or groups.dim() != 1:  # long [K] indices
                raise ValueError(
                    f"{what} bool [{G}] or long [K], got {groups.dtype} {groups.shape}")
            if groups.numel() and not (0 <= int(groups.min()) and int(groups.max()) < G):  # host-ok
                raise ValueError(f"{what} indices in [0, {G})")
            groups = torch.zeros(G, dtype=torch.bool, device=dev).index_fill_(0, groups, 1)
        self._eng().reset(mask, None if groups is None else groups.contiguous(), stream)

    # ------------------------------------------------------------------ params coupling
    def attach(self, env, *, listen: bool = True) -> GroupedRunningStats:
        """Bind to ``env`` (N, device); with ``listen``, register :meth:`on_param_change` with
        ``env.params.on_change`` if ``reset_on`` is set (``TransformedEnv`` listens itself).
        Raises as :meth:`check_env` does."""
        self.check_env(env)
        self._bind(int(env.num_envs))
        if self._detach is not None:
            self._detach()
            self._detach = None
        if listen and self.reset_on:
            # a gpuparam env's captured step records the reset launch into this engine's
            # buffers, which a new engine (.to(), a load) frees: keyed by the engine;
            # not told of checkpoint loads: statistics and env state load in either order
            key = ({"key": self.replay_key, "loads": False} if isinstance(env.params, ParamTable)
                   else {})
            remove = env.params.on_change(self.on_param_change, **key)
            self._detach = remove if callable(remove) else None
        return self

    def check_env(self, env, *, device: bool = True) -> None:
        """Raise unless this module fits ``env``: ``KeyError`` listing the valid names if a
        ``reset_on`` name is unknown; ``ValueError`` if ``env.num_envs`` or (``device``)
        ``env.device`` disagree with the module. Changes nothing."""
        name, names = type(self).__name__, tuple(env.params.names)
        unknown = [r for r in self.reset_on if r not in names]
        if unknown:
            raise KeyError(f"{name}: reset_on names {unknown} unknown; valid names: {names}")
        if device and torch.empty(0, device=env.device).device != self.device:
            raise ValueError(f"{name}: env device {env.device} != module device {self.device}")
        if self.num_envs not in (None, int(env.num_envs)):
            raise ValueError(f"{name}: env.num_envs={env.num_envs} != num_envs={self.num_envs}")

    def on_param_change(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``env.params.on_change`` callback: ``reset_stats(mask)`` (``mask`` bool
        ``[num_envs]`` on the device, or ``None``: all envs) if one of the parameter
        ``names`` written is in ``reset_on``."""
        if any(n in self.reset_on for n in names):
            self.reset_stats(mask)

    # ------------------------------------------------------------------ distributed
    def sync(self, group: dist.ProcessGroup | None = None) -> None:
        """Merge statistics over ``torch.distributed`` ranks; afterwards all ranks agree.

        Each rank's statistics are the shared baseline (``synced_*``) plus its own data
        since the last sync; sync gathers these deltas in one collective and merges them
        exactly (Chan et al.), the same way on every rank, into the baseline, which becomes
        the current statistics too: repeated syncs never double count. A group reset on any
        rank since the last sync drops its baseline on all ranks. Collective: all ranks call
        it with the same G and shape (no process group: a world of one). Device ops only:
        call it between steps, or let ``env.sync_every(k, norm)`` pack it with other targets
        into one collective overlapped with the next steps (``gp.SyncSchedule``); an exchange
        in flight is applied first. ``RewardNorm``'s per-env returns stay per rank.
        """
        exchange([self], group)

    # the Exchangeable split (gpuparam.distributed), used by sync() and by SyncSchedule
    def exchange_device(self) -> torch.device:
        """The device of the packed rows."""
        return self.device

    def exchange_size(self) -> int:
        """float64 values per rank: per group the count, mean, M2 and a reset flag."""
        return self.num_groups * (2 * math.prod(self.shape) + 2)

    def exchange_pack(self, out: torch.Tensor) -> None:
        """Write this rank's data since the last pack (and resets since) into ``out``
        (float64 ``[exchange_size()]``): one Warp launch."""
        e = self._eng()
        args = [e.P, e.live, e.sent, e.unsent, out]
        e.bound(("pack",), kstats.exchange_pack, e.G, args).repoint(out).launch(
            stream_for(self.device))

    def exchange_apply(self, rows: torch.Tensor) -> None:
        """Merge every rank's packed row (float64 ``[W, exchange_size()]``) into the
        baseline; live = baseline + own data since the pack; rewrite the float32 tables:
        one Warp launch."""
        if rows.stride(-1) != 1:
            rows = rows.contiguous()
        e, (W, stride) = self._eng(), (rows.shape[0], rows.stride(0))
        args = [rows, stride, W, e.P, e.live, e.synced, e.sent, e.unsent,
                e.pending, e.eps, e.tab]
        e.bound(("apply", W, stride), kstats.exchange_apply, e.G, args).repoint(rows).launch(
            stream_for(self.device))

    # ------------------------------------------------------------------ checkpoints
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for key in self.saved_settings:
            destination[prefix + key] = torch.tensor(float(getattr(self, key)), dtype=F64,
                                                     device=self.device)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, validated whole first: keys (with ``strict``),
        shapes, dtypes, dense tensors holding data, group ids, values (counts whole and >=
        0, statistics finite, M2 >= 0) and ``saved_settings`` (equal to this module's). A
        rejected load raises ``ValueError`` and changes nothing; tensors requiring grad are
        copied outside any graph. Synchronizes."""
        check_stats_state(self, state_dict, "", strict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def check_state_dict(self, state_dict, strict: bool = True) -> None:
        """Raise ``ValueError`` unless ``load_state_dict(state_dict, strict)`` would load
        it (the same checks; writes nothing)."""
        check_stats_state(self, state_dict, "", strict)

    def save(self, path) -> None:
        """Write ``state_dict()`` to the file ``path`` atomically (``gpuparam.files``)."""
        save_state(self.state_dict(), path)

    def load(self, path) -> None:
        """Restore a file written by :meth:`save`, validated whole (``ValueError``)."""
        self.load_state_dict(load_state(path))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # torch passes strict=True here whatever the caller asked: keys are checked by
        # load_state_dict; shapes, dtypes and values of what is present, before any write
        check_stats_state(self, state_dict, prefix, False)
        gid = state_dict.get(prefix + "group_ids")
        if gid is not None:
            self._bind(gid.shape[0])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        for key in self.saved_settings:  # not buffers: checked, nothing to copy
            if prefix + key in unexpected_keys:
                unexpected_keys.remove(prefix + key)
        # resend everything not in the loaded baseline; an exchange in flight is not applied
        self.reset_unsent.copy_(self.reset_pending)
        keep = ~self.reset_pending
        for k in ("count", "mean", "m2"):
            base = getattr(self, "synced_" + k)
            getattr(self, "sent_" + k).copy_(base * keep.view(-1, *([1] * (base.dim() - 1))))
        self.exchange_epoch += 1
        if self.num_groups > 1:  # the group layout may have changed
            self._counts = group_counts(self.group_ids, self.num_groups)
        self._set_engine(None)  # a new engine, new tables

    def extra_repr(self) -> str:
        keys = ("shape", "num_groups", "num_envs", "clip", "eps", "reset_on")
        return ", ".join(f"{k}={getattr(self, k)}" for k in keys)
