"""Host time per captured step, and the masked parameter writes against the peers'.

``measure``: at N=1 a step's device work is a few hundred nanoseconds, so ``env.step``'s
time is the library's host overhead (action check and copy, capture checks, the graph
replay call, any eager stage), for the bare CartPole and for CartPole with 3
step-randomization terms, ObsNorm and RewardNorm (issue 11's goal), and the replay call
alone (``env.pipeline()``). On CUDA the step's device work outlasts its host call: the
figures there are times to completion, labelled ``"measures": "host+device"``. Each figure
is the fastest of the interleaved rounds (``{key}_step_s``; the median as
``{key}_step_median_s``): the host code is deterministic, so time above the fastest round
is the machine's, as Python's ``timeit`` reasons.

``masked_writes`` (issue 41 item 3): the host time of ``env.params.set("length", value,
mask)`` and of the same plus ``ObsNorm.reset_stats(mask)`` at N=1, the fastest of
``WRITE_CALLS`` calls timed one by one (masks rotating over ``NUM_MASKS`` device tensors),
with a Python number (validated on the host), a device tensor with ``validate=False`` (no
host sync) and a validated device tensor (one read of a check flag: a sync on CUDA). On
CUDA, ``masked_write_device_time`` adds their device time without host pacing (a hundred
calls captured in one CUDA graph, replayed between events) at N=1 and 2**20, with the
bytes a write moves against the device's copy bandwidth.

``latency``: the masked write against the peers' ways to change a parameter, at N=4096
and 16384 (and 2**20 on CUDA): gpuparam's ``params.set("length", 0.9, mask=m)`` alone and
with ``ObsNorm.reset_stats(m)`` (a full "switch"); Gymnasium's
``AsyncVectorEnv.set_attr("length", 0.9)`` (one message round trip per worker); TorchRL:
shutting a 2-worker ``MultiAsyncCollector`` on ``GymEnv("CartPole-v1")`` down and building
a new one, until its first batch (the workaround users run today).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from functools import partial

import torch

import gpuparam as gp
from benchmarks import timing
from benchmarks.config import BARE, FULLEST, LATENCY_SIZES, RunConfig
from benchmarks.subjects import Subject, gp_subject, gym_cartpole, run_group, torchrl_cartpole
from benchmarks.timing import Skipped, attempt, median, optional_import, outcome, sync

STEPS = 2000
WRITE_CALLS = 300  # calls timed one by one; the figure is the fastest (issue 41)
NUM_MASKS = 8
WRITE_GOALS_S = {"set": 12e-6, "set_reset_stats": 20e-6}  # issue 41 item 3, N=1, CPU


def measure(cfg: RunConfig) -> dict:
    full = gp_subject(FULLEST, 1, cfg.device)
    inner = full.env.env  # the TransformedEnv's VecEnv
    times, _, _ = run_group({  # "replay_only": the pipeline's replay call alone
        "bare": partial(gp_subject, BARE, 1, cfg.device), "full": lambda: full,
        "replay_only": lambda: Subject(1, lambda i: inner.pipeline(), cfg.device)},
        STEPS, cfg.repeats_for("paired"))
    out = {"num_envs": 1, "steps": STEPS, "config": FULLEST.label,
           "measures": "host+device" if cfg.is_cuda else "host",
           "plan": [list(names) + [graphed] for names, graphed in inner.pipeline.plan]}
    for k, ts in times.items():
        out[f"{k}_step_s"] = min(ts) / STEPS
        out[f"{k}_step_median_s"] = median(ts) / STEPS
    out["masked_writes"] = outcome(masked_writes, cfg.device)
    if cfg.is_cuda:
        for n in (1, 1 << 20):
            out["masked_writes"][f"device_time_N{n}"] = outcome(masked_write_device_time,
                                                                cfg.device, n)
    return out


def write_calls(device: str | torch.device, n: int = 1):
    """``(calls, env, norm, masks)``: the masked writes measured, as ``{name: fn(i)}`` (call
    ``i`` takes ``masks[i % NUM_MASKS]``, bool ``[n]`` on the device), on a CartPole-v1 of
    ``n`` envs and an ``ObsNorm`` holding one batch. Names: ``set`` / ``set_reset_stats``
    with a Python number; ``_tensor``: a float32 device tensor ``[n]`` with
    ``validate=False``; ``_tensor_validated``: the same, validated (one flag read);
    ``reset_stats`` alone."""
    env = gp.make("CartPole-v1", num_envs=n, device=str(device), seed=0)
    norm = gp.ObsNorm((4,), num_envs=n, device=env.device)
    norm(env.reset()["observation"])
    g = torch.Generator().manual_seed(0)
    masks = [(torch.rand(n, generator=g) < 0.5).to(env.device) for _ in range(NUM_MASKS)]
    masks[0][0] = True  # (at N=1 some call writes)
    value = torch.full((n,), 0.9, device=env.device)
    p, reset = env.params, norm.reset_stats
    calls = {
        "set": lambda i: p.set("length", 0.9, mask=masks[i % NUM_MASKS]),
        "set_tensor": lambda i: p.set("length", value, mask=masks[i % NUM_MASKS],
                                      validate=False),
        "set_tensor_validated": lambda i: p.set("length", value, mask=masks[i % NUM_MASKS]),
        "reset_stats": lambda i: reset(masks[i % NUM_MASKS]),
    }
    for k in ("set", "set_tensor", "set_tensor_validated"):
        calls[k.replace("set", "set_reset_stats", 1)] = (
            lambda i, f=calls[k]: (f(i), reset(masks[i % NUM_MASKS])))
    return calls, env, norm, masks


def masked_writes(device: str | torch.device, calls: int = WRITE_CALLS) -> dict:
    """Host seconds per call at N=1, the fastest of ``calls`` calls timed one by one
    (``{name}_s``; the median as ``{name}_median_s``), for each of :func:`write_calls`;
    ``goals``: issue 41's limits (CPU) and whether the fastest call met them."""
    fns, env, _, _ = write_calls(device)
    out: dict = {"num_envs": 1, "calls": calls, "masks": NUM_MASKS, "measures": "host",
                 "device": str(env.device)}
    for name, fn in fns.items():
        for i in range(2 * NUM_MASKS):  # warm: launches bound, views kept for every mask
            fn(i)
        sync(env.device)
        per = []
        for i in range(calls):
            t0 = time.perf_counter()
            fn(i)
            per.append(time.perf_counter() - t0)
        sync(env.device)
        out[f"{name}_s"], out[f"{name}_median_s"] = min(per), median(per)
    if env.device.type == "cpu":
        out["goals"] = {f"{k}{v}": {"limit_s": lim, "s": out[f"{k}{v}_s"],
                                    "met": out[f"{k}{v}_s"] <= lim}
                        for k, lim in WRITE_GOALS_S.items()
                        for v in ("", "_tensor", "_tensor_validated")}
    return out


