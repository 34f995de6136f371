"""Weak scaling over ``torch.distributed`` ranks: W ranks x N envs vs 1 rank x N envs.

Each rank is its own process (spawned, joined by a file-store process group: gloo on CPU,
NCCL on GPUs, one GPU per rank) stepping CartPole-v1 with ``ObsNorm`` through a
``TransformedEnv`` and ``env.sync_every(10, obs_norm)`` (the sync all-reduces the
statistics between steps). A round is: barrier, ``steps`` steps, barrier; the rate is
``W * N * steps / time``. The 1-rank run is the same program in a world of one (its syncs
run the merge math, its all-reduces are over one rank). Every rank uses one torch thread
(torchrun's default), so on CPU the W ranks need W free cores.

Also reported per W: the host time of one ``ObsNorm.sync()`` inside the timed rounds
(collective waits for the other rank included) and its share of the round time, and, after
the rounds, one ``ObsNorm.sync()`` and one bare ``all_reduce`` of the same packed
statistics back to back.

Run alone: ``python -m benchmarks.distributed [--device cpu] [--num-envs N] [--steps S]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks.config import GOAL_N, RunConfig
from benchmarks.features import Skipped
from benchmarks.machine import load_average

SYNC_EVERY = 10
WORLD = 2
SYNC_CALLS = 50


class _TimedSync:
    """Wraps a sync target: host seconds spent in its ``sync`` (collective waits included)."""

    def __init__(self, target):
        self.target, self.seconds, self.calls = target, 0.0, 0

    def sync(self, group=None) -> None:
        t0 = time.perf_counter()
        self.target.sync(group)
        self.seconds += time.perf_counter() - t0
        self.calls += 1


def _worker(rank: int, world: int, cfg: dict, store: str, out: str) -> None:
    torch.set_num_threads(1)
    cuda = cfg["device"].startswith("cuda")
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{store}",
                            rank=rank, world_size=world)
    try:
        import gpuparam as gp

        device = f"cuda:{rank}" if cuda else "cpu"
        n, steps = cfg["num_envs"], cfg["steps"]
        env = gp.make("CartPole-v1", n, device=device, seed=0, env_offset=rank * n)
        norm = gp.ObsNorm((4,), num_envs=n)
        tenv = gp.TransformedEnv(env, norm)
        timed = _TimedSync(norm)
        env.sync_every(cfg["sync_every"], timed)
        g = torch.Generator().manual_seed(rank)
        actions = [torch.randint(0, 2, (n,), generator=g).to(device) for _ in range(16)]
        tenv.reset()
        for t in range(20):  # warm-up: capture, first syncs
            tenv.step(actions[t % 16])
        rounds = []
        timed.seconds, timed.calls = 0.0, 0
        for _ in range(cfg["rounds"]):
            _barrier(device)
            t0 = time.perf_counter()
            for t in range(steps):
                tenv.step(actions[t % 16])
            _barrier(device)
            rounds.append(time.perf_counter() - t0)
        sync_s = _per_call(norm.sync, device)
        pack = torch.zeros(norm.count.shape[0], 1 + 4 + 1, dtype=torch.float64, device=device)
        reduce_s = _per_call(lambda: dist.all_reduce(pack), device)
        if rank == 0:
            with open(out, "w") as f:
                json.dump({"round_s": rounds, "sync_s": sync_s, "all_reduce_s": reduce_s,
                           "in_loop_sync_s": timed.seconds / max(timed.calls, 1),
                           "in_loop_sync_share": timed.seconds / sum(rounds)}, f)
    finally:
        dist.destroy_process_group()


def _barrier(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    dist.barrier()


def _per_call(fn, device: str) -> float:
    fn()
    _barrier(device)
    t0 = time.perf_counter()
    for _ in range(SYNC_CALLS):
        fn()
    _barrier(device)
    return (time.perf_counter() - t0) / SYNC_CALLS


def run_world(world: int, cfg: dict) -> dict:
    """Spawn ``world`` ranks with ``cfg`` (device, num_envs, steps, rounds); rank 0's
    timings plus env-steps/s (median round)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank0.json")
        mp.spawn(_worker, args=(world, cfg, os.path.join(tmp, "store"), out), nprocs=world,
                 join=True)
        with open(out) as f:
            res = json.load(f)
    t = statistics.median(res["round_s"])
    return {"world_size": world, **res,
            "env_steps_per_s": world * cfg["num_envs"] * cfg["steps"] / t}


