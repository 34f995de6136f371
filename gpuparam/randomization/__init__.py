"""Domain randomization: declarative terms executed on the device by one launch per class."""

from __future__ import annotations

from gpuparam.randomization.manager import Randomization
from gpuparam.randomization.terms import (
    Choice,
    Every,
    Gaussian,
    Interval,
    Linear,
    LogUniform,
    OnReset,
    Step,
    Term,
    Uniform,
)

__all__ = [
    "Choice",
    "Every",
    "Gaussian",
    "Interval",
    "Linear",
    "LogUniform",
    "OnReset",
    "Randomization",
    "Step",
    "Term",
    "Uniform",
]
