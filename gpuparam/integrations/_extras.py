"""Import an optional dependency, or fail with the extra that provides it; hold an env."""

from __future__ import annotations

import contextlib
import importlib
from types import ModuleType


def require(module: str, extra: str, integration: str) -> ModuleType:
    """Import ``module``; on failure raise ``ImportError`` naming ``pip install "gpuparam[extra]"``.

    Args:
        module: top-level module to import, e.g. ``"torchrl"``.
        extra: the gpuparam extra that installs it, e.g. ``"torchrl"``.
        integration: the integration module asking, for the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{integration} needs {module!r}, which is not installed: "
            f'pip install "gpuparam[{extra}]"'
        ) from e


def held(env) -> contextlib.AbstractContextManager:
    """``env.hold()`` (a gpuparam env, or a wrapper forwarding it): an adapter's call holds
    the env from its first write to its last read of the env's buffers, so another call
    made meanwhile (another thread's) raises instead of overwriting what this one returns.
    A no-op context for an env without ``hold``."""
    hold = getattr(env, "hold", None)
    return hold() if callable(hold) else contextlib.nullcontext()
