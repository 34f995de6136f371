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


@pytest.fixture(scope="module")
def ppo_halfcheetah(tmp_path_factory) -> tuple[str, Path]:
    """One tiny run of examples/ppo_halfcheetah.py with 8-step episodes: its stdout and its
    ``--out`` folder."""
    out_dir = tmp_path_factory.mktemp("ppo_halfcheetah") / "run"
    out = _run("examples/ppo_halfcheetah.py", "--num-envs", "4", "--iterations", "2",
               "--rollout", "8", "--epochs", "1", "--minibatches", "2", "--log-every", "1",
               "--device", "cpu", "--out", str(out_dir), "--episode-steps", "8")
    return out, out_dir


def test_ppo_halfcheetah_tiny(ppo_halfcheetah):
    out, out_dir = ppo_halfcheetah
    assert len(re.findall(r"^iter +\d+ \| env steps", out, flags=re.M)) == 2
    assert "first iteration" in out
    # no MuJoCo warning, so no MUJOCO_LOG.TXT: the plot is all it writes
    assert [p.name for p in out_dir.iterdir()] == ["ppo_halfcheetah.png"]


def test_ppo_halfcheetah_prints_completed_episodes(ppo_halfcheetah):
    """The docstring promises the returns of completed episodes: 8-step episodes end (each
    iteration's 8 steps end one episode in each of the 4 envs)."""
    out, _ = ppo_halfcheetah
    for it in (1, 2):
        assert re.search(rf"^iter +{it} .* \| 4 episodes completed, mean return +-?\d+\.\d",
                         out, flags=re.M), out


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
