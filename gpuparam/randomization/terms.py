"""Declarative randomization terms, their triggers and their schedules.

A term only describes what to draw; ``env.randomize(term)`` binds it to an env, checks it
against the env's parameter specs and builds the device tables (see ``manager.py``).
Everything here is validated on construction, without an env, except what needs the
env's parameters (``check_result``, ``range_tensor``: at binding, by curricula and ADR).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from gpuparam.kernels import randomize as kernels_randomize
from gpuparam.randomization import registry

Number = float | int
Bound = Number | Sequence[Number]  # a scalar, or one value per component of a vector param
Range = tuple[Bound, Bound]  # (low, high) or (mean, std), depending on the distribution

OP = {"set": kernels_randomize.OP_SET, "add": kernels_randomize.OP_ADD,
      "scale": kernels_randomize.OP_SCALE}  # a term's op -> TermRow.op


# ---------------------------------------------------------------------------- triggers
class Trigger:
    """Base of the triggers the ``randomize`` kernel evaluates per env (``Every``,
    ``Interval``, ``OnReset``). A subclass that sets ``due`` in its body registers itself
    (``randomization.registry``: the next trigger id, ``TermRow.trigger``); it declares:

    - ``launch``: ``"step"`` or ``"reset"``, the launch that evaluates it;
    - ``due``: ``@wp.func (row: TermRow, env: int, gstep: wp.int64, effective:
      wp.array2d(dtype=float), key: int) -> bool``, whether the term draws for ``env`` (it
      may keep per-env state in ``row.clock``, float64 ``[N]``, ``RESTARTED`` at first);
    - ``fired``: ``@wp.func (row, env, h: wp.uint32)`` run after a draw (``h``: the bits
      after the value's; default: nothing);
    - ``row(env)``: ``(dt_col, period_lo, period_hi)`` of its ``TermRow`` for ``env``;
    - ``plain()``: True when it is a plain reset or step trigger (no kernel test).
    """

    launch: str = "reset"
    due = None
    fired = kernels_randomize.fired_nothing

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "due" in cls.__dict__:
            registry.register_trigger(cls)

    def row(self, env) -> tuple[int, float, float]:
        return -1, 0.0, 0.0

    def plain(self) -> bool:
        return False


@dataclass(frozen=True)
class Every(Trigger):
    """Fire every ``k`` env steps, per env, with a per-env phase drawn counter-based (keyed
    like the term's draws), so envs do not all resample on the same step. Each env fires
    exactly once in every window of ``k`` consecutive steps it is in the term's mask."""

    k: int

    launch = "step"
    due = kernels_randomize.every_due
    fired = kernels_randomize.interval_fired

    def row(self, env) -> tuple[int, float, float]:
        return -1, float(self.k), float(self.k)

    def __post_init__(self) -> None:
        # k <= 2**53: the trigger clocks count in float64, exact up to there
        if not isinstance(self.k, int) or isinstance(self.k, bool) or not 1 <= self.k <= 2**53:
            raise ValueError(f"Every(k): expected an int k in [1, 2**53], got {self.k!r}")


@dataclass(frozen=True)
class Interval(Trigger):
    """Fire after per-env random intervals drawn uniformly from ``[low_s, high_s]`` (as
    IsaacLab's ``interval`` events). The unit is seconds, counted with the env's time-step
    parameter (``VecEnv.time_step_param``: CartPole's ``tau``, Pendulum's ``dt``, read per
    env at every step), or steps for an env without one. An interval is due once less than
    half a step of it is left, so an interval lasts ``round(interval / dt)`` steps, at least
    one. The first interval starts when the term is added."""

    low_s: float
    high_s: float

    launch = "step"
    due = kernels_randomize.interval_due
    fired = kernels_randomize.interval_fired

    def row(self, env) -> tuple[int, float, float]:
        name = getattr(env, "time_step_param", None)
        dt_col = env.params.columns(name)[0] if name else -1
        return dt_col, float(self.low_s), float(self.high_s)

    def __post_init__(self) -> None:
        lo, hi = self.low_s, self.high_s
        if not (_is_num(lo) and _is_num(hi) and 0 < lo <= hi and math.isfinite(hi)):
            raise ValueError(f"Interval(low_s, high_s): need 0 < low_s <= high_s, got {lo}, {hi}")


@dataclass(frozen=True)
class OnReset(Trigger):
    """Fire when the env resets (``on="reset"`` is ``OnReset()``). With ``min_steps > 0``
    only if at least that many env steps passed since the env's previous draw of this
    term (IsaacGymEnvs' ``frequency``, IsaacLab's ``min_step_count_between_reset``)."""

    min_steps: int = 0

    launch = "reset"
    due = kernels_randomize.min_steps_due

    def row(self, env) -> tuple[int, float, float]:
        return -1, float(self.min_steps), float(self.min_steps)

    def plain(self) -> bool:
        return self.min_steps == 0

    def __post_init__(self) -> None:
        check_int(self.min_steps, 0, "OnReset(min_steps)")


On = str | Trigger
TRIGGERS = ("startup", "reset", "step")


# ---------------------------------------------------------------------------- schedules
@dataclass(frozen=True)
class Linear:
    """The range moves linearly from ``start_range`` to ``end_range`` between global steps
    ``start_step`` and ``start_step + steps``, then stays (IsaacGym's ``linear`` schedule).
    The global step counts ``env.step`` calls since the env was built. Both endpoints of a
    range are interpolated (low and high, or mean and std)."""

    start_range: Range
    end_range: Range
    steps: int
    start_step: int = 0

    def __post_init__(self) -> None:
        check_int(self.steps, 1, "Linear(steps)")
        check_int(self.start_step, 0, "Linear(start_step)")

    def breakpoints(self) -> tuple[list[int], list[Range], str]:
        """``(global steps, ranges, "linear")`` for the device table."""
        s0 = self.start_step
        return [s0, s0 + self.steps], [self.start_range, self.end_range], "linear"


@dataclass(frozen=True)
class Step:
    """Piecewise-constant range: ``ranges[0]`` before global step ``at[0]``, ``ranges[i]``
    from ``at[i - 1]`` on (IsaacGym's ``constant`` schedule is ``Step([no_change, range],
    at=[schedule_steps])``)."""

    ranges: Sequence[Range]
    at: Sequence[int]

    def __post_init__(self) -> None:
        at = list(self.at)
        if len(self.ranges) != len(at) + 1 or not at:
            raise ValueError(
                f"Step: expected len(ranges) == len(at) + 1 >= 2, got {len(self.ranges)} "
                f"ranges and {len(at)} steps"
            )
        if any(not isinstance(a, int) or a < 1 for a in at) or at != sorted(set(at)):
            raise ValueError(f"Step(at): expected strictly increasing ints >= 1, got {at}")

    def breakpoints(self) -> tuple[list[int], list[Range], str]:
        return [0, *self.at], list(self.ranges), "hold"


Schedule = Linear | Step


# ---------------------------------------------------------------------------- terms
Op = Literal["set", "add", "scale"]
Mask = torch.Tensor | None
EnvIds = torch.Tensor | Sequence[int] | None

_ARGS = """
    Common args (keyword only):
        op: what a draw ``x`` does to the parameter: ``"set"`` (effective = x, default),
            ``"add"`` (nominal + x) or ``"scale"`` (nominal * x). ``add`` and ``scale`` act on
            the env's nominal value, so repeated draws never compound. Every result is
            clamped to the parameter's valid range on the device and counted
            (``env.randomization.clamped``); ``env.randomize`` refuses ranges that can
            leave it (a Gaussian: its mean).
        on: when an env draws: ``"reset"`` (default: at each reset of the env, auto or
            ``env.reset``), ``"step"`` (every step, before the physics), ``"startup"``
            (once, when the term is added), ``gp.Every(k)``, ``gp.Interval(low_s, high_s)``
            or ``gp.OnReset(min_steps)``.
        mask: bool tensor ``[num_envs]`` on the env's device confining the term to some envs
            (copied when the term is added; change it with ``env.randomization.set_mask``).
        env_ids: alternatively, env indices (long tensor ``[K]`` or a list of ints).
        schedule: ``gp.Linear`` or ``gp.Step`` moving the range with the global step (then
            the range arguments are omitted).
        name: label used in messages and ``repr`` (default: the constructor call).

    A vector parameter (shape ``[size]``) takes one value per component for each range
    argument (a sequence of ``size`` numbers), or a scalar for all components; component
    ``j`` of an event uses the event's ``j``-th random bits. Draws are counter-based, keyed
    by (seed, global env id, term, the env's event counter): env ``i`` draws the same values
    whatever ``num_envs`` and on CPU and GPU alike.
"""


class Term:
    __doc__ = """One randomized parameter: the base of ``Uniform``, ``LogUniform``,
    ``Gaussian``, ``Choice`` and of new distributions (add terms to an env with
    ``env.randomize(*terms)``).

    A distribution is a subclass that sets, in its body (then it registers itself; see
    ``docs/randomization.md``, "Adding a distribution"):

    - ``dist``: its name (an identifier, unique; configs' ``distribution``);
    - ``draw``: its device draw, a ``@wp.func (h: wp.uint32, a: float, b: float) -> float``
      of a component's 32 counter-based random bits ``h`` and its range ``(a, b)``;
    - optionally ``range_names`` (default ``("low", "high")``) and ``check_pair`` (the
      host-side check of one component's range) and ``support`` (the draws' bounds).

    Args:
        param: parameter name (checked when added to an env).
        range_: ``(a, b)``, e.g. ``(low, high)`` or ``(mean, std)``, or None with a
            ``schedule``.
    """ + _ARGS

    dist: str = ""
    draw = None  # the device draw (a @wp.func), see above
    table: bool = False  # True: a table distribution (Choice): ``draw`` takes the table
    range_names: tuple[str, str] = ("low", "high")

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "dist" in cls.__dict__:
            registry.register(cls)

    def __init__(
        self, param: str, range_: Range | None, *, op: Op = "set", on: On = "reset",
        mask: Mask = None, env_ids: EnvIds = None, schedule: Schedule | None = None,
        name: str | None = None,
    ):
        self.param, self.range = param, range_
        self.op, self.on, self.schedule = op, on, schedule
        self.mask, self.env_ids = mask, env_ids
        self.name = name or self._default_name()
        if not isinstance(param, str):
            raise ValueError(f"{self}: param must be a parameter name, got {param!r}")
        if op not in OP:
            raise ValueError(f"{self}: op must be one of {tuple(OP)}, got {op!r}")
        if not (isinstance(on, Trigger) or (isinstance(on, str) and on in TRIGGERS)):
            raise ValueError(
                f"{self}: on must be 'startup', 'reset', 'step', Every(k), Interval(lo, hi) "
                f"or OnReset(min_steps), got {on!r}"
            )
        if mask is not None and env_ids is not None:
            raise ValueError(f"{self}: pass mask or env_ids, not both")
        if mask is not None and (
            not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 1
        ):
            got = f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else mask
            raise ValueError(f"{self}: mask must be a bool tensor [num_envs], got {got}")
        if schedule is not None and not isinstance(schedule, (Linear, Step)):
            raise ValueError(f"{self}: schedule must be Linear(...) or Step(...), got {schedule!r}")
        if range_ is None and schedule is None:
            names = ", ".join(self.range_names)
            raise ValueError(f"{self}: give the range ({names}) or a schedule")
        if range_ is not None and schedule is not None:
            raise ValueError(f"{self}: give the range or a schedule, not both")
        if not self.dist:
            raise NotImplementedError(f"{self}: Term is the base class; use gp.Uniform, "
                                      "gp.LogUniform, gp.Gaussian or gp.Choice")
        for r in self.ranges():
            self.check_range(r)

    # ------------------------------------------------------------------ description
    @property
    def trigger_class(self) -> str:
        """``"startup"``, ``"reset"`` or ``"step"``: which launch evaluates the term."""
        return self.on.launch if isinstance(self.on, Trigger) else self.on

    def ranges(self) -> list[Range]:
        """The term's ranges: one, or one per schedule breakpoint."""
        if self.schedule is None:
            return [self.range]
        return self.schedule.breakpoints()[1]

    def _default_name(self) -> str:
        args = [repr(self.param), *self._range_reprs()]
        if self.op != "set":
            args.append(f"op={self.op!r}")
        args.append(f"on={self.on!r}")
        return f"{type(self).__name__}({', '.join(args)})"

    def _range_reprs(self) -> list[str]:
        return [] if self.range is None else [repr(v) for v in self.range]

    def __repr__(self) -> str:
        return self.name

    # ------------------------------------------------------------------ validation
    def check_range(self, r) -> None:
        """Raise ``ValueError`` unless ``r`` is a valid range for the distribution."""
        if not isinstance(r, (tuple, list)) or len(r) != 2:
            raise ValueError(
                f"{self}: a range is a pair ({', '.join(self.range_names)}), got {r!r}"
            )
        a, b = (_as_floats(v, f"{self}: {n}") for v, n in zip(r, self.range_names, strict=True))
        if len(a) != len(b) and 1 not in (len(a), len(b)):
            raise ValueError(
                f"{self}: {self.range_names[0]} has {len(a)} components, "
                f"{self.range_names[1]} {len(b)}"
            )
        n, where = max(len(a), len(b)), f"{self}: parameter {self.param!r}"
        for x, y in zip(a * (n // len(a)), b * (n // len(b)), strict=True):
            self.check_pair(x, y, where)

    def check_pair(self, a: float, b: float, where: str) -> None:
        """Raise ``ValueError`` (its message starting with ``where``) unless ``(a, b)`` is
        a valid range of one component (the default: ``a <= b``)."""
        if a > b:
            raise ValueError(f"{where}: {self.range_names[0]} {a} > {self.range_names[1]} {b}")

    @classmethod
    def constant(cls, value: float) -> Range:
        """The range whose draws are all ``value`` (configs' "no change" schedule start;
        the default: ``(value, value)``)."""
        return (value, value)

    def support(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The bounds ``(lo, hi)`` of the draws of ranges ``(a, b)`` (float32 tensors of
        one shape) that ``env.randomize`` checks against the parameter's valid range (the
        default: ``(a, b)``; draws beyond it are clamped on the device and counted)."""
        return a, b


class _LowHigh(Term):
    """The ``(low, high)`` constructor of ``Uniform`` and ``LogUniform`` (siblings, so that
    ``isinstance(t, Uniform)`` stays exact)."""

    def __init__(
        self, param: str, low: Bound | None = None, high: Bound | None = None, *,
        op: Op = "set", on: On = "reset", mask: Mask = None, env_ids: EnvIds = None,
        schedule: Schedule | None = None, name: str | None = None,
    ):
        pair = None if low is None and high is None else (low, high)
        super().__init__(param, pair, op=op, on=on, mask=mask, env_ids=env_ids,
                         schedule=schedule, name=name)


class Uniform(_LowHigh):
    __doc__ = """Uniform draws in ``[low, high]`` per component (low <= high).

    Args:
        param: parameter name, e.g. ``"length"``.
        low, high: the range: numbers, or sequences of one number per component.
    """ + _ARGS

    dist = "uniform"
    draw = kernels_randomize.uniform_draw


class LogUniform(_LowHigh):
    __doc__ = """Draws whose log is uniform in ``[log low, log high]`` per component
    (``0 < low <= high``): ``low (high / low)^u``, computed with the same bits on every
    device.

    Args:
        param: parameter name, e.g. ``"masspole"``.
        low, high: the range: positive numbers, or sequences of one per component.
    """ + _ARGS

    dist = "loguniform"
    draw = kernels_randomize.log_uniform_draw

    def check_pair(self, a: float, b: float, where: str) -> None:
        if a <= 0 or b <= 0:
            raise ValueError(f"{where}: LogUniform bounds must be positive, got low {a}, high {b}")
        super().check_pair(a, b, where)


class Gaussian(Term):
    __doc__ = """Normal draws with ``mean`` and standard deviation ``std >= 0`` per component
    (the standard normal quantile of 24 random bits: ``|x - mean| <= 5.42 std``; tails
    beyond the valid range are clamped, see ``op``).

    Args:
        param: parameter name, e.g. ``"force_mag"``.
        mean, std: numbers, or sequences of one number per component.
    """ + _ARGS

    dist = "gaussian"
    draw = kernels_randomize.gaussian_draw
    range_names = ("mean", "std")

    def check_pair(self, a: float, b: float, where: str) -> None:
        if b < 0:
            raise ValueError(f"{where}: std {b} < 0")

    def support(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean: tails are clamped and counted."""
        return a, a

    @classmethod
    def constant(cls, value: float) -> Range:
        return (value, 0.0)

    def __init__(
        self, param: str, mean: Bound | None = None, std: Bound | None = None, *,
        op: Op = "set", on: On = "reset", mask: Mask = None, env_ids: EnvIds = None,
        schedule: Schedule | None = None, name: str | None = None,
    ):
        pair = None if mean is None and std is None else (mean, std)
        super().__init__(param, pair, op=op, on=on, mask=mask, env_ids=env_ids,
                         schedule=schedule, name=name)


class Choice(Term):
    __doc__ = """One of ``values`` with probabilities ``probs`` (default: equal).

    Args:
        param: parameter name, e.g. ``"gravity"``.
        values: a non-empty sequence; each value is a number, or for a vector parameter a
            sequence with one number per component (one draw picks the whole vector).
        probs: probabilities ``[len(values)]``, >= 0, summing to 1.
        schedule: not supported (``ValueError``).
    """ + _ARGS

    dist = "choice"
    draw = kernels_randomize.choice_draw
    table = True

    def __init__(
        self, param: str, values: Sequence[Bound], probs: Sequence[float] | None = None, *,
        op: Op = "set", on: On = "reset", mask: Mask = None, env_ids: EnvIds = None,
        schedule: Schedule | None = None, name: str | None = None,
    ):
        if schedule is not None:
            raise ValueError(f"Choice({param!r}): schedules are not supported for Choice")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"Choice({param!r}): values must be a non-empty sequence, "
                             f"got {values!r}")
        self.values = [_as_floats(v, f"Choice({param!r}): value") for v in values]
        n = len(self.values)
        self.probs = [1.0 / n] * n if probs is None else [float(p) for p in probs]
        super().__init__(param, (0.0, 0.0), op=op, on=on, mask=mask, env_ids=env_ids, name=name)
        if len({len(v) for v in self.values}) > 1:
            raise ValueError(f"{self}: values have different numbers of components")
        if len(self.probs) != n:
            raise ValueError(f"{self}: {n} values but {len(self.probs)} probabilities")
        if any(not math.isfinite(p) or p < 0 for p in self.probs):
            raise ValueError(f"{self}: probabilities must be >= 0, got {self.probs}")
        if abs(sum(self.probs) - 1.0) > 1e-6:
            raise ValueError(f"{self}: probabilities must sum to 1, got {sum(self.probs)}")

    def _range_reprs(self) -> list[str]:
        return [repr([v[0] if len(v) == 1 else v for v in self.values])]

    def tables(self, size: int) -> tuple[torch.Tensor, int]:
        """The device table of a parameter of ``size`` components: float32 ``[nch * size +
        nch]``, the values then the cumulative probabilities (the last one 2: every draw
        ``u < 1`` stops at the last value at the latest), and ``nch``."""
        vals = torch.tensor([per_component(v, size, self, "value") for v in self.values])
        cdf = torch.tensor(self.probs, dtype=torch.float64).cumsum(0)
        cdf[-1] = 2.0
        return torch.cat([vals.reshape(-1), cdf.to(torch.float32)]), len(self.values)


# ---------------------------------------------------------------------------- helpers
def check_int(v, low: int, what: str) -> None:
    """Raise ``ValueError`` unless ``v`` is an int (not a bool) ``>= low``."""
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise ValueError(f"{what}: expected an int >= {low}, got {v!r}")


def per_component(v, size: int, term: Term, what: str) -> list[float]:
    """A scalar or one value per component, as ``size`` floats (``ValueError`` naming
    ``what`` if the count is wrong)."""
    vals = [float(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    if len(vals) == 1:
        return vals * size
    if len(vals) != size:
        raise ValueError(
            f"{term}: parameter {term.param!r} has {size} components, {what} has {len(vals)}"
        )
    return vals


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
    mean: its tails are clamped and counted: ``term.support``; a table's (a ``Choice``'s)
    values ``v`` as ranges ``(v, v)``)."""
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


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _as_floats(v, what: str) -> list[float]:
    """A scalar or a sequence of finite numbers, as a list of floats."""
    items = list(v) if isinstance(v, (Sequence, torch.Tensor)) and not isinstance(v, str) else [v]
    if not items:
        raise ValueError(f"{what}: expected a number or a non-empty sequence, got {v!r}")
    out = []
    for x in items:
        if isinstance(x, torch.Tensor) and x.numel() == 1:
            x = x.item()  # host-ok: construction only
        if not _is_num(x) or not math.isfinite(x):
            raise ValueError(f"{what}: expected finite numbers, got {v!r}")
        out.append(float(x))
    return out
