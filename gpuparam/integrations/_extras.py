"""What several adapters share: optional imports, holding the env, Gymnasium spaces, ``params``."""

from __future__ import annotations

import contextlib
import importlib
from types import ModuleType

import numpy as np
import torch

from gpuparam.spec import BoxSpec, DiscreteSpec


def require(module: str, extra: str, integration: str) -> ModuleType:
    """Import ``module`` (e.g. ``"torchrl"``); on failure raise ``ImportError`` naming the
    ``integration`` module asking and ``pip install "gpuparam[extra]"``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{integration} needs {module!r}, which is not installed: "
            f'pip install "gpuparam[{extra}]"'
        ) from e


def held(env) -> contextlib.AbstractContextManager:
    """``env.hold()`` (see the package docstring); a no-op context for an env without it."""
    hold = getattr(env, "hold", None)
    return hold() if callable(hold) else contextlib.nullcontext()


def gym_spaces(env) -> tuple:
    """``(observation_space, action_space)`` of one env, Gymnasium's: float32 ``Box``es of the
    specs' shapes and nominal bounds, or ``Discrete(n)`` for a discrete action spec."""
    from gymnasium import spaces

    def box(spec: BoxSpec) -> spaces.Box:
        low, high = (np.broadcast_to(np.asarray(v, dtype=np.float32), spec.shape)
                     for v in (spec.low, spec.high))
        return spaces.Box(low, high, shape=spec.shape, dtype=np.float32)

    act = env.action_spec
    return box(env.observation_spec), (
        spaces.Discrete(act.n) if isinstance(act, DiscreteSpec) else box(act))


def check_tensor(what: str, x, kind: str, ok, shapes: tuple, device) -> None:
    """Raise ``ValueError`` ("``{what} expected {kind} tensor {shape} on {device}, got ...``",
    naming the first mismatch) unless ``x`` is a tensor of one of ``shapes`` whose dtype
    ``ok(x)`` accepts, on ``device``. Host metadata only (no sync)."""
    got = (type(x).__name__ if not isinstance(x, torch.Tensor)
           else f"shape {tuple(x.shape)}" if tuple(x.shape) not in shapes
           else f"dtype {x.dtype}" if not ok(x)
           else f"device {x.device}" if x.device != device else None)
    if got is not None:
        raise ValueError(f"{what} expected {kind} tensor {' or '.join(map(str, shapes))} on "
                         f"{device}, got {got}")


def env_seed(seed: int | None) -> int | None:
    """A library's seed (any int >= 0) as the env's: the env keys its draws with an int32."""
    return None if seed is None else int(seed) % 2**31


class Adapter:
    """Base of the adapters: ``params`` and a repr of the instance attribute ``gp_env``."""

    @property
    def params(self):
        """The wrapped env's ``ParamTable``."""
        return self.gp_env.params

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.gp_env!r})"


def base_env(env):
    """The gpuparam env under any ``gp.TransformedEnv`` layers (``env`` itself otherwise)."""
    from gpuparam.transforms import TransformedEnv

    while isinstance(env, TransformedEnv):
        env = env.env
    return env


@contextlib.contextmanager
def after_failed_step(env, keep):
    """Around ``env.step(...)``: when the step raises after running to its end (a raising hook
    or stage does not stop the step: ``gp.Stage``), call ``keep(env.outputs)`` (the step's
    outputs, TensorDict batch ``[N]``) before the error propagates, so that an adapter's
    bookkeeping follows the step the env took. A step refused before running (a bad action)
    calls nothing."""
    pipeline = getattr(base_env(env), "pipeline", None)
    runs = getattr(pipeline, "runs", None)
    try:
        yield
    except BaseException:
        if runs is not None and pipeline.runs != runs:
            keep(env.outputs)
        raise
