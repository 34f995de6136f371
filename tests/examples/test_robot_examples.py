"""The robot examples run end to end in tiny configurations (MuJoCo Warp on CPU)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mujoco_warp")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: int = 300) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's gpuparam
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_robot_randomization_tiny():
    out = _run("examples/robot_randomization.py", "--num-envs", "8", "--steps", "30",
               "--promote", "8", "--device", "cpu")
    assert re.search(r"^8 Ants x 30 steps in [\d.]+ s: [\d,]+ env-steps/s$", out, flags=re.M)
    assert len(re.findall(r"^group \d \(floor friction", out, flags=re.M)) == 4
    assert "mean curriculum level" in out


def test_ppo_halfcheetah_tiny(tmp_path):
    out = _run("examples/ppo_halfcheetah.py", "--num-envs", "4", "--iterations", "2",
               "--rollout", "8", "--epochs", "1", "--minibatches", "2", "--log-every", "1",
               "--device", "cpu", "--out", str(tmp_path / "run"))
    assert len(re.findall(r"^iter +\d+ \| env steps", out, flags=re.M)) == 2
    assert "first iteration" in out
    # no MuJoCo warning, so no MUJOCO_LOG.TXT: the plot is all it writes
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["ppo_halfcheetah.png"]


def test_ppo_halfcheetah_prints_completed_episodes(tmp_path):
    """The docstring promises the returns of completed episodes: 8-step episodes end."""
    out = _run("examples/ppo_halfcheetah.py", "--num-envs", "2", "--iterations", "1",
               "--rollout", "16", "--epochs", "1", "--minibatches", "1", "--log-every", "1",
               "--device", "cpu", "--out", str(tmp_path), "--episode-steps", "8")
    assert re.search(r"^iter +1 .* \| 4 episodes completed, mean return +-?\d+\.\d", out,
                     flags=re.M), out


def test_rsl_rl_train_robot_tiny(tmp_path):
    pytest.importorskip("rsl_rl")
    out = _run("examples/rsl_rl_train.py", "--task", "HalfCheetah-v5", "--num-envs", "4",
               "--iterations", "1", "--steps-per-env", "8", "--episode-steps", "8",
               "--promote=-1e9", "--demote=-2e9", "--hidden", "8", "--device", "cpu",
               "--out", str(tmp_path / "run"))
    # every episode ends within the iteration and is promoted: the curriculum is wired
    assert re.search(r"^iter +0 \| env steps +32 \| mean return +-?\d+\.\d .*"
                     r"mean level 1\.00 / 4", out, flags=re.M), out
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["rsl_rl_halfcheetah.png"]


def test_go1_train_and_play_tiny(tmp_path):
    pytest.importorskip("rsl_rl")
    out = _run("examples/go1_train.py", "--num-envs", "4", "--iterations", "2",
               "--steps-per-env", "8", "--hidden", "8", "--log-every", "1", "--device", "cpu",
               "--out", str(tmp_path), "--export", str(tmp_path / "policy.pt"))
    assert len(re.findall(r"^iter +\d+ \| env steps +\d+ \| tracking \d\.\d{3} \| episode "
                          r"length", out, flags=re.M)) == 2
    assert not re.search(r"episode length +nan", out), out  # issue 43 item 8: says why
    for name in ("model.pt", "history.json", "curve.png"):
        assert (tmp_path / name).stat().st_size > 500, name
    # as the README writes it: no MUJOCO_GL, no display (the script picks EGL itself)
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    env["PYTHONPATH"] = str(ROOT)
    # the rsl_rl checkpoint, then the exported TorchScript policy (issue 32: --play with
    # examples/go1_policy.pt)
    for saved in ("model.pt", "policy.pt"):
        gif = tmp_path / "play.gif"
        gif.unlink(missing_ok=True)
        res = subprocess.run([sys.executable, "examples/go1_train.py", "--play",
                              str(tmp_path / saved), "--hidden", "8", "--play-envs", "2",
                              "--play-steps", "6", "--device", "cpu"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300, env=env)
        if res.returncode != 0 and "offscreen renderer did not start" in res.stderr:
            pytest.skip(f"no offscreen OpenGL here: {res.stderr.strip().splitlines()[-1]}")
        assert res.returncode == 0, res.stderr[-3000:]
        assert "3 frames of 2 envs" in res.stdout and gif.stat().st_size > 1000, saved


@pytest.mark.parametrize("task", ["G1JoystickFlatTerrain-v1", "G1Terrain-v0"])
def test_g1_train_tiny(tmp_path, task):
    pytest.importorskip("rsl_rl")
    grid = ("--terrain-rows", "2") if task == "G1Terrain-v0" else ()
    out = _run("examples/g1_train.py", "--task", task, *grid, "--num-envs", "4",
               "--iterations", "2", "--steps-per-env", "8", "--hidden", "8", "--log-every",
               "1", "--device", "cpu", "--out", str(tmp_path))
    assert len(re.findall(r"^iter +\d+ \| env steps +\d+ \| reward [+-]\d\.\d{4} \| "
                          r"tracking \d\.\d{3} \| episode length", out, flags=re.M)) == 2
    assert not re.search(r"episode length +nan", out), out  # issue 43 item 8: says why
    for name in ("model.pt", "history.json", "curve.png"):
        assert (tmp_path / name).stat().st_size > 500, name


def test_go1_train_resume_continues_bit_for_bit_and_exports(tmp_path):
    """Two iterations, then ``--resume`` to four, equal four in one run: the model, the
    optimizer and every logged figure (the env, its randomization and curriculum, the
    tracking metric and torch's random state come back with it). ``--export`` writes a
    TorchScript policy: raw observations ``[B, 48]`` in, actions in ``[-1, 1]`` out."""
    pytest.importorskip("rsl_rl")
    import json

    import torch

    tiny = ("--num-envs", "4", "--steps-per-env", "8", "--hidden", "8", "--device", "cpu",
            "--save-every", "2")
    _run("examples/go1_train.py", *tiny, "--iterations", "4", "--out", str(tmp_path / "a"),
         "--export", str(tmp_path / "policy.pt"))
    _run("examples/go1_train.py", *tiny, "--iterations", "2", "--out", str(tmp_path / "b"))
    out = _run("examples/go1_train.py", *tiny, "--iterations", "4", "--out",
               str(tmp_path / "b"), "--resume", str(tmp_path / "b"))
    assert "resumed" in out and "at iteration 2" in out
    runs = {}
    for run in ("a", "b"):
        with open(tmp_path / run / "history.json") as f:
            rows = json.load(f)["history"]
        runs[run] = ([{k: v for k, v in r.items() if k != "seconds"} for r in rows],
                     torch.load(tmp_path / run / "model.pt", weights_only=False))
    assert runs["a"][0] == runs["b"][0] and len(runs["a"][0]) == 4
    for key in ("actor_state_dict", "critic_state_dict"):
        a, b = runs["a"][1][key], runs["b"][1][key]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), key
    assert str(runs["a"][1]["optimizer_state_dict"]) == str(runs["b"][1]["optimizer_state_dict"])
    policy = torch.jit.load(str(tmp_path / "policy.pt"))
    obs = torch.randn(5, 48) * 3.0
    act = policy(obs)
    assert act.shape == (5, 12) and act.abs().max() <= 1.0 and torch.equal(act, policy(obs))
    assert not torch.equal(act[0], act[1])
