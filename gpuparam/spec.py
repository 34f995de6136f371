"""Typed specs: one frozen dataclass per parameter, plus observation and action spaces."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ParamSpec:
    """One environment parameter.

    Attributes:
        name: key in ``env.params``.
        default: value every env starts with (scalar, or a tuple for vector parameters).
        low, high: inclusive valid range, checked on every validated write.
        shape: per-env shape; ``()`` for scalars. Values live in ``env.params[name]``
            as a float32 tensor ``[num_envs, *shape]`` on the env's device.
        unit: physical unit, for humans.
        doc: one line.
        dtype: storage dtype; the table stores float32 parameters.
        integer: whole numbers only (a level, a count).
        ordered: a ``(low, high)`` pair (shape ``(2,)``) with ``low <= high``.

    Validated writes, checkpoint loads and curriculum levels refuse values outside
    ``[low, high]``, non-finite ones, and those that break ``integer`` or ``ordered``
    (:meth:`invalid`). Unvalidated device writes (``validate=False``, randomization draws)
    are clamped into the range only: the kernel reading an ``integer`` parameter rounds
    it, one reading an ``ordered`` pair draws between its two values whichever is larger.
    """

    name: str
    default: float | tuple[float, ...]
    low: float
    high: float
    shape: tuple[int, ...] = ()
    unit: str = ""
    doc: str = ""
    dtype: torch.dtype = torch.float32
    integer: bool = False
    ordered: bool = False

    def __post_init__(self) -> None:
        if self.dtype != torch.float32:
            raise ValueError(
                f"ParamSpec {self.name!r}: dtype must be torch.float32, got {self.dtype}"
            )
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low > self.high:
            raise ValueError(
                f"ParamSpec {self.name!r}: need finite low <= high, got [{self.low}, {self.high}]"
            )
        defaults = self.default if isinstance(self.default, tuple) else (self.default,)
        if len(defaults) not in (1, self.size):
            raise ValueError(
                f"ParamSpec {self.name!r}: default has {len(defaults)} values, "
                f"shape {self.shape} needs {self.size}"
            )
        if self.ordered and self.shape != (2,):
            raise ValueError(f"ParamSpec {self.name!r}: ordered needs shape (2,), got "
                             f"{self.shape}")
        if bool(self.invalid(self.default_tensor()[None]).any()):
            raise ValueError(f"ParamSpec {self.name!r}: default expected {self.requirement}, "
                             f"got {self.default}")

    @property
    def requirement(self) -> str:
        """What a valid value is, in words (error messages)."""
        what = f"finite values in [{self.low}, {self.high}]"
        if self.integer:
            what += ", whole numbers"
        if self.ordered:
            what += ", as (low, high) with low <= high"
        return what

    def invalid(self, values: torch.Tensor, pair: bool = True) -> torch.Tensor:
        """Bool ``[rows]``: which rows of ``values`` (float ``[rows, k]``: the ``k =
        size`` components of one env per row, or ``k`` of them with ``pair=False``, which
        skips the ``ordered`` check) are not valid values (:attr:`requirement`)."""
        bad = ~torch.isfinite(values) | (values < self.low) | (values > self.high)
        if self.integer:
            bad |= values != torch.round(values)
        bad = bad.any(-1)
        if self.ordered and pair:
            bad |= values[..., 0] > values[..., 1]
        return bad

    @property
    def size(self) -> int:
        """Number of float components per env (``prod(shape)``)."""
        return math.prod(self.shape)

    def default_tensor(self) -> torch.Tensor:
        """The default as a float32 CPU tensor of shape ``[size]``."""
        return torch.tensor(self.default, dtype=torch.float32).expand(self.size).clone()


@dataclass(frozen=True)
class BoxSpec:
    """Continuous space: float32 values of ``shape`` per env, within ``[low, high]``.

    Attributes:
        shape: per-env shape, e.g. ``(4,)``.
        low, high: bounds, scalars or one value per component (``-inf``/``inf``: none).
        dtype: ``torch.float32``.
    """

    shape: tuple[int, ...]
    low: float | tuple[float, ...]
    high: float | tuple[float, ...]
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class OutputSpec:
    """An extra output tensor an env class declares (``VecEnv.output_specs``): allocated
    once as ``[num_envs, *shape]`` in the step's TensorDict (so hooks see it and
    checkpoints save it), written by the env's task.

    Attributes:
        shape: per-env shape.
        dtype: torch dtype (float32, int32 or bool).
        reset: also in the TensorDict ``reset`` returns (written by the reset, e.g. a
            second observation group).
        doc: one line.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    reset: bool = False
    doc: str = ""


@dataclass(frozen=True)
class DiscreteSpec:
    """Discrete actions ``{0, ..., n-1}``, one integer per env.

    Attributes:
        n: number of actions.
        shape: per-env shape, ``()``.
        dtype: ``torch.int64``.
    """

    n: int
    shape: tuple[int, ...] = ()
    dtype: torch.dtype = torch.int64
