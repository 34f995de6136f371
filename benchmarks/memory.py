"""Memory: device bytes per env (counted from the env's tensors), steady-state growth, and
the roofline: counted bytes per env-step against the device's copy bandwidth.

Bytes per env are counted by ``env.device_bytes()``: the distinct memory ranges of every
torch tensor and Warp array the env holds (parameter tables, state, output buffers,
randomization and transform buffers), views and Warp aliases of torch memory counted once.
Steady state: RSS (CPU, ``/proc/self/statm``) or ``torch.cuda.memory_allocated`` (CUDA) sampled
while stepping the fullest configuration available; growth is the last sample minus the sample
taken after the first 10% of the steps.

Roofline (CUDA runs): bytes per env-step are counted from the buffers the step must touch,
each once per access: the env kernel's array arguments (parameters and action read;
``*_out`` written; state, step counter and running return read and written back), the auto-
reset kernel's read of the done mask, and, for the full configuration, the nominal read and
effective write of each per-step randomized parameter and ObsNorm's read of
``observation``/``final_observation`` and write of their normalized copies. Writes made
only where an episode ends (episode return and length, auto-reset state) are left out: the
count is a lower bound, so the achieved fraction of the roofline is never flattered.
"""

from __future__ import annotations

import math
import os
import resource

import torch
import warp as wp

import gpuparam as gp
from benchmarks.config import BARE, EVERYTHING, GpSetup, RunConfig
from benchmarks.subjects import gp_actions, make_gp_env
from benchmarks.timing import outcome, sync


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
    env = make_gp_env(EVERYTHING, n, cfg.device)
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
    return {"config": EVERYTHING.label, "num_envs": n, "steps": steps,
            "metric": "torch.cuda.memory_allocated" if cfg.is_cuda else "process RSS",
            "samples": [{"step": s, "bytes": b} for s, b in samples],
            "growth_bytes": samples[-1][1] - after_warm, "growth_from_step": warm}


def measure(cfg: RunConfig) -> dict:
    return {"per_env": {key: outcome(_per_env, setup, cfg.goal_n, cfg.device)
                        for key, setup in (("bare", BARE), ("full", EVERYTHING))},
            "steady_state": outcome(steady_state, cfg, cfg.goal_n)}


# kernels/episode.py writes these only where done
CONDITIONAL_WRITES = frozenset({"episode_return_out", "episode_length_out"})
RANDOMIZED_PARAMS = 3  # benchmarks.config.randomization_terms
COPY_BYTES = 1 << 30


def step_bytes(env_id: str = "CartPole-v1") -> dict:
    """Counted bytes per env-step for the bare step and for rand3(step)+ObsNorm."""
    env = gp.make(env_id, num_envs=1, device="cpu")
    params = set(env.params.names)
    read = write = 0
    args = []
    for a in type(env).step_kernel.adj.args:
        if not wp.types.is_array(a.type):
            continue
        size = wp.types.type_size_in_bytes(a.type.dtype)
        if a.label in CONDITIONAL_WRITES:
            kind = "conditional write (not counted)"
        elif a.label.endswith("_out"):
            kind, write = "write", write + size
        elif a.label in params or a.label == "action":
            kind, read = "read", read + size
        else:
            kind, read, write = "read+write", read + size, write + size
        args.append({"arg": a.label, "bytes": size, "access": kind})
    read += 1  # auto-reset kernel reads the done mask
    bare = read + write
    obs_bytes = 4 * math.prod(env.observation_spec.shape)
    rand = RANDOMIZED_PARAMS * 8
    obsnorm = 4 * obs_bytes
    return {
        "bare": bare,
        "bare_read": read,
        "bare_write": write,
        "full": bare + rand + obsnorm,
        "full_extra": {"randomization_3_params": rand, "ObsNorm": obsnorm},
        "step_kernel_args": args,
    }


def copy_bandwidth(device: str, nbytes: int = COPY_BYTES, iters: int = 20) -> dict:
    """Device-to-device ``copy_`` bandwidth in bytes/s, counting read + write."""
    x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    y = torch.empty_like(x)
    y.copy_(x)
    sync(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        y.copy_(x)
    end.record()
    sync(device)
    seconds = start.elapsed_time(end) * 1e-3
    del x, y
    torch.cuda.empty_cache()
    return {"bytes": nbytes, "iters": iters, "bytes_per_s": 2 * nbytes * iters / seconds}


def _best_point(series: dict) -> dict | None:
    pts = [p for p in series.get("points", []) if "env_steps_per_s" in p]
    return max(pts, key=lambda p: p["num_envs"]) if pts else None


def roofline(cfg: RunConfig, throughput: dict) -> dict:
    counted = step_bytes()
    out: dict = {"bytes_per_env_step": counted}
    if not cfg.is_cuda:
        out["skipped"] = "GPU only: the roofline compares against device memory bandwidth"
        return out
    bw = copy_bandwidth(cfg.device)
    out["copy_bandwidth"] = bw
    targets = {
        "bare": "gpuparam CartPole-v1",
        "full": "gpuparam CartPole-v1 rand3(step)+ObsNorm",
    }
    for key, name in targets.items():
        p = _best_point(throughput.get(name, {}))
        if p is None:
            out[key] = {"skipped": f"no throughput figure for {name!r}"}
            continue
        achieved = counted[key] * p["env_steps_per_s"]
        out[key] = {
            "num_envs": p["num_envs"],
            "env_steps_per_s": p["env_steps_per_s"],
            "bytes_per_env_step": counted[key],
            "achieved_bytes_per_s": achieved,
            "fraction_of_copy_bandwidth": achieved / bw["bytes_per_s"],
        }
    return out
