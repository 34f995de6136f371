"""Parameter-update latency: gpuparam's masked write vs the peers' ways to change a parameter.

- gpuparam: ``env.params.set("length", 0.9, mask=m)``, and the same plus
  ``ObsNorm.reset_stats(m)`` (a full "switch": new parameter, fresh statistics for those envs);
- Gymnasium: ``AsyncVectorEnv.set_attr("length", 0.9)`` (one message round trip per worker);
- TorchRL: shut a 2-worker ``MultiAsyncCollector`` on ``GymEnv("CartPole-v1")`` down and build
  a new one, until its first batch: the workaround users run today.
"""

from __future__ import annotations

import multiprocessing as mp
import time

import torch

import gpuparam as gp
from benchmarks.config import LATENCY_SIZES, RunConfig
from benchmarks.subjects import gym_cartpole, torchrl_cartpole
from benchmarks.timing import (
    Skipped,
    attempt,
    median,
    optional_import,
    preserve_torch_threads,
    start_method,
    timed,
)

NUM_MASKS = 8
SET_VALUE = 0.9


def _masks(n: int, device: torch.device) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [(torch.rand(n, generator=g) < 0.5).to(device) for _ in range(NUM_MASKS)]


def _per_call(fn, calls: int, repeats: int, device) -> dict:
    fn(0)  # warm-up (first launch loads kernels)
    per = [timed(lambda: [fn(i) for i in range(calls)], device) / calls for _ in range(repeats)]
    return {"per_call_s": median(per), "per_call_s_repeats": per, "calls": calls}


def _switch_fns(n: int, device: str):
    """``(write, write_and_reset)``: ``write(i)`` does one masked write with mask ``i % K``,
    ``write_and_reset(i)`` the same plus ``ObsNorm.reset_stats``."""
    env = gp.make("CartPole-v1", num_envs=n, device=device, seed=0)
    masks = _masks(n, env.device)
    norm = gp.ObsNorm(env.observation_spec.shape, num_envs=n, device=env.device)
    norm(env.reset()["observation"])  # statistics hold one batch

    def write(i: int) -> None:
        env.params.set("length", SET_VALUE, mask=masks[i % NUM_MASKS])

    def write_and_reset(i: int) -> None:
        write(i)
        norm.reset_stats(masks[i % NUM_MASKS])

    return write, write_and_reset


def measure_gpuparam(cfg: RunConfig, sizes: tuple[int, ...]) -> tuple[dict, dict]:
    calls = 100 if cfg.quick else 500
    repeats = cfg.repeats_for("paired")
    write_res: dict = {}
    reset_res: dict = {}
    for n in sizes:
        write, write_and_reset = _switch_fns(n, cfg.device)
        write_res[str(n)] = {"num_envs": n, **_per_call(write, calls, repeats, cfg.device)}
        reset_res[str(n)] = {"num_envs": n,
                             **_per_call(write_and_reset, calls, repeats, cfg.device)}
    return write_res, reset_res


def measure_set_attr(cfg: RunConfig) -> dict:
    """Gymnasium ``AsyncVectorEnv.set_attr`` on the smallest peer size."""
    optional_import("gymnasium")
    from gymnasium.vector import AsyncVectorEnv

    n = min(cfg.peer_sizes)
    venv = AsyncVectorEnv([gym_cartpole] * n)
    try:
        venv.reset(seed=0)
        res = _per_call(lambda i: venv.set_attr("length", SET_VALUE), 20 if cfg.quick else 50,
                        cfg.repeats_for("peer"), "cpu")
    finally:
        venv.close()
    note = "writes the attribute only (CartPole's derived polemass_length is not updated)"
    return {"num_envs": n, **res, "note": note}


def _collector_class():
    collectors = optional_import("torchrl.collectors")
    for name in ("MultiAsyncCollector", "MultiaSyncDataCollector"):
        if hasattr(collectors, name):
            return getattr(collectors, name)
    raise Skipped("torchrl.collectors has neither MultiAsyncCollector nor MultiaSyncDataCollector")


