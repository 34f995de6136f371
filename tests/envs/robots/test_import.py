"""The robots are an optional extra: imported at first use, with a clear error without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# MuJoCo Warp hidden: importing it fails as it would without the extra installed
HIDE = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "mujoco_warp" or name.startswith("mujoco_warp."):
            raise ImportError("No module named 'mujoco_warp' (hidden by the test)")
sys.meta_path.insert(0, Block())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_import_gpuparam_does_not_load_mujoco_warp():
    out = _run("import sys, gpuparam as gp\n"
               "assert 'mujoco_warp' not in sys.modules\n"
               "assert 'Ant-v5' in gp.registered()\nprint('ok')")
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_without_the_extra_make_names_the_install_line():
    out = _run(HIDE + "import gpuparam as gp\n"
               "gp.make('CartPole-v1', 2, device='cpu')\n"
               "try:\n    gp.make('Ant-v5', 2, device='cpu')\n"
               "except ImportError as e:\n    print('ERR', e)\n"
               "try:\n    gp.Push\n"
               "except ImportError as e:\n    print('ERR2', e)\n")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ERR" in out.stdout and "pip install gpuparam[mujoco]" in out.stdout
    assert "ERR2" in out.stdout
