"""Argument types and path checks shared by the training examples ``go1_train.py`` and
``g1_train.py`` (copy it with them): each bad value is an argparse error, one line naming
the option, what it expects and what it got, given before anything is built, trained or
written.

    p.add_argument("--hidden", type=hidden_sizes, default="256,128")
    p.add_argument("--num-envs", type=int_at_least(1), default=128)
    check_writable_dir(p, "--out", args.out)      # after parse_args, before any build
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile


def int_at_least(low: int, high: int | None = None):
    """An argparse ``type``: an int in ``[low, high]`` (``high`` None: no upper bound)."""
    want = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if v < low or (high is not None and v > high):
            raise argparse.ArgumentTypeError(f"expected {want}, got {v}")
        return v

    parse.__name__ = want  # argparse's message for a failed type names it
    return parse


def float_at_least(low: float):
    """An argparse ``type``: a finite float >= ``low``."""
    want = f"a finite number >= {low:g}"

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if not math.isfinite(v) or v < low:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text}")
        return v

    return parse


def hidden_sizes(text: str) -> list[int]:
    """An argparse ``type``: hidden layer sizes, comma-separated positive ints (``256,128``)."""
    parts = text.split(",")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive ints (layer sizes, e.g. 256,128), got {text!r}")
    return [int(p) for p in parts]


def _probe(folder: str) -> str | None:
    """Why this process cannot write a file into ``folder`` (None: it can): a temporary
    file is made there and removed (permission bits alone say nothing for root or on
    read-only mounts)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as e:
        return e.strerror or type(e).__name__


def check_writable_dir(p: argparse.ArgumentParser, option: str, path: str) -> None:
    """``p.error`` unless ``path`` is (or can be made) a folder this process writes into;
    makes it, as the run would first."""
    if os.path.exists(path) and not os.path.isdir(path):
        p.error(f"{option}: expected a folder, got the file {path}")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        p.error(f"{option}: expected a folder this process can make, got {path} "
                f"({e.strerror or type(e).__name__})")
    why = _probe(path)
    if why is not None:
        p.error(f"{option}: expected a folder this process can write, got {path} ({why})")


def check_writable_file(p: argparse.ArgumentParser, option: str, path: str) -> None:
    """``p.error`` unless ``path`` names a file this process can write: not a folder, in
    an existing folder it can write into. Creates nothing that stays."""
    if os.path.isdir(path):
        p.error(f"{option}: expected a file path, got the folder {path}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        p.error(f"{option}: expected a file in an existing folder, got {path} ({folder} does "
                "not exist)")
    why = _probe(folder)
    if why is None and os.path.exists(path) and not os.access(path, os.W_OK):
        why = "the file is read-only"
    if why is not None:
        p.error(f"{option}: expected a file this process can write, got {path} ({why})")


def episode_length(value: float) -> str:
    """A log line's mean episode length: ``"  12.5"``, or why there is none (rsl_rl's mean
    over the episodes that ended in the iteration is NaN while none has)."""
    return f"{value:6.1f}" if math.isfinite(value) else "none (no episode ended yet)"
