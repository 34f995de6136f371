"""The numbers the issues ask for, as data, evaluated on one results dict: PASS / FAIL / SKIP.

The CPU overheads of randomization, normalization and the adapters over the bare step are
figures, not goals (issue 22: the CPU runs the GPU's kernels, one thread per env, and is not
tuned for; what a GPU will pay is guarded by the device-independent budgets,
``tests/benchmarks/test_budgets.py``).
"""

from __future__ import annotations

from benchmarks.report import get, pct, times, us

MIB = 1 << 20


def _gpu_rate(res: dict):
    """The best rate of CartPole rand3(step)+ObsNorm at N >= 1M."""
    pts = get(res, "throughput/gpuparam CartPole-v1 rand3(step)+ObsNorm/points") or []
    rates = [p["env_steps_per_s"] for p in pts if p["num_envs"] >= 1 << 20
             and "env_steps_per_s" in p]
    return max(rates, default=None)


def _one_kernel(res: dict):
    """1.0 when a masked write at N=1M is one kernel and no torch host sync, else 0.0."""
    gt = get(res, "latency/gpu_time_masked_write_N1048576") or {}
    ops = gt.get("kernels_per_call")
    return None if ops is None else float(ops == 1 and not gt.get("torch_sync_inside"))


def _go1_8192(res: dict):
    rec = get(res, "robots/go1_recipe") or {}
    return rec.get("full_env_steps_per_s") if rec.get("num_envs") == 8192 else None


WRITES = "host time (N=1, fastest of 300; {})"
GOALS = [  # (id, devices, goal, value: a results path or a function of the results,
    #           passes, display)
    ("cartpole_vs_gymnasium", "cpu", "CartPole step >= 2.5x Gymnasium vector (N=16384)",
     "throughput_paired/ratio", lambda v: v >= 2.5, times),
    ("switch_vs_recreate", "cpu", "parameter switch (write + reset_stats) >= 10,000x faster "
     "than collector recreate (spawn, N=16384)",
     "latency/ratios/collector_recreate_over_gpuparam_write_reset_stats_N16384",
     lambda v: v >= 1e4, "{:,.0f}x".format),
    ("issue5_switch", "cpu", "parameter switch (write + reset_stats) >= 1,000x faster than "
     "collector recreate (spawn, N=4096)",
     "latency/ratios/collector_recreate_over_gpuparam_write_reset_stats_N4096",
     lambda v: v >= 1e3, "{:,.0f}x".format),
    ("host_time", "cpu", "host time per captured step < 15 us (N=1, CartPole rand3(step)"
     "+ObsNorm+RewardNorm)", "host_time/full_step_s", lambda v: v < 15e-6, us),
    ("write_host_time_set", "cpu", "params.set(name, value, mask) <= 12 us "
     + WRITES.format("a number"), "host_time/masked_writes/set_s", lambda v: v <= 12e-6, us),
    ("write_host_time_set_tensor", "cpu", "params.set(name, value, mask) <= 12 us "
     + WRITES.format("a device tensor, validate=False"),
     "host_time/masked_writes/set_tensor_s", lambda v: v <= 12e-6, us),
    ("write_host_time_set_reset_stats", "cpu", "params.set + ObsNorm.reset_stats(mask) <= "
     "20 us " + WRITES.format("a number"), "host_time/masked_writes/set_reset_stats_s",
     lambda v: v <= 20e-6, us),
    ("write_host_time_set_reset_stats_tensor", "cpu", "params.set + ObsNorm.reset_stats(mask)"
     " <= 20 us " + WRITES.format("a device tensor, validate=False"),
     "host_time/masked_writes/set_reset_stats_tensor_s", lambda v: v <= 20e-6, us),
    ("gpu_throughput", "cuda", "CartPole rand3(step)+ObsNorm, N >= 1M: >= 1e10 env-steps/s",
     _gpu_rate, lambda v: v >= 1e10, "{:.3g} env-steps/s".format),
    ("gpu_roofline", "cuda", ">= 50% of copy bandwidth for the counted bytes (full config)",
     "roofline/full/fraction_of_copy_bandwidth", lambda v: v >= 0.5, "{:.1%}".format),
    ("gpu_write_time", "cuda", "masked parameter write at N=1M < 20 us GPU time",
     "latency/gpu_time_masked_write_N1048576/gpu_s_per_call", lambda v: v < 20e-6, us),
    ("gpu_write_one_kernel", "cuda", "masked write: one kernel, no torch host sync",
     _one_kernel, lambda v: v == 1.0, {1.0: "yes", 0.0: "no"}.get),
    ("memory_growth", "cpu cuda", "no memory growth over the steady-state run (<= 4 MiB)",
     "memory/steady_state/growth_bytes", lambda v: v <= 4 * MIB, "{:+,d} B".format),
    ("distributed_weak_scaling", "cpu cuda", "2 ranks x N >= 1.8x the env-steps/s of 1 rank "
     "x N (ObsNorm synced every 10 steps)", "distributed/ratio", lambda v: v >= 1.8, times),
    ("robot_step_rand3", "cpu cuda", "Ant per-step friction+damping+gear <= 10% over bare "
     "(N=64, its stages timed alone over the bare step)",
     "robots/overhead/rand3/extra_share", lambda v: v <= 0.10, pct),
    ("robot_host_time", "cpu cuda", "Ant captured step at N=1: host time beyond physics "
     "< 50 us", "robots/host_time/beyond_physics_s", lambda v: v < 50e-6, us),
    ("go1_recipe", "cpu cuda", "Go1 full recipe <= 15% over the bare Go1 step (N=64)",
     "robots/go1_recipe/overhead", lambda v: v <= 0.15, pct),
    ("go1_gpu_8192", "cuda", "Go1 full recipe at N=8192: >= 1M env-steps/s", _go1_8192,
     lambda v: v >= 1e6, lambda v: f"{v / 1e6:.2f}M env-steps/s"),
]


def _reason(res: dict, path) -> str:
    """The skip or error recorded nearest the figure's path, else "not measured"."""
    d, why = res, "not measured"
    for key in path.split("/") if isinstance(path, str) else ():
        if not isinstance(d, dict):
            break
        why = d.get("skipped") or d.get("error") or why
        d = d.get(key)
    return why


def evaluate(res: dict) -> list[dict]:
    """The goals of the run's device (``res["config"]["device"]``), each a dict with
    ``id``, ``goal``, ``status`` and ``measured`` / ``display``, or ``reason`` when SKIP."""
    kind = "cuda" if str(get(res, "config/device") or "cpu").startswith("cuda") else "cpu"
    out = []
    for gid, devices, goal, where, passes, display in GOALS:
        if kind not in devices.split():
            continue
        value = where(res) if callable(where) else get(res, where)
        if value is None:
            out.append({"id": gid, "goal": goal, "status": "SKIP", "reason": _reason(res, where)})
        else:
            out.append({"id": gid, "goal": goal, "measured": value, "display": display(value),
                        "status": "PASS" if passes(value) else "FAIL"})
    return out
