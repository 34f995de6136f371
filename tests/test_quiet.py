"""Quiet by default: building and stepping envs prints no warning a user cannot act on
(Warp's line about a missing NVIDIA driver on a CPU machine, MuJoCo's settotalmass
deprecation), and nothing writes MUJOCO_LOG.TXT into the working directory."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuparam import _device

ROOT = Path(__file__).resolve().parents[1]


def _run_in(cwd: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=env)


def test_cartpole_is_quiet(tmp_path):
    out = _run_in(tmp_path, "import torch, gpuparam as gp\n"
                  "env = gp.make('CartPole-v1', 8, device='cpu')\n"
                  "env.step(torch.zeros(8, dtype=torch.long))\nprint('stepped')\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "stepped\n"
    assert out.stderr == ""  # no Warp banner or driver line, no MuJoCo warning
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mujoco_warp") is None,
                    reason="needs gpuparam[mujoco]")
def test_half_cheetah_is_quiet(tmp_path):
    out = _run_in(tmp_path, "import torch, gpuparam as gp\n"
                  "env = gp.make('HalfCheetah-v5', 2, device='cpu')\n"
                  "env.step(torch.zeros(2, 6))\nprint('stepped')\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "stepped\n"
    assert out.stderr == ""  # no Warp banner or driver line, no MuJoCo warning
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_only_the_no_driver_line_is_dropped(monkeypatch, capfd):
    """Every other line Warp's native init prints reaches stderr, in order."""

    def fake_init():
        os.write(2, b"before\n" + _device.NO_DRIVER_LINE + b"\nafter\n")

    monkeypatch.setattr(_device.wp, "init", fake_init)
    _device.init_warp.__wrapped__()
    err = capfd.readouterr().err
    assert err == "before\nafter\n"


def test_init_errors_still_raise_and_restore_stderr(monkeypatch, capfd):
    def failing_init():
        os.write(2, b"native error text\n")
        raise RuntimeError("Warp initialization failed")

    monkeypatch.setattr(_device.wp, "init", failing_init)
    with pytest.raises(RuntimeError, match="initialization failed"):
        _device.init_warp.__wrapped__()
    os.write(2, b"stderr works\n")
    assert capfd.readouterr().err == "native error text\nstderr works\n"
