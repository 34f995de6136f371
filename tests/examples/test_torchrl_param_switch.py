"""End-to-end runs of examples/torchrl_param_switch.py in a tiny configuration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchrl")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "torchrl_param_switch.py"
TINY = ["--num-envs", "64", "--groups", "4", "--steps", "4", "--batches", "4",
        "--switch-every", "1", "--device", "cpu"]


def _run(*extra: str, timeout: float) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), *TINY, *extra], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def compare_out() -> str:
    """One run with ``--compare``: the switches (the plain run's output) and then the
    timing of collector recreation."""
    return _run("--compare", "--recreates", "1", timeout=300)


def test_switches_run_end_to_end(compare_out):
    assert compare_out.count("switch: group") == 3
    assert "median" in compare_out and "batch   4:" in compare_out


@pytest.mark.slow
def test_compare_measures_collector_recreation(compare_out):
    assert "TorchRL recreate 1:" in compare_out
    assert "ratio: a gpuparam switch is" in compare_out
