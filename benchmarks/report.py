"""The docs' performance tables, generated from a results JSON (``python -m benchmarks``).

``python -m benchmarks.report RESULTS.json`` prints both Markdown sections;
``--update-readme README.md`` rewrites the README's summary between ``<!-- perf:start -->``
and ``<!-- perf:end -->``, ``--update-reference benchmarks/README.md`` the full tables between
``<!-- perf-full:start -->`` and ``<!-- perf-full:end -->`` (nothing else is touched).

Which figures the tables show is data: ``FIGURES`` and ``SUMMARY`` list ``(label, path,
format)``. A path walks the JSON by keys separated by ``/``; a part with ``*`` matches every
key it fits (bound to ``k[0]``, ``k[1]``, ...), one row each. The label is a format string
over ``k``, ``r`` (the results) and ``d`` (the dict holding the figure); a figure whose
measurement was skipped or raised shows the reason.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from pathlib import Path

START, END = "<!-- perf:start -->", "<!-- perf:end -->"  # README.md: the summary
FULL_START, FULL_END = "<!-- perf-full:start -->", "<!-- perf-full:end -->"  # the reference
REFERENCE = "benchmarks/README.md"


def _scaled(v: float, units, digits: str = ".3g") -> str:
    for scale, unit in units:
        if abs(v) >= scale:
            return f"{v / scale:{digits}} {unit}"
    return f"{v / units[-1][0]:{digits}} {units[-1][1]}"


def rate(v: float) -> str:
    return _scaled(v, ((1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s"), (1, "/s")))


def seconds(v: float) -> str:
    return _scaled(v, ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")))


def nbytes(v: float) -> str:
    return _scaled(v, ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B")), ".4g")


pct, times = "{:+.1%}".format, "{:.2f}x".format  # +12.3%, 2.50x


def us(v: float) -> str:
    return f"{v * 1e6:.1f} us"


def _largest(series: dict) -> str:
    p = max((p for p in series["points"] if "env_steps_per_s" in p), key=lambda p: p["num_envs"])
    return f"{rate(p['env_steps_per_s'])} (N={p['num_envs']:,})"


def _stages(c: dict) -> str:
    parts = " + ".join(f"{k} {v * 1e6:.1f}" for k, v in c["stages_s"].items())
    return f"{parts} = {c['sum_s'] * 1e6:.1f} us (whole step {c['step_s'] * 1e6:.1f} us)"


def _budget(c: dict) -> str:
    phys = f" (+{c['physics_launches']} MuJoCo Warp, eager)" if c["physics_launches"] else ""
    return (f"{c['launches']}{phys} / {c['graph_segments']} / {c['eager_segments']} / "
            f"{c['argument_bytes_per_env']:.0f} B")


def _pair(a: str, b: str, ratio: str | None = None, fmt=rate):
    """``a / b (ratio)`` of the figures at keys (paths) ``a``, ``b`` and ``ratio`` of a dict."""
    return lambda d: (f"{fmt(get(d, a))} / {fmt(get(d, b))}"
                      + (f" ({times(get(d, ratio))})" if ratio else ""))


def _go1(row: dict) -> str:
    """gpuparam's rate, then envpool's per thread count with gpuparam's over it."""
    return f"{rate(row['gpuparam']['env_steps_per_s'])} / " + ", ".join(
        f"{k.replace('_', ' ')} {rate(v['env_steps_per_s'])} "
        f"({times(row['ratio_gpuparam_over_' + k])})" for k, v in row.items()
        if k.startswith("envpool_"))


_robot = _pair("gpuparam/env_steps_per_s", "gymnasium_sync/env_steps_per_s",
               "ratio_gpuparam_over_gymnasium")
