"""Curricula: per-env difficulty levels on the device, moved by a metric at episode end.

A level maps to parameter values and/or randomization ranges: a table with one entry per
level, or an (easy, hard) pair interpolated linearly over the levels. At every step, for
the envs whose episode just ended (the ``done`` mask, nothing else), one recorded launch
compares a device metric with the thresholds, moves the level and writes the level's
values (nominal and effective) and per-env ranges. It runs after the env kernel and before
reset-time randomization, so a new level's ranges apply to the very next episode. Optional
automatic domain randomization (``ADR``) widens a range bound while episodes drawn near it
keep a high metric.

Sharded runs (``gpuparam.distributed``): levels are per env, so they need no merging and
match a single process's for the same global envs. ADR ranges are global: with
``sync=True`` the step only collects ADR statistics and ``sync()`` (a collective, between
steps, e.g. by ``env.sync_every``) all-reduces them (integer sums: exact) and decides, so
every rank keeps identical ranges.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gpuparam._checkpoint import check_curriculum
from gpuparam._checks import check_env_ids, check_mask, ids_to_mask
from gpuparam._curriculum_build import (
    bind_adr,
    check_unowned,
    dev_f32,
    dev_i32,
    metric_source,
    range_table,
    table,
)
from gpuparam._device import launch, stream_for, to_wp
from gpuparam.distributed import exchange
from gpuparam.kernels import curriculum as K
from gpuparam.randomization.binding import DIST, check_result
from gpuparam.randomization.terms import Term, Uniform

Metric = str | torch.Tensor | Callable[[object], torch.Tensor]


@dataclass
class ADR:
    """Automatic domain randomization of a ``Uniform`` reset term's range (OpenAI's ADR,
    with "episodes drawn near a bound" standing in for boundary sampling).

    Each episode end adds the metric to a bound's statistics when the value the episode
    ran with lies within ``edge`` times the range's width of that bound. Once a bound has
    ``samples`` episodes: mean metric ``>= threshold_high`` moves it outwards by ``delta``
    (never past ``limits``), ``< threshold_low`` moves it inwards (never past the other
    bound); then its statistics restart. The range is global (shared by all envs) and
    lives in the term's device table, so it is saved by ``env.state_dict()``.

    Args:
        term: a ``gp.Uniform`` term with ``on="reset"``, added to the env, no schedule.
        delta: step per decision (scalar or per component), > 0.
        limits: ``(lowest low, highest high)``, scalars or per component; must contain the
            term's current range.
        threshold_high: widen at or above this mean metric.
        threshold_low: narrow below this mean metric (default: never narrow).
        samples: episodes per decision, >= 1.
        edge: fraction of the width counted as "at the bound", in [0, 0.5].
    """

    term: Term
    delta: float | Sequence[float]
    limits: tuple[float | Sequence[float], float | Sequence[float]]
    threshold_high: float
    threshold_low: float | None = None
    samples: int = 64
    edge: float = 0.1

    def __post_init__(self) -> None:
        if not isinstance(self.term, Uniform) or self.term.on != "reset" or self.term.schedule:
            raise ValueError(f"ADR: needs a gp.Uniform term with on='reset' and no schedule, "
                             f"got {self.term!r}")
        if not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"ADR({self.term}): samples must be an int >= 1, got {self.samples}")
        if not 0.0 <= self.edge <= 0.5:
            raise ValueError(f"ADR({self.term}): edge must be in [0, 0.5], got {self.edge}")
        lo = -math.inf if self.threshold_low is None else self.threshold_low
        if not (math.isfinite(self.threshold_high) and lo < self.threshold_high):
            raise ValueError(f"ADR({self.term}): need threshold_low < threshold_high (finite)")


class Curriculum:
    """Per-env levels ``0 .. num_levels - 1`` (``levels``: int32 ``[num_envs]``, device).

    Args:
        num_levels: L >= 1.
        params: ``{name: values}``: ``values`` has one entry per level (``[L]`` or
            ``[L, size]``), or is an ``(easy, hard)`` pair (``[2]`` or ``[2, size]``)
            interpolated linearly. Written to nominal and effective values when an env's
            level changes (and by ``set_level``).
        ranges: ``{term: ranges}`` for terms added to the env (not ``Choice``, no
            schedule): one range per level, or ``(easy_range, hard_range)``; a range is the
            term's ``(low, high)`` or ``(mean, std)``, scalars or per component. The term
            then draws from its env's level's range.
        metric: ``"episode_return"`` (default) or another key of the step's TensorDict,
            a tensor ``[num_envs]`` on the device (read at every step: update it in place),
            or ``fn(env) -> tensor [num_envs]`` called at every step. Only its values at
            done envs matter; bool and int metrics are cast to float.
        promote: a done env whose metric is ``>= promote`` moves one level up.
        demote: ``<= demote`` moves one level down (``demote < promote``).
        initial_level: every env's level when the curriculum is added.
        adr: ``ADR`` specs run at the same point.
        sync: for runs sharded over ``torch.distributed`` ranks: ADR statistics are only
            collected at each step, and ranges decided at each :meth:`sync` from the
            statistics of all ranks (all-reduced), so every rank keeps the same ranges;
            call ``sync`` between steps, e.g. with ``env.sync_every(k, curriculum)``. Also
            fine in one process (a world of one): decisions then happen at syncs only.
            Default False: ADR decides at every step from this process's envs.

    Add it with ``env.add_curriculum(cur)``.
    """

    def __init__(
        self,
        num_levels: int,
        *,
        params: Mapping[str, object] | None = None,
        ranges: Mapping[Term, object] | None = None,
        metric: Metric = "episode_return",
        promote: float | None = None,
        demote: float | None = None,
        initial_level: int = 0,
        adr: Sequence[ADR] = (),
        sync: bool = False,
    ):
        if not isinstance(num_levels, int) or isinstance(num_levels, bool) or num_levels < 1:
            raise ValueError(f"Curriculum: num_levels must be an int >= 1, got {num_levels!r}")
        self.num_levels = num_levels
        self.params = dict(params or {})
        self.ranges = dict(ranges or {})
        self.metric = metric
        self.promote = math.inf if promote is None else float(promote)
        self.demote = -math.inf if demote is None else float(demote)
        if math.isnan(self.promote) or math.isnan(self.demote) or self.demote >= self.promote:
            raise ValueError(f"{self}: need demote < promote, got {demote}, {promote}")
        if not isinstance(initial_level, int) or not 0 <= initial_level < num_levels:
            raise ValueError(f"{self}: initial_level must be in [0, {num_levels}), "
                             f"got {initial_level!r}")
        self.initial_level = initial_level
        self.adr = list(adr)
        if any(not isinstance(a, ADR) for a in self.adr):
            raise ValueError(f"{self}: adr must be a list of gp.ADR")
        if not (isinstance(metric, (str, torch.Tensor)) or callable(metric)):
            raise ValueError(f"{self}: metric must be a key, a tensor or a callable, "
                             f"got {type(metric).__name__}")
        if not isinstance(sync, bool):
            raise ValueError(f"{self}: sync must be a bool, got {sync!r}")
        self.synced = sync
        self._env = None

    def __repr__(self) -> str:
        return f"Curriculum(num_levels={self.num_levels})"

    # ------------------------------------------------------------------ public
    @property
    def levels(self) -> torch.Tensor:
        """int32 tensor ``[num_envs]`` on the env's device (live)."""
        self._require_env()
        return self._levels

    def set_level(self, level, mask: torch.Tensor | None = None, env_ids=None) -> None:
        """Set the level of the masked envs (all when both are None) and write its values.

        Args:
            level: an int, or an int tensor ``[num_envs]`` on the device (range-checked:
                synchronizes).
            mask: bool tensor ``[num_envs]`` on the device; or ``env_ids`` (long ``[K]``).
        """
        env = self._require_env()
        n, dev, L = env.num_envs, env.device, self.num_levels
        if mask is not None and env_ids is not None:
            raise ValueError(f"{self}.set_level: pass mask or env_ids, not both")
        check_mask(mask, n, dev)
        if env_ids is not None:
            mask = ids_to_mask(check_env_ids(env_ids, n, dev), n)
        if isinstance(level, torch.Tensor):
            if (
                level.shape != (n,) or level.dtype.is_floating_point or level.is_complex()
                or level.dtype == torch.bool or level.device != dev
            ):
                raise ValueError(f"{self}.set_level: expected an int tensor [{n}] on {dev}")
            lo, hi = int(level.min()), int(level.max())  # host-ok: validated user call
            value = level.detach().to(torch.int32)
        else:
            if not isinstance(level, int) or isinstance(level, bool):
                raise ValueError(
                    f"{self}.set_level: expected an int in [0, {L}) or an int tensor [{n}], "
                    f"got {level!r} ({type(level).__name__})"
                )
            lo = hi = level
            value = torch.full((n,), level if 0 <= level < L else 0, dtype=torch.int32,
                               device=dev)
        if not (isinstance(lo, int) and 0 <= lo and hi < L):
            raise ValueError(f"{self}.set_level: levels must be in [0, {L}), got {level!r}")
        gate = torch.ones(n, dtype=torch.bool, device=dev) if mask is None else mask
        self._levels.copy_(torch.where(gate, value, self._levels))
        launch(K.update_levels, n, self._level_inputs(gate, force=1), dev)
        if self._names:
            env.params.notify(self._names, mask)

    # ------------------------------------------------------------------ binding
    def bind(self, env) -> None:
        if self._env is not None:
            raise ValueError(f"{self}: already added to an env")
        n, dev, L = env.num_envs, env.device, self.num_levels
        p, rz = env.params, env.randomization
        pcol, ptab = [], []
        for name, value in self.params.items():
            if name not in p:
                raise KeyError(f"{self}: unknown parameter {name!r}; valid names: "
                               f"{', '.join(p.names)}")
            spec = p.spec[name]
            col, size = p.columns(name)
            tab = table(value, L, (size,), f"{self}: parameter {name!r}")
            bad = (tab < spec.low) | (tab > spec.high)
            if bool(bad.any()):
                lvl = int(bad.any(1).nonzero()[0])  # host-ok: construction, error path
                raise ValueError(f"{self}: parameter {name!r}: level {lvl} value "
                                 f"{tab[lvl].tolist()} outside its valid range "  # host-ok
                                 f"[{spec.low}, {spec.high}]")
            pcol += range(col, col + size)
            ptab.append(tab)
        both = [a.term for a in self.adr if a.term in self.ranges]
        if both:
            raise ValueError(f"{self}: {both[0]} has per-level ranges and ADR; give it one "
                             "(ADR moves the global range, which per-env ranges replace)")
        bounds, rtab = [], []
        for term, value in self.ranges.items():
            b = rz.bound(term)
            check_unowned(b, term, self)
            if b.dist == DIST["choice"] or b.scheduled:
                raise ValueError(f"{self}: {term}: per-level ranges need a term without "
                                 "schedule, not Choice")
            tab = range_table(value, L, term, b.size)
            for r in tab:
                term.check_range((r[:, 0].tolist(), r[:, 1].tolist()))  # host-ok: binding
                lo, hi = (r[:, 0], r[:, 0]) if term.dist == "gaussian" else (r[:, 0], r[:, 1])
                check_result(term, p.spec[term.param], p, b.mask, lo.float(), hi.float())
            bounds.append(b)
            rtab.append(tab)
        for a in self.adr:
            check_unowned(rz.bound(a.term), a.term, self)
        adr = [bind_adr(a, env) for a in self.adr]
        src = metric_source(self.metric, env, self)
        # everything checked: commit
        self._env = env
        self._levels = torch.full((n,), self.initial_level, dtype=torch.int32, device=dev)
        self._changed = torch.zeros(n, dtype=torch.bool, device=dev)  # envs the update wrote
        self._src, self._metric_buf = src
        self._names = tuple(self.params)
        self._pcol = dev_i32(pcol, dev)
        self._pval = dev_f32(torch.cat(ptab, 1) if ptab else torch.zeros(L, 0), dev)
        self._num_p = len(pcol)
        self._range_bounds = bounds
        self._rval = dev_f32(torch.cat(rtab, 1) if rtab else torch.zeros(L, 0, 2), dev)
        self._num_q = sum(b.size for b in bounds)
        self._adr = adr
        na = sum(len(a["acol"]) for a in adr)
        self._adr_sums = torch.zeros(2 * na, dtype=torch.int64, device=dev)
        self._adr_counts = torch.zeros(2 * na, dtype=torch.int32, device=dev)
        # sync=True: statistics collected since the last sync (this rank's), and one int64
        # buffer packing them with the level histogram for a single all-reduce
        self._local_sums = torch.zeros(2 * na, dtype=torch.int64, device=dev)
        self._local_counts = torch.zeros(2 * na, dtype=torch.int32, device=dev)
        self._in_flight = torch.zeros(4 * na, dtype=torch.int64, device=dev)  # packed, unapplied
        self._pack = torch.zeros(4 * na + L, dtype=torch.int64, device=dev)
        self._level_counts = torch.zeros(L, dtype=torch.int64, device=dev)
        self._ones = torch.ones(n, dtype=torch.int64, device=dev)
        self._adr_params = {
            k: (dev_i32 if k in ("acol", "aop", "samples") else dev_f32)(
                [x for a in adr for x in a[k]], dev)
            for k in ("acol", "aop", "samples", "edge", "thr_high", "thr_low", "delta",
                      "lim_low", "lim_high")
        }
        if bounds:
            rz.attach_per_env_ranges([b.term for b in bounds])
        self._pinned = [b.term for b in bounds] + [a.term for a in self.adr]
        rz.pin(self._pinned, self)
        self._remove_listener = rz.on_rebuild(self._record)
        self._record()
        self.set_level(self.initial_level)

    def unbind(self) -> None:
        env = self._env
        self._remove_listener()
        env.randomization.unpin(self._pinned)
        if self._range_bounds:
            env.randomization.detach_per_env_ranges([b.term for b in self._range_bounds])
        self._env = None

    def _require_env(self):
        if self._env is None:
            raise ValueError(f"{self}: add it to an env first (env.add_curriculum)")
        return self._env

    # ------------------------------------------------------------------ launches
    def _level_inputs(self, gate: torch.Tensor, force: int) -> list:
        env = self._env
        n, p = env.num_envs, env.params
        prow = [b.pe_row + j for b in self._range_bounds for j in range(b.size)]
        self._prow = dev_i32(prow, env.device)
        return [
            to_wp(gate), force, to_wp(self._metric_buf), self.promote, self.demote,
            self.num_levels, n, to_wp(self._pcol), to_wp(self._pval.reshape(-1)), self._num_p,
            to_wp(self._prow), to_wp(self._rval.reshape(-1)), self._num_q, to_wp(self._levels),
            to_wp(self._changed), to_wp(p.nominal_table.view(-1)),
            to_wp(p.effective_table.view(-1)),
            to_wp(env.randomization.tables()["pe"]),
        ]

    def _record(self) -> None:
        """(Re)record the launches: at binding and after every randomization rebuild."""
        env = self._env
        n, dev, done = env.num_envs, env.device, env.context.done
        self._cmd = launch(K.update_levels, n, self._level_inputs(done, 0), dev, record=True)
        self._cmd_adr = None
        if not self._adr:
            return
        vals = env.randomization.tables()["vals"]
        aval = dev_i32([b.r0 + 2 * j for a in self._adr for b, j in a["slots"]], dev)
        ap, p = self._adr_params, env.params
        self._aval = aval
        collect = [
            to_wp(done), to_wp(self._metric_buf), n, to_wp(ap["acol"]), to_wp(aval),
            to_wp(ap["aop"]), to_wp(ap["edge"]), len(aval), to_wp(vals),
            to_wp(p.nominal_table.view(-1)), to_wp(p.effective_table.view(-1)),
            *((to_wp(self._local_sums), to_wp(self._local_counts)) if self.synced
              else (to_wp(self._adr_sums), to_wp(self._adr_counts))),
        ]
        update = [
            to_wp(aval), to_wp(ap["samples"]), to_wp(ap["thr_high"]), to_wp(ap["thr_low"]),
            to_wp(ap["delta"]), to_wp(ap["lim_low"]), to_wp(ap["lim_high"]), to_wp(vals),
            to_wp(self._adr_sums), to_wp(self._adr_counts),
        ]
        self._cmd_adr = (
            launch(K.adr_collect, n, collect, dev, record=True),
            launch(K.adr_update, len(aval), update, dev, record=True),
        )

    @property
    def warp_only(self) -> bool:
        """True when ``update`` only launches Warp kernels (the metric is an env buffer,
        not a callable): its step stage then replays inside a Warp CPU graph."""
        return self._src is None

    def update(self, ctx) -> None:
        """Stage of the env's step (``ctx``: its ``StepContext``): metric, levels and
        values, ADR, for the done envs; no host sync."""
        stream = ctx.stream
        if self._src is not None:
            m = self._src()
            if not isinstance(m, torch.Tensor) or m.shape != self._metric_buf.shape:
                raise ValueError(f"{self}: metric must give a tensor [{self._env.num_envs}], "
                                 f"got {getattr(m, 'shape', type(m).__name__)}")
            self._metric_buf.copy_(m)
        self._cmd.launch(stream)
        if self._names:  # the envs whose level moved, not every done env
            self._env.params.notify(self._names, self._changed)
        if self._cmd_adr is not None:
            self._cmd_adr[0].launch(stream)
            if not self.synced:
                self._cmd_adr[1].launch(stream)

    # ------------------------------------------------------------------ distributed
    @property
    def global_level_counts(self) -> torch.Tensor:
        """int64 tensor ``[num_levels]`` on the env's device: envs at each level over all
        ranks, as of the last applied sync (zeros before): of the step it was packed at,
        one interval before it was applied for an overlapped ``env.sync_every``."""
        self._require_env()
        return self._level_counts

    def sync(self, group: dist.ProcessGroup | None = None) -> None:
        """Merge over ``torch.distributed`` ranks (collective: every rank calls it between
        the same steps): the histogram of levels (``global_level_counts``) and, with
        ``sync=True``, the ADR statistics collected since the last sync, which are then
        added to the shared ones and decided on (``ADR``) identically on every rank.
        Without an initialized process group, a world of one. Device ops and one
        all-gather of ``4 * ADR components + num_levels`` int64 values (exact integer sums);
        no host sync. ``env.sync_every(k, cur)`` packs it with the schedule's other targets
        into one collective, overlapped with the next steps by default
        (``gp.SyncSchedule``); an exchange of it still in flight is applied first.

        Raises ``ValueError`` for a curriculum with ADR built with ``sync=False`` (its
        ranges are decided per rank at every step and would differ between ranks)."""
        self._check_syncable()
        exchange([self], group)

    def _check_syncable(self) -> None:
        self._require_env()
        if self._adr and not self.synced:
            raise ValueError(f"{self}.sync: this curriculum's ADR decides at every step on "
                             "each rank; build it with Curriculum(..., sync=True) to sync it")

    # the Exchangeable split (gpuparam.distributed), used by sync() and by SyncSchedule
    exchange_epoch = 0

    def exchange_device(self) -> torch.device:
        """The env's device."""
        return self._require_env().device

    def exchange_size(self) -> int:
        """Values per rank (int64 bits in a float64 row): ADR sums and counts, levels."""
        self._require_env()
        return self._pack.numel()

    def exchange_pack(self, out: torch.Tensor) -> None:
        """Move the ADR statistics collected since the last pack and this rank's level
        histogram into ``out`` (float64 ``[exchange_size()]``, holding int64 bits)."""
        self._check_syncable()
        na2 = self._local_sums.numel()
        pack = self._pack
        pack[:na2].copy_(self._local_sums)
        pack[na2 : 2 * na2].copy_(self._local_counts)
        pack[2 * na2 :].zero_().index_add_(0, self._levels.long(), self._ones)
        out.view(torch.int64).copy_(pack)
        if self._cmd_adr is not None:
            self._in_flight += pack[: 2 * na2]  # kept for state_dict until applied
            self._local_sums.zero_()
            self._local_counts.zero_()

    def exchange_apply(self, rows: torch.Tensor) -> None:
        """Sum every rank's row (int64: exact), set ``global_level_counts`` and, with ADR,
        add the sums to the shared statistics and decide."""
        total = rows.view(torch.int64).sum(0)
        na2 = self._local_sums.numel()
        self._level_counts.copy_(total[2 * na2 :])
        if self._cmd_adr is not None:
            self._adr_sums += total[:na2]
            self._adr_counts += total[na2 : 2 * na2].to(torch.int32)
            self._in_flight.zero_()
            self._cmd_adr[1].launch(stream_for(self._env.device))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """``levels`` and ADR statistics (parameter values, per-env ranges and ADR ranges
        are saved by the env's parameters and randomization)."""
        self._require_env()
        na2 = self._local_sums.numel()
        return {
            "num_levels": self.num_levels, "levels": self._levels.clone(),
            "adr_sums": self._adr_sums.clone(), "adr_counts": self._adr_counts.clone(),
            # statistics packed into an exchange still in flight count as not yet sent
            "adr_local_sums": self._local_sums + self._in_flight[:na2],
            "adr_local_counts": self._local_counts + self._in_flight[na2:].to(torch.int32),
            "level_counts": self._level_counts.clone(),
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore a ``state_dict()`` (checked first)."""
        self.check_state(state)
        self.exchange_epoch += 1  # an exchange in flight is not applied to this state
        self._in_flight.zero_()
        self._levels.copy_(state["levels"])
        self._adr_sums.copy_(state["adr_sums"])
        self._adr_counts.copy_(state["adr_counts"])
        for key, buf in (("adr_local_sums", self._local_sums),
                         ("adr_local_counts", self._local_counts),
                         ("level_counts", self._level_counts)):
            if key in state:  # absent in checkpoints of older versions: keep zeros
                buf.copy_(state[key])
            else:
                buf.zero_()

    def check_state(self, state: Mapping[str, object]) -> None:
        """Raise ``ValueError`` unless ``state`` fits this curriculum."""
        self._require_env()
        for key in ("levels", "adr_sums", "adr_counts"):
            t = state.get(key)
            if not isinstance(t, torch.Tensor) or t.shape != getattr(self, "_" + key).shape:
                raise ValueError(f"{self}.load_state_dict: {key!r} missing or of another shape")
            if t.dtype != getattr(self, "_" + key).dtype:
                raise ValueError(f"{self}.load_state_dict: {key!r} expected dtype "
                                 f"{getattr(self, '_' + key).dtype}, got {t.dtype}")
        for key, buf in (("adr_local_sums", "_local_sums"), ("adr_local_counts", "_local_counts"),
                         ("level_counts", "_level_counts")):
            t = state.get(key)
            if t is not None and (not isinstance(t, torch.Tensor)
                                  or t.shape != getattr(self, buf).shape):
                raise ValueError(f"{self}.load_state_dict: {key!r} of another shape")
        if state.get("num_levels") != self.num_levels:
            raise ValueError(f"{self}.load_state_dict: num_levels {state.get('num_levels')}")
        check_curriculum(state, self.num_levels, f"{self}")
