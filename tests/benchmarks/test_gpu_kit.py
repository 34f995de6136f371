"""The carry kit (``benchmarks/gpu/gpu_kit.py``) on small fake wheels: an item split across
folders less than 1 MiB from its start installs; a damaged stash is reported; manifests
that name paths outside the stash, or are malformed, end with one ``gpu_kit:`` line; a
folder the kit did not make is never deleted."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchmarks.gpu import gpu_kit

ROOT = Path(__file__).resolve().parents[2]
KIB = 1024
SIZES = {"kitbig": 300 * KIB, "kitsmall": 150 * KIB, "kittiny": 20 * KIB}


def _wheel(where: Path, name: str, size: int) -> Path:
    """A pure-Python wheel ``name-1.0`` of about ``size`` bytes (incompressible data)."""
    path = where / f"{name}-1.0-py3-none-any.whl"
    data = random.Random(name).randbytes(size)
    files = {f"{name}/__init__.py": b"", f"{name}/data.bin": data,
             f"{name}-1.0.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{name}-1.0.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                 b"Tag: py3-none-any\n"}
    files[f"{name}-1.0.dist-info/RECORD"] = "".join(f"{f},,\n" for f in
                                                    [*files, f"{name}-1.0.dist-info/RECORD"]
                                                    ).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for f, b in files.items():
            z.writestr(f, b)
    return path


@pytest.fixture
def kit(tmp_path):
    """Wheels of 300, 150 and 20 KiB cut into folders of 200 KiB: the first is split at
    200 KiB (folders 1, 2), the second at about 100 KiB of its start (folders 2, 3), the
    third lies whole in folder 3."""
    src = tmp_path / "src"
    src.mkdir()
    items = [{"name": w.name, "kind": "wheel", "src": w, "dist": n, "top_level": [n]}
             for w, n in ((_wheel(src, name, size), name) for name, size in SIZES.items())]
    dest = tmp_path / "whl"
    manifest = gpu_kit.write_kit(items, dest, 200 * KIB, "3.12")
    return dest, manifest


def _run(*args: str) -> tuple[int, str, str]:
    """``gpu_kit.main(args)`` in a fresh process: (status, stdout, stderr)."""
    r = subprocess.run([sys.executable, "benchmarks/gpu/gpu_kit.py", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def _one_line(err: str, message: str) -> None:
    assert err.startswith(f"gpu_kit: {message}") and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_an_item_split_less_than_a_mib_from_its_start_installs(kit, tmp_path):
    dest, manifest = kit
    assert manifest["folders"] == 3
    small = next(it for it in manifest["items"] if it["dist"] == "kitsmall")
    big = next(it for it in manifest["items"] if it["dist"] == "kitbig")
    assert [p["folder"] for p in big["parts"]] == [1, 2]
    assert [p["folder"] for p in small["parts"]] == [2, 3]
    # where the old names (offset in MiB) collided: part-00000 twice
    assert 0 < small["parts"][1]["offset"] < 1 << 20
    tiny = next(it for it in manifest["items"] if it["dist"] == "kittiny")
    assert [(p["folder"], p["file"]) for p in tiny["parts"]] == [(3, tiny["name"])]
    files = [p["file"] for it in manifest["items"] for p in it["parts"]]
    assert len(files) == len(set(files)) == 5, files
    assert small["parts"][1]["file"].endswith(".part-01")
    stash = tmp_path / "stash"
    for k in (1, 2, 3):
        assert gpu_kit.main(["stash", str(k), "--kit", str(dest), "--stash", str(stash)]) == 0
    target = tmp_path / "site"
    assert gpu_kit.main(["install", "--force", "--stash", str(stash),
                         "--target", str(target)]) == 0
    for name, size in SIZES.items():
        data = (target / name / "data.bin").read_bytes()
        assert data == random.Random(name).randbytes(size)
    # nothing written beside the kit's own folders
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "src", "stash", "whl"]


def test_a_failed_stash_is_reported_not_all_folders_stashed(kit, tmp_path, capsys):
    dest, manifest = kit
    stash = tmp_path / "stash"
    part = next(p for it in manifest["items"] for p in it["parts"] if p["folder"] == 1)
    good = (dest / "1" / part["file"]).read_bytes()
    (dest / "1" / part["file"]).write_bytes(bytes(len(good)))  # same size, other bytes
    assert gpu_kit.main(["stash", "1", "--kit", str(dest), "--stash", str(stash)]) == 2
    _one_line(capsys.readouterr().err, f"{part['file']} of folder 1: SHA-256 mismatch")
    assert not (stash / part["file"]).exists()
    for k in (2, 3):
        assert gpu_kit.main(["stash", str(k), "--kit", str(dest), "--stash", str(stash)]) == 0
    assert "folders still to stash: [1]" in capsys.readouterr().out
    # a part damaged in the stash after its check (same size): found by its SHA-256
    (dest / "1" / part["file"]).write_bytes(good)
    assert gpu_kit.main(["stash", "1", "--kit", str(dest), "--stash", str(stash)]) == 0
    assert "all folders stashed" in capsys.readouterr().out
    other = next(p for it in manifest["items"] for p in it["parts"] if p["folder"] == 3)
    data = bytearray((stash / other["file"]).read_bytes())
    data[0] ^= 1
    (stash / other["file"]).write_bytes(bytes(data))
    assert gpu_kit.main(["stash", "2", "--kit", str(dest), "--stash", str(stash)]) == 0
    assert "folders still to stash: [3]" in capsys.readouterr().out
    assert gpu_kit.main(["install", "--force", "--stash", str(stash),
                         "--target", str(tmp_path / "site")]) == 3
    assert "parts missing for folders [3]" in capsys.readouterr().out
    assert not (tmp_path / "site").exists()


def _rewrite(dest: Path, change) -> None:
    for k in (1, 2, 3):
        path = dest / str(k) / "MANIFEST.json"
        m = json.loads(path.read_text())
        change(m)
        path.write_text(json.dumps(m))


@pytest.mark.parametrize("bad", ["../x", "/tmp/x", "sub/x", "..", "", "MANIFEST.json"])
def test_part_names_stay_inside_the_stash(kit, tmp_path, capsys, bad):
    dest, _ = kit

    def change(m):
        m["items"][0]["parts"][0]["file"] = bad

    _rewrite(dest, change)
    stash = tmp_path / "stash" / "inner"
    assert gpu_kit.main(["stash", "1", "--kit", str(dest), "--stash", str(stash)]) == 2
    first = json.loads((dest / "1" / "MANIFEST.json").read_text())["items"][0]["name"]
    _one_line(capsys.readouterr().err, f"{dest / '1' / 'MANIFEST.json'}: the manifest's part "
              f"name of {first} {bad!r} is not a plain file name")
    assert not stash.exists() and not (tmp_path / "stash" / "x").exists()


def test_an_item_name_outside_the_stash_is_refused(kit, tmp_path, capsys):
    dest, _ = kit

    def change(m):
        m["items"][0]["name"] = "../../escape.whl"

    _rewrite(dest, change)
    assert gpu_kit.main(["stash", "1", "--kit", str(dest),
                         "--stash", str(tmp_path / "stash")]) == 2
    _one_line(capsys.readouterr().err, f"{dest / '1' / 'MANIFEST.json'}: the manifest's item "
              "name '../../escape.whl' is not a plain file name")


def _drop(key):
    def change(m):
        del m["items"][0][key]
    return change


def _set_part(key, value):
    def change(m):
        m["items"][0]["parts"][-1][key] = value
    return change


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m.clear() or m.update(folders=3), "the manifest lacks 'items'"),
    (_drop("parts"), "the manifest's item 0 lacks ['parts']"),
    (_set_part("size", "12"), "the manifest's size of "),
    (_set_part("folder", 9), "folder 9 is beyond the kit's 3 folders"),
    (_set_part("sha256", "xyz"), "'sha256' must be 64 hex digits"),
    (lambda m: m["items"][1]["parts"].append(m["items"][0]["parts"][0]), "the part "),
    (_set_part("offset", 1), "expected"),
    (lambda m: m["items"][0].update(kind="egg"), "kind must be 'wheel' or 'tree'"),
    (lambda m: m["items"].append(m["items"][0]), "twice"),
])
def test_a_malformed_manifest_is_one_line(kit, tmp_path, capsys, change, message):
    dest, _ = kit
    _rewrite(dest, change)
    for args in (["stash", "1", "--kit", str(dest), "--stash", str(tmp_path / "stash")],
                 ["install", "--stash", str(dest / "1"), "--target", str(tmp_path / "site")]):
        assert gpu_kit.main(args) == 2
        err = capsys.readouterr().err
        _one_line(err, f"{dest / '1' / 'MANIFEST.json'}: ")
        assert message in err, err
    assert not (tmp_path / "site").exists()


def test_a_manifest_that_is_not_json_is_one_line_without_a_traceback(kit, tmp_path):
    dest, _ = kit
    (dest / "1" / "MANIFEST.json").write_text('{"folders": 3, "items": [')
    rc, _, err = _run("stash", "1", "--kit", str(dest), "--stash", str(tmp_path / "stash"))
    assert rc == 2
    _one_line(err, f"{dest / '1' / 'MANIFEST.json'} is not valid JSON")
    (dest / "1" / "MANIFEST.json").write_text("[1, 2]")
    rc, _, err = _run("install", "--stash", str(dest / "1"), "--target", str(tmp_path / "s"))
    assert rc == 2
    _one_line(err, f"{dest / '1' / 'MANIFEST.json'}: the manifest must be a JSON object")
    rc, _, err = _run("stash", "7", "--kit", str(dest), "--stash", str(tmp_path / "stash"))
    assert rc == 2
    _one_line(err, f"no {dest / '7' / 'MANIFEST.json'}")


def test_an_existing_folder_given_as_the_target_is_not_deleted(kit, tmp_path, capsys):
    dest, _ = kit
    stash = tmp_path / "stash"
    for k in (1, 2, 3):
        assert gpu_kit.main(["stash", str(k), "--kit", str(dest), "--stash", str(stash)]) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    args = ["install", "--force", "--stash", str(stash), "--target"]
    assert gpu_kit.main([*args, str(mine)]) == 2
    _one_line(capsys.readouterr().err, f"--target {mine} is a folder gpu_kit did not make")
    assert (mine / "notes.txt").read_text() == "keep me"
    assert gpu_kit.main([*args, str(mine / "notes.txt")]) == 2
    _one_line(capsys.readouterr().err, f"--target {mine / 'notes.txt'} is a file")
    assert (mine / "notes.txt").read_text() == "keep me"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert gpu_kit.main([*args, str(empty)]) == 0  # an empty folder: used
    assert (empty / "kitbig" / "data.bin").exists()
    assert gpu_kit.main([*args, str(empty)]) == 0  # its own earlier install: replaced
    assert (empty / gpu_kit.MARK).exists()


def test_a_kit_is_never_written_over_a_foreign_folder(kit, tmp_path, capsys):
    dest, manifest = kit
    items = [{"name": it["name"], "kind": "wheel", "src": tmp_path / "src" / it["name"],
              "dist": it["dist"], "top_level": it["top_level"]} for it in manifest["items"]]
    assert gpu_kit.write_kit(items, dest, 200 * KIB, "3.12") == manifest  # an old kit: replaced
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(gpu_kit.KitError, match="holds 'notes.txt', which is no kit folder"):
        gpu_kit.write_kit(items, mine, 200 * KIB, "3.12")
    assert os.listdir(mine) == ["notes.txt"]
