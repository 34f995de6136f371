"""``bash benchmarks/gpu/gpu_check.sh --dry-run``: the GPU check's whole sequence on the CPU
at tiny sizes, gpuparam imported from the checkout through the script's symlink tree (not
the development install), the carry kit installed from ``.whl/`` when it is there; and the
settings it refuses before writing anything."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu import gpu_sections

ROOT = Path(__file__).resolve().parents[2]
CHECK = "benchmarks/gpu/gpu_check.sh"
SECTIONS = ("kit", *(name for name, *_ in gpu_sections.ORDER), "summary")


def _check(out, *args, timeout=600, **env):
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, **env}
    return subprocess.run(["bash", CHECK, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _sections(out) -> list[str]:
    """The sections of ``results.jsonl`` in order, a section's consecutive lines as one."""
    names = [json.loads(x)["section"] for x in (out / "results.jsonl").read_text().splitlines()]
    return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    pytest.importorskip("mujoco_warp")
    pytest.importorskip("rsl_rl")
    out = tmp_path_factory.mktemp("gpu_check")
    r = _check(out, "--dry-run", timeout=900)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return r, out, {d["section"]: d for d in lines}, lines


def test_the_table_names_sections_that_exist():
    """Every entry of ``ORDER`` is a function of gpu_sections.py or a module of its own,
    named once."""
    names = [name for name, *_ in gpu_sections.ORDER]
    assert len(names) == len(set(names)) and "kit" not in names and "summary" not in names
    for name, cap_gpu, cap_dry, module in gpu_sections.ORDER:
        assert cap_gpu >= 10 and cap_dry >= 10, name
        if module is None:
            assert name in gpu_sections.SECTIONS, name
        else:
            assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module


@pytest.mark.slow
def test_every_section_ends_ok(dry_run):
    r, out, by_name, lines = dry_run
    assert _sections(out) == list(SECTIONS), r.stdout[-3000:]
    bad = {k: v for k, v in by_name.items() if v["ok"] is not True}
    assert not bad, (bad, r.stdout[-3000:])
    assert r.returncode == 0


@pytest.mark.slow
def test_output_folder_holds_at_most_eight_files(dry_run):
    _, out, by_name, _ = dry_run
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert len(files) <= 8, files
    assert {"results.jsonl", "check.log", "go1_history.json", "go1_curve.png"} <= set(files)
    assert by_name["summary"]["files_in_out"] == len(files)


@pytest.mark.slow
def test_gpuparam_comes_from_the_checkout_not_the_install(dry_run):
    _, _, by_name, _ = dry_run
    smoke = by_name["smoke"]
    assert "/src/gpuparam/" in smoke["gpuparam_file"]
    assert "/src/gpuparam/kernels/" in smoke["kernels_file"]
    if "installed_into" in by_name["kit"]:  # .whl/ was there: warp came from the kit
        assert smoke["warp_file"].startswith(by_name["kit"]["installed_into"])


@pytest.mark.slow
def test_the_capture_section_runs_its_experiments(dry_run):
    """Issue 40: the capture section comes first, one line per experiment, all equal on the
    CPU (the harness, and the experiments that split the two H200 failures)."""
    _, _, by_name, lines = dry_run
    capture = [d for d in lines if d["section"] == "capture"]
    assert _sections_of(lines)[:3] == ["kit", "versions", "capture"]
    ran = [d for d in capture if d["ok"] is not None and d["experiment"] != "summary"]
    assert ran and all(d["ok"] for d in ran), [d for d in ran if not d["ok"]]
    assert {"all", "push_only"} <= {d["experiment"] for d in ran}
    assert by_name["capture"]["experiment"] == "summary" and by_name["capture"]["ok"]
    assert by_name["capture"]["ran"] == len(ran)


def _sections_of(lines) -> list[str]:
    names = [d["section"] for d in lines]
    return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]


@pytest.mark.slow
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


