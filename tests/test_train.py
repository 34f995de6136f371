"""The documented contract of ``python -m gpuparam.train`` / ``gpuparam.play`` (docs/legged.md,
issue 42), run as written on a legged task (Go1 flat, 16 and 4 envs, CPU; a session's
commands in one interpreter, each as ``python -m`` runs it): a new run in a timestamped
folder, a resume that continues its iteration count, a play that writes its video and
exported policies under ``--out`` and nothing anywhere else; rsl_rl's TensorBoard scalars
with the reward terms; a video logged to TensorBoard; and the same entry sharded over two
gloo ranks under ``torchrun``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

pytest.importorskip("rsl_rl")
pytest.importorskip("tyro")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TASK = "Go1JoystickFlatTerrain-v1"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's gpuparam
    env["OMP_NUM_THREADS"] = "1"
    return env


def _run(*args: str, timeout: int = 600, launcher: tuple[str, ...] = ("-m",)) -> str:
    out = subprocess.run([sys.executable, *launcher, *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout, env=_env())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


# One fresh interpreter runs the commands one after another, each as ``python -m <entry>``
# runs it (``runpy``, its arguments in ``sys.argv``; its stdout captured), so that the
# imports and Warp's and ONNX's one-time set-up are paid once. Its reply to each command
# is a JSON line ``[exit code, stdout]`` on its own copy of fd 1 (fd 1 itself is pointed
# at stderr: nothing else can write there).
_DRIVER = """
import contextlib, io, json, os, runpy, sys, traceback
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in sys.stdin:
    entry, argv = json.loads(line)
    out, code = io.StringIO(), 0
    sys.argv = [entry, *argv]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(entry, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    except BaseException:
        code = 1
        out.write(traceback.format_exc())
    replies.write(json.dumps([code, out.getvalue()]) + chr(10))
    replies.flush()
"""


@contextlib.contextmanager
def _interpreter():
    """``run("gpuparam.train", *args) -> stdout``: ``python -m gpuparam.train *args`` in one
    fresh interpreter (cwd the checkout, no MUJOCO_GL or DISPLAY), the same for each call."""
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER], cwd=ROOT, env=_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = threading.Timer(1200, proc.kill)  # a hung command: the reply ends empty
    deadline.start()

    def run(module: str, *args: str) -> str:
        proc.stdin.write(json.dumps([module, list(args)]) + "\n")
        proc.stdin.flush()
        reply = proc.stdout.readline()
        assert reply, f"{module} {args}: the interpreter ended (exit {proc.wait()})"
        code, out = json.loads(reply)
        assert code == 0, (module, args, code, out[-4000:])
        return out

    try:
        yield run
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=120)
        deadline.cancel()
        if code != 0:
            raise AssertionError(f"the interpreter exited {code}")


def _files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file()}


def _tensorboard(run: Path) -> tuple[dict, dict]:
    """``({tag: [steps]}, {tag: [steps]})`` of the scalars and images under ``run``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars, images = {}, {}
    for f in sorted(run.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"images": 0, "scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend(e.step for e in acc.Scalars(tag))
        for tag in acc.Tags()["images"]:
            images.setdefault(tag, []).extend(e.step for e in acc.Images(tag))
    return scalars, images


def _gif(path: Path) -> tuple[int, set[int]]:
    from PIL import Image

    im = Image.open(path)
    durations = set()
    for k in range(im.n_frames):
        im.seek(k)
        durations.add(im.info["duration"])
    return im.n_frames, durations


def test_play_train_resume_play_contract(tmp_path):
    """In one interpreter, as a user runs them in turn: examples/go1_policy.pt (TorchScript,
    written by the former go1_train.py --export) plays, then a new run, its resume and a
    play of its latest checkpoint. The TorchScript play comes first: its video makes the
    entry pick EGL before MuJoCo is first imported, as the resume's video then needs."""
    d, e, ts = tmp_path / "D", tmp_path / "E", tmp_path / "TS"
    ts.mkdir()
    with _interpreter() as run_entry:
        # the shipped TorchScript policy: a GIF, and nothing to export
        out = run_entry("gpuparam.play", "--checkpoint", "examples/go1_policy.pt",
                        "--num-envs", "2", "--device", "cpu", "--steps", "6",
                        "--video-envs", "1", "--out", str(ts))
        assert "mean reward per step" in out
        assert sorted(p.name for p in ts.iterdir()) == ["play.gif"]

        run_entry("gpuparam.train", "--task", TASK, "--num-envs", "16", "--max-iterations",
                  "2", "--device", "cpu", "--log-dir", str(d))
        (run,) = (d / TASK).iterdir()  # D/<task>/<timestamp>
        assert len(run.name) == len("2026-01-01_00-00-00")
        cfg = json.loads((run / "config.json").read_text())
        assert (cfg["task"], cfg["num_envs"], cfg["max_iterations"]) == (TASK, 16, 2)
        for name in ("model_1.pt", "env_1.pt", "exported/policy.pt2", "exported/policy.onnx"):
            assert (run / name).stat().st_size > 1000, name
        assert torch.load(run / "model_1.pt", weights_only=False)["iter"] == 1

        # resume: the same command with more iterations; a clip at the last iteration
        out = run_entry("gpuparam.train", "--task", TASK, "--num-envs", "16",
                        "--max-iterations", "4", "--device", "cpu", "--log-dir", str(d),
                        "--resume", "--video", "--video-interval", "4", "--video-length", "8")
        assert f"resumed {run / 'model_1.pt'} at iteration 2" in out
        assert [p.name for p in (d / TASK).iterdir()] == [run.name]  # the same run folder
        assert torch.load(run / "model_3.pt", weights_only=False)["iter"] == 3
        assert (run / "env_3.pt").is_file()
        frames, durations = _gif(run / "videos" / "iter_3.gif")
        assert frames == 4 and durations == {40}  # every 2nd step of 8, 2 x 0.02 s each
        scalars, images = _tensorboard(run)
        for tag in ("Loss/value", "Loss/surrogate", "Loss/learning_rate", "Policy/mean_std",
                    "Perf/total_fps", "Episode_Reward/tracking_lin_vel",
                    "Episode_Reward/feet_air_time", "Episode_Termination/terminated",
                    "Episode_Termination/time_out"):
            assert tag in scalars, (tag, sorted(scalars))
        assert sorted(scalars["Perf/total_fps"]) == [0, 1, 2, 3]  # the count continued
        assert images == {"Video/policy": [3]}

        # play: the latest checkpoint; everything under E, nothing else written
        before = _files(tmp_path)
        run_entry("gpuparam.play", "--task", TASK, "--num-envs", "4", "--device", "cpu",
                  "--log-dir", str(d), "--steps", "40", "--out", str(e))
        after = _files(tmp_path)
        written = sorted(k for k in after if k not in before or after[k] != before[k])
        assert written == ["E/exported/policy.onnx", "E/exported/policy.pt2", "E/play.gif"]
        frames, durations = _gif(e / "play.gif")
        assert frames == 20 and durations == {40}


def test_torchrun_two_gloo_ranks(tmp_path):
    """The train entry under torchrun: 2 CPU ranks (gloo), each its shard of 8 envs, one
    run folder (rank 0 writes the model; each rank its env state); rsl_rl counts the
    steps of both ranks."""
    _run("--nproc-per-node", "2", "--master-port", "29517", "-m", "gpuparam.train",
         "--task", "Pendulum-v1", "--num-envs", "8", "--max-iterations", "2", "--device",
         "cpu", "--log-dir", str(tmp_path), "--agent.num-steps-per-env", "4",
         launcher=("-m", "torch.distributed.run"))
    (run,) = (tmp_path / "Pendulum-v1").iterdir()
    names = {p.name for p in run.iterdir()}
    assert {"model_1.pt", "env_1.pt", "env_1_rank1.pt", "config.json"} <= names
    import gpuparam as gp

    for rank, name in ((0, "env_1.pt"), (1, "env_1_rank1.pt")):  # each rank's shard's state
        shard = gp.make("Pendulum-v1", 8, device="cpu", shard=(rank, 2))
        shard.load(run / name)
        assert shard.env_offset == 4 * rank
        assert int(shard.episode_length.max()) > 0  # stepped: not a fresh env's state
    scalars, _ = _tensorboard(run)
    assert sorted(scalars["Perf/total_fps"]) == [0, 1]
