"""Curricula: per-env difficulty levels on the device, moved by a metric at episode end.

At every step, for the envs whose episode just ended (the ``done`` mask, nothing else), one
recorded launch compares a device metric with the thresholds, moves the level and writes
the level's values (nominal and effective) and per-env ranges. It runs after the env kernel
and before reset-time randomization, so a new level's ranges apply to the very next
episode. Optional ADR (``gpuparam.adr``) runs at the same point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.distributed as dist

from gpuparam._checkpoint import check_curriculum, check_like
from gpuparam._device import launch, stream_for, to_wp
from gpuparam._launch import BoundLaunch
from gpuparam.adr import ADR, AdrGroup
from gpuparam.distributed import exchange
from gpuparam.kernels import curriculum as kcurriculum
from gpuparam.randomization.manager import select_envs
from gpuparam.randomization.terms import Term, check_int, check_result, range_tensor

__all__ = ["ADR", "Curriculum", "Metric"]

Metric = str | torch.Tensor | Callable[[object], torch.Tensor]


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
            or ``fn(env) -> tensor [num_envs]`` (dense, real, on the env's device: else that
            step, completed, raises ``ValueError``) called at every step. Only its values at
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
        check_int(num_levels, 1, "Curriculum(num_levels)")
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
        n, dev, num_levels = env.num_envs, env.device, self.num_levels
        mask = select_envs(f"{self}.set_level", env, mask, env_ids)
        if isinstance(level, torch.Tensor):
            if (
                level.shape != (n,) or level.dtype.is_floating_point or level.is_complex()
                or level.dtype == torch.bool or level.device != dev
            ):
                raise ValueError(f"{self}.set_level: expected an int tensor [{n}] on {dev}, "
                                 f"got {level.dtype} {tuple(level.shape)} on {level.device}")
            lo, hi = int(level.min()), int(level.max())  # host-ok: validated user call
            level = level.detach().to(torch.int32)
        elif not isinstance(level, int) or isinstance(level, bool):
            raise ValueError(
                f"{self}.set_level: expected an int in [0, {num_levels}) or an int tensor [{n}], "
                f"got {level!r} ({type(level).__name__})"
            )
        else:
            lo = hi = level
        if not 0 <= lo <= hi < num_levels:
            raise ValueError(f"{self}.set_level: levels must be in [0, {num_levels}), "
                             f"got {level!r}")
        gate = torch.ones(n, dtype=torch.bool, device=dev) if mask is None else mask
        self._levels.copy_(torch.where(gate, level, self._levels))
        launch(kcurriculum.update_levels, n, self._level_inputs(gate, force=1), dev,
               outputs=self._level_outputs)
        if self._names:
            env.params.notify(self._names, mask)

    # ------------------------------------------------------------------ binding
    def bind(self, env) -> None:
        """Check everything against ``env``, then attach (``env.add_curriculum`` calls it);
        ``RuntimeError`` during a step."""
        if self._env is not None:
            raise ValueError(f"{self}: already added to an env")
        if env.stepping:
            raise RuntimeError(f"{self}: added during a step; add it between steps")
        n, dev, num_levels = env.num_envs, env.device, self.num_levels
        p, randomization = env.params, env.randomization
        pcol, ptab = [], []
        for name, value in self.params.items():
            if name not in p:
                raise KeyError(f"{self}: unknown parameter {name!r}; valid names: "
                               f"{', '.join(p.names)}")
            spec = p.spec[name]
            col, size = p.columns(name)
            tab = _table(value, num_levels, (size,), f"{self}: parameter {name!r}")
            bad = spec.invalid(tab)  # range, whole numbers, (low, high) pairs
            if bool(bad.any()):
                lvl = int(bad.nonzero()[0])  # host-ok: construction, error path
                raise ValueError(f"{self}: parameter {name!r}: level {lvl} value "
                                 f"{tab[lvl].tolist()}: expected {spec.requirement}")  # host-ok
            pcol += range(col, col + size)
            ptab.append(tab)
        both = [a.term for a in self.adr if a.term in self.ranges]
        if both:
            raise ValueError(f"{self}: {both[0]} has per-level ranges and ADR; give it one "
                             "(ADR moves the global range, which per-env ranges replace)")
        rtab = []
        for term, value in self.ranges.items():
            randomization.check_free(term, self, per_env=True)
            tab = _range_table(value, num_levels, term, p.columns(term.param)[1])
            check_result(term, p, randomization.mask(term), tab.float())
            rtab.append(tab.reshape(num_levels, -1))
        src, buf = _metric_source(self.metric, env, self)
        adr = AdrGroup(self.adr, env, self, buf, self.synced)
        # everything checked: commit
        self._env = env
        self._levels = torch.full((n,), self.initial_level, dtype=torch.int32, device=dev)
        self._changed = torch.zeros(n, dtype=torch.bool, device=dev)  # envs the update wrote
        self._src, self._metric_buf, self._adr = src, buf, adr
        self._names = tuple(self.params)
        f32, i64 = dict(dtype=torch.float32, device=dev), dict(dtype=torch.int64, device=dev)
        self._pcol = torch.tensor(pcol, dtype=torch.int32, device=dev)
        self._pval = (torch.cat(ptab, 1) if ptab else torch.zeros(num_levels, 0)).to(**f32)
        self._rval = (torch.cat(rtab, 1) if rtab else torch.zeros(num_levels, 0)).to(**f32)
        self._pe = torch.zeros(self._rval.shape[1], n, **f32)  # per-env ranges [2Q, N]
        self._level_counts = torch.zeros(num_levels, **i64)
        self._ones = torch.ones(n, **i64)
        self._state = {"levels": self._levels, "level_counts": self._level_counts,
                       **adr.saved}
        sizes = [2 * p.columns(term.param)[1] for term in self.ranges]
        for term, rows in zip(self.ranges, self._pe.split(sizes), strict=True):
            randomization.pin(term, self, rows)
        for a in self.adr:
            randomization.pin(a.term, self)
        # views of buffers allocated once (above, the parameter table): bound once
        table = kcurriculum.Levels()
        table.pcol, table.pval, table.rval = to_wp(self._pcol), to_wp(self._pval), to_wp(self._rval)
        self._level_table = table
        self._level_outputs = [to_wp(self._levels), to_wp(self._changed),
                               to_wp(p.nominal_table), to_wp(p.effective_table), to_wp(self._pe)]
        self._update = BoundLaunch(kcurriculum.update_levels, n,
                                   inputs=self._level_inputs(env.context.done, 0),
                                   outputs=self._level_outputs, device=dev)
        self.set_level(self.initial_level)

    def unbind(self) -> None:
        """Detach from the env (``env.add_curriculum``'s remover calls it)."""
        for term in [*self.ranges, *(a.term for a in self.adr)]:
            self._env.randomization.pin(term, None)
        self._env = None

    def _require_env(self):
        if self._env is None:
            raise ValueError(f"{self}: add it to an env first (env.add_curriculum)")
        return self._env

    def _level_inputs(self, gate: torch.Tensor, force: int) -> list:
        return [self._level_table, self.promote, self.demote, force, to_wp(gate),
                to_wp(self._metric_buf)]

    @property
    def kind(self) -> str:
        """The kind of its step stage: ``"warp"`` when ``update`` only launches Warp kernels
        (the metric is an env buffer; it replays inside a Warp CPU graph), ``"python"`` when
        the metric is a callable."""
        return "warp" if self._src is None else "python"

    def update(self, ctx) -> None:
        """Stage of the env's step (``ctx``: its ``StepContext``): metric, levels and
        values, ADR, for the done envs; no host sync."""
        if self._src is not None:
            m, buf = self._src(), self._metric_buf
            if not isinstance(m, torch.Tensor) or m.shape != buf.shape:
                raise ValueError(f"{self}: metric must give a tensor [{self._env.num_envs}], "
                                 f"got {getattr(m, 'shape', type(m).__name__)}")
            if m.device != buf.device or m.layout != torch.strided or m.is_complex():
                raise ValueError(f"{self}: metric must give a dense real tensor on "
                                 f"{buf.device}, got a {m.layout} {m.dtype} tensor on {m.device}")
            self._metric_buf.copy_(m.detach())  # the buffer never joins the metric's graph
        self._update.launch(ctx.stream)
        if self._names:  # the envs whose level moved, not every done env
            self._env.params.notify(self._names, self._changed)
        self._adr.step(ctx.stream)

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
        the same steps; without an initialized process group, a world of one): the level
        histogram (``global_level_counts``) and, with ``sync=True``, the ADR statistics
        collected since the last sync, decided on identically on every rank. One
        all-gather of ``4 * ADR components + num_levels`` int64 values; no host sync.
        ``env.sync_every(k, cur)`` packs it with the schedule's other targets into one
        collective (``gp.SyncSchedule``); an exchange of it still in flight is applied
        first. ``ValueError`` with ADR built with ``sync=False`` (see ``check_syncable``)."""
        self._require_env()
        self.check_syncable()
        exchange([self], group)

    def check_syncable(self) -> None:
        """Raise ``ValueError`` if this curriculum cannot be synced over ranks (ADR built
        with ``sync=False`` decides on each rank at every step). ``env.sync_every`` calls
        it when the schedule is made."""
        if self.adr and not self.synced:
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
        return self._adr.in_flight.numel() + self.num_levels

    def exchange_pack(self, out: torch.Tensor) -> None:
        """Move the ADR statistics collected since the last pack and this rank's level
        histogram into ``out`` (float64 ``[exchange_size()]``, holding int64 bits)."""
        self._require_env()
        self.check_syncable()
        pack, na4 = out.view(torch.int64), self._adr.in_flight.numel()
        self._adr.pack(pack[:na4])  # kept in flight for state_dict until applied
        pack[na4:].zero_().index_add_(0, self._levels.long(), self._ones)

    def exchange_apply(self, rows: torch.Tensor) -> None:
        """Sum every rank's row (int64: exact), set ``global_level_counts`` and, with ADR,
        add the sums to the shared statistics and decide."""
        total = rows.view(torch.int64).sum(0)
        na4 = self._adr.in_flight.numel()
        self._level_counts.copy_(total[na4:])
        self._adr.apply(total[:na4], stream_for(self._env.device))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """``levels``, ADR statistics and the last synced level histogram (parameter
        values, per-env ranges and ADR ranges are saved by the env's parameters and
        randomization)."""
        self._require_env()
        state = {k: buf.clone() for k, buf in self._state.items()}
        na2, flight = self._adr.sums.numel(), self._adr.in_flight  # packed, not yet sent
        state["adr_local_sums"] += flight[:na2]
        state["adr_local_counts"] += flight[na2:].to(torch.int32)
        return {"num_levels": self.num_levels, **state}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore a ``state_dict()`` (checked first)."""
        self.check_state(state)
        self.exchange_epoch += 1  # an exchange in flight is not applied to this state
        self._adr.in_flight.zero_()
        with torch.no_grad():  # a saved tensor requiring grad must not attach ours
            for key, buf in self._state.items():
                buf.copy_(state[key])

    def check_state(self, state: Mapping[str, object]) -> None:
        """Raise ``ValueError`` unless ``state`` fits this curriculum."""
        self._require_env()
        check_like(state.get("num_levels"), self.num_levels, f"{self}.num_levels")
        for key, buf in self._state.items():
            check_like(state.get(key), buf, f"{self}.{key}")
        check_curriculum(state, self.num_levels, f"{self}")


