"""Weak scaling over ``torch.distributed`` ranks: W ranks x N envs vs 1 rank x N envs.

One launch of W processes (spawned, joined by a file-store process group: gloo on CPU, NCCL
on GPUs, one GPU per rank), each stepping CartPole-v1 with ``ObsNorm`` through a
``TransformedEnv`` and ``env.sync_every(10, obs_norm)`` (the library default: one all-
gather per sync, overlapped with the next 10 steps). Rank 0 also holds a second, identical
env of N envs whose schedule syncs over a process group of rank 0 alone: a 1-rank run in
the same processes. Rounds alternate (1, W, W, 1, ...): in a 1-rank round rank 0 steps its
solo env while the other ranks wait at a barrier; in a W-rank round every rank steps. Each
round is barrier, ``steps`` steps, barrier. The ratio is the median over round pairs of ``W
* t_1 / t_W`` (paired, so load changes on the shared machine hit both), rates are ``ranks *
N * steps / median time``. Every rank uses one torch thread (torchrun's default), so on CPU
the W ranks need W free cores.

Also reported per launch: the schedule's host time per sync inside the timed rounds
(``host``: packing, launching, applying, waits included; ``wait``: of which blocked on the
collective), its share of the round time, and, after the rounds, per call: one blocking
``ObsNorm.sync()`` (pack, one all-gather, merge), one bare ``all_gather`` and one bare
``all_reduce`` of the same payload (``1 + 4 + 4 + 1`` float64 values per rank), back to
back on otherwise idle ranks.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks.config import GOAL_N, RunConfig
from benchmarks.timing import Skipped, load_average

SYNC_EVERY = 10
WORLD = 2
SYNC_CALLS = 50


def _build(gp, n: int, device: str, offset: int, group):
    env = gp.make("CartPole-v1", n, device=device, seed=0, env_offset=offset)
    norm = gp.ObsNorm((4,), num_envs=n)
    tenv = gp.TransformedEnv(env, norm)
    env.sync_every(SYNC_EVERY, norm, group=group)
    return tenv, env, norm


def _round(tenv, actions, steps: int, device: str, active: bool) -> float:
    _barrier(device)
    t0 = time.perf_counter()
    if active:
        for t in range(steps):
            tenv.step(actions[t % 16])
    _barrier(device)
    return time.perf_counter() - t0


def _sched_costs(env, rounds: list[float]) -> dict:
    (s,) = env.sync_schedules
    n = max(s.syncs, 1)
    return {"in_loop_sync_s": s.host_seconds / n, "in_loop_wait_s": s.wait_seconds / n,
            "in_loop_sync_share": s.host_seconds / sum(rounds), "syncs": s.syncs}


def _worker(rank: int, world: int, cfg: dict, store: str, out: str) -> None:
    torch.set_num_threads(1)
    cuda = cfg["device"].startswith("cuda")
    if cuda:
        torch.cuda.set_device(rank)  # NCCL binds each rank's communicator to its device
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{store}",
                            rank=rank, world_size=world)
    try:
        import gpuparam as gp

        solo_group = dist.new_group([0])  # every rank takes part in creating it
        device = f"cuda:{rank}" if cuda else "cpu"
        n, steps = cfg["num_envs"], cfg["steps"]
        tenv, env, norm = _build(gp, n, device, rank * n, None)
        solo = _build(gp, n, device, 0, solo_group) if rank == 0 else None
        g = torch.Generator().manual_seed(rank)
        actions = [torch.randint(0, 2, (n,), generator=g).to(device) for _ in range(16)]
        for te in ([tenv, solo[0]] if solo else [tenv]):
            te.reset()
            for t in range(20):  # warm-up: capture, first syncs
                te.step(actions[t % 16])
        for e in ([env, solo[1]] if solo else [env]):
            e.sync_schedules[0].reset_costs()
        t1, tw = [], []
        pair = [(t1, solo[0] if solo else None, rank == 0), (tw, tenv, True)]
        for r in range(cfg["rounds"]):  # 1, W, W, 1, ...
            for times, stepped, active in (pair if r % 2 == 0 else pair[::-1]):
                times.append(_round(stepped, actions, steps, device, active))
        sync_s = _per_call(norm.sync, device)
        pack = torch.zeros(norm.exchange_size(), dtype=torch.float64, device=device)
        everyone = pack.new_empty(world * pack.numel())
        gather_s = _per_call(lambda: dist.all_gather_into_tensor(everyone, pack), device)
        reduce_s = _per_call(lambda: dist.all_reduce(pack), device)
        if rank == 0:
            with open(out, "w") as f:
                json.dump({"round_s_1": t1, f"round_s_{WORLD}": tw, "sync_s": sync_s,
                           "all_gather_s": gather_s, "all_reduce_s": reduce_s,
                           "costs_1": _sched_costs(solo[1], t1),
                           f"costs_{WORLD}": _sched_costs(env, tw)}, f)
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


def run_launch(cfg: dict) -> dict:
    """Spawn ``WORLD`` ranks with ``cfg`` (device, num_envs, steps, rounds); rank 0's
    timings."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rank0.json")
        mp.spawn(_worker, args=(WORLD, cfg, os.path.join(tmp, "store"), out), nprocs=WORLD,
                 join=True)
        with open(out) as f:
            return json.load(f)


def measure(cfg: RunConfig) -> dict:
    """Launches (1, 2 in a full run) of rounds (4, 10) of interleaved 1-rank / ``WORLD``-rank
    rounds each, N per rank: 16384 (the issue's), or the largest ``--sizes`` when given; the
    ratio is the median over all round pairs of ``WORLD * t_1 / t_W``."""
    if not dist.is_available():
        raise Skipped("torch.distributed is not available")
    if cfg.is_cuda and torch.cuda.device_count() < WORLD:
        raise Skipped(f"needs {WORLD} GPUs (one per rank), found {torch.cuda.device_count()}")
    n = max(cfg.sizes) if GOAL_N["cpu"] not in cfg.sizes else GOAL_N["cpu"]
    steps = cfg.steps if cfg.steps is not None else (200 if cfg.quick else 500)
    rounds = 4 if cfg.quick else 10
    w = str(WORLD)
    out: dict = {"num_envs_per_rank": n, "steps": steps, "rounds": rounds,
                 "sync_every": SYNC_EVERY, "overlap": True, "world_sizes": [1, WORLD],
                 "load_average_before": load_average()}
    launch = {"device": cfg.device, "num_envs": n, "steps": steps, "rounds": rounds}
    ls = out["launches"] = [run_launch(launch) for _ in range(1 if cfg.quick else 2)]
    out["load_average_after"] = load_average()
    t1 = [t for r in ls for t in r["round_s_1"]]
    tw = [t for r in ls for t in r[f"round_s_{w}"]]
    out["round_ratios"] = [WORLD * a / b for a, b in zip(t1, tw, strict=True)]
    out["ratio"] = statistics.median(out["round_ratios"])
    out["env_steps_per_s_1"] = n * steps / statistics.median(t1)
    out[f"env_steps_per_s_{w}"] = WORLD * n * steps / statistics.median(tw)
    for k in ("sync_s", "all_gather_s", "all_reduce_s"):
        out[f"{k}_{w}"] = statistics.median(r[k] for r in ls)
    for ranks in ("1", w):
        for k in ("in_loop_sync_s", "in_loop_wait_s", "in_loop_sync_share"):
            out[f"{k}_{ranks}"] = statistics.median(r[f"costs_{ranks}"][k] for r in ls)
    return out
