"""``python -m benchmarks [--device D] [--quick] [--sizes N ...] [--threads T] [--output DIR]``.

Measures, in one run, gpuparam against its peers side by side (``config.SECTIONS``, in
order; what and at which sizes is data, in benchmarks/config.py), writes
``DIR/<device>[_quick].json`` with every figure, the goals, the machine and the run's wall
time, and prints the figures and the goals as PASS / FAIL / SKIP lines. Exits 1 when any
measurement raised (its error is recorded in the JSON and printed), else 0. MuJoCo's log
goes to DIR/MUJOCO_LOG.TXT. Flags, and how to refresh the committed results: see
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path

import torch

from benchmarks import report
from benchmarks.config import DEFAULT_OUTPUT, PACKAGES, SECTIONS, RunConfig
from benchmarks.timing import load_average, outcome


def parse(argv: list[str] | None) -> RunConfig:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    default_dev = "cuda" if torch.cuda.is_available() else "cpu"
    p.add_argument("--device", default=default_dev, help=f"cpu or cuda[:i] (default {default_dev})")
    p.add_argument("--quick", action="store_true", help="fewer sizes, steps and repeats")
    p.add_argument("--sizes", type=int, nargs="+", metavar="N", help="numbers of envs to sweep")
    p.add_argument("--threads", type=int, default=1, metavar="T",
                   help="torch intra-op threads (default 1, so CPU figures do not depend on "
                        "the core count; 0: torch's own choice)")
    p.add_argument("--output", default=DEFAULT_OUTPUT, metavar="DIR",
                   help=f"where the JSON and MuJoCo's log go (default {DEFAULT_OUTPUT}; "
                        "the committed results: benchmarks/results)")
    hidden = argparse.SUPPRESS  # for tests and debugging
    p.add_argument("--peer-sizes", type=int, nargs="+", help=hidden)
    for flag in ("--steps", "--repeats", "--memory-steps", "--recreate-repeats"):
        p.add_argument(flag, type=int, help=hidden)  # None: derived from N and --quick
    p.add_argument("--collector-methods", nargs="+", choices=("spawn", "fork", "forkserver"),
                   help=hidden)
    a = p.parse_args(argv)
    if not (a.device == "cpu" or a.device.startswith("cuda")):
        p.error(f"--device: expected cpu or cuda[:i], got {a.device!r}")
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available")
    if a.threads < 0:
        p.error(f"--threads: expected a positive int, or 0 for torch's choice, got {a.threads}")
    for name in ("sizes", "peer_sizes"):
        if any(n < 1 for n in getattr(a, name) or ()):
            p.error(f"--{name.replace('_', '-')}: sizes must be positive")
    args = sys.argv[1:] if argv is None else argv
    return RunConfig(**{**vars(a), "threads": a.threads or None,
                        "command": shlex.join(["python", "-m", "benchmarks", *args])})


def run(cfg: RunConfig) -> dict:
    """Every section, in order; returns the results dict."""
    t0 = time.perf_counter()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    res: dict = {
        "schema": 1,
        "config": {
            "device": cfg.device, "quick": cfg.quick, "sizes": list(cfg.sizes),
            "peer_sizes": list(cfg.peer_sizes), "command": cfg.command,
            "steps": cfg.steps, "repeats": cfg.repeats,
            "collector_methods": list(cfg.collector_methods),
            "torch_threads": torch.get_num_threads(),
        },
        "machine": describe(cfg.device),
    }
    for i, (key, where) in enumerate(SECTIONS.items()):
        print(f"[{i + 1}/{len(SECTIONS)}] {key} ({time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
        module, name = where.rsplit(".", 1)
        measure = getattr(importlib.import_module(f"benchmarks.{module}"), name)
        extra = (res.get("throughput") or {},) if key == "roofline" else ()
        res[key] = outcome(measure, cfg, *extra)
    res["machine"]["load_average_at_end"] = load_average()
    res["goals"] = report.evaluate(res)
    res["wall_time_s"] = time.perf_counter() - t0
    return res


def _proc(path: str, key: str) -> str | None:
    """The rest of the first line of ``path`` (``/proc/cpuinfo``, ``/proc/meminfo``) that
    starts with ``key``, or None (not Linux)."""
    try:
        with open(path) as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith(key)),
                        None)
    except OSError:
        return None


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=Path(__file__).parents[1], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def describe(device: str) -> dict:
    """The machine and software measured on: CPU model and cores, memory, GPU name, Python
    and library versions, UTC date, git commit and whether the code had changes."""
    memory = _proc("/proc/meminfo", "MemTotal:")
    # the results of earlier runs (benchmarks/results) are outputs, not changes to the code
    status = _git("status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    info: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": _proc("/proc/cpuinfo", "model name") or platform.processor()
        or platform.machine(),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "memory_bytes": int(memory.split()[0]) * 1024 if memory else None,
        "platform": platform.platform(), "python": sys.version.split()[0],
        "versions": {p: _version(p) for p in PACKAGES},
        "git": {"commit": _git("rev-parse", "HEAD"),
                "dirty": bool(status) if status is not None else None},
        "gpu_name": None, "load_average_at_start": load_average(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(
            torch.device(device) if device.startswith("cuda") else torch.device("cuda"))
        info.update(gpu_name=props.name, gpu_memory_bytes=props.total_memory,
                    cuda=torch.version.cuda)
    return info


def route_mujoco_log(out: Path) -> Path | None:
    """Send MuJoCo's log to ``out/MUJOCO_LOG.TXT`` instead of the console and the working
    directory (``mujoco.MjLogConfig``). Returns the file's path, or None without MuJoCo."""
    try:
        import mujoco
    except ImportError:
        return None
    path = (out / "MUJOCO_LOG.TXT").resolve()
    log = mujoco.MjLogConfig.get()
    log.logfile, log.logto_console, log.logto_file = str(path), False, True
    log.set()
    return path


def main(argv: list[str] | None = None) -> int:
    cfg = parse(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    mujoco_log = route_mujoco_log(out)
    res = run(cfg)
    path = out / f"{cfg.kind}{'_quick' if cfg.quick else ''}.json"
    path.write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(report.text(res))
    print(f"\nwall time {res['wall_time_s']:.1f} s; wrote {path}")
    if mujoco_log is not None and mujoco_log.exists():
        lines = mujoco_log.read_text(errors="replace").splitlines()
        print(f"MuJoCo logged {len(lines)} lines to {mujoco_log} (Gymnasium's half_cheetah.xml "
              "logs a settotalmass deprecation each time a Gymnasium peer loads it)")
    errors = report.errors(res)
    for where, msg in errors:
        print(f"ERROR  {where}: {msg}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