def weak_scaling(device: str, num_envs: int, steps: int, rounds: int, repeats: int,
                 sync_every: int = SYNC_EVERY) -> dict:
    """Alternate 1-rank and ``WORLD``-rank launches ``repeats`` times each; the ratio is of
    the median rates."""
    if not dist.is_available():
        raise Skipped("torch.distributed is not available")
    if device.startswith("cuda") and torch.cuda.device_count() < WORLD:
        raise Skipped(f"needs {WORLD} GPUs (one per rank), found {torch.cuda.device_count()}")
    cfg = {"device": device, "num_envs": num_envs, "steps": steps, "rounds": rounds,
           "sync_every": sync_every}
    out: dict = {"num_envs_per_rank": num_envs, "steps": steps, "rounds": rounds,
                 "sync_every": sync_every, "world_sizes": [1, WORLD],
                 "load_average_before": load_average(), "runs": {"1": [], str(WORLD): []}}
    for _ in range(repeats):
        for w in (1, WORLD):
            out["runs"][str(w)].append(run_world(w, cfg))
    out["load_average_after"] = load_average()
    for w in ("1", str(WORLD)):
        rs = out["runs"][w]
        out[f"env_steps_per_s_{w}"] = statistics.median(r["env_steps_per_s"] for r in rs)
        out[f"sync_s_{w}"] = statistics.median(r["sync_s"] for r in rs)
        out[f"all_reduce_s_{w}"] = statistics.median(r["all_reduce_s"] for r in rs)
        out[f"in_loop_sync_s_{w}"] = statistics.median(r["in_loop_sync_s"] for r in rs)
        out[f"in_loop_sync_share_{w}"] = statistics.median(r["in_loop_sync_share"] for r in rs)
    out["ratio"] = out[f"env_steps_per_s_{WORLD}"] / out["env_steps_per_s_1"]
    return out


def measure(cfg: RunConfig, bar) -> dict:
    """N per rank: 16384 (the issue's), or the largest ``--sizes`` when given."""
    n = max(cfg.sizes) if cfg.sizes and GOAL_N not in cfg.sizes else GOAL_N
    steps = cfg.steps if cfg.steps is not None else (200 if cfg.quick else 500)
    bar.set_postfix_str(f"distributed: 1 vs {WORLD} ranks x N={n}")
    res = weak_scaling(cfg.device, n, steps, rounds=3, repeats=1 if cfg.quick else 2)
    bar.update(1)
    return res


def units(cfg: RunConfig) -> int:
    return 1


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.distributed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--num-envs", type=int, default=GOAL_N, help="per rank")
    p.add_argument("--steps", type=int, default=500, help="per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2, help="launches per world size")
    p.add_argument("--sync-every", type=int, default=SYNC_EVERY)
    a = p.parse_args()
    res = weak_scaling(a.device, a.num_envs, a.steps, a.rounds, a.repeats, a.sync_every)
    print(json.dumps(res, indent=1))
    print(f"\n{WORLD} ranks x {a.num_envs}: {res[f'env_steps_per_s_{WORLD}']:.3g} env-steps/s; "
          f"1 rank: {res['env_steps_per_s_1']:.3g}; ratio {res['ratio']:.2f}x (goal >= 1.8x); "
          f"ObsNorm.sync {res[f'sync_s_{WORLD}'] * 1e6:.0f} us, all_reduce "
          f"{res[f'all_reduce_s_{WORLD}'] * 1e6:.0f} us per call at {WORLD} ranks (in the loop: "
          f"{res[f'in_loop_sync_s_{WORLD}'] * 1e6:.0f} us per sync, "
          f"{res[f'in_loop_sync_share_{WORLD}']:.0%} of the time); load "
          f"{res['load_average_before']} -> {res['load_average_after']}")


if __name__ == "__main__":
    main()
