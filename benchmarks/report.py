"""Turn a results JSON into text: a console summary, or the Markdown sections of the docs.

``python -m benchmarks.report RESULTS.json`` prints both Markdown sections;
``--update-readme README.md`` rewrites the README's short summary between
``<!-- perf:start -->`` and ``<!-- perf:end -->``, and ``--update-reference
benchmarks/README.md`` the full tables between ``<!-- perf-full:start -->`` and
``<!-- perf-full:end -->`` (the markers must exist; nothing else in the files is touched).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.goals import evaluate

START, END = "<!-- perf:start -->", "<!-- perf:end -->"  # README.md: the summary
FULL_START, FULL_END = "<!-- perf-full:start -->", "<!-- perf-full:end -->"  # the reference
REFERENCE = "benchmarks/README.md"


# ----------------------------------------------------------------------------- formatting
def rate(v: float) -> str:
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.3g} {unit}/s"
    return f"{v:.3g} /s"


def seconds(v: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v * 1e9:.3g} ns"


def nbytes(v: float) -> str:
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.4g} B"


def _why(d) -> str:
    if isinstance(d, dict):
        reason = d.get("skipped") or d.get("error")
        if reason:
            return ("skipped: " if "skipped" in d else "error: ") + reason
    return "not measured"


# ----------------------------------------------------------------------------- figures
def _point(res: dict, series: str, n: int | None = None) -> dict | None:
    pts = res.get("throughput", {}).get(series, {}).get("points", [])
    ok = [p for p in pts if "env_steps_per_s" in p and (n is None or p["num_envs"] == n)]
    if not ok:
        return None
    return max(ok, key=lambda p: p["num_envs"]) if n is None else ok[0]


def _series_row(res: dict, series: str, n: int | None, label: str) -> tuple[str, str]:
    p = _point(res, series, n)
    if p is None:
        s = res.get("throughput", {}).get(series, {})
        return label, _why(s if "skipped" in s else next(iter(s.get("points", [])), {}))
    return f"{label} (N={p['num_envs']:,})", rate(p["env_steps_per_s"])


def key_figures(res: dict) -> list[tuple[str, str]]:
    """``(figure, value)`` rows: throughput, latency, overheads, memory, roofline."""
    rows: list[tuple[str, str]] = []
    paired = res.get("throughput_paired", {})
    n = paired.get("num_envs")
    pts = paired.get("points", {})
    for key, label in (("gpuparam", "gpuparam CartPole-v1"),
                       ("gymnasium", "Gymnasium vector CartPole-v1"),
                       ("gpuparam_full", "gpuparam CartPole-v1 rand3(step)+ObsNorm")):
        p = pts.get(key, {})
        val = rate(p["env_steps_per_s"]) if "env_steps_per_s" in p else _why(p)
        rows.append((f"{label} (N={n:,}, paired)" if n else label, val))
    if "ratio" in paired:
        rows.append(("gpuparam / Gymnasium vector, same run", f"{paired['ratio']:.2f}x"))
    rows.append(_series_row(res, "gpuparam CartPole-v1", None, "gpuparam CartPole-v1, largest N"))
    rows.append(_series_row(res, "gpuparam Pendulum-v1", None, "gpuparam Pendulum-v1, largest N"))
    for series in ("gymnasium SyncVectorEnv", "gymnasium AsyncVectorEnv", "torchrl ParallelEnv",
                   "envpool"):
        rows.append(_series_row(res, series, None, f"{series} CartPole-v1"))
    lat = res.get("latency", {})
    for key, label in (("gpuparam_write", "gpuparam params.set(mask)"),
                       ("gpuparam_write_reset_stats", "gpuparam set + ObsNorm.reset_stats")):
        for nn, r in sorted(lat.get(key, {}).items(), key=lambda kv: int(kv[0])):
            val = seconds(r["per_call_s"]) if "per_call_s" in r else _why(r)
            rows.append((f"{label} (N={int(nn):,})", val))
    sa = lat.get("gymnasium_async_set_attr", {})
    rows.append((f"Gymnasium AsyncVectorEnv.set_attr (N={sa.get('num_envs', '?')})",
                 seconds(sa["per_call_s"]) if "per_call_s" in sa else _why(sa)))
    rc = lat.get("torchrl_collector_recreate", {})
    by_method = rc.get("by_start_method") or {"": rc}
    for method, r in by_method.items():
        label = "TorchRL 2-worker collector shutdown + recreate to first batch"
        label += f" ({method})" if method else ""
        rows.append((label, seconds(r["per_switch_s"]) if "per_switch_s" in r else _why(r)))
    ov = res.get("overhead", {})
    for key, c in ov.get("configs", {}).items():
        val = f"{c['overhead']:+.1%}" if "overhead" in c else _why(c)
        what = c.get("label", key) if key == "ObsNorm_D64" else key
        rows.append((f"overhead {what} (N={ov.get('num_envs'):,})", val))
    st = res.get("stages", {})
    for key, c in st.get("configs", {}).items():
        if "stages_s" in c:
            parts = " + ".join(f"{k} {v * 1e6:.1f}" for k, v in c["stages_s"].items())
            val = f"{parts} = {c['sum_s'] * 1e6:.1f} us (whole step {c['step_s'] * 1e6:.1f} us)"
        else:
            val = _why(c)
        rows.append((f"stage times, {c.get('label', key)} (N={st.get('num_envs'):,})", val))
    if "skipped" in st:
        rows.append(("stage times", _why(st)))
    ht = res.get("host_time", {})
    timed = ("time to completion" if ht.get("measures") == "host+device" else "host time")
    for key, what in (("bare_step_s", "bare"), ("full_step_s", ht.get("config", "full")),
                      ("replay_only_step_s", "replay call only, full")):
        if key in ht:
            rows.append((f"{timed} per captured step, {what} (N=1)",
                         f"{ht[key] * 1e6:.1f} us"))
    if ht and "full_step_s" not in ht:
        rows.append(("host time per captured step (N=1)", _why(ht)))
    rows += write_rows(ht.get("masked_writes"))
    ad = res.get("adapters", {})
    for key, c in ad.get("configs", {}).items():
        val = f"{c['overhead']:+.1%}" if "overhead" in c else _why(c)
        rows.append((f"adapter overhead {c.get('label', key)} (N={ad.get('num_envs'):,})", val))
    tr = res.get("training", {})
    for lib, c in tr.get("libraries", {}).items():
        val = f"{c['ratio']:.2f}x" if "ratio" in c else _why(c)
        side = f" ({c['gymnasium_side']})" if "gymnasium_side" in c else ""
        rows.append((f"{lib} training loop, time on Gymnasium{side} / on gpuparam "
                     f"(N={tr.get('num_envs')}, {tr.get('iterations')} iterations)", val))
    mem = res.get("memory", {})
    for key, m in mem.get("per_env", {}).items():
        if "counted_bytes_per_env" in m:
            rows.append((f"device bytes per env, {m.get('config', key)}",
                         f"{m['counted_bytes_per_env']:.1f} B"))
        else:
            rows.append((f"device bytes per env, {key}", _why(m)))
    ss = mem.get("steady_state", {})
    if "growth_bytes" in ss:
        rows.append((f"memory growth over {ss['steps']:,} steps ({ss['metric']})",
                     nbytes(ss["growth_bytes"])))
    else:
        rows.append(("memory growth", _why(ss)))
    d = res.get("distributed", {})
    if "ratio" in d:
        n = d["num_envs_per_rank"]
        for w in ("1", "2"):
            rows.append((f"{w} rank(s) x N={n:,}, ObsNorm synced every {d['sync_every']}",
                         rate(d[f"env_steps_per_s_{w}"])))
        rows.append(("weak scaling 2 ranks / 1 rank", f"{d['ratio']:.2f}x"))
        if "in_loop_sync_s_2" in d and "all_gather_s_2" in d:
            mode = "overlapped" if d.get("overlap") else "blocking"
            rows.append((f"sync in the loop at 2 ranks ({mode}): host time / of which waiting",
                         f"{seconds(d['in_loop_sync_s_2'])} / {seconds(d['in_loop_wait_s_2'])}"))
            rows.append(("blocking ObsNorm.sync / bare all_gather at 2 ranks, per call",
                         f"{seconds(d['sync_s_2'])} / {seconds(d['all_gather_s_2'])}"))
        else:
            rows.append(("ObsNorm.sync / bare all_reduce at 2 ranks, per call",
                         f"{seconds(d['sync_s_2'])} / {seconds(d['all_reduce_s_2'])}"))
    else:
        rows.append(("weak scaling over ranks", _why(d)))
    rows += robot_rows(res)
    rows += budget_rows(res)
    roof = res.get("roofline", {})
    counted = roof.get("bytes_per_env_step", {})
    if counted:
        rows.append(("counted bytes per env-step, bare / full", f"{counted['bare']} / "
                     f"{counted['full']} B"))
    if "copy_bandwidth" in roof:
        rows.append(("device copy bandwidth", rate(roof["copy_bandwidth"]["bytes_per_s"])
                     .replace("/s", "B/s")))
        for key in ("bare", "full"):
            r = roof.get(key, {})
            if "fraction_of_copy_bandwidth" in r:
                rows.append((f"roofline {key}: achieved / copy bandwidth",
                             f"{r['fraction_of_copy_bandwidth']:.1%}"))
    elif "skipped" in roof:
        rows.append(("roofline", "skipped: " + roof["skipped"]))
    return rows


def robot_rows(res: dict) -> list[tuple[str, str]]:
    """Rows of the MuJoCo Warp robots (benchmarks/robots.py)."""
    rob = res.get("robots", {})
    rows: list[tuple[str, str]] = []
    tp = rob.get("throughput", {})
    if "throughput" in rob and not isinstance(tp, dict) or "skipped" in tp or "error" in tp:
        return [("robots", _why(tp))]
    for key, row in tp.items():
        for who, label in (("gpuparam", "gpuparam"), ("gymnasium_sync", "Gymnasium sync")):
            r = row.get(who, {})
            val = rate(r["env_steps_per_s"]) if "env_steps_per_s" in r else _why(r)
            rows.append((f"{label} {key}", val))
        if "ratio_gpuparam_over_gymnasium" in row:
            rows.append((f"gpuparam / Gymnasium sync {key}",
                         f"{row['ratio_gpuparam_over_gymnasium']:.2f}x"))
    ov = rob.get("overhead", {})
    for key in ("rand3", "rand3_real", "mass", "push"):
        c = ov.get(key, {})
        val = f"{c['overhead']:+.1%}" if "overhead" in c else _why(c or ov)
        if "extra_share" in c:
            val += f" end to end; its stages alone {c['extra_share']:.1%}"
        rows.append((f"robot overhead {c.get('label', key)} (Ant N={ov.get('num_envs')})", val))
    g1 = rob.get("go1_throughput", {})
    if isinstance(g1, dict) and ("skipped" in g1 or "error" in g1):
        rows.append(("Go1", _why(g1)))
    elif isinstance(g1, dict):
        for key, row in g1.items():
            for who in [k for k in row if k == "gpuparam" or k.startswith("envpool_")]:
                r = row[who]
                val = rate(r["env_steps_per_s"]) if "env_steps_per_s" in r else _why(r)
                rows.append((f"{who.replace('_', ' ')} {key}", val))
            for k, v in row.items():
                if k.startswith("ratio_"):
                    rows.append((f"{k.replace('ratio_', '').replace('_', ' ')} {key}",
                                 f"{v:.2f}x"))
    rec = rob.get("go1_recipe", {})
    if "overhead" in rec:
        rows.append((f"Go1 full recipe over bare ({rec['env']} N={rec['num_envs']}: "
                     f"{rec['label']})", f"{rec['overhead']:+.1%} "
                     f"({rate(rec['full_env_steps_per_s'])} vs "
                     f"{rate(rec['bare_env_steps_per_s'])})"))
    elif rec:
        rows.append(("Go1 recipe", _why(rec)))
    host = rob.get("host_time", {})
    if "beyond_physics_s" in host:
        rows.append(("Ant N=1 captured step / physics replay / beyond physics",
                     f"{seconds(host['step_s'])} / {seconds(host['physics_replay_s'])} / "
                     f"{seconds(host['beyond_physics_s'])}"))
        rows.append(("  of which other stages' launches / Python",
                     f"{seconds(host['other_stages_device_s'])} / {seconds(host['python_s'])}"))
    return rows


WRITE_LABELS = {
    "set": "params.set(mask), a number",
    "set_tensor": "params.set(mask), a device tensor, validate=False",
    "set_tensor_validated": "params.set(mask), a device tensor, validated (one flag read)",
    "reset_stats": "ObsNorm.reset_stats(mask)",
    "set_reset_stats": "set + reset_stats, a number",
    "set_reset_stats_tensor": "set + reset_stats, a device tensor, validate=False",
    "set_reset_stats_tensor_validated": "set + reset_stats, a device tensor, validated",
}


def write_rows(mw: dict | None) -> list[tuple[str, str]]:
    """Rows of the masked writes' host times at N=1 (``host_time.masked_writes``) and, on
    CUDA, their device times without host pacing."""
    if not mw:
        return []
    if "set_s" not in mw:
        return [("host time per masked write (N=1)", _why(mw))]
    rows = [(f"host time, {label} (N=1, fastest of {mw['calls']})",
             f"{mw[f'{k}_s'] * 1e6:.1f} us") for k, label in WRITE_LABELS.items()
            if f"{k}_s" in mw]
    for key, d in mw.items():
        if not key.startswith("device_time_N"):
            continue
        n = key.removeprefix("device_time_N")
        for k, label in WRITE_LABELS.items():
            c = d.get(k) if isinstance(d, dict) else None
            if isinstance(c, dict) and "device_s_per_call" in c:
                bw = (f", {c['bytes_per_s'] / 1e9:.0f} GB/s = "
                      f"{c['fraction_of_copy_bandwidth']:.0%} of copy bandwidth"
                      if "bytes_per_s" in c else "")
                rows.append((f"device time without host pacing, {label} (N={int(n):,})",
                             f"{c['device_s_per_call'] * 1e6:.2f} us{bw}"))
        if isinstance(d, dict) and ("skipped" in d or "error" in d):
            rows.append((f"device time of masked writes (N={int(n):,})", _why(d)))
    return rows


def budget_rows(res: dict) -> list[tuple[str, str]]:
    """Rows of the device-independent counts (benchmarks/budgets.py)."""
    b = res.get("budgets", {})
    if "subjects" not in b:
        return [("budgets", _why(b))] if b else []
    rows = []
    for name, c in b["subjects"].items():
        if "launches" not in c:
            rows.append((f"budget {name}", _why(c)))
            continue
        phys = f" (+{c['physics_launches']} MuJoCo Warp, eager)" if c["physics_launches"] else ""
        rows.append((f"budget {name}: launches / Warp graphs / eager segments / arg bytes per env",
                     f"{c['launches']}{phys} / {c['graph_segments']} / {c['eager_segments']} / "
                     f"{c['argument_bytes_per_env']:.0f} B"))
    for name, c in (b.get("masked_writes") or {}).items():
        if isinstance(c, dict) and "kernels" in c:
            rows.append((f"budget {WRITE_LABELS.get(name, name)}: kernels / host reads per call",
                         f"{c['kernels']} / {c['host_reads']}"))
    return rows


def errors(res: object, where: str = "") -> list[tuple[str, str]]:
    """``(path, message)`` of every measurement that raised (an ``"error"`` entry)."""
    out = []
    if isinstance(res, dict):
        if isinstance(res.get("error"), str):
            out.append((where or "run", res["error"]))
        for k, v in res.items():
            if k not in ("goals", "error"):
                out += errors(v, f"{where}.{k}" if where else str(k))
    elif isinstance(res, list):
        for i, v in enumerate(res):
            out += errors(v, f"{where}[{i}]")
    return out


def goal_lines(res: dict) -> list[str]:
    out = []
    for g in evaluate(res):
        if g["status"] == "SKIP":
            out.append(f"SKIP  {g['goal']}: {g['reason']}")
        else:
            detail = f" [{g['detail']}]" if g.get("detail") else ""
            out.append(f"{g['status']}  {g['goal']}: measured {g['display']}{detail}")
    return out


# ----------------------------------------------------------------------------- renderers
def load_note(res: dict) -> str | None:
    """A warning when other processes kept the cores busy during the run."""
    m = res.get("machine", {})
    cores = m.get("cpu_count") or 1
    loads = [x[0] for x in (m.get("load_average_at_start"), m.get("load_average_at_end")) if x]
    if loads and max(loads) > 0.5 * cores:
        return (f"note: 1-min load average reached {max(loads):.1f} on {cores} cores: other "
                "processes shared the machine, so absolute figures are noisy (same-run "
                "interleaved ratios less so)")
    return None


def text(res: dict) -> str:
    """Console summary: aligned key figures, then PASS/FAIL/SKIP goal lines."""
    rows = key_figures(res)
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    note = load_note(res)
    return "\n".join([*lines, "", *goal_lines(res), *([note] if note else [])])


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def _provenance(res: dict) -> list[str]:
    """Where and how the results were measured: machine, command, commit, libraries, load."""
    m, c = res.get("machine", {}), res.get("config", {})
    v = m.get("versions", {})
    libs = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    gpu = m.get("gpu_name") or "none"
    git = m.get("git") or {}
    threads = c.get("torch_threads", m.get("torch_threads", "?"))
    return [
        f"Measured {m.get('date', '?')} on {m.get('cpu_model', '?')} "
        f"({m.get('cpu_count', '?')} cores), GPU: {gpu}, device `{c.get('device', '?')}`, "
        f"torch threads: {threads}.",
        f"Command: `{c.get('command', '?')}` at commit {git.get('commit') or '?'}"
        f"{' (with uncommitted changes)' if git.get('dirty') else ''}. Libraries: {libs}.",
        f"Load average (1/5/15 min) at start: {m.get('load_average_at_start')}, at end: "
        f"{m.get('load_average_at_end')}.",
    ]


def _pct(d: dict | None) -> str:
    return f"{d['overhead']:+.1%}" if isinstance(d, dict) and "overhead" in d else _why(d)


def summary_rows(res: dict) -> list[tuple[str, str]]:
    """The README's few headline figures, ``(figure, value)``."""
    rows: list[tuple[str, str]] = []
    paired = res.get("throughput_paired", {})
    pts, n = paired.get("points", {}), paired.get("num_envs")
    gp_, gym = pts.get("gpuparam", {}), pts.get("gymnasium", {})
    if "env_steps_per_s" in gp_ and "env_steps_per_s" in gym and "ratio" in paired:
        rows.append((f"CartPole-v1 env-steps/s, N={n:,}: gpuparam / Gymnasium vector",
                     f"{rate(gp_['env_steps_per_s'])} / {rate(gym['env_steps_per_s'])} "
                     f"({paired['ratio']:.2f}x)"))
    else:
        rows.append(("CartPole-v1 env-steps/s: gpuparam / Gymnasium vector", _why(gp_ or gym)))
    rows.append(_series_row(res, "gpuparam CartPole-v1", None, "CartPole-v1, largest N"))
    lat = res.get("latency", {})
    switch = lat.get("gpuparam_write_reset_stats", {}).get(str(n), {})
    rec = lat.get("torchrl_collector_recreate", {})
    rec = (rec.get("by_start_method") or {}).get(rec.get("start_method"), rec)
    if "per_call_s" in switch and "per_switch_s" in rec:
        rows.append((f"switch a parameter for some envs + reset their statistics (N={n:,}) / "
                     "recreate a 2-worker TorchRL collector",
                     f"{seconds(switch['per_call_s'])} / {seconds(rec['per_switch_s'])}"))
    ov = res.get("overhead", {}).get("configs", {})
    rows.append(("per-step randomization of 3 parameters, over the bare step",
                 _pct(ov.get("step_randomization_3"))))
    rows.append(("ObsNorm + RewardNorm, over the bare step", _pct(ov.get("ObsNorm+RewardNorm"))))
    ht = res.get("host_time", {})
    if "full_step_s" in ht:
        rows.append((f"host time per captured step, N=1, {ht.get('config', 'full')}",
                     seconds(ht["full_step_s"])))
    ad = res.get("adapters", {}).get("configs", {})
    rows.append(("rsl_rl adapter (incl. copies), over the bare step", _pct(ad.get("rsl_rl"))))
    ant = res.get("robots", {}).get("throughput", {}).get("Ant-v5 N=64", {})
    if isinstance(ant, dict) and "ratio_gpuparam_over_gymnasium" in ant:
        rows.append(("Ant-v5 env-steps/s, N=64: gpuparam (MuJoCo Warp) / Gymnasium (MuJoCo C)",
                     f"{rate(ant['gpuparam']['env_steps_per_s'])} / "
                     f"{rate(ant['gymnasium_sync']['env_steps_per_s'])} "
                     f"({ant['ratio_gpuparam_over_gymnasium']:.2f}x)"))
    go1 = res.get("robots", {}).get("go1_throughput", {}).get("Go1JoystickFlatTerrain-v1 N=256")
    if isinstance(go1, dict) and "ratio_gpuparam_over_envpool_1_threads" in go1:
        rows.append(("Go1 flat env-steps/s, N=256: gpuparam (MuJoCo Warp) / envpool's port "
                     "(MuJoCo C, 1 thread)",
                     f"{rate(go1['gpuparam']['env_steps_per_s'])} / "
                     f"{rate(go1['envpool_1_threads']['env_steps_per_s'])} "
                     f"({go1['ratio_gpuparam_over_envpool_1_threads']:.2f}x)"))
    rec = res.get("robots", {}).get("go1_recipe", {})
    if isinstance(rec, dict) and "overhead" in rec:
        rows.append((f"Go1 full sim-to-real recipe, over the bare Go1 step (N={rec['num_envs']})",
                     f"{rec['overhead']:+.1%}"))
    bud = (res.get("budgets", {}).get("subjects") or {}).get(
        "CartPole rand3(step)+ObsNorm+RewardNorm", {})
    if "launches" in bud:
        rows.append(("what a GPU pays per step, CartPole rand3(step)+ObsNorm+RewardNorm: "
                     "launches / graphs", f"{bud['launches']} / {bud['graph_segments']}"))
    goals = evaluate(res)
    met = [g for g in goals if g["status"] == "PASS"]
    failed = [g["id"] for g in goals if g["status"] == "FAIL"]
    rows.append(("goals met", f"{len(met)} of {len(goals)}"
                 + (f" (not met: {', '.join(failed)})" if failed else "")))
    return rows


