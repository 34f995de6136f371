"""The sim-to-sim check of an exported Go1 policy (``examples/go1_sim2sim.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("mujoco_warp")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "examples" / "go1_policy.pt"


def _run(*args: str, python: str = sys.executable) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([python, "examples/go1_sim2sim.py", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    return out.returncode, json.loads(out.stdout)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(48, 12)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(observation))


def test_script_measures_any_torchscript_policy_on_gpuparam(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "policy.pt"
    torch.jit.script(Tiny()).save(str(path))
    rc, res = _run("--policy", str(path), "--envs", "gpuparam", "--num-envs", "4",
                   "--steps", "6", "--device", "cpu")
    got = res["gpuparam"]
    for who in ("policy", "standing_still"):
        assert 0.0 < got[who]["tracking_error"] < 10.0 and 0.0 <= got[who]["fell"] <= 1.0
    assert got["ratio"] == pytest.approx(got["policy"]["tracking_error"]
                                         / got["standing_still"]["tracking_error"])
    assert rc == (0 if res["passed"] else 1)


def test_committed_policy_walks_on_gpuparam():
    """Issue 32: the committed policy (examples/go1_policy.pt) halves standing still's
    velocity tracking error with at most 10% of envs falling, on gpuparam's Go1 (64 envs,
    500 steps: the script's defaults)."""
    rc, res = _run("--envs", "gpuparam", "--device", "cpu")
    assert rc == 0 and res["passed"], res
    assert res["gpuparam"]["ratio"] <= 0.5 and res["gpuparam"]["policy"]["fell"] <= 0.1


# envpool's port: envpool in this environment, or another interpreter that has it
# (ENVPOOL_PYTHON; the envpool side of the script does not import gpuparam)
ENVPOOL_PYTHON = os.environ.get("ENVPOOL_PYTHON") or (
    sys.executable if importlib.util.find_spec("envpool") else None)


@pytest.mark.skipif(ENVPOOL_PYTHON is None,
                    reason="envpool not installed (or ENVPOOL_PYTHON: a Python that has it)")
def test_committed_policy_walks_on_envpools_port():
    """Issue 32: the same on envpool's C++ port of the task (the script runs it in
    ``ENVPOOL_PYTHON`` when envpool is not importable here)."""
    rc, res = _run("--envs", "envpool")
    assert rc == 0 and res["passed"], res


def _refused(extra_env: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ENVPOOL_PYTHON"}
    env.update(PYTHONPATH=str(ROOT), **extra_env)
    out = subprocess.run([sys.executable, "examples/go1_sim2sim.py"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, \
        out.stderr[-3000:]
    return out.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(importlib.util.find_spec("envpool") is not None,
                    reason="envpool imports here: nothing to refuse")
def test_defaults_check_envpool_before_the_gpuparam_half(tmp_path):
    """Issue 43 item 7: at its defaults (both envs) the script stops at once, in one line,
    when envpool imports neither here nor in ``ENVPOOL_PYTHON`` (it used to run the whole
    gpuparam half first, minutes on a CPU, then fail with a traceback)."""
    line = _refused({})
    assert line.endswith("--envs envpool: envpool does not import in this Python and "
                         "ENVPOOL_PYTHON is not set: pip install envpool envpool-assets-"
                         "mujoco-large (here, or in another environment named by "
                         "ENVPOOL_PYTHON), or run --envs gpuparam"), line
    line = _refused({"ENVPOOL_PYTHON": str(tmp_path / "python")})
    assert line.endswith(f"ENVPOOL_PYTHON: expected a Python that imports envpool, numpy "
                         f"and torch, got {tmp_path / 'python'} (No such file or "
                         f"directory)"), line
    line = _refused({"ENVPOOL_PYTHON": sys.executable})
    assert "ENVPOOL_PYTHON: expected a Python that imports envpool" in line
    assert "No module named 'envpool'" in line


FAKE_ENVPOOL = """
import numpy as np


class _Env:
    def __init__(self, n):
        self.n = n

    def _obs(self):
        obs = np.zeros((self.n, 48), np.float32)
        obs[:, 45] = 0.5  # command vx 0.5, base still: tracking error 0.5
        return {"state": obs}

    def reset(self):
        return self._obs(), {}

    def step(self, action):
        assert action.shape == (self.n, 12)
        no = np.zeros(self.n, bool)
        return self._obs(), np.zeros(self.n, np.float32), no, no, {}


def make(task, env_type, num_envs, seed):
    assert task == "Go1JoystickFlatTerrain-v1" and env_type == "gymnasium"
    return _Env(num_envs)
"""


@pytest.mark.skipif(importlib.util.find_spec("envpool") is not None,
                    reason="envpool imports here: ENVPOOL_PYTHON is not read")
def test_envpool_half_runs_in_envpool_python(tmp_path):
    """Issue 43 item 7: the script itself honours ``ENVPOOL_PYTHON``: the gpuparam half
    runs here, the envpool half in that Python (here one that finds a stand-in envpool
    whose base never moves: tracking error 0.5 for both policies, ratio 1)."""
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "envpool.py").write_text(FAKE_ENVPOOL)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'fake'} exec {sys.executable} "
                      f'"$@"\n')
    python.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ENVPOOL_PYTHON": str(python)}
    out = subprocess.run([sys.executable, "examples/go1_sim2sim.py", "--num-envs", "2",
                          "--steps", "3", "--device", "cpu"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 1, out.stderr[-3000:]  # envpool's ratio 1 > 0.5: not passed
    res = json.loads(out.stdout)
    assert res["envpool"]["ratio"] == 1.0 and res["envpool"]["passed"] is False
    for who in ("policy", "standing_still"):
        assert res["envpool"][who] == {"tracking_error": 0.5, "fell": 0.0}
        assert 0.0 < res["gpuparam"][who]["tracking_error"] < 10.0
