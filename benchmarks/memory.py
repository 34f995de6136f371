"""Memory: device bytes per env (counted from the env's tensors) and steady-state growth.

Bytes per env are counted by ``env.device_bytes()``: the distinct memory ranges of every
torch tensor and Warp array the env holds (parameter tables, state, output buffers,
randomization and transform buffers), views and Warp aliases of torch memory counted once.
Steady state: RSS (CPU, ``/proc/self/statm``) or ``torch.cuda.memory_allocated`` (CUDA) sampled
while stepping the fullest configuration available; growth is the last sample minus the sample
taken after the first 10% of the steps.
"""

from __future__ import annotations

import os
import resource

import torch

from benchmarks.config import BARE, EVERYTHING, GpSetup, RunConfig
from benchmarks.subjects import gp_actions, make_gp_env
from benchmarks.timing import attempt, sync


def _host_rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: peak RSS is the best we have
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _per_env(setup: GpSetup, n: int, device: str) -> dict:
    if device.startswith("cuda"):
        sync(device)
        before = torch.cuda.memory_allocated(device)
    env = make_gp_env(setup, n, device)
    env.reset()
    env.step(gp_actions(env, n, env.device)[0])
    res = env.device_bytes()
    dev_total = res["bytes_by_device"].get(str(env.device), 0)
    res.update(config=setup.label, num_envs=n, counted_bytes=dev_total,
               counted_bytes_per_env=dev_total / n)
    if device.startswith("cuda"):
        sync(device)
        delta = torch.cuda.memory_allocated(device) - before
        res.update(cuda_allocated_delta=delta, cuda_allocated_delta_per_env=delta / n)
    return res


def steady_state(cfg: RunConfig, n: int) -> dict:
    """Sample memory while stepping; returns samples and the growth after warm-up."""
    setup = EVERYTHING
    env = make_gp_env(setup, n, cfg.device)
    actions = gp_actions(env, n, env.device)
    env.reset()
    steps = cfg.memory_steps
    every = max(1, steps // 20)
    warm = max(1, steps // 10)

    def sample() -> int:
        if cfg.is_cuda:
            sync(cfg.device)
            return torch.cuda.memory_allocated(cfg.device)
        return _host_rss()

    samples = [(0, sample())]
    for i in range(1, steps + 1):
        env.step(actions[i % len(actions)])
        if i % every == 0 or i == warm:
            samples.append((i, sample()))
    after_warm = next(b for s, b in samples if s >= warm)
    growth = samples[-1][1] - after_warm
    return {
        "config": setup.label,
        "num_envs": n,
        "steps": steps,
        "metric": "torch.cuda.memory_allocated" if cfg.is_cuda else "process RSS",
        "samples": [{"step": s, "bytes": b} for s, b in samples],
        "growth_bytes": growth,
        "growth_from_step": warm,
    }


def measure(cfg: RunConfig) -> dict:
    n = cfg.goal_n
    out: dict = {"per_env": {}}
    for key, setup in (("bare", BARE), ("full", EVERYTHING)):
        val, failed = attempt(_per_env, setup, n, cfg.device)
        out["per_env"][key] = failed or val
    val, failed = attempt(steady_state, cfg, n)
    out["steady_state"] = failed or val
    return out