def captured_device_time(fn, device: torch.device, calls: int = 100, replays: int = 10) -> dict:
    """Device seconds per call of ``fn(i)`` without host pacing: ``calls`` calls captured
    in one CUDA graph (``torch.cuda.graph``: the calls' Warp launches go to torch's current
    stream, which it captures), replayed ``replays`` times between CUDA events; the fastest
    replay over ``calls``. CUDA only: raises ``RuntimeError`` elsewhere."""
    if device.type != "cuda":
        raise RuntimeError(f"captured device time needs a CUDA device, got {device}")
    side = torch.cuda.Stream(device)  # captured on; warmed on it first, so that its Warp
    side.wait_stream(torch.cuda.current_stream(device))  # stream wrapper, the modules and
    with torch.cuda.stream(side):  # the launches' recorded variants exist before capture
        for i in range(calls):
            fn(i)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for i in range(calls):
            fn(i)
    graph.replay()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e-3 / calls)
    return {"device_s_per_call": best, "calls": calls, "replays": replays}


def masked_write_device_time(device: str, n: int) -> dict:
    """On CUDA, device seconds per call (:func:`captured_device_time`) of the calls of
    :func:`write_calls` that do not synchronize, at ``n`` envs, with the bytes a write
    moves (mask read, the two tables' rows written, the value read: counted whole, as the
    lines a random mask touches) and their rate against the copy bandwidth. Elsewhere
    ``{"skipped": ...}``."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return {"skipped": "device time without host pacing needs CUDA (a captured graph)"}
    from benchmarks.memory import copy_bandwidth

    fns, _, _, _ = write_calls(dev, n)
    out: dict = {"num_envs": n, "measures": "device"}
    bw = copy_bandwidth(device)["bytes_per_s"]
    out["copy_bandwidth_bytes_per_s"] = bw
    moved = {"set": n + 8 * n, "set_tensor": n + 12 * n}
    for name in ("set", "set_tensor", "reset_stats", "set_reset_stats",
                 "set_reset_stats_tensor"):
        out[name] = outcome(captured_device_time, fns[name], dev)
        if name in moved and "device_s_per_call" in out[name]:
            rate = moved[name] / out[name]["device_s_per_call"]
            out[name].update(bytes=moved[name], bytes_per_s=rate,
                             fraction_of_copy_bandwidth=rate / bw)
    return out


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
    n = min(cfg.peer_sizes)
    venv = optional_import("gymnasium.vector").AsyncVectorEnv([gym_cartpole] * n)
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
        with timing.start_method(method), timing.preserve_torch_threads():
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


def latency(cfg: RunConfig) -> dict:
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
