"""Feature detection: which gpuparam APIs exist yet. A missing one becomes a skip reason.

The randomization, hooks and transforms APIs are built by other issues in parallel; the suite
is written against their documented names and reports what is absent instead of failing.
"""

from __future__ import annotations

import importlib

import gpuparam as gp


class Skipped(Exception):
    """A measurement that cannot run here; ``str(e)`` is the reason recorded in the JSON."""


def lookup(name: str, *modules: str):
    """``gp.<name>``, else ``<module>.<name>`` for the first module that has it; else Skipped."""
    if hasattr(gp, name):
        return getattr(gp, name)
    for mod in modules:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(m, name):
            return getattr(m, name)
    where = ", ".join(("gpuparam", *modules))
    raise Skipped(f"{name} not available yet (looked in {where})")


def transforms(*names: str) -> list:
    """The transform classes ``names`` (e.g. ``"ObsNorm"``), from gpuparam(.transforms)."""
    return [lookup(n, "gpuparam.transforms") for n in names]


def randomization_terms(on: str) -> list:
    """Three randomization terms on CartPole's ``force_mag``, ``length`` and ``masspole``.

    ``on``: ``"step"`` or ``"reset"``. Ranges stay well inside the parameters' valid ranges.
    """
    uniform = lookup("Uniform", "gpuparam.randomization")
    gaussian = lookup("Gaussian", "gpuparam.randomization")
    return [
        gaussian("force_mag", 0.0, 0.5, op="add", on=on),
        uniform("length", 0.8, 1.2, op="scale", on=on),
        uniform("masspole", 0.8, 1.2, op="scale", on=on),
    ]


def require_method(obj: object, *names: str) -> None:
    """Skipped unless ``obj`` has every method in ``names``."""
    missing = [n for n in names if not callable(getattr(obj, n, None))]
    if missing:
        raise Skipped(f"env.{'/'.join(missing)} not available yet")


def optional_import(module: str, hint: str = ""):
    """Import ``module`` or raise Skipped("<module> not installed...")."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Skipped(f"{module} not installed ({e}){'; ' + hint if hint else ''}") from None


def attempt(fn, *args, **kwargs) -> tuple[object, dict | None]:
    """``(fn(...), None)``, or ``(None, {"skipped": reason})`` / ``(None, {"error": msg})``.

    A missing peer or feature is a skip; any other exception is recorded as an error so that
    one broken measurement does not hide the others (and is never turned into a number).
    """
    try:
        return fn(*args, **kwargs), None
    except Skipped as e:
        return None, {"skipped": str(e)}
    except Exception as e:
        return None, {"error": f"{type(e).__name__}: {e}"}
