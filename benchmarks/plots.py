"""PNG plots of a results dict (matplotlib, Agg backend): one figure per measurement."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first


def throughput(res: dict, path: Path) -> bool:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for name, s in res.get("throughput", {}).items():
        pts = sorted((p for p in s.get("points", []) if "env_steps_per_s" in p),
                     key=lambda p: p["num_envs"])
        if not pts:
            continue
        style = "-o" if s.get("kind") == "gpuparam" else "--s"
        ax.plot([p["num_envs"] for p in pts], [p["env_steps_per_s"] for p in pts], style,
                label=name, markersize=4)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("number of envs N")
    ax.set_ylabel("env-steps / s")
    ax.set_title(f"Throughput vs N ({res.get('config', {}).get('device', '?')})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _bars(path: Path, labels: list[str], values: list[float], title: str, xlabel: str,
          log: bool = False) -> bool:
    if not values:
        return False
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(values) + 1.5))
    ax.barh(labels, values)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def overhead(res: dict, path: Path) -> bool:
    cfgs = res.get("overhead", {}).get("configs", {})
    items = [(k, c["overhead"]) for k, c in cfgs.items() if "overhead" in c]
    n = res.get("overhead", {}).get("num_envs")
    return _bars(path, [k for k, _ in items], [100 * v for _, v in items],
                 f"Overhead over the bare CartPole step (N={n})", "% over bare")


def latency(res: dict, path: Path) -> bool:
    lat = res.get("latency", {})
    items = []
    for key, label in (("gpuparam_write", "gpuparam set"),
                       ("gpuparam_write_reset_stats", "gpuparam set+reset_stats")):
        for n, r in lat.get(key, {}).items():
            if "per_call_s" in r:
                items.append((f"{label} N={n}", r["per_call_s"]))
    sa = lat.get("gymnasium_async_set_attr", {})
    if "per_call_s" in sa:
        items.append((f"gymnasium set_attr N={sa['num_envs']}", sa["per_call_s"]))
    rc = lat.get("torchrl_collector_recreate", {})
    for method, r in rc.get("by_start_method", {}).items():
        if "per_switch_s" in r:
            items.append((f"torchrl collector recreate ({method})", r["per_switch_s"]))
    return _bars(path, [k for k, _ in items], [v for _, v in items],
                 "Parameter-update latency", "seconds (log)", log=True)


def memory(res: dict, path: Path) -> bool:
    ss = res.get("memory", {}).get("steady_state", {})
    samples = ss.get("samples")
    if not samples:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.8))
    base = samples[0]["bytes"]
    ax.plot([s["step"] for s in samples], [(s["bytes"] - base) / 2**10 for s in samples], "-o",
            markersize=3)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax.set_xlabel("step")
    ax.set_ylabel(f"{ss.get('metric', '')} change (KiB)")
    ax.set_title(f"Memory while stepping, N={ss.get('num_envs')}\n{ss.get('config')}",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_all(res: dict, out_dir: Path, prefix: str) -> list[str]:
    """Write every plot that has data; returns the file names written."""
    written = []
    for name, fn in (("throughput", throughput), ("overhead", overhead), ("latency", latency),
                     ("memory", memory)):
        path = out_dir / f"{prefix}_{name}.png"
        if fn(res, path):
            written.append(path.name)
    return written
