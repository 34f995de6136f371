"""``python -m benchmarks [--device cpu|cuda] [--quick] [--sizes N ...] [--output DIR]``.

Measures, in one run: throughput vs N (gpuparam and peers), parameter-update latency,
overheads of randomization / normalization / hooks, the time of each stage of the step
(CPU), host time per captured step, adapter overheads, training loops, memory, weak scaling
over torch.distributed ranks (1 vs 2 ranks, ObsNorm synced every 10 steps), (CUDA) the
roofline, and the MuJoCo Warp robots (benchmarks/robots.py). Writes
``DIR/<device>[_quick].json`` with every figure and the machine, PNG plots next to it, and
prints a summary with the goals of the issues as PASS / FAIL / SKIP lines. Exits 1 when
any measurement raised (its error is recorded in the JSON and printed), else 0.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import torch
import warp as wp

wp.config.quiet = True

from tqdm import tqdm  # noqa: E402 - after Warp is silenced

from benchmarks import (  # noqa: E402
    adapters,
    budgets,
    distributed,
    host_time,
    latency,
    machine,
    memory,
    overhead,
    plots,
    report,
    robots,
    roofline,
    stages,
    throughput,
    training,
)
from benchmarks.config import RunConfig  # noqa: E402
from benchmarks.features import attempt  # noqa: E402
from benchmarks.goals import evaluate  # noqa: E402


def parse(argv: list[str] | None) -> RunConfig:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    default_dev = "cuda" if torch.cuda.is_available() else "cpu"
    p.add_argument("--device", default=default_dev, help=f"cpu or cuda[:i] (default {default_dev})")
    p.add_argument("--quick", action="store_true", help="fewer sizes/steps (~2 min on 2 cores)")
    p.add_argument("--sizes", type=int, nargs="+", metavar="N", help="numbers of envs to sweep")
    p.add_argument("--threads", type=int, metavar="T",
                   help="torch intra-op threads (default: torch's own choice)")
    p.add_argument("--output", default="benchmarks/results", metavar="DIR",
                   help="where the JSON and PNGs go (default benchmarks/results)")
    hidden = argparse.SUPPRESS  # for tests and debugging
    p.add_argument("--peer-sizes", type=int, nargs="+", help=hidden)
    p.add_argument("--steps", type=int, help=hidden)
    p.add_argument("--repeats", type=int, help=hidden)
    p.add_argument("--memory-steps", type=int, help=hidden)
    p.add_argument("--recreate-repeats", type=int, help=hidden)
    p.add_argument("--collector-methods", nargs="+", choices=("spawn", "fork", "forkserver"),
                   help=hidden)
    a = p.parse_args(argv)
    if not (a.device == "cpu" or a.device.startswith("cuda")):
        p.error(f"--device: expected cpu or cuda[:i], got {a.device!r}")
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available")
    if a.threads is not None and a.threads < 1:
        p.error("--threads: expected a positive int")
    for name in ("sizes", "peer_sizes"):
        if any(n < 1 for n in getattr(a, name) or ()):
            p.error(f"--{name.replace('_', '-')}: sizes must be positive")
    args = sys.argv[1:] if argv is None else argv
    return RunConfig(
        device=a.device, quick=a.quick, sizes=tuple(a.sizes or ()),
        peer_sizes=tuple(a.peer_sizes or ()), steps=a.steps, repeats=a.repeats,
        output=a.output, command=shlex.join(["python", "-m", "benchmarks", *args]),
        mem_steps=a.memory_steps, recreate_repeats=a.recreate_repeats, threads=a.threads,
        **({"collector_methods": tuple(a.collector_methods)} if a.collector_methods else {}),
    )


def run(cfg: RunConfig) -> dict:
    """Every measurement, in order, under one progress bar; returns the results dict."""
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
        "machine": machine.describe(cfg.device),
    }
    modules = (budgets, throughput, latency, overhead, stages, host_time, adapters, training,
               memory, distributed, roofline, robots)
    total = sum(m.units(cfg) for m in modules) + 1  # + the paired throughput ratio
    with tqdm(total=total, desc="benchmarks", unit="part", file=sys.stderr,
              dynamic_ncols=True) as bar:
        steps = (
            ("budgets", lambda: budgets.measure(cfg, bar)),
            ("throughput", lambda: throughput.measure(cfg, bar)),
            ("throughput_paired", lambda: throughput.measure_paired(cfg, bar)),
            ("latency", lambda: latency.measure(cfg, bar)),
            ("overhead", lambda: overhead.measure(cfg, bar)),
            ("stages", lambda: stages.measure(cfg, bar)),
            ("host_time", lambda: host_time.measure(cfg, bar)),
            ("adapters", lambda: adapters.measure(cfg, bar)),
            ("training", lambda: training.measure(cfg, bar)),
            ("memory", lambda: memory.measure(cfg, bar)),
            ("distributed", lambda: distributed.measure(cfg, bar)),
            ("roofline", lambda: roofline.measure(cfg, res.get("throughput", {}), bar)),
            ("robots", lambda: robots.measure(cfg, bar)),
        )
        for key, fn in steps:
            val, failed = attempt(fn)
            res[key] = failed or val
    res["machine"]["load_average_at_end"] = machine.load_average()
    res["goals"] = evaluate(res)
    res["wall_time_s"] = time.perf_counter() - t0
    return res


def main(argv: list[str] | None = None) -> int:
    cfg = parse(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    res = run(cfg)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    stem = cfg.device.split(":")[0] + ("_quick" if cfg.quick else "")
    res["plots"] = plots.write_all(res, out, stem)
    path = out / f"{stem}.json"
    path.write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(report.text(res))
    print(f"\nwall time {res['wall_time_s']:.1f} s; wrote {path} and "
          f"{', '.join(res['plots']) or 'no plots'} in {out}")
    errors = report.errors(res)
    for where, msg in errors:
        print(f"ERROR  {where}: {msg}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
