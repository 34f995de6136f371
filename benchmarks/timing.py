"""Timing helpers: device sync, interleaved repeats, medians; and how a measurement that
cannot run here (a peer not installed) is recorded: ``Skipped``, ``attempt``."""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import os
import statistics
from collections.abc import Callable, Iterator, Mapping

import torch


def sync(device: str | torch.device) -> None:
    """Wait for queued device work (CUDA is asynchronous; CPU work is already done)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def interleave(runs: Mapping[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run every ``runs[name]()`` once per round, ``repeats`` rounds, round-robin.

    Interleaving spreads slow phases of the machine (other processes, frequency changes) over
    all subjects alike, so ratios between subjects taken round by round cancel them.
    Returns ``{name: [seconds per round]}``.
    """
    out: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            out[name].append(run())
    return out


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: other processes share the cores this run measured on."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def paired_ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of ``num[i] / den[i]`` (the noise-cancelling same-run ratio)."""
    return median([a / b for a, b in zip(num, den, strict=True)])


@contextlib.contextmanager
def preserve_torch_threads() -> Iterator[None]:
    """Restore ``torch.get_num_threads()`` afterwards.

    TorchRL's ``ParallelEnv`` and collectors lower the parent's thread count to leave cores to
    their workers; without this, every later gpuparam measurement would run on fewer threads.
    """
    n = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(n)


@contextlib.contextmanager
def start_method(method: str) -> Iterator[None]:
    """Make ``method`` the global multiprocessing start method inside, then restore."""
    before = mp.get_start_method(allow_none=True)
    mp.set_start_method(method, force=True)
    try:
        yield
    finally:
        mp.set_start_method(before, force=True)


class Skipped(Exception):
    """A measurement that cannot run here; ``str(e)`` is the reason recorded in the JSON."""


def optional_import(module: str, hint: str = ""):
    """Import ``module`` or raise Skipped("<module> not installed...")."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Skipped(f"{module} not installed ({e}){'; ' + hint if hint else ''}") from None


def attempt(fn, *args, **kwargs) -> tuple[object, dict | None]:
    """``(fn(...), None)``, or ``(None, {"skipped": reason})`` / ``(None, {"error": msg})``.

    A missing peer is a skip; any other exception is recorded as an error so that one
    broken measurement does not hide the others (and is never turned into a number).
    """
    try:
        return fn(*args, **kwargs), None
    except Skipped as e:
        return None, {"skipped": str(e)}
    except Exception as e:
        return None, {"error": f"{type(e).__name__}: {e}"}


def outcome(fn, *args, **kwargs):
    """What the JSON records of ``fn(...)``: its value, or ``attempt``'s skip or error."""
    val, failed = attempt(fn, *args, **kwargs)
    return failed or val
