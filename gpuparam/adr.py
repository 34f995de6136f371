"""Automatic domain randomization (ADR): the global range of a reset term widened while the
episodes drawn near its bounds keep a high metric (OpenAI's ADR, with "episodes drawn near a
bound" standing in for boundary sampling). A ``Curriculum`` runs it (``Curriculum(...,
adr=[gp.ADR(...)])``) for the envs whose episode just ended.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gpuparam._device import host_array, to_wp
from gpuparam._launch import BoundLaunch
from gpuparam.kernels import curriculum as kcurriculum
from gpuparam.randomization.terms import OP, Term, Uniform, check_int, check_result, per_component

__all__ = ["ADR", "AdrGroup"]


@dataclass
class ADR:
    """Automatic domain randomization of a ``Uniform`` reset term's range.

    Each episode end adds the metric to a bound's statistics when the value the episode
    ran with lies within ``edge`` times the range's width of that bound. Once a bound has
    ``samples`` episodes: mean metric ``>= threshold_high`` moves it outwards by ``delta``
    (never past ``limits``), ``< threshold_low`` moves it inwards (never past the other
    bound); then its statistics restart. An episode whose metric is NaN or infinite is not
    counted; a metric beyond ``+-2**21`` counts as ``+-2**21``. The range is global (shared
    by all envs) and lives in the term's device range (``env.randomization.ranges(term)``),
    so it is saved by ``env.state_dict()``.

    Args:
        term: a ``gp.Uniform`` term with ``on="reset"``, added to the env, no schedule, no
            mask.
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
        check_int(self.samples, 1, f"ADR({self.term}): samples")
        if not 0.0 <= self.edge <= 0.5:
            raise ValueError(f"ADR({self.term}): edge must be in [0, 0.5], got {self.edge}")
        lo = -math.inf if self.threshold_low is None else self.threshold_low
        if not (math.isfinite(self.threshold_high) and lo < self.threshold_high):
            raise ValueError(f"ADR({self.term}): need threshold_low < threshold_high (finite)")


class AdrGroup:
    """The ADR specs of one curriculum bound to an env: one ``kernels.curriculum.AdrSlot``
    per term component (``A`` in all), their statistics and bound launches.

    Statistics (device): ``sums`` int64 ``[2A]`` and ``counts`` int32 ``[2A]`` (metric sums
    in fixed point and episodes, per bound) decided on; with ``synced``, ``local_sums`` and
    ``local_counts`` collected since the last ``pack``, and ``in_flight`` int64 ``[4A]``
    packed but not yet applied (checkpointed as local ones); ``saved``: the checkpointed
    statistics by key.
    """

    def __init__(self, specs: Sequence[ADR], env, owner: object, metric: torch.Tensor,
                 synced: bool):
        n, dev, p, randomization = env.num_envs, env.device, env.params, env.randomization
        slots = []  # everything checked before anything is allocated
        for a in specs:
            t = a.term
            randomization.check_free(t, owner)
            if randomization.mask(t) is not None:
                raise ValueError(f"ADR({t}): ADR needs a term without mask (envs outside it "
                                 "never draw from the range its statistics would move)")
            col, size = p.columns(t.param)
            ranges = randomization.ranges(t)
            rng = ranges[0].cpu()  # host-ok: binding only, [size, 2]
            lim_lo = per_component(a.limits[0], size, t, "limits low")
            lim_hi = per_component(a.limits[1], size, t, "limits high")
            delta = per_component(a.delta, size, t, "delta")
            check_result(t, p, None, torch.tensor([lim_lo, lim_hi]).T)
            for j in range(size):
                if not lim_lo[j] <= rng[j, 0] <= rng[j, 1] <= lim_hi[j]:
                    raise ValueError(f"ADR({t}): limits [{lim_lo[j]}, {lim_hi[j]}] must contain "
                                     f"the range [{rng[j, 0]}, {rng[j, 1]}] (component {j})")
                if not delta[j] > 0:
                    raise ValueError(f"ADR({t}): delta must be > 0, got {delta[j]}")
                s = kcurriculum.AdrSlot()
                s.ranges, s.col, s.op = to_wp(ranges[0, j]), col + j, OP[t.op]
                s.edge, s.samples, s.delta = a.edge, a.samples, delta[j]
                s.thr_high = a.threshold_high
                s.thr_low = -math.inf if a.threshold_low is None else a.threshold_low
                s.lim_low, s.lim_high = lim_lo[j], lim_hi[j]
                slots.append(s)
        self.synced, na2 = synced, 2 * len(slots)
        i64, i32 = dict(dtype=torch.int64, device=dev), dict(dtype=torch.int32, device=dev)
        self.sums, self.counts = torch.zeros(na2, **i64), torch.zeros(na2, **i32)
        self.local_sums, self.local_counts = torch.zeros(na2, **i64), torch.zeros(na2, **i32)
        self.in_flight = torch.zeros(2 * na2, **i64)
        self.saved = {"adr_sums": self.sums, "adr_counts": self.counts,  # checkpoint keys
                      "adr_local_sums": self.local_sums, "adr_local_counts": self.local_counts}
        self._collect = self._decide = None
        if slots:
            arr = host_array(slots, kcurriculum.AdrSlot, dev)
            sums, counts = ((self.local_sums, self.local_counts) if synced
                            else (self.sums, self.counts))
            self._collect = BoundLaunch(kcurriculum.adr_collect, n, inputs=[
                to_wp(env.context.done), to_wp(metric), arr, to_wp(p.nominal_table),
                to_wp(p.effective_table)], outputs=[to_wp(sums), to_wp(counts)], device=dev)
            # the slots' ranges are written (widened or narrowed), the sums and counts cleared
            self._decide = BoundLaunch(kcurriculum.adr_update, len(slots), device=dev,
                                       outputs=[arr, to_wp(self.sums), to_wp(self.counts)])

    def step(self, stream) -> None:
        """Collect the done envs' statistics; unless ``synced``, decide."""
        if self._collect is not None:
            self._collect.launch(stream)
            if not self.synced:
                self._decide.launch(stream)

    def pack(self, out: torch.Tensor) -> None:
        """Move the local statistics into ``out`` (int64 ``[4A]``: sums, counts)."""
        na2 = self.sums.numel()
        out[:na2].copy_(self.local_sums)
        out[na2:].copy_(self.local_counts)
        self.in_flight += out
        self.local_sums.zero_()
        self.local_counts.zero_()

    def apply(self, total: torch.Tensor, stream) -> None:
        """Add every rank's statistics (int64 ``[4A]``) to the shared ones and decide."""
        if self._decide is not None:
            na2 = self.sums.numel()
            self.sums += total[:na2]
            self.counts += total[na2:].to(torch.int32)
            self.in_flight.zero_()
            self._decide.launch(stream)
