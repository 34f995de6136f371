"""Domain randomization: declarative terms executed on the device by one launch per class.

Distributions (``Term`` subclasses) and triggers (``Trigger`` subclasses) register
themselves in ``registry``, from which the ``randomize`` kernel is generated.
"""

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
    Trigger,
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
    "Trigger",
    "Uniform",
]
