"""``bash benchmarks/gpu_check.sh --dry-run``: the GPU check's whole sequence on the CPU at
tiny sizes, gpuparam imported from the checkout through the script's symlink tree (not the
development install), the carry kit installed from ``.whl/`` when it is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("kit", "versions", "smoke", "gpu_tests", "sweep", "masked_write", "recaptures",
            "mempool", "robots", "graph_counts", "go1_train", "summary")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    pytest.importorskip("mujoco_warp")
    pytest.importorskip("rsl_rl")
    out = tmp_path_factory.mktemp("gpu_check")
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    r = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return r, out, {d["section"]: d for d in lines}, lines


def test_every_section_ends_ok(dry_run):
    r, _, by_name, lines = dry_run
    assert [d["section"] for d in lines] == list(SECTIONS), r.stdout[-3000:]
    bad = {k: v for k, v in by_name.items() if v["ok"] is not True}
    assert not bad, (bad, r.stdout[-3000:])
    assert r.returncode == 0


def test_output_folder_holds_at_most_eight_files(dry_run):
    _, out, by_name, _ = dry_run
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert len(files) <= 8, files
    assert {"results.jsonl", "check.log", "go1_history.json", "go1_curve.png"} <= set(files)
    assert by_name["summary"]["files_in_out"] == len(files)


def test_gpuparam_comes_from_the_checkout_not_the_install(dry_run):
    _, _, by_name, _ = dry_run
    smoke = by_name["smoke"]
    assert "/src/gpuparam/" in smoke["gpuparam_file"]
    assert "/src/gpuparam/kernels/" in smoke["kernels_file"]
    if "installed_into" in by_name["kit"]:  # .whl/ was there: warp came from the kit
        assert smoke["warp_file"].startswith(by_name["kit"]["installed_into"])


def test_sections_report_their_figures(dry_run):
    _, _, by_name, _ = dry_run
    assert all(p["captured"] and p["recaptures"] == 0 for p in by_name["sweep"]["points"])
    robots = by_name["robots"]
    for name in ("Ant-v5", "Go1JoystickFlatTerrain-v1"):
        for setup in ("bare", "mass(reset)"):
            assert robots[f"{name} {setup}"]["launches_per_step"] > 0
    rec = by_name["recaptures"]
    assert rec["cartpole_full"]["captures_per_1000_steps"] == 0
    assert rec["go1_mass_reset"]["captures_per_1000_steps"] == 0
    assert by_name["go1_train"]["iterations_done"] == 2
    assert by_name["gpu_tests"]["tests"] > 0


def test_chosen_sections_run_in_the_order_given_with_their_caps(tmp_path):
    """``GPU_CHECK_SECTIONS`` picks sections and their order, ``GPU_CHECK_CAPS`` their caps
    (a cap too small to start a section skips it); an unknown name stops before anything
    runs."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable,
           "GPU_CHECK_SECTIONS": "versions mempool versions", "GPU_CHECK_CAPS": "mempool=5"}
    r = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [d["section"] for d in lines] == ["kit", "versions", "mempool", "versions",
                                             "summary"], r.stdout[-2000:]
    assert lines[2] == {"section": "mempool", "ok": False,
                        "skipped": "its cap is under 10 s"}
    env["GPU_CHECK_SECTIONS"] = "versions nosuch"
    r = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "no section 'nosuch'" in r.stderr
