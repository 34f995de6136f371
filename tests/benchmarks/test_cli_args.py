"""The benchmark CLI's defaults: one torch thread, output outside the tracked files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import parse

ROOT = Path(__file__).resolve().parents[2]


def test_threads_default_to_one_and_zero_means_torchs_choice():
    assert parse([]).threads == 1
    assert parse(["--threads", "2"]).threads == 2
    assert parse(["--threads", "0"]).threads is None
    with pytest.raises(SystemExit):
        parse(["--threads", "-1"])


def test_output_defaults_to_an_ignored_folder():
    out = parse([]).output
    assert out == "runs/benchmarks"
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{out}/cpu.json"], cwd=ROOT)
    assert ignored.returncode == 0, f"{out} is not ignored by git"


def test_help_states_the_thread_default():
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    assert "default 1" in out.stdout and "--threads" in out.stdout
