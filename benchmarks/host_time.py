"""Host time per captured step: what the Python around one replay costs.

At N=1 a step's device work is a few hundred nanoseconds, so the time of ``env.step`` is
the library's host overhead: action check and copy, capture checks, the graph replay call
(one CUDA graph, or Warp CPU graphs), and any stage that runs eagerly. Measured for the bare
CartPole and for CartPole with 3 step-randomization terms, ObsNorm and RewardNorm (the
configuration issue 11 sets a goal for), and, separately, the replay call alone
(``env.pipeline()``).

On CUDA the device work of a step (a graph of a dozen small kernels) outlasts its host
call, and a queue of launches fills within the round: every figure there is the time per
step to completion (each round ends with a device sync), labelled ``"measures":
"host+device"``.

Each figure is the fastest of the interleaved rounds (``{key}_step_s``; the median is kept as
``{key}_step_median_s``): the host code is deterministic, so time above the fastest round is
the machine's (preemption, other processes), as Python's ``timeit`` reasons.

Masked writes (``masked_writes``, issue 41 item 3): the host time of one
``env.params.set("length", value, mask)`` and of the same plus ``ObsNorm.reset_stats(mask)``
at N=1, the fastest of ``WRITE_CALLS`` calls timed one by one (masks rotating over
``NUM_MASKS`` device tensors, as a caller's masks do): with a Python number (validated on the
host), a device tensor with ``validate=False`` (no host sync) and a validated device tensor
(one read of a check flag: a sync on CUDA, documented). These are host times on both
devices: a call that does not synchronize returns once its launches are queued. On CUDA,
``masked_write_device_time`` adds the device time of the same calls without host pacing (a
hundred calls captured in one CUDA graph, replayed between events) at N=1 and at 2**20 envs,
with the bytes a write moves against the device's copy bandwidth.
"""

from __future__ import annotations

import time
from functools import partial

import torch

import gpuparam as gp
from benchmarks.config import BARE, FULLEST, RunConfig
from benchmarks.subjects import Subject, gp_subject, run_group
from benchmarks.timing import median, outcome, sync

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
    from benchmarks.roofline import copy_bandwidth

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