PAIRED = "gpuparam / Gymnasium vector"
FIGURES = [  # (label, path, format): the reference's full table
    ("gpuparam CartPole-v1 (N={r[throughput_paired][num_envs]:,}, paired)",
     "throughput_paired/points/gpuparam/env_steps_per_s", rate),
    ("Gymnasium vector CartPole-v1 (N={r[throughput_paired][num_envs]:,}, paired)",
     "throughput_paired/points/gymnasium/env_steps_per_s", rate),
    ("gpuparam CartPole-v1 rand3(step)+ObsNorm (N={r[throughput_paired][num_envs]:,}, paired)",
     "throughput_paired/points/gpuparam_full/env_steps_per_s", rate),
    (f"{PAIRED}, same run (median of per-round ratios)", "throughput_paired/ratio", times),
    ("{k[0]}, largest N", "throughput/*", _largest),
    ("gpuparam params.set(mask) (N={d[num_envs]:,})", "latency/gpuparam_write/*/per_call_s",
     seconds),
    ("gpuparam set + ObsNorm.reset_stats (N={d[num_envs]:,})",
     "latency/gpuparam_write_reset_stats/*/per_call_s", seconds),
    ("Gymnasium AsyncVectorEnv.set_attr (N={d[num_envs]})",
     "latency/gymnasium_async_set_attr/per_call_s", seconds),
    ("TorchRL 2-worker collector shutdown + recreate to first batch ({k[0]})",
     "latency/torchrl_collector_recreate/by_start_method/*/per_switch_s", seconds),
    ("overhead {k[0]} (N={r[overhead][num_envs]:,})", "overhead/configs/*/overhead", pct),
    ("stage times, {d[label]} (N={r[stages][num_envs]:,})", "stages/configs/*", _stages),
    ("host time per captured step, {k[0]} (N=1)", "host_time/*_step_s", us),
    ("host time per masked write, {k[0]} (N=1, fastest of {d[calls]})",
     "host_time/masked_writes/*[!n]_s", us),  # not the medians (*_median_s)
    ("device time without host pacing, {k[1]} (N={k[0]})",
     "host_time/masked_writes/device_time_N*/*/device_s_per_call", us),
    ("adapter overhead {d[label]} (N={r[adapters][num_envs]:,})", "adapters/configs/*",
     lambda c: pct(c["overhead"])),
    ("{k[0]} training loop, time on Gymnasium ({d[gymnasium_side]}) / on gpuparam "
     "(N={r[training][num_envs]}, {r[training][iterations]} iterations)",
     "training/libraries/*", lambda c: times(c["ratio"])),
    ("device bytes per env, {d[config]}", "memory/per_env/*/counted_bytes_per_env",
     lambda v: f"{v:.1f} B"),
    ("memory growth over {d[steps]:,} steps ({d[metric]})", "memory/steady_state/growth_bytes",
     nbytes),
    ("{k[0]} rank(s) x N={d[num_envs_per_rank]:,}, ObsNorm synced every {d[sync_every]}",
     "distributed/env_steps_per_s_*", rate),
    ("weak scaling 2 ranks / 1 rank", "distributed/ratio", times),
    ("sync in the loop at 2 ranks: host time / of which waiting", "distributed",
     _pair("in_loop_sync_s_2", "in_loop_wait_s_2", fmt=seconds)),
    ("blocking ObsNorm.sync / bare all_gather at 2 ranks, per call", "distributed",
     _pair("sync_s_2", "all_gather_s_2", fmt=seconds)),
    ("gpuparam / Gymnasium sync (MuJoCo C) {k[0]}", "robots/throughput/*", _robot),
    ("robot overhead {d[label]} (Ant N={r[robots][overhead][num_envs]})", "robots/overhead/*",
     lambda c: f"{pct(c['overhead'])} end to end; its stages alone {c['extra_share']:.1%}"),
    ("gpuparam / envpool's C++ port (MuJoCo C) {k[0]}", "robots/go1_throughput/*", _go1),
    ("Go1 full recipe over bare ({d[env]} N={d[num_envs]}: {d[label]})", "robots/go1_recipe",
     lambda c: f"{pct(c['overhead'])} ({rate(c['full_env_steps_per_s'])} vs "
               f"{rate(c['bare_env_steps_per_s'])})"),
    ("Ant N=1 captured step / physics replay / beyond physics", "robots/host_time",
     lambda h: " / ".join(seconds(h[k]) for k in ("step_s", "physics_replay_s",
                                                   "beyond_physics_s"))),
    ("  of which other stages' launches / Python", "robots/host_time",
     _pair("other_stages_device_s", "python_s", fmt=seconds)),
    ("budget {k[0]}: launches / Warp graphs / eager segments / arg bytes per env",
     "budgets/subjects/*", _budget),
    ("budget {k[0]}: kernels / host reads per call", "budgets/masked_writes/*",
     lambda c: f"{c['kernels']} / {c['host_reads']}"),
    ("counted bytes per env-step, bare / full", "roofline/bytes_per_env_step",
     lambda b: f"{b['bare']} / {b['full']} B"),
    ("device copy bandwidth", "roofline/copy_bandwidth/bytes_per_s",
     lambda v: rate(v).replace("/s", "B/s")),
    ("roofline {k[0]}: achieved / copy bandwidth", "roofline/*/fraction_of_copy_bandwidth",
     lambda v: f"{v:.1%}"),
]

