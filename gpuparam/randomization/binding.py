"""Binding a term to an env: checks against the parameter specs, host-side table rows.

Runs when terms are added (never per step); it may synchronize with the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from gpuparam._checks import check_env_ids, check_mask, ids_to_mask
from gpuparam.kernels import randomize as K
from gpuparam.randomization.terms import Choice, Every, Interval, OnReset, Term

DIST = {
    "uniform": K.UNIFORM, "loguniform": K.LOGUNIFORM, "gaussian": K.GAUSSIAN, "choice": K.CHOICE,
}
OP = {"set": K.OP_SET, "add": K.OP_ADD, "scale": K.OP_SCALE}
# I_TIMED codes
PLAIN, EVERY, INTERVAL, MIN_STEPS = 0, 1, 2, 3


@dataclass(eq=False)
class Bound:
    """A term bound to one env: its device-table row and views of its live state.

    ``values`` (float32, CPU) is the term's initial block of ``vals``: ranges ``[nbp, size,
    2]`` flattened, or for ``Choice`` the values ``[nch, size]`` then the cumulative
    probabilities ``[nch]``. The views (set by the manager at every rebuild) point into
    the manager's device arrays: ``keys`` int32 ``[N]``, ``counter`` int32 ``[N]`` (strided
    for reset terms), ``clock`` float64 ``[N]``, ``clamped`` int64 ``[1]``, ``vals`` float32
    (the term's block), ``pe`` float32 ``[2 * size, N]`` per-env ranges (rows low/high
    interleaved per component) or None.
    """

    term: Term
    uid: int
    cls: str
    param: str
    col: int
    size: int
    low: float
    high: float
    dist: int
    op: int
    timed: int
    dtcol: int
    plo: float
    phi: float
    mask: torch.Tensor | None
    values: torch.Tensor
    nbp: int
    bp: list[int]
    interp: int
    nch: int = 0
    pe_row: int = -1
    r0: int = 0  # first index of the term's block in the shared ``vals`` table
    pinned_by: object = None  # a curriculum using the term's ranges (blocks removal)
    # every env's counter is the same (set at a restart, checked at a load, cleared when the
    # term gets a mask): lets the dense path mix the counter once (``I_LOCK``)
    uniform_counters: bool = True
    state: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def scheduled(self) -> bool:
        return self.nbp > 1

    def range_view(self) -> torch.Tensor:
        """Device view ``[nbp, size, 2]`` of the term's ranges (writable)."""
        return self.state["vals"][: self.nbp * self.size * 2].view(self.nbp, self.size, 2)


def bind(term: Term, env, uid: int) -> Bound:
    """Check ``term`` against ``env`` and return its table row; raises ``KeyError`` for an
    unknown parameter and ``ValueError`` for anything else, naming the term and parameter."""
    params = env.params
    if term.param not in params:
        raise KeyError(
            f"{term}: unknown parameter {term.param!r}; valid names: {', '.join(params.names)}"
        )
    spec = params.spec[term.param]
    col, size = params.columns(term.param)
    mask = term_mask(term, env, term.mask, term.env_ids)
    timed, dtcol, plo, phi = _trigger(term, env)
    if isinstance(term, Choice):
        vals = torch.tensor([_per_component(v, size, term, "value") for v in term.values])
        check_result(term, spec, params, mask, vals, vals)
        cdf = torch.tensor(term.probs, dtype=torch.float64).cumsum(0)
        cdf[-1] = 2.0  # every draw u < 1 stops at the last choice at the latest
        values = torch.cat([vals.reshape(-1), cdf.to(torch.float32)])
        nbp, bp, interp, nch = 1, [0], K.HOLD, len(term.values)
    else:
        if term.schedule is None:
            bp, ranges, kind = [0], [term.range], "hold"
        else:
            bp, ranges, kind = term.schedule.breakpoints()
        rows = []
        for r in ranges:
            term.check_range(r)
            a = torch.tensor(_per_component(r[0], size, term, term.range_names[0]))
            b = torch.tensor(_per_component(r[1], size, term, term.range_names[1]))
            lo, hi = _result_inputs(term, a, b)
            check_result(term, spec, params, mask, lo, hi)
            rows.append(torch.stack([a, b], dim=-1))  # [size, 2]
        values = torch.stack(rows).reshape(-1)
        nbp, interp, nch = len(bp), K.LINEAR if kind == "linear" else K.HOLD, 0
    return Bound(
        term=term, uid=uid, cls=term.trigger_class, param=term.param, col=col, size=size,
        low=spec.low, high=spec.high, dist=DIST[term.dist], op=OP[term.op], timed=timed,
        dtcol=dtcol, plo=plo, phi=phi, mask=mask, values=values.to(torch.float32), nbp=nbp,
        bp=bp, interp=interp, nch=nch,
    )


