"""The README's GPU figures, from the results of ``benchmarks/gpu/gpu_check.sh`` runs.

``benchmarks/results/gpu/h200.json`` lists the runs of one GPU session (each a
``results.jsonl`` the check wrote, its command, its commit, and which other run shared the
GPU at the same time); this module turns them into the README's section between
``<!-- perf-gpu:start -->`` and ``<!-- perf-gpu:end -->``, and the same table into
docs/gpu.md between ``<!-- gpu-figures:start -->`` and ``<!-- gpu-figures:end -->``::

    python -m benchmarks.gpu.gpu_report benchmarks/results/gpu/h200.json \
        --update-readme README.md --update-docs docs/gpu.md

Every figure is read from a result line; a section that failed or did not run is said so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.report import rate, update_section

START, END = "<!-- perf-gpu:start -->", "<!-- perf-gpu:end -->"
DOCS_START, DOCS_END = "<!-- gpu-figures:start -->", "<!-- gpu-figures:end -->"


def load(manifest: Path) -> dict:
    """The manifest with each run's result lines as ``run["sections"]``: {section: line}."""
    m = json.loads(manifest.read_text())
    for run in m["runs"]:
        lines = (manifest.parent / run["file"]).read_text().splitlines()
        run["results"] = {d["section"]: d for d in map(json.loads, filter(None, lines))}
    return m


def _find(m: dict, section: str) -> tuple[dict | None, dict | None]:
    """The last ``ok`` line of ``section`` over the runs (and its run), else None."""
    found = (None, None)
    for run in m["runs"]:
        d = run["results"].get(section)
        if d is not None and d.get("ok"):
            found = (d, run)
    return found


def _shared(run: dict) -> str:
    other = run.get("shared_gpu_with")
    return f" (another process shared the GPU: {other})" if other else ""


def rows(m: dict) -> list[tuple[str, str]]:
    out = []
    d, run = _find(m, "go1_train")
    if d:
        t = d["tracking_lin_vel"]
        out.append((
            f"Go1 flat, rsl_rl PPO, N={d['num_envs']:,}, 512-256-128: env steps in training "
            f"time (PPO updates included){_shared(run)}",
            f"{d['env_steps'] / 1e6:.1f} M in {d['train_seconds']:.0f} s "
            f"({rate(d['env_steps_per_s'])}); linear tracking reward per step "
            f"{t[0]:.2f} -> {t[-1]:.2f}"))
    d, run = _find(m, "sweep")
    if d:
        pts = d["points"]
        out.append((f"CartPole-v1 + 3 per-step terms + ObsNorm + RewardNorm, captured "
                    f"(one graph), env-steps/s{_shared(run)}",
                    ", ".join(f"N={p['num_envs']:,}: {rate(p['env_steps_per_s'])}"
                              for p in pts)))
    d, run = _find(m, "robots")
    if d:
        for name in ("Ant-v5", "Go1JoystickFlatTerrain-v1"):
            bare, mass = d[f"{name} bare"], d[f"{name} mass(reset)"]
            sizes = [k for k in bare if k.startswith("N=")]
            out.append((f"{name} env-steps/s, captured, bare / with a reset-time body_mass "
                        f"term{_shared(run)}",
                        ", ".join(f"N={int(k[2:]):,}: "
                                  f"{rate(bare[k]['env_steps_per_s'])} / "
                                  f"{rate(mass[k]['env_steps_per_s'])}" for k in sizes)))
    d, run = _find(m, "masked_write")
    if d:
        out.append((f"`params.set(mask)` / with `ObsNorm.reset_stats(mask)`, N={d['num_envs']:,}"
                    f": GPU time per call{_shared(run)}",
                    f"{d['set_gpu_us']:.0f} us / {d['set_reset_stats_gpu_us']:.0f} us"))
        cap = d.get("captured") or {}
        for key, what in (("set", "`params.set(mask)`, a number"),
                          ("set_tensor", "`params.set(mask)`, a tensor, validate=False")):
            c = cap.get(key)
            if isinstance(c, dict) and "device_s_per_call" in c:
                out.append((f"{what}, N={cap['num_envs']:,}: device time without host pacing "
                            f"(captured), bytes/s / copy bandwidth",
                            f"{c['device_s_per_call'] * 1e6:.1f} us, "
                            f"{c['bytes_per_s'] / 1e9:.0f} GB/s = "
                            f"{c['fraction_of_copy_bandwidth']:.0%}"))
    d, _ = _find(m, "recaptures")
    if d:
        c, g = d["cartpole_full"], d["go1_mass_reset"]
        out.append((f"recaptures per 1,000 steps with masked writes between steps "
                    f"(CartPole N={c['num_envs']:,}, Go1 N={g['num_envs']:,})",
                    f"{c['captures_per_1000_steps']:g}, {g['captures_per_1000_steps']:g}"))
    d, _ = _find(m, "mempool")
    if d:
        out.append((f"Warp memory pool growth over 200 captured Go1 steps "
                    f"(N={d['go1_num_envs']:,})",
                    f"{d['warp_mempool_growth_over_200_go1_steps']} bytes"))
    tests = [run["results"]["gpu_tests"] for run in m["runs"] if "gpu_tests" in run["results"]]
    if tests:
        d = tests[-1]
        if "tests" not in d:  # a failed section keeps its figures in the error text
            d = {**d, **json.loads(d["error"].split(": ", 1)[1])}
        failed = [f.split(": ")[0].split("::")[-1] for f in d.get("failed", [])]
        out.append(("GPU tests (`pytest -m gpu`, 5 files): run / failed",
                    f"{d['tests']} / {d['failures'] + d['errors']}"
                    + (f" ({', '.join(failed)})" if failed else "")))
    return out


