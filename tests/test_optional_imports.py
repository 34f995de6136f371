"""Every test module collects on a machine with only the core dependencies (torch, warp,
tensordict, numpy, pytest), as `pytest -m gpu` on the GPU machine does: a module that
needs an optional package skips itself (``pytest.importorskip``), since one collection
error stops the whole run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("scipy", "gymnasium", "torchrl", "rsl_rl", "skrl", "stable_baselines3", "mujoco",
            "mujoco_warp", "envpool", "matplotlib", "hypothesis", "tqdm", "imageio")

# a meta-path finder that answers the optional packages with a spec whose loader raises
# ModuleNotFoundError (what importing a missing package raises; merely looking one up, as
# torch does at import, still succeeds), then pytest's collection
SCRIPT = f"""
import importlib.machinery
import sys

class Hidden:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {{spec.name!r}} (hidden)", name=spec.name)

    def exec_module(self, module):
        raise ModuleNotFoundError(module.__name__, name=module.__name__)

sys.meta_path.insert(0, Hidden())
import pytest

sys.exit(pytest.main(["--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                      "-p", "no:hypothesispytest", "tests"]))
"""


@pytest.mark.slow  # imports every test module (about 30 s)
def test_every_module_collects_without_the_optional_packages():
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "error" not in out.lower().split("warnings summary")[0], out[-4000:]
    assert "tests/test_gpu.py::" in out  # the GPU tests themselves were collected