def summary_markdown(res: dict) -> str:
    """The README's performance section (markers included): provenance and a short table;
    the full tables are in the reference (``full_markdown``)."""
    lines = [
        START,
        "## Performance",
        "",
        *_provenance(res),
        "",
        "| figure | value |",
        "| --- | --- |",
        *(f"| {_md(k)} | {_md(val)} |" for k, val in summary_rows(res)),
        "",
        f"Every figure, the goals and how they are measured: [{REFERENCE}]({REFERENCE}).",
    ]
    note = load_note(res)
    lines += (["", f"_{note[0].upper() + note[1:]}._"] if note else []) + ["", END]
    return "\n".join(lines)


def full_markdown(res: dict) -> str:
    """The reference's full tables (markers included): every figure and every goal."""
    lines = [
        FULL_START,
        *_provenance(res),
        "All ratios are measured in the same run; peers that are not installed are listed as "
        "skipped.",
        "",
        "| figure | value |",
        "| --- | --- |",
        *(f"| {_md(k)} | {_md(val)} |" for k, val in key_figures(res)),
        "",
        "| goal | status | measured |",
        "| --- | --- | --- |",
    ]
    for g in evaluate(res):
        measured = g.get("display") or g.get("reason", "")
        if g.get("detail"):
            measured += f" ({g['detail']})"
        lines.append(f"| {_md(g['goal'])} | {g['status']} | {_md(measured)} |")
    note = load_note(res)
    lines += (["", f"_{note[0].upper() + note[1:]}._"] if note else []) + ["", FULL_END]
    return "\n".join(lines)


def update_section(path: Path, section: str, start: str = START, end: str = END) -> None:
    """Replace the text from ``start`` to ``end`` (inclusive) in ``path`` with ``section``."""
    content = path.read_text()
    i, j = content.find(start), content.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"{path}: markers {start} ... {end} not found; add them where the "
                         "performance section belongs")
    path.write_text(content[:i] + section + content[j + len(end):])


def update_readme(readme: Path, section: str) -> None:
    """``update_section`` between the README's markers (``START`` ... ``END``)."""
    update_section(readme, section, START, END)


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
    if args.update_readme:
        update_readme(args.update_readme, summary_markdown(res))
        print(f"updated {args.update_readme}", file=sys.stderr)
    if args.update_reference:
        update_section(args.update_reference, full_markdown(res), FULL_START, FULL_END)
        print(f"updated {args.update_reference}", file=sys.stderr)
    if not (args.update_readme or args.update_reference):
        print(summary_markdown(res) + "\n\n" + full_markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
