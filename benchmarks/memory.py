"""Memory: device bytes per env (counted from the env's tensors) and steady-state growth.

Bytes per env are counted by walking the env object (its parameter tables, state, output
buffers, randomization and transform buffers) and summing the distinct memory ranges of every
torch tensor and Warp array reached, views and Warp aliases of torch memory counted once.
Steady state: RSS (CPU, ``/proc/self/statm``) or ``torch.cuda.memory_allocated`` (CUDA) sampled
while stepping the fullest configuration available; growth is the last sample minus the sample
taken after the first 10% of the steps.
"""

from __future__ import annotations

import os
import resource

import torch
import warp as wp
from tensordict import TensorDictBase
from torch import nn

from benchmarks.config import RunConfig
from benchmarks.features import Skipped, attempt
from benchmarks.subjects import BARE, FULL, GpSetup, gp_actions, make_gp_env
from benchmarks.timing import sync

EVERYTHING = GpSetup(
    "rand3(step)+ObsNorm+RewardNorm+hooks",
    randomize="step",
    transforms=("ObsNorm", "RewardNorm"),
    hooks=True,
)
_MAX_DEPTH = 8


def _ranges(obj, path: str, seen: set[int], out: list, depth: int = 0) -> None:
    """Append ``(device, start, end, top_level_attr)`` for every buffer reachable from obj."""
    if id(obj) in seen or depth > _MAX_DEPTH:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        st = obj.untyped_storage()
        if st.nbytes():
            out.append((str(obj.device), st.data_ptr(), st.data_ptr() + st.nbytes(), path))
        return
    if isinstance(obj, wp.array):
        if obj.ptr:
            out.append((str(obj.device), int(obj.ptr), int(obj.ptr) + int(obj.capacity), path))
        return
    if isinstance(obj, TensorDictBase):
        children = list(obj.values(include_nested=True, leaves_only=True))
    elif isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    elif isinstance(obj, nn.Module) or type(obj).__module__.startswith("gpuparam"):
        if hasattr(obj, "__dict__"):
            items = vars(obj).items()
        else:  # a class with __slots__
            items = [(k, getattr(obj, k, None)) for k in getattr(type(obj), "__slots__", ())]
        for name, child in items:
            _ranges(child, path or name, seen, out, depth + 1)
        return
    else:
        return
    for child in children:
        _ranges(child, path, seen, out, depth + 1)


def device_bytes(env) -> dict:
    """Distinct bytes of all buffers reachable from ``env``, per device and per attribute."""
    found: list = []
    _ranges(env, "", set(), found)
    found.sort(key=lambda r: (r[0], r[1]))
    total: dict[str, int] = {}
    by_attr: dict[str, int] = {}
    end_by_dev: dict[str, int] = {}
    for dev, start, end, attr in found:
        start = max(start, end_by_dev.get(dev, 0))  # overlap with an earlier range
        if end <= start:
            continue
        end_by_dev[dev] = end
        total[dev] = total.get(dev, 0) + end - start
        by_attr[attr or "<env>"] = by_attr.get(attr or "<env>", 0) + end - start
    return {"bytes_by_device": total, "bytes_by_attribute": by_attr}


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
    notes: list[str] = []
    env = make_gp_env(setup, n, device, notes)
    env.reset()
    env.step(gp_actions(env, n, env.device)[0])
    res = device_bytes(env)
    dev_total = res["bytes_by_device"].get(str(env.device), 0)
    res.update(config=setup.label, num_envs=n, counted_bytes=dev_total,
               counted_bytes_per_env=dev_total / n)
    if device.startswith("cuda"):
        sync(device)
        delta = torch.cuda.memory_allocated(device) - before
        res.update(cuda_allocated_delta=delta, cuda_allocated_delta_per_env=delta / n)
    res["notes"] = notes
    return res


def _first_buildable(n: int, device: str):
    reasons = []
    for setup in (EVERYTHING, FULL, BARE):
        try:
            return setup, make_gp_env(setup, n, device)
        except Skipped as e:
            reasons.append(f"{setup.label}: {e}")
    raise Skipped("; ".join(reasons))


def steady_state(cfg: RunConfig, n: int, bar) -> dict:
    """Sample memory while stepping; returns samples and the growth after warm-up."""
    setup, env = _first_buildable(n, cfg.device)
    actions = gp_actions(env, n, env.device)
    env.reset()
    steps = cfg.memory_steps()
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


def measure(cfg: RunConfig, bar) -> dict:
    n = cfg.goal_n
    out: dict = {"per_env": {}}
    bar.set_postfix_str("memory per env")
    for key, setup in (("bare", BARE), ("full", EVERYTHING)):
        val, failed = attempt(_per_env, setup, n, cfg.device)
        if failed and setup is EVERYTHING:  # fall back to what exists
            val, failed = attempt(_per_env, FULL, n, cfg.device)
        out["per_env"][key] = failed or val
    bar.update(1)
    bar.set_postfix_str("memory steady state")
    val, failed = attempt(steady_state, cfg, n, bar)
    out["steady_state"] = failed or val
    bar.update(1)
    return out


def units(cfg: RunConfig) -> int:
    return 2
