"""The carry kit for an air-gapped GPU machine: wheels packed here, installed there.

The GPU machine this project targets (Python 3.12, torch preinstalled, no package index,
at most 64 MiB copied per command, its disk lost when released) lacks warp-lang, MuJoCo
(Warp), tensordict, Gymnasium, rsl_rl and pytest. Three commands move them over:

- ``pack`` (here, with network; ``benchmarks/gpu/gpu_wheels.sh``): downloads the cp312
  manylinux x86_64 wheels of :data:`PINS` into a cache, turns warp-lang's 149 MB wheel into an xz
  tarball of its files (the wheel's deflate leaves its two shared libraries at 100+ MB;
  its examples and tests are dropped), and cuts everything into folders ``.whl/1``,
  ``.whl/2``, ... each of which, with the working tree, fits one command's 64 MiB; a file
  too big for the room left in a folder is split into parts, named by their index
  (``NAME.part-00``, ``NAME.part-01``, ...). Every folder holds the whole ``MANIFEST.json``
  (SHA-256 of every item and every part, and the folder of each part).
- ``stash K`` (there, one command per folder, ``.whl/K`` copied along): copies folder K's
  parts to a stash directory outside the checkout, checks their SHA-256, and says which folders
  are still missing (every stashed part's SHA-256 checked again).
- ``install`` (there, after the last stash): joins the parts, checks every item's SHA-256,
  and installs with ``pip install --no-index --no-deps --target`` only the wheels whose
  distribution is not installed and whose top-level modules are not importable, so a
  preinstalled numpy or torch is never replaced. ``--force`` (the CPU dry run) installs
  every wheel this Python accepts instead, skipping those sharing a top-level module with
  a wheel it cannot take (``mujoco`` with the cp312 ``mujoco-core``). The target is a new
  folder, an empty one, or one an earlier ``install`` made (it holds :data:`MARK`); any
  other folder is refused, never emptied.

Standard library only: it runs before anything is installed. A manifest is checked whole
before anything is written (file names plain, inside the stash; parts contiguous; digests
hexadecimal); a bad one, or a bad argument, ends with one ``gpu_kit:`` line and exit status
2. Exit status 3 means a part is missing (a machine released between commands loses the
stash: stash every folder again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
CALL_BYTES = 64 * MIB  # what one command receives: the working tree plus one folder
MAX_FILE = 60 * MIB  # no file of the kit is bigger
MARGIN = 3 * MIB  # room for the working tree to grow before the run
STASH = os.environ.get("GPU_KIT_STASH", "/tmp/gpuparam-kit/stash")
SITE = os.environ.get("GPU_KIT_SITE", "/tmp/gpuparam-kit/site")
MARK = ".gpu_kit_site"  # in a folder ``install`` made: the only kind it may replace

# The versions this repository's development environment runs. What the GPU check imports,
# and what those import at run time; not the declared closure: rsl-rl-lib's tensorboard
# (TensorBoard logging, log_dir=None here), onnx/onnxscript (policy export) and mujoco's
# studio viewer, glfw and PyOpenGL (rendering) are never imported by the check, and torch
# with its own dependencies is on the machine already.
PINS = (
    "warp-lang==1.19.0",
    "mujoco==4.0.1", "mujoco-core==4.0.1", "mujoco-warp==4.0.0", "absl-py==2.5.1",
    "etils==1.15.0",
    "tensordict==0.14.3", "pyvers==0.2.3", "cloudpickle==3.1.3", "packaging==26.4",
    "importlib-metadata==10.2.0", "lazy-importer==0.1.0", "zipp==4.1.2", "orjson==3.13.0",
    "numpy==2.4.6", "typing-extensions==4.16.0",
    "gymnasium==1.4.0", "farama-notifications==0.0.6",
    "rsl-rl-lib==5.5.1", "gitpython==3.2.1", "gitdb==4.0.12", "smmap==5.0.3",
    "pytest==9.2.0", "pluggy==1.7.0", "iniconfig==2.3.1", "pygments==2.21.0",
    "pytest-timeout==2.4.0",
    "torchrl==0.14.1", "hoptorch==0.1.4",  # tests/integrations/test_torchrl.py's GPU test
    # the go1_train section draws its curve
    "matplotlib==3.11.2", "contourpy==1.3.3", "cycler==0.12.1", "fonttools==4.68.0",
    "kiwisolver==1.5.1", "pillow==13.0.0", "pyparsing==3.3.3", "python-dateutil==4.0.0",
    "tzdata==2026.6",
)
# Distributions the GPU image has already (its package list, read 2026-11-17):
# ``install`` never replaces them, so the kit leaves them out (``pack --all`` keeps them).
# Dropping these 43 MB saves a call-sized folder.
ON_IMAGE = frozenset({
    "numpy", "matplotlib", "contourpy", "cycler", "fonttools", "kiwisolver", "pillow",
    "pyparsing", "python_dateutil", "pytest", "pluggy", "iniconfig", "pygments",
    "pytest_timeout", "packaging", "typing_extensions", "zipp", "cloudpickle", "absl_py",
    "etils",
})
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")
UNPACKED = {"warp_lang": ("warp/examples/", "warp/tests/")}  # wheels shipped as .tar.xz


def sha256(path: Path, offset: int = 0, size: int | None = None) -> str:
    """SHA-256 of ``path``'s bytes from ``offset``, ``size`` of them (all by default)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        left = size if size is not None else float("inf")
        while left > 0:
            block = f.read(int(min(MIB, left)))
            if not block:
                break
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def _say(msg: str) -> None:
    print(f"gpu_kit: {msg}", flush=True)


