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

from benchmarks.config import LATENCY_SIZES, RunConfig
from benchmarks.host_time import write_calls
from benchmarks.subjects import Subject, gym_cartpole, torchrl_cartpole
from benchmarks.timing import (
    Skipped,
    attempt,
    median,
    optional_import,
    outcome,
    preserve_torch_threads,
    start_method,
)


def _per_call(fn, calls: int, repeats: int, device) -> dict:
    timed = Subject(1, fn, device=str(device)).warm(1)  # (first launch loads kernels)
    per = [timed.run(calls) / calls for _ in range(repeats)]
    return {"per_call_s": median(per), "per_call_s_repeats": per, "calls": calls}


def measure_gpuparam(cfg: RunConfig, sizes: tuple[int, ...]) -> tuple[dict, dict]:
    """``params.set("length", 0.9, mask)`` alone and with ``ObsNorm.reset_stats(mask)``
    (``host_time.write_calls``' ``set`` and ``set_reset_stats``) at each N."""
    calls = 100 if cfg.quick else 500
    write_res: dict = {}
    reset_res: dict = {}
    for n in sizes:
        fns = write_calls(cfg.device, n)[0]
        for res, name in ((write_res, "set"), (reset_res, "set_reset_stats")):
            res[str(n)] = {"num_envs": n, **_per_call(fns[name], calls,
                                                      cfg.repeats_for("paired"), cfg.device)}
    return write_res, reset_res


def measure_set_attr(cfg: RunConfig) -> dict:
    """Gymnasium ``AsyncVectorEnv.set_attr`` on the smallest peer size."""
    optional_import("gymnasium")
    from gymnasium.vector import AsyncVectorEnv

    n = min(cfg.peer_sizes)
    venv = AsyncVectorEnv([gym_cartpole] * n)
    try:
        venv.reset(seed=0)
        res = _per_call(lambda i: venv.set_attr("length", 0.9), 20 if cfg.quick else 50,
                        cfg.repeats_for("peer"), "cpu")
    finally:
        venv.close()
    note = "writes the attribute only (CartPole's derived polemass_length is not updated)"
    return {"num_envs": n, **res, "note": note}


def _recreate_times(cls, repeats: int) -> list[float]:
    def first_batch():
        collector = cls([torchrl_cartpole] * 2, policy=None, frames_per_batch=64,
                        total_frames=-1)
        next(iter(collector))
        return collector

    collector = first_batch()  # a running collector, as in training
    times = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            collector.shutdown()
            collector = first_batch()
            times.append(time.perf_counter() - t0)
    finally:
        collector.shutdown()
    return times


def measure_collector_recreate(cfg: RunConfig) -> dict:
    """Seconds from ``shutdown()`` of a running collector to the first batch of a new one.

    Measured per multiprocessing start method (set globally for the measurement, then
    restored). The headline figure is TorchRL's default, spawn, when it was measured.
    """
    collectors = optional_import("torchrl.collectors")
    cls = (getattr(collectors, "MultiAsyncCollector", None)  # torchrl < 0.11's name:
           or getattr(collectors, "MultiaSyncDataCollector", None))
    if cls is None:
        raise Skipped("torchrl.collectors has neither MultiAsyncCollector nor "
                      "MultiaSyncDataCollector")
    by_method: dict = {}
    for method in cfg.collector_methods:
        if method not in mp.get_all_start_methods():
            by_method[method] = {"skipped": f"start method {method!r} not available here"}
            continue
        with start_method(method), preserve_torch_threads():
            times, failed = attempt(_recreate_times, cls, cfg.recreate_repeats)
        by_method[method] = failed or {"per_switch_s": median(times),
                                       "per_switch_s_repeats": times}
    measured = [m for m, r in by_method.items() if "per_switch_s" in r]
    if not measured:
        first = next(iter(by_method.values()), {"skipped": "no start method requested"})
        return {**first, "by_start_method": by_method}
    headline = "spawn" if "spawn" in measured else measured[0]
    return {"per_switch_s": by_method[headline]["per_switch_s"], "start_method": headline,
            "by_start_method": by_method, "workers": 2, "class": cls.__name__,
            "env": 'GymEnv("CartPole-v1")',
            "note": "spawn is TorchRL's default start method; fork is opt-in"}


def _ratios(res: dict) -> dict:
    """Peer time / gpuparam time: ``collector_recreate[_<method>]_over_<figure>_N<n>`` and
    ``gymnasium_set_attr_over_<figure>_N<n>`` (set_attr is measured at its own, small N)."""
    rc = res["torchrl_collector_recreate"]
    peers = {f"collector_recreate{suffix}": r.get("per_switch_s") for suffix, r in
             [("", rc), *((f"_{m}", r) for m, r in rc.get("by_start_method", {}).items())]}
    peers = {"gymnasium_set_attr": res["gymnasium_async_set_attr"].get("per_call_s"), **peers}
    return {f"{peer}_over_{key}_N{n}": t / r["per_call_s"]
            for key in ("gpuparam_write", "gpuparam_write_reset_stats")
            for n, r in res[key].items() for peer, t in peers.items()
            if t is not None and "per_call_s" in r}


def measure(cfg: RunConfig) -> dict:
    sizes = LATENCY_SIZES + ((1048576,) if cfg.is_cuda else ())
    res: dict = {}
    val, failed = attempt(measure_gpuparam, cfg, sizes)
    res["gpuparam_write"], res["gpuparam_write_reset_stats"] = val or ({}, {})
    if failed:
        res["gpuparam_error"] = failed
    res["gymnasium_async_set_attr"] = outcome(measure_set_attr, cfg)
    res["torchrl_collector_recreate"] = outcome(measure_collector_recreate, cfg)
    if cfg.is_cuda:
        from benchmarks.gpu.gpu_time import masked_write_gpu_time

        res["gpu_time_masked_write_N1048576"] = outcome(masked_write_gpu_time, cfg.device,
                                                        1048576)
    res["ratios"] = _ratios(res)
    return res
