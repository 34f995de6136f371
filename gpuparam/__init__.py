"""gpuparam: RL envs as Warp kernels with per-env parameters changed by masked device writes.

The names below are the public API; everything else may change.
"""

from __future__ import annotations

from gpuparam import (
    _device,  # noqa: F401  (configures Warp before kernels load)
    testing,  # noqa: F401  (gp.testing.check_capture; after _device: it loads kernels)
)
from gpuparam.backend import Backend, BindContext, KernelBackend, Task
from gpuparam.config import randomization_from_config
from gpuparam.curriculum import ADR, Curriculum
from gpuparam.distributed import SyncSchedule, shard_range
from gpuparam.envs import CartPoleEnv, PendulumEnv, make, register, registered
from gpuparam.params import ParamTable
from gpuparam.pipeline import Pipeline, Stage, StepContext
from gpuparam.randomization import (
    Choice,
    Every,
    Gaussian,
    Interval,
    Linear,
    LogUniform,
    OnReset,
    Randomization,
    Step,
    Term,
    Uniform,
)
from gpuparam.spec import BoxSpec, DiscreteSpec, OutputSpec, ParamSpec
from gpuparam.transforms import ObsNorm, RewardNorm, TransformedEnv
from gpuparam.vecenv import VecEnv

_ROBOT_API = ("Push", "RobotEnv")


def __getattr__(name: str):
    """``gp.Push`` and ``gp.RobotEnv`` import MuJoCo Warp at first use (extra
    ``gpuparam[mujoco]``; an ``ImportError`` names the install line without it)."""
    if name in _ROBOT_API:
        from gpuparam.envs import mujoco

        return getattr(mujoco, name)
    raise AttributeError(f"module 'gpuparam' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "ADR", "Backend", "BindContext", "BoxSpec", "CartPoleEnv", "Choice", "Curriculum",
    "DiscreteSpec", "Every", "Gaussian", "Interval", "KernelBackend", "Linear", "LogUniform",
    "ObsNorm", "OnReset", "OutputSpec", "ParamSpec", "ParamTable", "PendulumEnv", "Pipeline",
    "Push", "Randomization", "RewardNorm", "RobotEnv", "Stage", "Step", "StepContext",
    "SyncSchedule", "Task", "Term", "TransformedEnv", "Uniform", "VecEnv", "make",
    "randomization_from_config", "register", "registered", "shard_range"
]
