"""Binding-time helpers of ``gpuparam.curriculum``: level tables, metric sources and ADR
slots (host code, run when a curriculum binds to an env, never on the step path)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from gpuparam.randomization.binding import _per_component, check_result
from gpuparam.randomization.terms import Term

if TYPE_CHECKING:
    from gpuparam.curriculum import ADR, Metric


def lerp(t: torch.Tensor, L: int) -> torch.Tensor:
    w = torch.linspace(0.0, 1.0, L, dtype=torch.float64) if L > 1 else torch.zeros(1)
    w = w.reshape(L, *([1] * (t.dim() - 1)))
    return t[0] + (t[1] - t[0]) * w


def table(value, L: int, tail: tuple[int, ...], what: str) -> torch.Tensor:
    """Values per level ``[L, *tail]``: a table ``[L]``/``[L, *tail]`` or an (easy, hard)
    pair ``[2]``/``[2, *tail]`` interpolated over the levels."""
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
    return t if t.shape[0] == L else lerp(t, L)


def range_table(value, L: int, term: Term, size: int) -> torch.Tensor:
    """Ranges per level ``[L, size, 2]`` from a list of ranges or an (easy, hard) pair."""
    if not isinstance(value, Sequence) or len(value) not in (L, 2) or any(
        not isinstance(r, Sequence) or len(r) != 2 for r in value
    ):
        raise ValueError(f"Curriculum: {term}: expected {L} ranges or an (easy, hard) pair of "
                         f"ranges (each a pair), got {value!r}")
    rows = []
    for r in value:
        a = _per_component(r[0], size, term, term.range_names[0])
        b = _per_component(r[1], size, term, term.range_names[1])
        rows.append(torch.tensor([a, b], dtype=torch.float64).T)  # [size, 2]
    t = torch.stack(rows)
    return t if t.shape[0] == L else lerp(t, L)


def metric_source(metric: Metric, env, cur) -> tuple[Callable | None, torch.Tensor]:
    """``(source called per step or None, float32 buffer [N] the kernel reads)``."""
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
        t = metric
    else:
        return (lambda: metric(env)), buf
    if t.dtype == torch.float32:
        return None, t
    return (lambda: t), buf


def check_unowned(b, term, cur) -> None:
    """Raise unless the bound term ``b`` is free for curriculum ``cur``: not used by another
    curriculum (its per-env ranges or ADR), without per-env ranges already."""
    if b.pinned_by is not None and b.pinned_by is not cur:
        raise ValueError(f"{cur}: {term} is already used by {b.pinned_by}; a term can belong "
                         "to one curriculum")
    if b.pe_row >= 0:
        raise ValueError(f"{cur}: {term} already has per-env ranges")


def bind_adr(a: ADR, env) -> dict[str, list]:
    b = env.randomization.bound(a.term)
    if b.pe_row >= 0:
        raise ValueError(f"ADR({a.term}): the term has per-level ranges; ADR needs a global one")
    if b.mask is not None:
        raise ValueError(f"ADR({a.term}): ADR needs a term without mask (envs outside it "
                         "never draw from the range its statistics would move)")
    size = b.size
    rng = b.range_view()[0].cpu()  # host-ok: binding only, [size, 2]
    lim_lo = _per_component(a.limits[0], size, a.term, "limits low")
    lim_hi = _per_component(a.limits[1], size, a.term, "limits high")
    delta = _per_component(a.delta, size, a.term, "delta")
    for j in range(size):
        if not lim_lo[j] <= rng[j, 0] <= rng[j, 1] <= lim_hi[j]:
            raise ValueError(f"ADR({a.term}): limits [{lim_lo[j]}, {lim_hi[j]}] must contain "
                             f"the range [{rng[j, 0]}, {rng[j, 1]}] (component {j})")
        if not delta[j] > 0:
            raise ValueError(f"ADR({a.term}): delta must be > 0, got {delta[j]}")
    spec = env.params.spec[b.param]
    check_result(a.term, spec, env.params, b.mask, torch.tensor(lim_lo), torch.tensor(lim_hi))
    lo_thr = -math.inf if a.threshold_low is None else a.threshold_low
    return {
        "slots": [(b, j) for j in range(size)], "acol": [b.col + j for j in range(size)],
        "aop": [b.op] * size, "samples": [a.samples] * size, "edge": [a.edge] * size,
        "thr_high": [a.threshold_high] * size, "thr_low": [lo_thr] * size, "delta": delta,
        "lim_low": lim_lo, "lim_high": lim_hi,
    }


def dev_i32(x, dev) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.int32).reshape(-1)
    return (t if t.numel() else torch.zeros(1, dtype=torch.int32)).to(dev)


def dev_f32(x, dev) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float32)
    return (t if t.numel() else torch.zeros(1)).to(dev)