class KitError(Exception):
    """A bad manifest, argument or folder: ``main`` prints it as one ``gpu_kit:`` line."""


# ---------------------------------------------------------------------------------- pack


def _download(cache: Path, python_version: str) -> list[Path]:
    dl = cache / f"dl-cp{python_version.replace('.', '')}"
    dl.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", python_version, "--implementation", "cp", "-d", str(dl)]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + list(PINS), check=True)
    wanted = {_canon(p.split("==")[0]): p.split("==")[1] for p in PINS}
    wheels = []
    for w in sorted(dl.glob("*.whl")):
        name, version = _wheel_name(w.name)
        if wanted.get(name) == version:
            wheels.append(w)
    missing = set(wanted) - {_wheel_name(w.name)[0] for w in wheels}
    if missing:
        raise KitError(f"no wheel downloaded for {sorted(missing)}")
    return wheels


def _canon(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _wheel_name(filename: str) -> tuple[str, str]:
    parts = filename[:-4].split("-")
    return _canon(parts[0]), parts[1]


def _unpacked(wheel: Path, cache: Path) -> Path:
    """``wheel``'s files (less the dropped folders) as an xz tarball, cached by its hash."""
    digest = sha256(wheel)[:16]
    out = cache / f"{wheel.name[:-4]}.{digest}.tar.xz"
    if out.exists():
        return out
    drop = UNPACKED[_wheel_name(wheel.name)[0]]
    _say(f"repacking {wheel.name} as {out.name} (xz; a few minutes once, then cached)")
    tmp = out.with_suffix(".tmp")
    xz = shutil.which("xz")
    with open(tmp, "wb") as raw:
        proc = (subprocess.Popen([xz, "-T0", "-6", "-c"], stdin=subprocess.PIPE, stdout=raw)
                if xz else None)
        sink = proc.stdin if proc else lzma.open(raw, "wb", preset=6)
        with zipfile.ZipFile(wheel) as z, tarfile.open(fileobj=sink, mode="w|") as tar:
            for info in z.infolist():
                if info.is_dir() or info.filename.startswith(drop):
                    continue
                ti = tarfile.TarInfo(info.filename)
                ti.size = info.file_size
                ti.mode = 0o755 if info.filename.endswith(".so") else 0o644
                with z.open(info) as f:
                    tar.addfile(ti, f)
        sink.close()
        if proc and proc.wait() != 0:
            raise KitError("xz failed")
    tmp.rename(out)
    return out


def _tree_bytes() -> int:
    """Bytes of the working tree a command receives (tracked and untracked, not ignored)."""
    r = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                       capture_output=True, check=True)
    files = [ROOT / f for f in r.stdout.decode().split("\0") if f]
    return sum(f.stat().st_size for f in files if f.is_file())