@pytest.mark.slow
def test_chosen_sections_run_in_the_order_given_with_their_caps(tmp_path):
    """``GPU_CHECK_SECTIONS`` picks sections and their order (``kit``, when named, first),
    ``GPU_CHECK_CAPS`` their caps (a cap too small to start a section skips it)."""
    r = _check(tmp_path, "--dry-run", GPU_CHECK_SECTIONS="versions mempool versions",
               GPU_CHECK_CAPS="mempool=5")
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [d["section"] for d in lines] == ["versions", "mempool", "versions", "summary"], \
        r.stdout[-2000:]
    assert lines[1] == {"section": "mempool", "ok": False, "skipped": "its cap is under 10 s"}
    r = _check(tmp_path, "--dry-run", GPU_CHECK_SECTIONS="versions kit")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert _sections(tmp_path) == ["kit", "versions", "summary"]


FAKE_SECTIONS = """
import argparse, json, sys
ORDER = (("plain", 30, 30, None), ("own", 30, 20, "benchmarks.gpu.own"),
         ("quiet", 30, 30, "benchmarks.gpu.quiet"), ("crash", 30, 30, "benchmarks.gpu.crash"))
if "--list" in sys.argv:
    for name, g, d, m in ORDER:
        print(name, g, d, m or "-")
    sys.exit(0)
p = argparse.ArgumentParser()
p.add_argument("section"); p.add_argument("--out"); p.add_argument("--budget", type=float)
p.add_argument("--dry-run", action="store_true")
a = p.parse_args()
with open(a.out + "/results.jsonl", "a") as f:
    f.write(json.dumps({"section": a.section, "ok": True, "budget": a.budget}) + "\\n")
"""
FAKE_MODULE = """
import argparse, json, sys
p = argparse.ArgumentParser()
p.add_argument("--out"); p.add_argument("--budget", type=float)
p.add_argument("--dry-run", action="store_true")
a = p.parse_args()
with open(a.out + "/results.jsonl", "a") as f:
    for line in LINES:
        f.write(json.dumps({**line, "budget": a.budget, "dry": a.dry_run}) + "\\n")
sys.exit(STATUS)
"""


def _fake_repo(tmp_path: Path) -> Path:
    """A checkout holding the real gpu_check.sh and a table of fake sections: two lines
    from ``own``, none from ``quiet``, one ``ok`` line then exit status 1 from ``crash``."""
    repo = tmp_path / "repo"
    gpu = repo / "benchmarks" / "gpu"
    gpu.mkdir(parents=True)
    shutil.copy(ROOT / CHECK, gpu / "gpu_check.sh")
    for d in ("gpuparam", "kernels", "tests", "examples"):
        (repo / d).mkdir()
    (repo / "pyproject.toml").write_text("")
    (repo / "benchmarks" / "__init__.py").write_text("")
    (gpu / "__init__.py").write_text("")
    (gpu / "gpu_sections.py").write_text(FAKE_SECTIONS)
    own = [{"section": "own", "ok": True, "experiment": e} for e in ("a", "b")]
    for name, lines, status in (("own", own, 0), ("quiet", [], 0),
                                ("crash", [{"section": "crash", "ok": True}], 1)):
        (gpu / f"{name}.py").write_text(f"LINES = {lines!r}\nSTATUS = {status}\n"
                                        + FAKE_MODULE)
    return repo


