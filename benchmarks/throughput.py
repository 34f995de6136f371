"""Throughput vs N: env-steps per second of gpuparam configurations and of peers.

At each N every available subject is built first, then timed round-robin (``interleave``),
so the subjects at one N see the same machine. Each point is the median over repeats.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from benchmarks.config import BARE, FULL, THROUGHPUT, RunConfig
from benchmarks.subjects import PEERS, Subject, gp_subject, gym_vector_subject
from benchmarks.timing import attempt, interleave, median, paired_ratio

GP_VECTOR = "gymnasium vector CartPole-v1"
HOST_PEER_MAX_N = 1 << 20


def _builders(cfg: RunConfig) -> dict[str, Callable[[int], Subject]]:
    out: dict[str, Callable[[int], Subject]] = {
        name: partial(gp_subject, setup, device=cfg.device) for name, setup in THROUGHPUT.items()
    }
    out[GP_VECTOR] = gym_vector_subject
    return out


def _sweep_point(builders, n: int, steps, repeats: int) -> dict[str, dict]:
    """Build every subject at N, time them interleaved, return ``{series: point}``.

    ``steps``: an int, or a function ``steps(subject) -> int``.
    """
    subjects: dict[str, Subject] = {}
    points: dict[str, dict] = {}
    for name, build in builders.items():
        subject, failed = attempt(build, n)
        if failed:
            points[name] = {"num_envs": n, **failed}
        else:
            subjects[name] = subject
    counts = {k: steps(s) if callable(steps) else steps for k, s in subjects.items()}
    try:
        times = interleave(
            {k: (lambda s=s, c=counts[k]: s.run(c)) for k, s in subjects.items()}, repeats
        )
    finally:
        for s in subjects.values():
            s.close()
    for name, ts in times.items():
        rates = [counts[name] * n / t for t in ts]
        points[name] = {
            "num_envs": n,
            "steps": counts[name],
            "env_steps_per_s": median(rates),
            "env_steps_per_s_repeats": rates,
            "notes": subjects[name].notes,
        }
    return points


def _steps(cfg: RunConfig, n: int):
    return lambda subject: cfg.steps_for(n, host=subject.host)


def _series(kind: str) -> dict:
    return {"kind": kind, "points": []}


def measure(cfg: RunConfig) -> dict:
    """All series over ``cfg.sizes`` (and the process-per-env peers over ``cfg.peer_sizes``)."""
    builders = _builders(cfg)
    series = {name: _series("gpuparam" if name.startswith("gpuparam") else "peer")
              for name in [*builders, *PEERS]}
    for n in cfg.sizes:
        here = dict(builders)
        if cfg.is_cuda and n > HOST_PEER_MAX_N:
            here.pop(GP_VECTOR)
            series[GP_VECTOR]["points"].append({"num_envs": n, "skipped": (
                f"CPU numpy peer limited to N <= {HOST_PEER_MAX_N} in CUDA runs (run time)")})
        pts = _sweep_point(here, n, _steps(cfg, n), cfg.repeats_for("sweep"))
        for name, p in pts.items():
            series[name]["points"].append(p)
    for n in cfg.peer_sizes:
        for name, build in PEERS.items():
            pts = _sweep_point({name: build}, n, cfg.peer_steps(), cfg.repeats_for("peer"))
            series[name]["points"].append(pts[name])
    for s in series.values():
        measured = [p for p in s["points"] if "env_steps_per_s" in p]
        if not measured and s["points"]:
            first = s["points"][0]
            s["skipped"] = first.get("skipped") or first.get("error")
    return series


def measure_paired(cfg: RunConfig) -> dict:
    """gpuparam vs Gymnasium vector CartPole at the goal N, interleaved round by round.

    ``ratio`` is the median over rounds of (gpuparam rate / Gymnasium rate).
    """
    n = cfg.goal_n
    steps, repeats = _steps(cfg, n), cfg.repeats_for("paired")
    builders = {
        "gpuparam": partial(gp_subject, BARE, device=cfg.device),
        "gymnasium": gym_vector_subject,
        "gpuparam_full": partial(gp_subject, FULL, device=cfg.device),
    }
    pts = _sweep_point(builders, n, steps, repeats)
    out: dict = {"num_envs": n, "repeats": repeats, "points": pts}
    gpp, gym, full = pts["gpuparam"], pts["gymnasium"], pts["gpuparam_full"]
    if "env_steps_per_s" not in gpp or "env_steps_per_s" not in gym:
        bad = gpp if "env_steps_per_s" not in gpp else gym
        out["skipped"] = bad.get("skipped") or bad.get("error")
        return out
    # rates per round: ratio of rates == inverse ratio of times
    out["ratio"] = paired_ratio(gpp["env_steps_per_s_repeats"], gym["env_steps_per_s_repeats"])
    out["ratio_of_medians"] = gpp["env_steps_per_s"] / gym["env_steps_per_s"]
    if "env_steps_per_s" in full:
        out["full_ratio"] = paired_ratio(
            full["env_steps_per_s_repeats"], gym["env_steps_per_s_repeats"]
        )
    else:
        out["full_ratio_skipped"] = full.get("skipped") or full.get("error")
    return out