# ---------------------------------------------------------------------------- binding helpers
def _lerp(t: torch.Tensor, L: int) -> torch.Tensor:
    w = torch.linspace(0.0, 1.0, L, dtype=torch.float64).reshape(L, *([1] * (t.dim() - 1)))
    return t[0] + (t[1] - t[0]) * w


def _table(value, L: int, tail: tuple[int, ...], what: str) -> torch.Tensor:
    """Values ``[L, *tail]`` from one per level or an interpolated (easy, hard) pair."""
    try:
        t = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{what}: expected numbers per level, got {value!r}") from None
    shape = tuple(t.shape)
    if t.dim() == 1 and tail == (tail[0],):
        t = t[:, None].expand(-1, tail[0])
    if t.dim() == 0 or tuple(t.shape[1:]) != tail or t.shape[0] not in (L, 2):
        raise ValueError(f"{what}: expected {L} values (one per level) or an (easy, hard) pair, "
                         f"each a scalar or of shape {tail}; got shape {shape}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{what}: values must be finite")
    return t if t.shape[0] == L else _lerp(t, L)


def _range_table(value, L: int, term: Term, size: int) -> torch.Tensor:
    """Ranges per level ``[L, size, 2]`` from a list of ranges or an (easy, hard) pair."""
    if not isinstance(value, Sequence) or len(value) not in (L, 2) or any(
        not isinstance(r, Sequence) or len(r) != 2 for r in value
    ):
        raise ValueError(f"Curriculum: {term}: expected {L} ranges or an (easy, hard) pair of "
                         f"ranges (each a pair), got {value!r}")
    t = torch.stack([range_tensor(r, size, term, torch.float64) for r in value])
    return t if t.shape[0] == L else _lerp(t, L)  # (ranges between valid ones are valid)


def _metric_source(metric: Metric, env, cur) -> tuple[Callable | None, torch.Tensor]:
    """``(source called per step or None, float32 buffer [N] the kernels read)``."""
    n, dev = env.num_envs, env.device
    buf = torch.zeros(n, dtype=torch.float32, device=dev)
    if isinstance(metric, str):
        outputs = env.context.outputs
        if metric not in outputs:
            raise KeyError(f"{cur}: unknown metric {metric!r}; keys: {', '.join(outputs)}")
        t = outputs[metric]
    elif isinstance(metric, torch.Tensor):
        if metric.shape != (n,) or metric.device != dev:
            raise ValueError(f"{cur}: metric tensor must be [{n}] on {dev}, got "
                             f"{tuple(metric.shape)} on {metric.device}")
        t = metric.detach()  # the same memory, read by the kernels outside any graph
    else:
        return (lambda: metric(env)), buf
    if t.dtype == torch.float32:
        return None, t
    return (lambda: t), buf