def _first_batch(collector) -> None:
    for _ in collector:
        break


def _recreate_times(cls, repeats: int) -> list[float]:
    def build():
        return cls([torchrl_cartpole] * 2, policy=None, frames_per_batch=64, total_frames=-1)

    collector = build()
    _first_batch(collector)  # a running collector, as in training
    times = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            collector.shutdown()
            collector = build()
            _first_batch(collector)
            times.append(time.perf_counter() - t0)
    finally:
        collector.shutdown()
    return times


def measure_collector_recreate(cfg: RunConfig) -> dict:
    """Seconds from ``shutdown()`` of a running collector to the first batch of a new one.

    Measured per multiprocessing start method (set globally for the measurement, then
    restored). The headline figure is TorchRL's default, spawn, when it was measured.
    """
    cls = _collector_class()
    by_method: dict = {}
    for method in cfg.collector_methods:
        if method not in mp.get_all_start_methods():
            by_method[method] = {"skipped": f"start method {method!r} not available here"}
            continue
        with start_method(method), preserve_torch_threads():
            times, failed = attempt(_recreate_times, cls, cfg.collector_repeats())
        by_method[method] = failed or {"per_switch_s": median(times),
                                       "per_switch_s_repeats": times}
    measured = [m for m, r in by_method.items() if "per_switch_s" in r]
    if not measured:
        first = next(iter(by_method.values()), {"skipped": "no start method requested"})
        return {**first, "by_start_method": by_method}
    headline = "spawn" if "spawn" in measured else measured[0]
    return {
        "per_switch_s": by_method[headline]["per_switch_s"],
        "start_method": headline,
        "by_start_method": by_method,
        "workers": 2,
        "class": cls.__name__,
        "env": 'GymEnv("CartPole-v1")',
        "note": "spawn is TorchRL's default start method; fork is opt-in",
    }


def _ratios(res: dict) -> dict:
    """Peer time / gpuparam time: ``collector_recreate[_<method>]_over_<figure>_N<n>`` and
    ``gymnasium_set_attr_over_<figure>_N<n>`` (set_attr is measured at its own, small N)."""
    rc = res["torchrl_collector_recreate"]
    recs = {"": rc.get("per_switch_s")}
    for method, r in rc.get("by_start_method", {}).items():
        recs[f"_{method}"] = r.get("per_switch_s")
    out: dict = {}
    set_attr = res["gymnasium_async_set_attr"].get("per_call_s")
    for key in ("gpuparam_write", "gpuparam_write_reset_stats"):
        for n, r in res[key].items():
            if set_attr is not None and "per_call_s" in r:
                out[f"gymnasium_set_attr_over_{key}_N{n}"] = set_attr / r["per_call_s"]
            for suffix, rec in recs.items():
                if rec is not None and "per_call_s" in r:
                    out[f"collector_recreate{suffix}_over_{key}_N{n}"] = rec / r["per_call_s"]
    return out


def measure(cfg: RunConfig) -> dict:
    sizes = LATENCY_SIZES + ((1048576,) if cfg.is_cuda else ())
    res: dict = {}
    val, failed = attempt(measure_gpuparam, cfg, sizes)
    if failed is None:
        res["gpuparam_write"], res["gpuparam_write_reset_stats"] = val
    else:
        res["gpuparam_write"], res["gpuparam_write_reset_stats"] = {}, {}
        res["gpuparam_error"] = failed
    val, failed = attempt(measure_set_attr, cfg)
    res["gymnasium_async_set_attr"] = failed or val
    val, failed = attempt(measure_collector_recreate, cfg)
    res["torchrl_collector_recreate"] = failed or val
    if cfg.is_cuda:
        from benchmarks.gpu.gpu_time import masked_write_gpu_time

        val, failed = attempt(masked_write_gpu_time, cfg.device, 1048576)
        res["gpu_time_masked_write_N1048576"] = failed or val
    res["ratios"] = _ratios(res)
    return res
