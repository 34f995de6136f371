"""The machine and software a results file was measured on."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata

import torch

PACKAGES = (
    "gpuparam", "torch", "warp-lang", "tensordict", "numpy", "gymnasium", "torchrl", "envpool",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: other processes share the cores this run measured on."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def _git() -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def run(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                               timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    # the results of earlier runs (benchmarks/results) are outputs, not changes to the code
    status = run("status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    return {"commit": run("rev-parse", "HEAD"), "dirty": bool(status) if status is not None
            else None}


def describe(device: str) -> dict:
    """CPU model and cores, memory, GPU name, Python and library versions, UTC date, git."""
    info: dict = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_bytes": _memory_bytes(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": {p: _version(p) for p in PACKAGES},
        "git": _git(),
        "gpu_name": None,
        "load_average_at_start": load_average(),
    }
    if torch.cuda.is_available():
        dev = torch.device(device) if device.startswith("cuda") else torch.device("cuda")
        props = torch.cuda.get_device_properties(dev)
        info["gpu_name"] = props.name
        info["gpu_memory_bytes"] = props.total_memory
        info["cuda"] = torch.version.cuda
    return info
