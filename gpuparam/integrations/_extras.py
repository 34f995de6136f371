"""Import an optional dependency, or fail with the extra that provides it."""

from __future__ import annotations

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