def pack(dest: Path, cache: Path, python_version: str, call_bytes: int,
         keep_all: bool = False) -> dict:
    """Download, repack and cut the kit into ``dest/1``, ``dest/2``, ...: its manifest."""
    _check_dest(dest)
    wheels = _download(cache, python_version)
    if not keep_all:
        wheels = [w for w in wheels if _wheel_name(w.name)[0] not in ON_IMAGE]
    items = []
    for w in wheels:
        name = _wheel_name(w.name)[0]
        if name in UNPACKED:
            tar = _unpacked(w, cache)
            with zipfile.ZipFile(w) as z:
                top = sorted({n.split("/")[0] for n in z.namelist()
                              if not n.split("/")[0].endswith((".dist-info", ".data"))})
            items.append({"name": f"{w.name[:-4]}.tar.xz", "kind": "tree", "src": tar,
                          "dist": name, "top_level": top})
        else:
            items.append({"name": w.name, "kind": "wheel", "src": w, "dist": name,
                          "top_level": _top_level(w)})
    tree = _tree_bytes()
    room = min(call_bytes - tree - MARGIN, MAX_FILE)
    if room < 8 * MIB:
        raise KitError(f"the working tree ({tree / MIB:.1f} MiB) leaves no room")
    manifest = write_kit(items, dest, room, python_version)
    for k in range(1, manifest["folders"] + 1):
        size = sum(f.stat().st_size for f in (dest / str(k)).iterdir())
        biggest = max(f.stat().st_size for f in (dest / str(k)).iterdir())
        _say(f"{dest.name}/{k}: {size / MIB:.1f} MiB (+ working tree {tree / MIB:.1f} MiB = "
             f"{(size + tree) / MIB:.1f} of {call_bytes / MIB:.0f} MiB), largest file "
             f"{biggest / MIB:.1f} MiB")
    return manifest


def _check_dest(dest: Path) -> None:
    """``dest`` is new, empty, or an earlier kit (only numbered folders with a manifest)."""
    if not dest.exists():
        return
    if not dest.is_dir():
        raise KitError(f"--dest {dest} is a file, not a folder")
    for e in dest.iterdir():
        if not (e.is_dir() and e.name.isdigit() and (e / "MANIFEST.json").is_file()):
            raise KitError(f"--dest {dest} holds {e.name!r}, which is no kit folder: name a "
                           "new folder (nothing was deleted)")