def term_mask(term: Term, env, mask=None, env_ids=None) -> torch.Tensor | None:
    """``mask`` or ``env_ids`` as a bool tensor ``[N]`` on the env's device (a copy), or
    None for all envs; ``ValueError`` naming the term if they are malformed."""
    if mask is not None and env_ids is not None:
        raise ValueError(f"{term}: pass mask or env_ids, not both")
    try:
        if mask is not None:
            return check_mask(mask, env.num_envs, env.device, "mask").clone()
        if env_ids is not None:
            ids = check_env_ids(env_ids, env.num_envs, env.device)
            return ids_to_mask(ids, env.num_envs)
    except ValueError as e:
        raise ValueError(f"{term}: parameter {term.param!r}: {e}") from None
    return None


def recheck(b: Bound, env, mask: torch.Tensor | None) -> None:
    """Re-run the valid-range check of a bound term's current ranges for a new mask."""
    spec = env.params.spec[b.param]
    if b.dist == K.CHOICE:
        vals = b.state["vals"][: b.nch * b.size].view(b.nch, b.size).cpu()  # host-ok: setup
        check_result(b.term, spec, env.params, mask, vals, vals)
        return
    r = b.range_view().cpu()  # host-ok: setup only, [nbp, size, 2]
    lo, hi = _result_inputs(b.term, r[..., 0], r[..., 1])
    check_result(b.term, spec, env.params, mask, lo, hi)


def _trigger(term: Term, env) -> tuple[int, int, float, float]:
    on = term.on
    if isinstance(on, Every):
        return EVERY, -1, float(on.k), float(on.k)
    if isinstance(on, Interval):
        name = getattr(env, "time_step_param", None)
        dtcol = env.params.columns(name)[0] if name else -1
        return INTERVAL, dtcol, float(on.low_s), float(on.high_s)
    if isinstance(on, OnReset) and on.min_steps > 0:
        return MIN_STEPS, -1, float(on.min_steps), float(on.min_steps)
    return PLAIN, -1, 0.0, 0.0


def _per_component(v, size: int, term: Term, what: str) -> list[float]:
    vals = [float(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    if len(vals) == 1:
        return vals * size
    if len(vals) != size:
        raise ValueError(
            f"{term}: parameter {term.param!r} has {size} components, {what} has {len(vals)}"
        )
    return vals


def _result_inputs(term: Term, a: torch.Tensor, b: torch.Tensor):
    """The draw interval checked against the valid range: the range itself, the mean of a
    Gaussian (its tails are clamped and counted)."""
    if term.dist == "gaussian":
        return a, a
    return a, b


def check_result(term: Term, spec, params, mask, lo: torch.Tensor, hi: torch.Tensor) -> None:
    """Raise ``ValueError`` when ``op(nominal, draw)`` for draws in ``[lo, hi]`` (per
    component, ``[..., size]``) can leave the parameter's valid range, for the current
    nominal values of the term's envs (reads them: synchronizes)."""
    lo, hi = lo.reshape(-1, lo.shape[-1]).min(0).values, hi.reshape(-1, hi.shape[-1]).max(0).values
    if term.op == "set":
        r_lo, r_hi = lo, hi
    else:
        nom = params.nominal[term.param].reshape(params.num_envs, -1)
        if mask is not None:
            nom = nom[mask]  # host-ok: binding only
        if nom.shape[0] == 0:
            return
        n_lo, n_hi = nom.min(0).values.cpu(), nom.max(0).values.cpu()  # host-ok: binding only
        if term.op == "add":
            r_lo, r_hi = n_lo + lo, n_hi + hi
        else:
            corners = torch.stack([n_lo * lo, n_lo * hi, n_hi * lo, n_hi * hi])
            r_lo, r_hi = corners.min(0).values, corners.max(0).values
    bad = (r_lo < spec.low - _tol(spec.low)) | (r_hi > spec.high + _tol(spec.high))
    if bool(bad.any()):
        j = int(bad.nonzero()[0])  # host-ok: error path
        comp = f" (component {j})" if lo.numel() > 1 else ""
        raise ValueError(
            f"{term}: op={term.op!r} gives values in [{r_lo[j].item():.6g}, "  # host-ok
            f"{r_hi[j].item():.6g}]{comp} for parameter {term.param!r}, "  # host-ok
            "outside its valid "
            f"range [{spec.low}, {spec.high}]"
        )


def _tol(x: float) -> float:
    return 1e-6 * max(1.0, abs(x)) if math.isfinite(x) else 0.0