def test_a_section_of_its_own_module_writes_its_lines(tmp_path):
    """A section of ``ORDER`` naming a module runs as ``python -m MODULE --out DIR --budget
    S [--dry-run]``; its lines are kept; one that writes nothing gets an ``ok`` line from
    the script; one that exits non-zero gets a failing line even after an ``ok`` one."""
    repo = _fake_repo(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    r = subprocess.run(["bash", str(repo / CHECK), "--dry-run"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [d["section"] for d in lines] == ["kit", "plain", "own", "own", "quiet", "crash",
                                             "crash", "summary"], r.stdout + r.stderr
    assert lines[1] == {"section": "plain", "ok": True, "budget": 30.0}
    assert lines[2] == {"section": "own", "ok": True, "experiment": "a", "budget": 20.0,
                        "dry": True}
    assert lines[4]["ok"] is True and lines[4]["section"] == "quiet"
    assert lines[6]["ok"] is False and lines[6]["returncode"] == 1
    assert lines[7]["ok"] is False and lines[7]["failed_sections"] == 1
    assert r.returncode == 1


@pytest.mark.parametrize(("setting", "message"), [
    ({"GPU_CHECK_CAPS": "robots=45.5"}, "GPU_CHECK_CAPS: 'robots=45.5': expected a whole"),
    ({"GPU_CHECK_CAPS": "robots=1m"}, "GPU_CHECK_CAPS: 'robots=1m': expected a whole"),
    ({"GPU_CHECK_CAPS": "robots=0"}, "GPU_CHECK_CAPS: 'robots=0': expected a whole"),
    ({"GPU_CHECK_CAPS": "robots"}, "GPU_CHECK_CAPS: 'robots': expected NAME=SECONDS"),
    ({"GPU_CHECK_CAPS": "robot=30"}, "GPU_CHECK_CAPS: 'robot=30': no section 'robot'"),
    ({"GPU_CHECK_BUDGET": "45.5"}, "GPU_CHECK_BUDGET='45.5': expected a whole number"),
    ({"GPU_CHECK_BUDGET": "1m"}, "GPU_CHECK_BUDGET='1m': expected a whole number"),
    ({"GPU_CHECK_SECTIONS": "versions nosuch"}, "GPU_CHECK_SECTIONS: no section 'nosuch'"),
])
def test_a_bad_setting_is_refused_before_anything_is_written(tmp_path, setting, message):
    out = tmp_path / "out"
    r = _check(out, "--dry-run", timeout=60, **setting)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"gpu_check: {message}") and r.stderr.count("\n") == 1, r.stderr
    assert not out.exists()


def test_an_unknown_argument_is_refused(tmp_path):
    r = _check(tmp_path / "out", "--dryrun", timeout=60)
    assert r.returncode == 2 and r.stderr == \
        "gpu_check: unknown argument '--dryrun' (expected nothing or --dry-run)\n"
    assert not (tmp_path / "out").exists()


def test_kit_is_a_section_name(tmp_path):
    """``GPU_CHECK_SECTIONS=kit`` (the kit step alone) is accepted; on a fresh clone with no
    ``.whl/`` it says the install was skipped."""
    r = _check(tmp_path, "--dry-run", timeout=120, GPU_CHECK_SECTIONS="kit")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _sections(tmp_path) == ["kit", "summary"]


def _out_refused(tmp_path, out, message):
    before = sorted(p.name for p in Path("/").iterdir())
    r = _check(out, "--dry-run", timeout=60, GPU_CHECK_SECTIONS="versions")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"gpu_check: OUT={out} {message}") and \
        r.stderr.count("\n") == 1, r.stderr
    assert sorted(p.name for p in Path("/").iterdir()) == before  # nothing written to /


def test_out_naming_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("mine")
    _out_refused(tmp_path, f, "is a file, not a folder")
    _out_refused(tmp_path, f / "sub", "cannot be made")
    assert f.read_text() == "mine"


def test_an_unwritable_out_is_refused(tmp_path):
    """A folder nobody may write into (``/proc``, even for root; a read-only folder for
    others) is refused: nothing lands in ``/`` instead (the old script's ``cd`` failed and
    it wrote ``/results.jsonl`` and ran ``rm -f /go1_*``)."""
    _out_refused(tmp_path, Path("/proc"), "is not writable")
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            _out_refused(tmp_path, locked, "is not writable")
        finally:
            locked.chmod(0o700)


def test_out_holding_other_files_is_refused(tmp_path):
    """An ``OUT`` with files the check did not write (``/``, a user's folder) is refused:
    the check never deletes or mixes with them; an earlier check's files are replaced."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "go1_curve.png").write_text("an earlier check's")
    _out_refused(tmp_path, tmp_path, "holds 'notes.txt', which no check wrote")
    assert (tmp_path / "go1_curve.png").read_text() == "an earlier check's"
    (tmp_path / "notes.txt").unlink()
    r = _check(tmp_path, "--dry-run", timeout=120, GPU_CHECK_SECTIONS="kit")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "go1_curve.png").exists()
