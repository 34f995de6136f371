"""examples/distributed_ppo.py under torchrun: 2 gloo ranks on CPU, tiny sizes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[2]


def test_distributed_ppo_two_ranks_agree():
    if not dist.is_available():
        pytest.skip("torch.distributed not available")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's gpuparam in the workers
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "examples/distributed_ppo.py", "--num-envs", "64", "--iterations", "2",
        "--rollout", "8", "--sync-every", "4", "--log-every", "1", "--device", "cpu",
    ]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(re.findall(r"^iter +\d+ \| env steps", out.stdout, flags=re.M)) == 2
    lines = re.findall(r"^rank (\d)/2 final \| envs (\S+) \| (.*)$", out.stdout, flags=re.M)
    finals = {rank: (envs, rest) for rank, envs, rest in lines}
    assert set(finals) == {"0", "1"}, out.stdout
    assert finals["0"][0] == "0..31" and finals["1"][0] == "32..63"
    # synced statistics, ADR range and DDP weights: identical on both ranks
    assert finals["0"][1] == finals["1"][1]
    assert "obs count 1024 " in finals["0"][1]  # 2 iterations x 8 steps x 64 global envs
