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
    """Issue 32: the same on envpool's C++ port of the task."""
    rc, res = _run("--envs", "envpool", python=ENVPOOL_PYTHON)
    assert rc == 0 and res["passed"], res
