"""The numbers the issues ask for, evaluated on one results dict: PASS / FAIL / SKIP."""

from __future__ import annotations

from collections.abc import Callable

MIB = 1 << 20
MEMORY_GROWTH_LIMIT = 4 * MIB  # page-granular RSS noise; a leak of 1 tensor/step is far above


def _get(d: dict, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _reason(d) -> str:
    """The skip/error reason recorded in a result entry ("" when there is none)."""
    if isinstance(d, dict):
        return d.get("skipped") or d.get("error") or ""
    return ""


def _goal(gid: str, text: str, value, ok: Callable[[float], bool],
          fmt: str | Callable[[float], str], why: str = "") -> dict:
    """A goal record; ``why`` is the skip reason when ``value`` is None, else a detail."""
    if value is None:
        return {"id": gid, "goal": text, "status": "SKIP", "reason": why or "not measured"}
    out = {
        "id": gid,
        "goal": text,
        "measured": value,
        "display": fmt(value) if callable(fmt) else fmt.format(value),
        "status": "PASS" if ok(value) else "FAIL",
    }
    if why:
        out["detail"] = why
    return out


def _switch_ratio(res: dict, n: int) -> tuple[float | None, str]:
    """Recreate time (TorchRL's default start method) / switch time, and what was compared."""
    ratios = _get(res, "latency", "ratios") or {}
    method = _get(res, "latency", "torchrl_collector_recreate", "start_method")
    for key, what in (("gpuparam_write_reset_stats", "write + reset_stats"),
                      ("gpuparam_write", "write only: ObsNorm.reset_stats unavailable")):
        v = ratios.get(f"collector_recreate_over_{key}_N{n}")
        if v is None:
            continue
        others = [f"{m}: {r:,.0f}x" for m, r in (
            (m, ratios.get(f"collector_recreate_{m}_over_{key}_N{n}"))
            for m in ("spawn", "fork", "forkserver")) if r is not None and m != method]
        detail = f"{what}; collector started with {method}"
        return v, detail + (f" (with {', '.join(others)})" if others else "")
    rec = _get(res, "latency", "torchrl_collector_recreate")
    return None, _reason(rec) or _reason(_get(res, "latency", "gpuparam_error"))


def _overhead(res: dict, key: str) -> tuple[float | None, str]:
    c = _get(res, "overhead", "configs", key)
    return (c.get("overhead") if isinstance(c, dict) else None), _reason(c)


def cpu_goals(res: dict) -> list[dict]:
    """The CPU goals. The CPU overheads of randomization, normalization and the adapters
    over the bare step are figures, not goals (issue 22: the CPU runs the GPU's kernels,
    one thread per env, and is not tuned for; what a GPU will pay is guarded by the
    device-independent budgets, ``benchmarks/budgets.py``)."""
    n = _get(res, "throughput_paired", "num_envs")
    paired = res.get("throughput_paired", {})
    goals = [
        _goal("cartpole_vs_gymnasium", f"CartPole step >= 2.5x Gymnasium vector (N={n})",
              paired.get("ratio"), lambda v: v >= 2.5, "{:.2f}x", _reason(paired)),
    ]
    for gid, n_sw, target in (("switch_vs_recreate", 16384, 1e4), ("issue5_switch", 4096, 1e3)):
        v, what = _switch_ratio(res, n_sw)
        text = f"parameter switch >= {target:,.0f}x faster than collector recreate (N={n_sw})"
        goals.append(_goal(gid, text, v, lambda x, t=target: x >= t, "{:,.0f}x", what))
    ht = res.get("host_time") or {}
    host_only = ht.get("measures", "host") == "host"  # on CUDA: to completion, not host time
    goals.append(_goal(
        "host_time", "host time per captured step < 15 us (N=1, CartPole rand3(step)+ObsNorm"
        "+RewardNorm)", ht.get("full_step_s") if host_only else None, lambda v: v < 15e-6,
        lambda v: f"{v * 1e6:.1f} us",
        _reason(ht) if host_only else "CUDA: steps timed to completion (a CPU goal)",
    ))
    return goals + _write_goals(res) + [_memory_goal(res), _distributed_goal(res)]


def _write_goals(res: dict) -> list[dict]:
    """Issue 41 item 3: host time per masked write and per write + ``reset_stats`` at N=1
    (fastest of 300 calls), with a Python number and with a device tensor value that does
    not synchronize (``validate=False``); the validated tensor (one flag read) is a figure."""
    mw = _get(res, "host_time", "masked_writes")
    if mw is None:  # a results file from before these were measured
        return []
    goals = []
    for key, what, limit in (("set", "params.set(name, value, mask)", 12e-6),
                             ("set_reset_stats", "params.set + ObsNorm.reset_stats(mask)",
                              20e-6)):
        for suffix, value in (("", "a number"), ("_tensor", "a device tensor, validate=False")):
            goals.append(_goal(
                f"write_host_time_{key}{suffix}",
                f"{what} <= {limit * 1e6:.0f} us host time (N=1, fastest of 300; {value})",
                mw.get(f"{key}{suffix}_s"), lambda v, lim=limit: v <= lim,
                lambda v: f"{v * 1e6:.1f} us", _reason(mw)))
    return goals


def _distributed_goal(res: dict) -> dict:
    d = res.get("distributed", {})
    n = d.get("num_envs_per_rank")
    sync = d.get("in_loop_sync_s_2", d.get("sync_s_2"))
    wait = d.get("in_loop_wait_s_2")
    why = _reason(d) or (f"sync {sync * 1e6:.0f} us host per sync at 2 ranks"
                         + (f" ({wait * 1e6:.0f} us waiting)" if wait is not None else "")
                         + f"; load average {d.get('load_average_before')} -> "
                         f"{d.get('load_average_after')}" if sync is not None else "")
    return _goal("distributed_weak_scaling",
                 f"2 ranks x N >= 1.8x the env-steps/s of 1 rank x N (N={n}, ObsNorm synced "
                 f"every {d.get('sync_every')} steps)", d.get("ratio"), lambda v: v >= 1.8,
                 "{:.2f}x", why)


def _memory_goal(res: dict) -> dict:
    ss = _get(res, "memory", "steady_state") or {}
    growth = ss.get("growth_bytes")
    steps = ss.get("steps")
    return _goal("memory_growth", f"no memory growth over {steps} steps (<= 4 MiB, "
                 f"{ss.get('metric', '')})", growth, lambda g: g <= MEMORY_GROWTH_LIMIT,
                 "{:+,d} B", _reason(ss))


def gpu_goals(res: dict) -> list[dict]:
    name = "gpuparam CartPole-v1 rand3(step)+ObsNorm"
    pts = _get(res, "throughput", name, "points") or []
    big = [p["env_steps_per_s"] for p in pts if p.get("num_envs", 0) >= 1 << 20
           and "env_steps_per_s" in p]
    roof = _get(res, "roofline", "full") or {}
    gt = _get(res, "latency", "gpu_time_masked_write_N1048576") or {}
    # kernels: the mask's copy into the table's staging buffer is a memcpy, reported apart
    ops = gt.get("kernels_per_call")
    one = None if ops is None else float(ops == 1 and not gt.get("torch_sync_inside"))
    return [
        _goal("gpu_throughput", "CartPole rand3(step)+ObsNorm, N >= 1M: >= 1e10 env-steps/s",
              max(big) if big else None, lambda v: v >= 1e10, "{:.3g} env-steps/s",
              "no point at N >= 1M"),
        _goal("gpu_roofline", ">= 50% of copy bandwidth for the counted bytes (full config)",
              roof.get("fraction_of_copy_bandwidth"), lambda v: v >= 0.5, "{:.1%}",
              _reason(roof)),
        _goal("gpu_write_time", "masked parameter write at N=1M < 20 us GPU time",
              gt.get("gpu_s_per_call"), lambda v: v < 20e-6, "{:.3g} s", _reason(gt)),
        _goal("gpu_write_one_kernel", "masked write: one kernel, no torch host sync",
              one, lambda v: v == 1.0,
              lambda _: (f"{ops:g} kernels + {gt.get('copies_per_call', 0):g} copies per call, "
                         f"torch sync: {gt.get('torch_sync_inside')}"),
              _reason(gt)),
        _memory_goal(res),
        _distributed_goal(res),
    ]


def robot_goals(res: dict) -> list[dict]:
    """Issue 12: robots on MuJoCo Warp."""
    ov = _get(res, "robots", "overhead") or {}
    n = ov.get("num_envs")
    rand3 = ov.get("rand3") or {}
    host = _get(res, "robots", "host_time") or {}
    return [
        _goal("robot_step_rand3", f"Ant per-step friction+damping+gear <= 10% over bare (N={n})",
              rand3.get("extra_share", rand3.get("overhead")), lambda x: x <= 0.10, "{:+.1%}",
              _reason(rand3 or ov) or "its stages timed alone over the bare step"),
        _goal("robot_host_time", "Ant captured step at N=1: host time beyond physics < 50 us",
              host.get("beyond_physics_s"), lambda x: x < 50e-6,
              lambda x: f"{x * 1e6:.1f} us", _reason(host)),
        *go1_goals(res),
    ]


def go1_goals(res: dict) -> list[dict]:
    """Issue 23: the Go1 recipe's cost, and on a GPU its throughput at N=8192."""
    rec = _get(res, "robots", "go1_recipe") or {}
    n = rec.get("num_envs")
    goals = [_goal("go1_recipe", f"Go1 full recipe <= 15% over the bare Go1 step (N={n})",
                   rec.get("overhead"), lambda x: x <= 0.15, "{:+.1%}", _reason(rec))]
    if str(_get(res, "config", "device") or "cpu").startswith("cuda"):
        goals.append(_goal("go1_gpu_8192", "Go1 full recipe at N=8192: >= 1M env-steps/s",
                           rec.get("full_env_steps_per_s") if n == 8192 else None,
                           lambda x: x >= 1e6, lambda x: f"{x / 1e6:.2f}M env-steps/s",
                           _reason(rec)))
    return goals


def evaluate(res: dict) -> list[dict]:
    """Goals of the run's device: CPU goals (issues 3-6) or GPU goals (issue 7), plus the
    robots' (issue 12)."""
    device = _get(res, "config", "device") or "cpu"
    goals = gpu_goals(res) if str(device).startswith("cuda") else cpu_goals(res)
    return goals + robot_goals(res)