def write_kit(items: list[dict], dest: Path, room: int, python_version: str) -> dict:
    """Cut ``items`` (dicts with ``name``, ``kind``, ``src``: a file, ``dist``,
    ``top_level``) into folders ``dest/1``, ``dest/2``, ... of at most ``room`` bytes each,
    largest first, splitting an item where a folder is full (as few folders as the total
    allows); every folder gets the whole ``MANIFEST.json``, which is returned. A part's
    name carries its index within its item, so parts never share a name whatever their
    offsets. ``dest`` is replaced only if it is an earlier kit."""
    _check_dest(dest)
    if room < 1:
        raise KitError(f"room per folder must be positive, got {room}")
    items = [dict(it) for it in items]
    for it in items:
        _plain(it["name"], "item name")
        it["size"] = Path(it["src"]).stat().st_size
        if it["size"] == 0:
            raise KitError(f"{it['name']} is empty")
        it["sha256"] = sha256(Path(it["src"]))
        it["parts"] = []
    items.sort(key=lambda it: -it["size"])
    folders: list[list[tuple[dict, str, int, int]]] = [[]]
    free = room
    for it in items:
        offset, index = 0, 0
        while offset < it["size"]:
            if free == 0:
                folders.append([])
                free = room
            n = min(free, it["size"] - offset)
            whole = offset == 0 and n == it["size"]
            fname = it["name"] if whole else f"{it['name']}.part-{index:02d}"
            folders[-1].append((it, fname, offset, n))
            offset, index, free = offset + n, index + 1, free - n
    for k, pieces in enumerate(folders, 1):
        for it, fname, offset, n in pieces:
            it["parts"].append({"file": fname, "folder": k, "offset": offset, "size": n,
                                "sha256": sha256(Path(it["src"]), offset, n)})
    manifest = {
        "python_version": python_version,
        "platforms": list(PLATFORMS),
        "folders": len(folders),
        "items": [{k: v for k, v in it.items() if k != "src"} for it in
                  sorted(items, key=lambda it: it["name"])],
    }
    check_manifest(manifest)  # before anything is written
    if dest.exists():
        shutil.rmtree(dest)
    for k, pieces in enumerate(folders, 1):
        (dest / str(k)).mkdir(parents=True)
        for it, fname, offset, n in pieces:
            with open(it["src"], "rb") as f, open(dest / str(k) / fname, "wb") as g:
                f.seek(offset)
                _copy(f, g, n)
    for k in range(1, len(folders) + 1):
        (dest / str(k) / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _copy(f, g, n: int) -> None:
    while n:
        block = f.read(min(n, 4 * MIB))
        g.write(block)
        n -= len(block)


def _top_level(wheel: Path) -> list[str]:
    """Top-level importable names a wheel installs (its root entries, not its metadata)."""
    top = set()
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            parts = n.split("/")
            if parts[0].endswith(".dist-info"):
                continue
            if parts[0].endswith(".data"):  # purelib/platlib land at the root
                if len(parts) < 4 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            if len(parts) > 1:
                top.add(parts[0])
            elif parts[0].endswith((".py", ".so")):  # a module file at the root
                top.add(parts[0].split(".")[0])
    return sorted(top)


# ------------------------------------------------------------------------- stash, install


_HEX64 = re.compile(r"[0-9a-f]{64}")
_RESERVED = ("MANIFEST.json", "items", MARK)


def _plain(name, what: str) -> str:
    """``name`` as a plain file name (no folder, not ``..``): it stays inside the stash."""
    if (not isinstance(name, str) or not name or name in (".", "..") or name in _RESERVED
            or any(c in name for c in "/\\\0") or name != name.strip()):
        raise KitError(f"the manifest's {what} {name!r} is not a plain file name")
    return name


def _int(value, what: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise KitError(f"the manifest's {what} must be an integer >= {low}, got {value!r}")
    return value


def check_manifest(m) -> dict:
    """``m`` if it is a whole kit manifest: plain, unique file names; parts that tile each
    item from offset 0 to its size; folders in range; SHA-256 digests as 64 hex digits.
    Raises :class:`KitError` naming the first thing wrong."""
    if not isinstance(m, dict):
        raise KitError(f"the manifest must be a JSON object, got {type(m).__name__}")
    for key in ("folders", "items"):
        if key not in m:
            raise KitError(f"the manifest lacks {key!r}")
    folders = _int(m["folders"], "'folders'", 1)
    if not isinstance(m["items"], list) or not m["items"]:
        raise KitError("the manifest's 'items' must be a non-empty list")
    names: set[str] = set()  # items' names (joined under items/)
    files: set[str] = set()  # parts' names (in the stash: a whole item's part is its name)
    for i, it in enumerate(m["items"]):
        if not isinstance(it, dict):
            raise KitError(f"the manifest's item {i} must be an object")
        missing = [k for k in ("name", "kind", "dist", "top_level", "size", "sha256", "parts")
                   if k not in it]
        if missing:
            raise KitError(f"the manifest's item {i} lacks {missing}")
        name = _plain(it["name"], "item name")
        if it["kind"] not in ("wheel", "tree"):
            raise KitError(f"{name}: kind must be 'wheel' or 'tree', got {it['kind']!r}")
        if it["kind"] == "wheel" and not (name.endswith(".whl") and name.count("-") >= 4):
            raise KitError(f"{name}: a wheel's name must be NAME-VERSION-PY-ABI-PLATFORM.whl")
        if not isinstance(it["dist"], str) or not isinstance(it["top_level"], list) \
                or not all(isinstance(t, str) for t in it["top_level"]):
            raise KitError(f"{name}: 'dist' must be a string and 'top_level' a list of strings")
        size = _int(it["size"], f"size of {name}", 1)
        if not isinstance(it["sha256"], str) or not _HEX64.fullmatch(it["sha256"]):
            raise KitError(f"{name}: 'sha256' must be 64 hex digits")
        if not isinstance(it["parts"], list) or not it["parts"]:
            raise KitError(f"{name}: 'parts' must be a non-empty list")
        if name in names:
            raise KitError(f"the manifest names {name!r} twice")
        names.add(name)
        offset = 0
        for p in it["parts"]:
            if not isinstance(p, dict) or any(k not in p for k in
                                              ("file", "folder", "offset", "size", "sha256")):
                raise KitError(f"{name}: each part needs file, folder, offset, size, sha256")
            f = _plain(p["file"], f"part name of {name}")
            if f in files:
                raise KitError(f"the manifest names the part {f!r} twice (parts' names must "
                               "be unique)")
            files.add(f)
            k = _int(p["folder"], f"folder of {f}", 1)
            if k > folders:
                raise KitError(f"{f}: folder {k} is beyond the kit's {folders} folders")
            if _int(p["offset"], f"offset of {f}") != offset:
                raise KitError(f"{f}: starts at {p['offset']}, expected {offset} "
                               "(parts must follow each other)")
            offset += _int(p["size"], f"size of {f}", 1)
            if not isinstance(p["sha256"], str) or not _HEX64.fullmatch(p["sha256"]):
                raise KitError(f"{f}: 'sha256' must be 64 hex digits")
        if offset != size:
            raise KitError(f"{name}: its parts add up to {offset} bytes, not its size {size}")
    return m


def _manifest(where: Path) -> dict:
    path = where / "MANIFEST.json"
    if not path.is_file():
        raise KitError(f"no {path}")
    try:
        m = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KitError(f"{path} is not valid JSON ({e})") from None
    try:
        return check_manifest(m)
    except KitError as e:
        raise KitError(f"{path}: {e}") from None


def _missing(manifest: dict, stash: Path) -> dict[int, list[str]]:
    """``{folder: [part names]}`` of the parts the stash lacks or holds damaged (size or
    SHA-256 not the manifest's)."""
    out: dict[int, list[str]] = {}
    for it in manifest["items"]:
        for p in it["parts"]:
            f = stash / p["file"]
            if not (f.is_file() and f.stat().st_size == p["size"]
                    and sha256(f) == p["sha256"]):
                out.setdefault(p["folder"], []).append(p["file"])
    return out


def _empty_stash(where: Path, old: dict) -> None:
    """Remove another kit's files (the ones its manifest names) from the stash."""
    for it in old["items"]:
        (where / "items" / it["name"]).unlink(missing_ok=True)
        for p in it["parts"]:
            (where / p["file"]).unlink(missing_ok=True)
    (where / "MANIFEST.json").unlink()


def stash(kit: Path, k: int, where: Path) -> int:
    """Copy folder ``k`` of ``kit``'s parts into ``where`` and check their SHA-256; 0 when
    every part of the folder is stashed whole."""
    src = kit / str(k)
    manifest = _manifest(src)
    if not 1 <= k <= manifest["folders"]:
        raise KitError(f"folder {k} is not in the kit (folders 1 to {manifest['folders']})")
    if where.exists() and not where.is_dir():
        raise KitError(f"--stash {where} is a file, not a folder")
    where.mkdir(parents=True, exist_ok=True)
    old = where / "MANIFEST.json"
    if old.exists():
        previous = _manifest(where)
        if previous != manifest:
            _say(f"the stash {where} holds another kit's parts: removed")
            _empty_stash(where, previous)
    shutil.copy(src / "MANIFEST.json", where / "MANIFEST.json")
    copied = 0
    for it in manifest["items"]:
        for p in it["parts"]:
            if p["folder"] != k:
                continue
            if not (src / p["file"]).is_file():
                raise KitError(f"folder {k} lacks its part {p['file']}: was all of it carried?")
            shutil.copy(src / p["file"], where / p["file"])
            if sha256(where / p["file"]) != p["sha256"]:
                (where / p["file"]).unlink()
                raise KitError(f"{p['file']} of folder {k}: SHA-256 mismatch (not stashed)")
            copied += p["size"]
    missing = _missing(manifest, where)
    _say(f"folder {k}: {copied / MIB:.1f} MiB stashed in {where}, SHA-256 checked; "
         + (f"folders still to stash: {sorted(missing)}" if missing else "all folders stashed"))
    return 0


def _tags_ok(filename: str) -> bool:
    """Whether this Python can install the wheel (its file name's tags; linux x86-64)."""
    py, abi, plat = (t.split(".") for t in filename[:-4].split("-")[-3:])
    minor = sys.version_info[1]
    cur = f"cp3{minor}"
    ok_py = any(p == "py3" or p == cur or (p.startswith("cp3") and "abi3" in abi
                                           and int(p[3:]) <= minor) for p in py)
    ok_abi = "none" in abi or cur in abi or "abi3" in abi
    ok_plat = any(p == "any" or p.endswith("x86_64") for p in plat)
    return ok_py and ok_abi and ok_plat


def _present(items: list[dict]) -> dict[str, bool]:
    """``{item name: installed already}``, judged by a Python without the kit's site on its
    path: the distribution's metadata is found, or every top-level module is importable."""
    probe = ("import importlib.metadata as m, importlib.util as u, json, sys\n"
             "out = {}\n"
             "for name, dist, tops in json.load(sys.stdin):\n"
             "    try:\n"
             "        m.version(dist); out[name] = True; continue\n"
             "    except m.PackageNotFoundError:\n"
             "        pass\n"
             "    out[name] = bool(tops) and all(u.find_spec(t) is not None for t in tops)\n"
             "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    data = json.dumps([[it["name"], it["dist"], it["top_level"]] for it in items])
    r = subprocess.run([sys.executable, "-c", probe], input=data, capture_output=True,
                       text=True, env=env, check=True, cwd=tempfile.gettempdir())
    return json.loads(r.stdout)


def _check_target(target: Path) -> None:
    """``target`` is new, an empty folder, or one an earlier ``install`` made."""
    if not target.exists():
        return
    if not target.is_dir():
        raise KitError(f"--target {target} is a file, not a folder")
    if any(target.iterdir()) and not (target / MARK).is_file():
        raise KitError(f"--target {target} is a folder gpu_kit did not make: name a new or "
                       "empty folder (nothing was deleted)")


def install(where: Path, target: Path, force: bool) -> int:
    """Join the stash's parts, check every item's SHA-256 and install into ``target``: 0
    when installed, 3 when parts are missing."""
    _check_target(target)
    manifest = _manifest(where)
    missing = _missing(manifest, where)
    if missing:
        _say(f"parts missing for folders {sorted(missing)}: run `stash K` for each "
             "(a released machine loses the stash)")
        return 3
    items = manifest["items"]
    built = where / "items"
    built.mkdir(exist_ok=True)
    paths: dict[str, Path] = {}
    for it in items:
        if len(it["parts"]) == 1:  # a whole file: used where it lies
            out = where / it["parts"][0]["file"]
        else:
            out = built / it["name"]
            with open(out, "wb") as g:
                for p in it["parts"]:  # in order of offset (check_manifest)
                    with open(where / p["file"], "rb") as f:
                        shutil.copyfileobj(f, g)
        if sha256(out) != it["sha256"]:
            raise KitError(f"{it['name']}: SHA-256 mismatch after joining its parts")
        paths[it["name"]] = out
    _say(f"{len(items)} items joined, SHA-256 checked")
    chosen, notes = [], []
    if force:
        bad_tops = {t for it in items if it["kind"] == "wheel" and not _tags_ok(it["name"])
                    for t in it["top_level"]}
        for it in items:
            if it["kind"] == "wheel" and not _tags_ok(it["name"]):
                notes.append(f"{it['name']}: not for Python {sys.version.split()[0]}, skipped")
            elif set(it["top_level"]) & bad_tops:
                notes.append(f"{it['name']}: shares {sorted(set(it['top_level']) & bad_tops)} "
                             "with a wheel this Python cannot take, skipped")
            else:
                chosen.append(it)
    else:
        present = _present(items)
        for it in items:
            if present[it["name"]]:
                notes.append(f"{it['dist']}: already installed, kept")
            else:
                chosen.append(it)
    for n in notes:
        _say(n)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / MARK).write_text("made by benchmarks/gpu/gpu_kit.py install: replaced by the next\n")
    for it in chosen:
        if it["kind"] == "tree":
            _untar_xz(paths[it["name"]], target)
    wheels = [str(paths[it["name"]]) for it in chosen if it["kind"] == "wheel"]
    if wheels:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
               "--no-compile", "--no-cache-dir", "--disable-pip-version-check",
               "--root-user-action=ignore",
               "--target", str(target), *wheels]
        has_pip = subprocess.run([sys.executable, "-m", "pip", "--version"],
                                 capture_output=True).returncode == 0
        if has_pip:
            subprocess.run(cmd, check=True)
        else:  # a wheel is a zip of the files pip would place: unzip it as pip would
            _say("no pip: unzipping the wheels")
            for w in wheels:
                _unzip_wheel(Path(w), target)
    _say(f"installed {len(chosen)} of {len(items)} into {target}: "
         f"export PYTHONPATH={target}:$PYTHONPATH")
    return 0


def _untar_xz(path: Path, target: Path) -> None:
    """Unpack an xz tarball into ``target`` (xz's threaded decoder when it is there)."""
    xz = shutil.which("xz")
    proc = subprocess.Popen([xz, "-dc", "-T0", str(path)], stdout=subprocess.PIPE) if xz else None
    src = proc.stdout if proc else lzma.open(path)
    with src, tarfile.open(fileobj=src, mode="r|") as tar:
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(target, **kw)
    if proc and proc.wait() != 0:
        raise KitError(f"xz could not unpack {path.name}")


def _unzip_wheel(wheel: Path, target: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            dest = target.joinpath(*parts)
            if info.is_dir():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as f, open(dest, "wb") as g:
                shutil.copyfileobj(f, g)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="download and split (here)")
    a.add_argument("--dest", default=str(ROOT / ".whl"))
    a.add_argument("--cache", default=os.path.expanduser("~/.cache/gpuparam/gpu_kit"))
    a.add_argument("--python-version", default="3.12")
    a.add_argument("--call-mib", type=int, default=CALL_BYTES // MIB)
    a.add_argument("--all", action="store_true",
                   help="keep the distributions the GPU image has (ON_IMAGE) in the kit")
    s = sub.add_parser("stash", help="copy folder K's parts to the stash (there)")
    s.add_argument("k", type=int)
    s.add_argument("--kit", default=str(ROOT / ".whl"))
    s.add_argument("--stash", default=STASH)
    i = sub.add_parser("install", help="join, check and install (there)")
    i.add_argument("--stash", default=STASH)
    i.add_argument("--target", default=SITE)
    i.add_argument("--force", action="store_true",
                   help="install every wheel this Python takes (the CPU dry run)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "pack":
            pack(Path(args.dest), Path(args.cache), args.python_version, args.call_mib * MIB,
                 args.all)
            return 0
        if args.cmd == "stash":
            return stash(Path(args.kit), args.k, Path(args.stash))
        return install(Path(args.stash), Path(args.target), args.force)
    except (KitError, OSError) as e:
        print(f"gpu_kit: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
