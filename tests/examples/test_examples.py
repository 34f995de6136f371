"""The examples a new user copies from run end to end in tiny configurations."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: int = 300) -> str:
    out = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_quickstart():
    out = _run("examples/quickstart.py", "--num-envs", "256", "--steps", "60", "--device", "cpu")
    assert "after env.params.set('length', 2.0, mask=second_half)" in out
    assert "lengths now: [0.5, 2.0]" in out


def test_ppo_curriculum_tiny(tmp_path):
    out = _run(
        "examples/ppo_curriculum.py", "--num-envs", "64", "--iterations", "3", "--rollout", "16",
        "--log-every", "1", "--device", "cpu", "--out", str(tmp_path / "run"),
    )
    assert len(re.findall(r"^iter +\d+ \| env steps", out, flags=re.M)) == 3
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["ppo_curriculum.png"]
    assert (tmp_path / "run" / "ppo_curriculum.png").stat().st_size > 1000


def test_custom_env_example():
    out = _run("examples/custom_env.py", "--num-envs", "64", "--steps", "100", "--device", "cpu")
    assert "stages ('physics', 'episode', 'randomize_reset', 'clock', 'autoreset')" in out
    assert re.search(r"episodes finished: [1-9]\d*, mean return -\d+\.\d+", out)


def test_rsl_rl_train_tiny(tmp_path):
    pytest.importorskip("rsl_rl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's gpuparam
    out = subprocess.run(
        [sys.executable, "examples/rsl_rl_train.py", "--num-envs", "16", "--iterations", "3",
         "--steps-per-env", "8", "--episode-steps", "8", "--log-every", "1", "--device", "cpu",
         "--out", str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = re.findall(r"^iter +\d+ \| env steps +\d+ \| mean return +-\d+\.\d", out.stdout,
                       flags=re.M)  # episodes of 8 steps end in every iteration
    assert len(lines) == 3
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["rsl_rl_pendulum.png"]