def _table(m: dict, check: str) -> list[str]:
    """The paragraph saying where and how the figures were measured, and their table;
    ``check`` names the check's README as the page linking it should."""
    commits = sorted({run["commit"] for run in m["runs"]})
    lines = [f"Measured {m['date']} on {m['machine']}, at commits {', '.join(commits)}, by "
             f"`benchmarks/gpu/gpu_check.sh` ({check}); two runs at a time shared the GPU "
             "(each row says with which), so the throughputs are lower bounds. Results: "
             "`benchmarks/results/gpu/`.", "",
             "| figure | value |", "| --- | --- |"]
    return lines + [f"| {a} | {b} |" for a, b in rows(m)]


def markdown(m: dict) -> str:
    """The README's section: heading, table, and the link to docs/gpu.md."""
    lines = [START, "## Performance on a GPU", "",
             *_table(m, "[benchmarks/gpu/README.md](benchmarks/gpu/README.md)"),
             "", "What has been verified on a GPU and what is still open: "
             "[docs/gpu.md](docs/gpu.md#what-is-still-open).", "", END]
    return "\n".join(lines)


def docs_markdown(m: dict) -> str:
    """docs/gpu.md's figures: the same table, linked from the docs folder."""
    return "\n".join([DOCS_START, *_table(m, "[its README](../benchmarks/gpu/README.md)"),
                      DOCS_END])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu.gpu_report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("manifest", type=Path, help="benchmarks/results/gpu/h200.json")
    p.add_argument("--update-readme", type=Path, metavar="README")
    p.add_argument("--update-docs", type=Path, metavar="GPU_PAGE", help="docs/gpu.md")
    args = p.parse_args(argv)
    m = load(args.manifest)
    if args.update_readme:
        update_section(args.update_readme, markdown(m), START, END)
        print(f"updated {args.update_readme}", file=sys.stderr)
    if args.update_docs:
        update_section(args.update_docs, docs_markdown(m), DOCS_START, DOCS_END)
        print(f"updated {args.update_docs}", file=sys.stderr)
    if not (args.update_readme or args.update_docs):
        print(markdown(m))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
