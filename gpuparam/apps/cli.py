"""Command lines of ``python -m gpuparam.train`` and ``python -m gpuparam.play``: the task's
config (``gpuparam.apps.config``), or a resumed run's, overridden by any flag (tyro), then
every value and path checked before anything is built."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
from dataclasses import dataclass

from gpuparam.apps import runs
from gpuparam.apps.config import G1, GO1, PLAYGROUND, TrainCfg, default_config, tasks

__all__ = ["PlayCfg", "parse_play", "parse_train"]


def fail(prog: str, message: str) -> None:
    """One error line naming the flag (argparse's format), exit status 2."""
    print(f"usage: {prog} [--help] ...\n{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _pre(argv: list[str], *flags: tuple[str, dict]) -> argparse.Namespace:
    """The few flags that pick the config tyro then overrides (``--task``, a resumed run)."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for name, kw in flags:
        p.add_argument(name, **kw)
    return p.parse_known_args(argv)[0]


def _resolve_device(prog: str, device: str) -> str:
    import torch

    if not device:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        d = torch.device(device)
    except RuntimeError:
        fail(prog, f"--device: expected cpu, cuda or cuda:<index>, got {device!r}")
    if d.type == "cuda" and not torch.cuda.is_available():  # device-ok: argument check
        fail(prog, f"--device: {device!r} asked for, but torch sees no CUDA device")
    if d.type not in ("cpu", "cuda"):
        fail(prog, f"--device: expected cpu, cuda or cuda:<index>, got {device!r}")
    return device


def _check_numbers(prog: str, cfg, checks: list[tuple[str, float, object]]) -> None:
    for dotted, low, _ in checks:
        v = runs.field(cfg, dotted)
        if isinstance(v, float) and not math.isfinite(v) or v < low:
            fail(prog, f"{runs.flag(dotted)}: expected a number >= {low:g}, got {v!r}")


def check_writable_dir(prog: str, flag: str, path: str) -> None:
    """``path`` is, or can be made, a folder this process writes in (nothing left behind)."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(os.path.abspath(probe))
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        fail(prog, f"{flag}: expected a folder (or a path one can be made at), got {path!r} "
                   f"({probe} is a file)")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        fail(prog, f"{flag}: expected a writable folder, got {path!r} ({e.strerror})")


def _tyro(cls, default, argv: list[str], prog: str, description: str):
    import tyro

    return tyro.cli(cls, default=default, args=argv, prog=prog, description=description)


@dataclass
class Resolved:
    """A checked train command: the config, the run folder (new or resumed), the
    checkpoint a resume loads (or None) and its iteration."""

    cfg: TrainCfg
    run_dir: str
    checkpoint: str | None
    done: int  # iterations the run has done (0: a new run)


def parse_train(argv: list[str] | None = None, prog: str = "gpuparam.train") -> Resolved:
    """Parse and check a train command line (see ``TrainCfg``); every error is one line
    naming the flag, given before anything is built or written."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = _pre(argv, ("--task", {"default": None}), ("--log-dir", {"default": None}),
               ("--resume", {"action": "store_true"}), ("--load-run", {"default": ""}),
               ("--checkpoint", {"default": ""}))
    if pre.task is not None and pre.task not in tasks():
        fail(prog, f"--task: expected one of {', '.join(tasks())}, got {pre.task!r}")
    task = pre.task or TrainCfg.task
    base = default_config(task)
    run_dir, checkpoint, done, saved = None, None, 0, None
    if pre.resume:
        log_dir = pre.log_dir if pre.log_dir is not None else base.log_dir
        try:
            run_dir = runs.find_run(log_dir, task, pre.load_run)
            checkpoint = runs.find_checkpoint(run_dir, pre.checkpoint)
            saved = runs.load_config(run_dir)
        except runs.RunError as e:
            fail(prog, str(e))
        it = runs.checkpoint_iteration(checkpoint)
        if it is None:
            fail(prog, f"--checkpoint: expected a model_<it>.pt file to resume, got "
                       f"{checkpoint}")
        env_file = os.path.join(run_dir, f"env_{it}.pt")
        if not os.path.isfile(env_file):
            fail(prog, f"--checkpoint: expected the env's state {env_file} beside "
                       f"{checkpoint} (written with it), found none")
        done = it + 1
        base = dataclasses.replace(saved, resume=False, load_run="", checkpoint="",
                                   log_dir=log_dir)
    description = (TrainCfg.__doc__ or "") + (
        f"\nDefaults: {task}'s config" + (f" (resuming {run_dir})" if run_dir else "") + ".")
    cfg = _tyro(TrainCfg, base, argv, prog, description)
    cfg.device = _resolve_device(prog, cfg.device)
    _check_numbers(prog, cfg, [
        ("num_envs", 1, int), ("max_iterations", 1, int), ("video_interval", 1, int),
        ("video_length", 1, int), ("video_envs", 1, int), ("max_seconds", 0, float),
        ("threads", 1, int), ("agent.num_steps_per_env", 1, int),
        ("agent.save_interval", 1, int), ("env.command_levels", 0, int),
        ("agent.init_noise_std", 0, float), ("agent.algorithm.num_learning_epochs", 1, int),
        ("agent.algorithm.num_mini_batches", 1, int)])
    if cfg.env.recipe not in ("legged", "playground", "none"):
        fail(prog, f"--env.recipe: expected 'legged', 'playground' or 'none', got "
                   f"{cfg.env.recipe!r}")
    if cfg.env.recipe == "legged" and cfg.task not in (*GO1, *G1):
        fail(prog, f"--env.recipe: 'legged' expected a Go1 or G1 task, got "
                   f"{cfg.task!r}")
    if cfg.env.recipe == "playground" and cfg.task not in (*GO1, *G1, *PLAYGROUND):
        fail(prog, f"--env.recipe: 'playground' expected a legged task, got {cfg.task!r}")
    if cfg.agent.logger not in ("tensorboard", "wandb", "neptune"):
        fail(prog, f"--agent.logger: expected tensorboard, wandb or neptune, got "
                   f"{cfg.agent.logger!r}")
    if cfg.agent.logger != "tensorboard":
        import importlib.util

        if importlib.util.find_spec(cfg.agent.logger) is None:
            fail(prog, f"--agent.logger: {cfg.agent.logger} is not installed (pip install "
                       f"{cfg.agent.logger}; WANDB_MODE=offline keeps wandb off the network)")
    if cfg.video:
        if cfg.task not in tasks()[:6] and not cfg.task.endswith(("-v5",)):
            fail(prog, f"--video: expected a MuJoCo robot task, got {cfg.task!r}")
        try:
            import imageio  # noqa: F401
            import PIL  # noqa: F401
        except ImportError:
            fail(prog, "--video: needs imageio and pillow (pip install 'gpuparam[train]')")
    if saved is not None:
        if cfg.task != saved.task:
            fail(prog, f"--task: the run in {run_dir} is of {saved.task}, got {cfg.task}")
        try:
            runs.check_resume(cfg, saved, run_dir)
        except runs.RunError as e:
            fail(prog, str(e))
        if cfg.max_iterations <= done:
            fail(prog, f"--max-iterations: expected more than the {done} iterations the run "
                       f"in {run_dir} has done (its {os.path.basename(checkpoint)}), got "
                       f"{cfg.max_iterations}")
    else:
        check_writable_dir(prog, "--log-dir", cfg.log_dir)
        run_dir = runs.new_run_dir(cfg.log_dir, cfg.task)
    if saved is not None:
        check_writable_dir(prog, "--log-dir", run_dir)
    return Resolved(cfg, run_dir, checkpoint, done)


@dataclass
class PlayCfg:
    """Play a trained policy: load a run's checkpoint (``--log-dir``, ``--load-run``,
    ``--checkpoint`` as for a resume: default the latest run's last ``model_<it>.pt``; or
    ``--checkpoint`` a path to an exported ``policy.pt2`` or a TorchScript policy such as
    ``examples/go1_policy.pt``), run ``--steps`` steps of ``--num-envs`` envs, and write
    under ``--out`` (default: the run folder) ``play.gif`` (or ``play.mp4``: ``--format
    mp4``) of the first ``--video-envs`` envs and, from a checkpoint,
    ``exported/policy.pt2`` and ``exported/policy.onnx``. Nothing else is written.
    ``--command VX VY YAW``: every env's velocity command pinned to (vx m/s, vy m/s, yaw
    rate rad/s) (``command_fixed``, ``command_value``; a legged task with a command)."""

    task: str = "Go1JoystickFlatTerrain-v1"
    num_envs: int = 4
    device: str = ""
    seed: int = 0
    log_dir: str = "runs"
    load_run: str = ""
    checkpoint: str = ""
    steps: int = 250
    out: str = ""
    video: bool = True
    video_envs: int = 3
    frame_every: int = 2
    width: int = 320
    height: int = 240
    format: str = "gif"
    threads: int = 1
    command: tuple[float, float, float] | None = None


@dataclass
class ResolvedPlay:
    cfg: PlayCfg
    train: TrainCfg  # the env settings (the run's config, or the task's)
    checkpoint: str
    kind: str  # "checkpoint" (rsl_rl's model_<it>.pt) or "exported"
    out: str


def parse_play(argv: list[str] | None = None, prog: str = "gpuparam.play") -> ResolvedPlay:
    """Parse and check a play command line (see ``PlayCfg``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = _tyro(PlayCfg, PlayCfg(), argv, prog, PlayCfg.__doc__ or "")
    if cfg.task not in tasks():
        fail(prog, f"--task: expected one of {', '.join(tasks())}, got {cfg.task!r}")
    cfg.device = _resolve_device(prog, cfg.device)
    _check_numbers(prog, cfg, [("num_envs", 1, int), ("steps", 1, int), ("video_envs", 1, int),
                               ("frame_every", 1, int), ("width", 16, int), ("height", 16, int),
                               ("threads", 1, int)])
    if cfg.format not in ("gif", "mp4"):
        fail(prog, f"--format: expected gif or mp4, got {cfg.format!r}")
    if cfg.command is not None and not all(math.isfinite(x) for x in cfg.command):
        fail(prog, f"--command: expected three finite numbers VX VY YAW, got "
                   f"{' '.join(map(str, cfg.command))}")
    if cfg.video and cfg.format == "mp4":
        import importlib.util

        if importlib.util.find_spec("imageio_ffmpeg") is None:
            fail(prog, "--format: mp4 needs imageio-ffmpeg (pip install imageio-ffmpeg), "
                       "not installed; gif needs nothing more")
    run = None
    if cfg.checkpoint and os.path.isfile(cfg.checkpoint) and runs.checkpoint_iteration(
            cfg.checkpoint) is None:
        path, kind = cfg.checkpoint, "exported"
        parent = os.path.dirname(os.path.abspath(path))
        for cand in (parent, os.path.dirname(parent)):  # <run>/exported/policy.pt2
            if os.path.isfile(os.path.join(cand, "config.json")):
                run = cand
    else:
        try:
            run = runs.find_run(cfg.log_dir, cfg.task, cfg.load_run)
            path = runs.find_checkpoint(run, cfg.checkpoint)
        except runs.RunError as e:
            fail(prog, str(e))
        kind = "checkpoint"
    if run is not None:
        try:
            train = runs.load_config(run)
        except runs.RunError as e:
            fail(prog, str(e))
        if train.task != cfg.task:
            fail(prog, f"--task: the run in {run} is of {train.task}, got {cfg.task}")
    else:
        train = default_config(cfg.task)
    train = dataclasses.replace(train, num_envs=cfg.num_envs, device=cfg.device,
                                seed=cfg.seed, resume=False, video=False)
    out = cfg.out or run or os.path.dirname(os.path.abspath(path))
    check_writable_dir(prog, "--out", out)
    return ResolvedPlay(cfg, train, path, kind, out)
