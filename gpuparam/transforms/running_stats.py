"""Per-group running count / mean / M2 on the device, merged with Chan et al.'s formula.

Counts, means and M2 (sum of squared deviations) are float64: a batch is reduced per group in
two passes (mean, then centered squares) and merged by the parallel-variance formula, so data
like 10000, 10001, 10002 keeps its std and counts stay exact past 2**24 (up to 2**53). The hot
path normalizes with a float32 cache (mean, 1/sqrt(var + eps)) refreshed on every change.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor, nn

from gpuparam._checks import check_mask

F64 = torch.float64


def _col(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
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
    w_b = _col(n_b / n.clamp(min=1.0), mean_a)
    delta = mean_b - mean_a
    corr = delta.square().mul_(_col(n_a, mean_a)).mul_(w_b)  # between-set term of M2
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
    has = _col(n_b > 0, mean)
    w = _col(n / n_b.clamp(min=1.0), mean)  # exactly 1 where A is empty
    mean_b = torch.where(has, mean_a + (mean - mean_a) * w, 0.0)
    corr = (mean_b - mean_a).square() * _col(n_a * n_b / n.clamp(min=1.0), mean)
    m2_b = torch.where(has, (m2 - m2_a - corr).clamp(min=0.0), 0.0)
    return n_b, mean_b, m2_b


class GroupedRunningStats(nn.Module):
    """Base module: per-group statistics of ``[N, *shape]`` batches, one group per env.

    Buffers (all persistent, float64 on the module's device): ``count`` ``[G]``, ``mean``
    ``[G, *shape]``, ``m2`` ``[G, *shape]``; the statistics at the last :meth:`sync`
    (``synced_count``, ``synced_mean``, ``synced_m2``); ``reset_pending`` bool ``[G]``;
    ``group_ids`` long ``[N]`` (absent until N is known). Subclasses add ``forward``.

    ``N`` is taken from ``group_ids``, else ``num_envs``, else the first batch, mask or
    :meth:`attach` that shows it.
    """

    def __init__(
        self,
        shape: Sequence[int],
        *,
        group_ids: torch.Tensor | None,
        num_groups: int | None,
        num_envs: int | None,
        clip: float | None,
        eps: float,
        reset_on: Sequence[str],
        device: str | torch.device | None,
    ):
        super().__init__()
        name = type(self).__name__
        if clip is not None and not clip > 0:
            raise ValueError(f"{name}: clip must be > 0 or None, got {clip}")
        if not eps > 0:
            raise ValueError(f"{name}: eps must be > 0, got {eps}")
        if isinstance(reset_on, str):
            reset_on = (reset_on,)
        self.shape, self.clip, self.eps = tuple(int(s) for s in shape), clip, float(eps)
        self.reset_on: tuple[str, ...] = tuple(reset_on)
        if device is None:
            device = group_ids.device if isinstance(group_ids, torch.Tensor) else "cpu"
        dev = torch.empty(0, device=device).device  # canonical form, e.g. cuda -> cuda:0
        self.num_groups = self._check_group_ids(group_ids, num_groups, num_envs, dev)
        G, S = self.num_groups, self.shape
        for prefix in ("", "synced_"):
            self.register_buffer(prefix + "count", torch.zeros(G, dtype=F64, device=dev))
            self.register_buffer(prefix + "mean", torch.zeros(G, *S, dtype=F64, device=dev))
            self.register_buffer(prefix + "m2", torch.zeros(G, *S, dtype=F64, device=dev))
        self.register_buffer("reset_pending", torch.zeros(G, dtype=torch.bool, device=dev))
        self.register_buffer("group_ids", None)
        for k in ("_gsum", "_gmean", "_gm2"):  # batch scratch [G, *S]
            self.register_buffer(k, torch.zeros(G, *S, dtype=F64, device=dev), persistent=False)
        self._frozen, self._detach, self._identity = False, None, False
        if group_ids is not None:
            self._bind(group_ids.shape[0], group_ids)
        elif num_envs is not None:
            self._bind(int(num_envs))

    # ------------------------------------------------------------------ setup
    def _check_group_ids(self, gid, num_groups, num_envs, dev) -> int:
        name = type(self).__name__
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

    def _bind(self, n: int, group_ids: torch.Tensor | None = None) -> None:
        """Fix N: allocate ``group_ids`` (one shared group by default) and ``[N]`` scratch.

        Elementwise work runs on ``[N, *S]`` viewed as rows ``[N // k, k * P]`` (P = numel of
        ``shape``). With one group, the per-row tables are its statistics tiled k times, so
        broadcasting runs over rows of up to 256 elements (a [N, 4] - [4] broadcast is ~6x
        slower on CPU); otherwise k = 1 and the tables hold each env's group statistics.
        """
        dev, S, G = self.device, self.shape, self.num_groups
        P, k = math.prod(S), 1
        while G == 1 and 2 * k * P <= 256 and n % (2 * k) == 0:
            k *= 2
        self._k, self._P = k, P
        if group_ids is None:
            group_ids = torch.zeros(n, dtype=torch.int64, device=dev)
        self.group_ids = group_ids.clone()
        rows = 1 if G == 1 else n
        for name, shape, dtype in (
            ("_d", (n, *S), F64),
            ("_rsum", (1, k * P), F64),
            ("_tile", (1, k * P), F64),
            ("_env_mean", (rows, k * P), None),
            ("_env_scale", (rows, k * P), None),
            ("_batch_count", (G,), F64),
        ):
            self.register_buffer(name, torch.zeros(shape, dtype=dtype, device=dev), False)
        self._bind_extra(n)
        self._group_layout_changed()

    def _rows(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` ``[N, *shape]`` (contiguous) viewed as ``[N // k, k * P]``."""
        return t.view(t.shape[0] // self._k, self._k * self._P)

    def _bind_extra(self, n: int) -> None:
        """Subclass hook: allocate per-env buffers once N is known."""

    def _group_layout_changed(self) -> None:
        gid, n = self.group_ids, self.group_ids.shape[0]
        self._batch_count.zero_().index_add_(0, gid, torch.ones(n, dtype=F64, device=gid.device))
        arange = torch.arange(n, device=gid.device)
        self._identity = self.num_groups == n and torch.equal(gid, arange)  # host-ok: setup
        self._refresh()

    @property
    def device(self) -> torch.device:
        """The device of every buffer."""
        return self.count.device

    @property
    def num_envs(self) -> int | None:
        """N, or ``None`` while not yet known."""
        return None if self.group_ids is None else self.group_ids.shape[0]

    def _ensure_bound(self, n: int) -> None:
        if self.group_ids is None:
            self._bind(n)

    # ------------------------------------------------------------------ statistics
    @property
    def var(self) -> torch.Tensor:
        """Population variance, float64 ``[G, *shape]`` on the device (0 for empty groups)."""
        return self.m2 / _col(self.count.clamp(min=1.0), self.m2)

    @property
    def std(self) -> torch.Tensor:
        """Population std, float64 ``[G, *shape]`` on the device (0 for empty groups)."""
        return self.var.sqrt()

    def _update64(self, x: torch.Tensor) -> None:
        """Merge the batch ``x`` (contiguous float64 ``[N, *shape]`` on the device) in."""
        gid, d, k, P = self.group_ids, self._d, self._k, self._P
        batch = (self._batch_count, self._gmean, self._gm2)
        if self._identity:  # one env per group: the batch is its own mean, with M2 = 0
            batch = (self._batch_count, x, self._gm2)
        elif self.num_groups == 1:  # dense two-pass reductions over rows, then over tiles
            torch.sum(self._rows(x), 0, keepdim=True, out=self._rsum)
            torch.sum(self._rsum.view(k, P), 0, out=self._gsum.view(P))
            torch.div(self._gsum, x.shape[0], out=self._gmean)
            self._tile.view(k, P).copy_(self._gmean.view(1, P).expand(k, P))
            torch.sub(self._rows(x), self._tile, out=self._rows(d))
            torch.sum(self._rows(d.square_()), 0, keepdim=True, out=self._rsum)
            torch.sum(self._rsum.view(k, P), 0, out=self._gm2.view(P))
        else:
            self._gsum.zero_().index_add_(0, gid, x)
            torch.div(self._gsum, _col(self._batch_count.clamp(min=1.0), x), out=self._gmean)
            torch.index_select(self._gmean, 0, gid, out=d)
            torch.sub(x, d, out=d)
            self._gm2.zero_().index_add_(0, gid, d.square_())
        merge_moments(self.count, self.mean, self.m2, *batch, inplace=True)
        self._refresh()

    def _refresh(self) -> None:
        """Refill the float32 per-row tables; empty groups normalize with mean 0, var 1."""
        if self.group_ids is None:
            return
        var = torch.where(_col(self.count > 0, self.m2), self.var, 1.0)
        k, P = self._k, self._P
        for table, src in (
            (self._env_mean, self.mean),
            (self._env_scale, (var + self.eps).rsqrt_()),
        ):
            if self.num_groups == 1:
                table.view(k, P).copy_(src.view(1, P).expand(k, P))
            elif self._identity:
                table.copy_(src.view(table.shape))
            else:
                torch.index_select(src.view(-1, P).float(), 0, self.group_ids, out=table)

    # ------------------------------------------------------------------ modes
    @property
    def frozen(self) -> bool:
        """True after :meth:`freeze`: ``forward`` normalizes without updating."""
        return self._frozen

    def freeze(self, frozen: bool = True) -> GroupedRunningStats:
        """Stop updates (``.eval()`` also does); ``freeze(False)`` resumes. Returns self."""
        self._frozen = bool(frozen)
        return self

    def unfreeze(self) -> GroupedRunningStats:
        """Same as ``freeze(False)``."""
        return self.freeze(False)

    @property
    def updating(self) -> bool:
        """Whether ``forward`` updates the statistics: ``self.training and not self.frozen``."""
        return self.training and not self._frozen

    def frozen_copy(self) -> GroupedRunningStats:
        """A frozen deep copy (same device, detached from any env's ``on_change``)."""
        c = copy.deepcopy(self)
        c._detach = None
        return c.freeze()

    # ------------------------------------------------------------------ masked reset
    def reset_stats(
        self, mask: torch.Tensor | None = None, *, groups: torch.Tensor | None = None
    ) -> None:
        """Reset the statistics of every group holding a masked env and/or listed in groups.

        Args:
            mask: bool tensor ``[num_envs]`` on the module's device, or ``None``.
            groups: bool tensor ``[G]`` or long tensor ``[K]`` of group indices, on the
                device, or ``None``. The long form checks its range on the host (a sync);
                the bool and mask forms never synchronize.

        With both ``None`` every group is reset. Other groups stay bit-identical.
        """
        name = type(self).__name__
        G, dev = self.num_groups, self.device
        if mask is not None:
            n = self.num_envs
            if n is None:  # N not known yet: a valid bool [K] mask fixes it
                n = mask.shape[0] if isinstance(mask, torch.Tensor) and mask.dim() == 1 else 0
            check_mask(mask, n, dev, f"{name}.reset_stats: mask")
            self._ensure_bound(n)
        gh = None if groups is None else self._groups_to_hit(groups)
        if mask is None and gh is None:
            hit = torch.ones(G, dtype=torch.bool, device=dev)
        else:
            hit = torch.zeros(G, dtype=torch.bool, device=dev) if gh is None else gh.clone()
            if mask is not None:
                per_group = torch.zeros(G, dtype=torch.int32, device=dev)
                hit |= per_group.index_add_(0, self.group_ids, mask.to(torch.int32)) > 0
        hv = _col(hit, self.mean)
        for prefix in ("", "synced_"):
            getattr(self, prefix + "count").masked_fill_(hit, 0.0)
            getattr(self, prefix + "mean").masked_fill_(hv, 0.0)
            getattr(self, prefix + "m2").masked_fill_(hv, 0.0)
        self.reset_pending |= hit
        self._after_reset(mask, gh)
        self._refresh()

    def _groups_to_hit(self, groups) -> torch.Tensor:
        what, G = f"{type(self).__name__}.reset_stats: groups expected", self.num_groups
        if not isinstance(groups, torch.Tensor) or groups.device != self.device:
            got = getattr(groups, "device", type(groups).__name__)
            raise ValueError(f"{what} a tensor on {self.device}, got {got}")
        if groups.dtype == torch.bool and tuple(groups.shape) == (G,):
            return groups
        if groups.dtype != torch.int64 or groups.dim() != 1:
            raise ValueError(f"{what} bool [{G}] or long [K], got {groups.dtype} {groups.shape}")
        if groups.numel() and not (0 <= int(groups.min()) and int(groups.max()) < G):  # host-ok
            raise ValueError(f"{what} indices in [0, {G})")
        return torch.zeros(G, dtype=torch.bool, device=self.device).index_fill_(0, groups, 1)

    def _after_reset(self, mask: torch.Tensor | None, groups_hit: torch.Tensor | None) -> None:
        """Subclass hook: clear per-env state after :meth:`reset_stats`."""

    # ------------------------------------------------------------------ params coupling
    def attach(self, env, *, listen: bool = True) -> GroupedRunningStats:
        """Bind to ``env`` (N, device); with ``listen``, register :meth:`on_param_change` with
        ``env.params.on_change`` if ``reset_on`` is set (``TransformedEnv`` listens itself).

        Raises ``KeyError`` listing the valid names if a ``reset_on`` name is unknown, and
        ``ValueError`` if ``env.num_envs`` or ``env.device`` disagree with the module.
        """
        name, names = type(self).__name__, tuple(env.params.names)
        unknown = [r for r in self.reset_on if r not in names]
        if unknown:
            raise KeyError(f"{name}: reset_on names {unknown} unknown; valid names: {names}")
        if torch.empty(0, device=env.device).device != self.device:
            raise ValueError(f"{name}: env device {env.device} != module device {self.device}")
        if self.num_envs not in (None, int(env.num_envs)):
            raise ValueError(f"{name}: env.num_envs={env.num_envs} != num_envs={self.num_envs}")
        self._ensure_bound(int(env.num_envs))
        if self._detach is not None:
            self._detach()
            self._detach = None
        if listen and self.reset_on:
            remove = env.params.on_change(self.on_param_change)
            self._detach = remove if callable(remove) else None
        return self

    def on_param_change(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``env.params.on_change`` callback: ``reset_stats(mask)`` if a name is in reset_on.

        Args:
            names: the parameter names written.
            mask: bool tensor ``[num_envs]`` on the device, or ``None`` for all envs.
        """
        if any(n in self.reset_on for n in names):
            self.reset_stats(mask)

    # ------------------------------------------------------------------ distributed
    def sync(self, group: dist.ProcessGroup | None = None) -> None:
        """Merge statistics over ``torch.distributed`` ranks; afterwards all ranks agree.

        Each rank's statistics are its ``synced_*`` baseline (identical on all ranks) plus
        its own data since the last sync. Sync all-reduces these deltas exactly (counts,
        count-weighted means, M2 plus the between-rank term), adds them to the baseline and
        makes the result the new baseline and the current statistics, so repeated syncs never
        double count. A group reset on any rank since the last sync drops its baseline on all
        ranks. All ranks must call it with the same G and shape (it is collective). Without an
        initialized process group it acts as a world of one.
        """
        G = self.num_groups
        n_d, mean_d, m2_d = unmerge_moments(
            self.count, self.mean, self.m2, self.synced_count, self.synced_mean, self.synced_m2
        )
        wsum = (mean_d * _col(n_d, mean_d)).reshape(G, -1)
        pack = torch.cat([n_d[:, None], wsum, self.reset_pending[:, None].to(F64)], 1)
        distributed = dist.is_available() and dist.is_initialized()
        if distributed:
            dist.all_reduce(pack, group=group)
        n_t, flags = pack[:, 0], pack[:, -1] > 0
        mean_t = (pack[:, 1:-1] / n_t.clamp(min=1.0)[:, None]).reshape(mean_d.shape)
        m2_t = m2_d + (mean_d - mean_t).square() * _col(n_d, mean_d)
        if distributed:
            dist.all_reduce(m2_t, group=group)
        keep = _col(~flags, mean_t)  # a reset on any rank drops the shared baseline
        base = (self.synced_count * ~flags, self.synced_mean * keep, self.synced_m2 * keep)
        merge_moments(*base, n_t, mean_t, m2_t, inplace=True)
        for k, v in zip(("count", "mean", "m2"), base, strict=True):
            getattr(self, k).copy_(v)
            getattr(self, "synced_" + k).copy_(v)
        self.reset_pending.zero_()
        self._refresh()

    # ------------------------------------------------------------------ checkpoints
    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        gid = state_dict.get(prefix + "group_ids")
        if gid is not None:
            self._check_group_ids(gid.to(self.device), self.num_groups, self.num_envs, self.device)
            self._ensure_bound(gid.shape[0])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if self.group_ids is not None:
            self._group_layout_changed()
        self._refresh()

    def extra_repr(self) -> str:
        keys = ("shape", "num_groups", "num_envs", "clip", "eps", "reset_on")
        return ", ".join(f"{k}={getattr(self, k)}" for k in keys)
