"""Binding a term to an env: checks against the parameter specs, and the term's device state.

Runs when terms are added (never per step); it may synchronize with the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gpuparam._checks import check_env_ids, check_mask, ids_to_mask
from gpuparam._device import to_wp
from gpuparam.kernels import randomize as K
from gpuparam.randomization import registry
from gpuparam.randomization.terms import Term, Trigger, per_component

__all__ = ["OP", "Bound", "bind", "check_result", "per_component", "range_tensor",
           "select_envs"]

OP = {"set": K.OP_SET, "add": K.OP_ADD, "scale": K.OP_SCALE}


@dataclass(eq=False)
class Bound:
    """A term bound to one env: its ``kernels.randomize.TermRow`` (``base``: constants and
    views of the tensors below, built once) and those tensors, each the like-named array of
    ``TermRow`` (``mask``, ``pe``: None for none) except ``values``: the ranges, or for a
    table distribution (``Choice``) its values then its cumulative probabilities
    (``TermRow.cdf``); ``nch``: a table's number of values (0: ranges)."""

    term: Term
    nch: int
    base: K.TermRow
    values: torch.Tensor
    steps: torch.Tensor
    mask: torch.Tensor | None
    counter: torch.Tensor
    clock: torch.Tensor
    clamped: torch.Tensor
    pe: torch.Tensor | None = None
    owner: object = None  # a curriculum using the term's ranges (blocks removal)

    def ranges(self) -> torch.Tensor:
        """Device view ``[nbp, size, 2]`` of the term's ranges (writable)."""
        if self.nch:
            raise ValueError(f"{self.term}: a Choice has values, not ranges")
        return self.values.view(-1, self.base.size, 2)

    def check(self, env, mask: torch.Tensor | None) -> None:
        """``check_result`` of the term's draws (its Choice values, or the ranges of every
        schedule breakpoint) for the envs of ``mask``."""
        n = self.nch * self.base.size
        vals = self.values[:n].view(self.nch, -1) if self.nch else self.ranges()
        check_result(self.term, env.params, mask, vals.cpu())  # host-ok: setup

    def row(self) -> K.TermRow:
        """``base`` with the term's current mask and per-env ranges."""
        r = self.base
        r.mask = None if self.mask is None else to_wp(self.mask)
        r.pe = None if self.pe is None else to_wp(self.pe)
        return r


def bind(term: Term, env, uid: int) -> Bound:
    """Check ``term`` against ``env`` and allocate its device state (counters at 0, clocks
    ``RESTARTED``); raises ``KeyError`` for an unknown parameter and ``ValueError`` for
    anything else, naming the term and parameter."""
    params, n, dev = env.params, env.num_envs, env.device
    if term.param not in params:
        raise KeyError(
            f"{term}: unknown parameter {term.param!r}; valid names: {', '.join(params.names)}"
        )
    spec = params.spec[term.param]
    col, size = params.columns(term.param)
    mask = select_envs(f"{term}: parameter {term.param!r}", env, term.mask, term.env_ids)
    steps, linear, nch = [0], False, 0
    if term.table:
        values, nch = term.tables(size)
    else:
        if term.schedule is not None:
            steps, _, kind = term.schedule.breakpoints()
            linear = kind == "linear"
        values = torch.stack([range_tensor(r, size, term) for r in term.ranges()]).reshape(-1)
    r = K.TermRow()
    r.dist, r.op, r.col, r.size = registry.dist_id(term.dist), OP[term.op], col, size
    r.uid = uid
    r.trigger, r.dt_col, (r.period_lo, r.period_hi) = _trigger(term, env)
    r.low, r.high, r.linear = spec.low, spec.high, int(linear)
    b = Bound(
        term=term, nch=nch, base=r, values=values.to(dev, torch.float32),
        steps=torch.tensor(steps, dtype=torch.int64, device=dev), mask=mask,
        counter=torch.zeros(n, dtype=torch.int32, device=dev),
        clock=torch.full((n,), K.RESTARTED, dtype=torch.float64, device=dev),
        clamped=torch.zeros(1, dtype=torch.int64, device=dev),
    )
    split = nch * size if nch else values.numel()
    r.ranges, r.steps = to_wp(b.values[:split]), to_wp(b.steps)
    r.cdf = to_wp(b.values[split:]) if nch else None
    r.counter, r.clock, r.clamped = to_wp(b.counter), to_wp(b.clock), to_wp(b.clamped)
    b.check(env, mask)
    return b


def select_envs(what: str, env, mask=None, env_ids=None) -> torch.Tensor | None:
    """``mask`` or ``env_ids`` as a bool tensor ``[N]`` on the env's device (a copy), or
    None for all envs; ``ValueError`` starting with ``what`` if they are malformed."""
    if mask is not None and env_ids is not None:
        raise ValueError(f"{what}: pass mask or env_ids, not both")
    try:
        if mask is not None:
            return check_mask(mask, env.num_envs, env.device, "mask").clone()
        if env_ids is not None:
            return ids_to_mask(check_env_ids(env_ids, env.num_envs, env.device), env.num_envs)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    return None


def _trigger(term: Term, env) -> tuple[int, int, tuple[float, float]]:
    on = term.on
    if isinstance(on, Trigger) and not on.plain():
        dt_col, lo, hi = on.row(env)
        return registry.trigger_id(type(on)), dt_col, (lo, hi)
    return K.PLAIN, -1, (0.0, 0.0)


def range_tensor(r, size: int, term: Term, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A range ``(a, b)`` of ``term`` as ``[size, 2]`` of ``dtype``; its numbers (anything
    ``float()`` takes) checked as floats."""
    a = per_component(r[0], size, term, term.range_names[0])
    b = per_component(r[1], size, term, term.range_names[1])
    term.check_range((a, b))
    return torch.tensor([a, b], dtype=dtype).T.contiguous()


def check_result(term: Term, params, mask, values: torch.Tensor) -> None:
    """Raise ``ValueError`` when ``op(nominal, draw)`` can leave the parameter's valid
    range for the current nominal values of the envs of ``mask`` (None: all; reads them:
    synchronizes). ``values``: ranges ``[..., size, 2]`` (a Gaussian is checked at its
    mean: its tails are clamped and counted: ``term.support``), or a table's (a
    ``Choice``'s) values ``[..., size]``."""
    if term.table:
        lo = hi = values
    else:
        lo, hi = term.support(values[..., 0], values[..., 1])
    spec = params.spec[term.param]
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
        f = torch.add if term.op == "add" else torch.mul
        corners = torch.stack([f(n_lo, lo), f(n_lo, hi), f(n_hi, lo), f(n_hi, hi)])
        r_lo, r_hi = corners.min(0).values, corners.max(0).values
    bad = (r_lo < spec.low - _tol(spec.low)) | (r_hi > spec.high + _tol(spec.high))
    if bool(bad.any()):
        j = int(bad.nonzero()[0])  # host-ok: error path
        comp = f" (component {j})" if lo.numel() > 1 else ""
        raise ValueError(
            f"{term}: op={term.op!r} gives values in [{r_lo[j].item():.6g}, "  # host-ok
            f"{r_hi[j].item():.6g}]{comp} for parameter {term.param!r}, "  # host-ok
            f"outside its valid range [{spec.low}, {spec.high}]"
        )


def _tol(x: float) -> float:
    return 1e-6 * max(1.0, abs(x)) if math.isfinite(x) else 0.0