SUMMARY = [  # (label, path, format): the README's few headline figures
    (f"CartPole-v1 env-steps/s, N={{d[num_envs]:,}}: {PAIRED}", "throughput_paired",
     _pair("points/gpuparam/env_steps_per_s", "points/gymnasium/env_steps_per_s", "ratio")),
    ("CartPole-v1, largest N", "throughput/gpuparam CartPole-v1", _largest),
    ("switch a parameter for some envs + reset their statistics (N=16,384) / recreate a "
     "2-worker TorchRL collector", "latency",
     _pair("gpuparam_write_reset_stats/16384/per_call_s",
           "torchrl_collector_recreate/per_switch_s", fmt=seconds)),
    ("per-step randomization of 3 parameters, over the bare step",
     "overhead/configs/step_randomization_3/overhead", pct),
    ("ObsNorm + RewardNorm, over the bare step", "overhead/configs/ObsNorm+RewardNorm/overhead",
     pct),
    ("host time per captured step, N=1, {d[config]}", "host_time/full_step_s", seconds),
    ("rsl_rl adapter (incl. copies), over the bare step", "adapters/configs/rsl_rl/overhead",
     pct),
    ("Ant-v5 env-steps/s, N=64: gpuparam (MuJoCo Warp) / Gymnasium (MuJoCo C)",
     "robots/throughput/Ant-v5 N=64", _robot),
    ("Go1 flat env-steps/s, N=256: gpuparam (MuJoCo Warp) / envpool's port (MuJoCo C, 1 "
     "thread)", "robots/go1_throughput/Go1JoystickFlatTerrain-v1 N=256",
     _pair("gpuparam/env_steps_per_s", "envpool_1_threads/env_steps_per_s",
           "ratio_gpuparam_over_envpool_1_threads")),
    ("Go1 full sim-to-real recipe, over the bare Go1 step (N={d[num_envs]})",
     "robots/go1_recipe/overhead", pct),
    ("what a GPU pays per step, CartPole rand3(step)+ObsNorm+RewardNorm: launches / graphs",
     "budgets/subjects/CartPole rand3(step)+ObsNorm+RewardNorm",
     lambda c: f"{c['launches']} / {c['graph_segments']}"),
]


def get(d, path: str):
    """The value at ``path`` (keys separated by ``/``), or None."""
    for key in path.split("/"):
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _walk(d, parts: list[str], keys: tuple, parent):
    """``(keys bound by *, the dict holding the figure, the figure)`` for each match."""
    if not parts:
        yield keys, parent, d
        return
    if not isinstance(d, dict):
        return
    part, rest = parts[0], parts[1:]
    pre, post = part.split("*")[0], re.split(r"[*\]]", part)[-1]
    found = [(k, v) for k, v in d.items() if k == part or (
        "*" in part and fnmatch.fnmatchcase(k, part) and (isinstance(v, dict) or not rest))]
    if not found and (d.get("skipped") or d.get("error")):  # did not run: its reason
        yield keys, d, d
    for k, v in found:  # a * binds the part of the key it matched
        yield from _walk(v, rest, keys + ((k[len(pre):len(k) - len(post)],) if "*" in part
                                          else ()), d)


def rows(res: dict, spec: list) -> list[tuple[str, str]]:
    """``(label, value)`` of every figure of ``spec`` found in ``res``."""
    out = []
    for label, path, fmt in spec:
        for keys, holder, value in _walk(res, path.split("/"), (), res):
            if isinstance(value, dict) and (value.get("skipped") or value.get("error")):
                why = ("skipped: " if value.get("skipped") else "error: ") + (
                    value.get("skipped") or value["error"])
                try:
                    out.append((label.format(k=keys, r=res, d=value), why))
                except (KeyError, IndexError, TypeError):
                    out.append((re.sub(r" ?\(?\{[^}]*\}\)?", "", label), why))
                continue
            d = value if isinstance(value, dict) else holder
            try:
                out.append((label.format(k=keys, r=res, d=d), fmt(value)))
            except (KeyError, IndexError, TypeError):
                continue  # a figure this run's results do not hold
    return out


def goal_rows(res: dict) -> list[tuple[str, str, str]]:
    """``(goal, status, measured)`` of the goals the run evaluated (``GOALS``)."""
    return [(g["goal"], g["status"], (g.get("display") or g.get("reason", ""))
             + (f" ({g['detail']})" if g.get("detail") else "")) for g in res.get("goals", [])]


def errors(res: object, where: str = "") -> list[tuple[str, str]]:
    """``(path, message)`` of every measurement that raised (an ``"error"`` entry)."""
    if isinstance(res, list):
        return [e for i, v in enumerate(res) for e in errors(v, f"{where}[{i}]")]
    if not isinstance(res, dict):
        return []
    out = [(where or "run", res["error"])] if isinstance(res.get("error"), str) else []
    return out + [e for k, v in res.items() if k not in ("goals", "error")
                  for e in errors(v, f"{where}.{k}" if where else str(k))]


