"""Run folders: ``<log_dir>/<task>/<YYYY-mm-dd_HH-MM-SS>/`` holding ``config.json`` (the
resolved train config), ``model_<it>.pt`` (rsl_rl's checkpoint: models, normalizers,
optimizer, iteration), ``env_<it>.pt`` (the env's state, ``env.save``), TensorBoard's event
files, ``videos/`` and ``exported/``; and the lookups of a resume or a play."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import typing

from gpuparam.apps.config import TrainCfg

__all__ = [
    "RUN_SETTINGS",
    "checkpoint_iteration",
    "config_from_dict",
    "find_checkpoint",
    "find_run",
    "load_config",
    "new_run_dir",
    "save_config",
]

_MODEL = re.compile(r"^model_(\d+)\.pt$")
_STAMP = "%Y-%m-%d_%H-%M-%S"

# the settings that define a run: a resume must keep them (flag, dotted field path)
RUN_SETTINGS = ("task", "num_envs", "seed", "env", "agent.num_steps_per_env", "agent.actor",
                "agent.critic")


class RunError(ValueError):
    """A bad run folder, checkpoint or resumed setting: the message names the flag."""


def new_run_dir(log_dir: str, task: str) -> str:
    """A fresh ``<log_dir>/<task>/<timestamp>`` path (not created; a suffix ``_1``, ``_2``
    ... where one of that second exists)."""
    base = os.path.join(log_dir, task, time.strftime(_STAMP))
    path, k = base, 0
    while os.path.exists(path):
        k += 1
        path = f"{base}_{k}"
    return path


def checkpoint_iteration(name: str) -> int | None:
    """The iteration of a ``model_<it>.pt`` file name, or None."""
    m = _MODEL.match(os.path.basename(name))
    return int(m.group(1)) if m else None


def _runs(root: str) -> list[str]:
    """Run folders under ``root`` that hold a checkpoint, oldest first (by name: the
    timestamps sort)."""
    if not os.path.isdir(root):
        return []
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))
                  and any(checkpoint_iteration(f) is not None
                          for f in os.listdir(os.path.join(root, d))))


def find_run(log_dir: str, task: str, load_run: str = "") -> str:
    """The run folder of ``--load-run`` (a folder name under ``<log_dir>/<task>``, or a
    path), default the latest there holding a checkpoint; ``RunError`` naming the flag."""
    root = os.path.join(log_dir, task)
    if load_run:
        path = load_run if os.path.isdir(load_run) else os.path.join(root, load_run)
        if not os.path.isdir(path):
            raise RunError(f"--load-run: expected a run folder under {root} (or a path to "
                           f"one), got {load_run!r} (no such folder; runs there: "
                           f"{', '.join(_runs(root)) or 'none'})")
        return path
    runs = _runs(root)
    if not runs:
        raise RunError(f"--log-dir: expected a run of {task} with a checkpoint "
                       f"(model_<it>.pt) under {root}, found none (train first, or give "
                       "--log-dir / --load-run)")
    return os.path.join(root, runs[-1])


def find_checkpoint(run: str, checkpoint: str = "") -> str:
    """The ``--checkpoint`` file of ``run`` (a file name in it, or a path), default its
    ``model_<it>.pt`` of the largest iteration; ``RunError`` naming the flag."""
    if checkpoint:
        path = checkpoint if os.path.isfile(checkpoint) else os.path.join(run, checkpoint)
        if not os.path.isfile(path):
            have = sorted(f for f in os.listdir(run) if checkpoint_iteration(f) is not None)
            raise RunError(f"--checkpoint: expected a checkpoint file in {run} (or a path), "
                           f"got {checkpoint!r} (no such file; there: "
                           f"{', '.join(have) or 'none'})")
        return path
    its = [(checkpoint_iteration(f), f) for f in os.listdir(run)]
    its = [(i, f) for i, f in its if i is not None]
    if not its:
        raise RunError(f"--load-run: expected a run folder holding model_<it>.pt, got {run} "
                       "(no checkpoint)")
    return os.path.join(run, max(its)[1])


def save_config(cfg: TrainCfg, path: str) -> None:
    """Write the resolved config as JSON."""
    with open(path, "w") as f:
        json.dump(dataclasses.asdict(cfg), f, indent=1)


def config_from_dict(d: dict, cls: type = TrainCfg):
    """The dataclass ``cls`` from a dict ``dataclasses.asdict`` wrote (JSON lists back to
    tuples where the field is one); ``RunError`` on an unknown field."""
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            continue
        v, hint = d[f.name], hints[f.name]
        if dataclasses.is_dataclass(hint):
            v = config_from_dict(v, hint)
        elif typing.get_origin(hint) is tuple:
            v = tuple(v)
        kw[f.name] = v
    unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise RunError(f"config: unknown fields {sorted(unknown)} for {cls.__name__}")
    return cls(**kw)


def load_config(run: str) -> TrainCfg:
    """The ``config.json`` of a run folder as a ``TrainCfg``."""
    path = os.path.join(run, "config.json")
    try:
        with open(path) as f:
            return config_from_dict(json.load(f))
    except (OSError, ValueError, TypeError) as e:
        raise RunError(f"--load-run: expected a run folder written by gpuparam.train "
                       f"(with config.json), got {run} ({e})") from None


def field(cfg, dotted: str):
    """The value of a dotted field path (``"agent.actor"``)."""
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def flag(dotted: str) -> str:
    """The command-line flag of a dotted field path (``--agent.num-steps-per-env``)."""
    return "--" + dotted.replace("_", "-")


def check_resume(cfg: TrainCfg, saved: TrainCfg, run: str) -> None:
    """``RunError`` naming the first flag whose value differs from the run's (every
    ``RUN_SETTINGS`` entry, leaf by leaf)."""
    def leaves(obj, path):
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                yield from leaves(getattr(obj, f.name), f"{path}.{f.name}")
        else:
            yield path, obj

    for key in RUN_SETTINGS:
        for path, got in leaves(field(cfg, key), key):
            want = field(saved, path)
            if got != want:
                raise RunError(f"{flag(path)}: the run in {run} was made with {want!r}, got "
                               f"{got!r} (a resumed run continues the run as it was: leave "
                               "it out or give the run's)")
