"""examples/torchrl_ppo.py end to end in a tiny configuration: TorchRL's PPO (collector,
GAE, ClipPPOLoss) trains through TorchRLEnv, and the mid-run parameter switch happens."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchrl")

ROOT = Path(__file__).resolve().parents[2]


def test_torchrl_ppo_tiny(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's gpuparam
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "torchrl_ppo.py"), "--num-envs", "16",
         "--iterations", "3", "--rollout", "16", "--switch-at", "1", "--device", "cpu"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = re.findall(r"^iter +(\d+) \| env steps +([\d,]+) \| mean episode return group 0 "
                       r"+(\S+) group 1 +(\S+)", out.stdout, flags=re.M)
    assert [(int(i), s) for i, s, _, _ in lines] == [(0, "256"), (1, "512"), (2, "768")]
    # 16-step rollouts from 10-to-60-step random episodes: some end in every iteration
    assert all(float(g) > 0 for _, _, *gs in lines for g in gs), out.stdout
    assert "iter   1 | switch: group 1 -> length 0.25 m, x_threshold 0.8 m" in out.stdout
    assert "Warning" not in out.stderr, out.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # writes nothing