def load_note(res: dict) -> list[str]:
    """A warning, as a Markdown paragraph, when other processes kept the cores busy."""
    m = res.get("machine", {})
    cores = m.get("cpu_count") or 1
    loads = [x[0] for x in (m.get("load_average_at_start"), m.get("load_average_at_end")) if x]
    if not loads or max(loads) <= 0.5 * cores:
        return []
    return ["", f"_Note: 1-min load average reached {max(loads):.1f} on {cores} cores: other "
            "processes shared the machine, so absolute figures are noisy (same-run "
            "interleaved ratios less so)._"]


def text(res: dict) -> str:
    """Console summary: aligned figures, then the goals' PASS / FAIL / SKIP lines."""
    figures = rows(res, FIGURES)
    width = max((len(k) for k, _ in figures), default=0)
    return "\n".join([*(f"{k.ljust(width)}  {v}" for k, v in figures), "",
                      *(f"{s}  {g}: {m}" for g, s, m in goal_rows(res)), *load_note(res)])


def _provenance(res: dict) -> list[str]:
    """Where and how the results were measured: machine, command, commit, libraries, load."""
    m, c = res.get("machine", {}), res.get("config", {})
    libs = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items() if v)
    git = m.get("git") or {}
    return [
        f"Measured {m.get('date')} on {m.get('cpu_model')} ({m.get('cpu_count')} cores), GPU: "
        f"{m.get('gpu_name') or 'none'}, device `{c.get('device')}`, torch threads: "
        f"{c.get('torch_threads')}.",
        f"Command: `{c.get('command')}` at commit {git.get('commit')}"
        f"{' (with uncommitted changes)' if git.get('dirty') else ''}. Libraries: {libs}.",
        f"Load average (1/5/15 min) at start: {m.get('load_average_at_start')}, at end: "
        f"{m.get('load_average_at_end')}.",
    ]


def _table(header: tuple[str, ...], body) -> list[str]:
    return [f"| {' | '.join(header)} |", f"|{' --- |' * len(header)}",
            *("| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |" for row in body)]


def summary_markdown(res: dict) -> str:
    """The README's performance section (markers included): provenance and the headline
    figures; the full tables are in the reference (``full_markdown``)."""
    goals = res.get("goals", [])
    failed = [g["id"] for g in goals if g["status"] == "FAIL"]
    met = (f"{sum(g['status'] == 'PASS' for g in goals)} of {len(goals)}"
           + (f" (not met: {', '.join(failed)})" if failed else ""))
    return "\n".join([
        START, "## Performance", "", *_provenance(res), "",
        *_table(("figure", "value"), [*rows(res, SUMMARY), ("goals met", met)]), "",
        f"Every figure, the goals and how they are measured: [{REFERENCE}]({REFERENCE}).",
        *load_note(res), "", END])


def full_markdown(res: dict) -> str:
    """The reference's full tables (markers included): every figure and every goal."""
    return "\n".join([
        FULL_START, *_provenance(res), "All ratios are measured in the same run; peers that "
        "are not installed are listed as skipped.", "",
        *_table(("figure", "value"), rows(res, FIGURES)), "",
        *_table(("goal", "status", "measured"), goal_rows(res)), *load_note(res), "", FULL_END])


def update_section(path: Path, section: str, start: str = START, end: str = END) -> None:
    """Replace the text from ``start`` to ``end`` (inclusive) in ``path`` with ``section``."""
    content = path.read_text()
    i, j = content.find(start), content.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"{path}: markers {start} ... {end} not found; add them where the "
                         "performance section belongs")
    path.write_text(content[:i] + section + content[j + len(end):])


# ----------------------------------------------------------------------------- goals
# The numbers the issues ask for, evaluated on one results dict: PASS / FAIL / SKIP. The CPU
# overheads of randomization, normalization and the adapters over the bare step are figures,
# not goals (issue 22: the CPU runs the GPU's kernels, one thread per env, and is not tuned
# for; what a GPU will pay is guarded by the device-independent budgets,
# tests/benchmarks/test_budgets.py).
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="a results JSON written by python -m benchmarks")
    p.add_argument("--update-readme", type=Path, metavar="README",
                   help="rewrite this file's summary between the perf markers")
    p.add_argument("--update-reference", type=Path, metavar="MD",
                   help=f"rewrite this file's full tables between the perf-full markers "
                        f"(the project's: {REFERENCE})")
    args = p.parse_args(argv)
    res = json.loads(args.results.read_text())
    for path, section, marks in ((args.update_readme, summary_markdown, (START, END)),
                                 (args.update_reference, full_markdown, (FULL_START, FULL_END))):
        if path:
            update_section(path, section(res), *marks)
            print(f"updated {path}", file=sys.stderr)
    if not (args.update_readme or args.update_reference):
        print(summary_markdown(res) + "\n\n" + full_markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
