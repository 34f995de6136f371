"""Throughput vs N, and the overheads of configurations and adapters over the bare step.

- ``measure``: env-steps/s of gpuparam configurations and of peers; at each N every
  subject is built, then all are timed round-robin; each point is the median over rounds.
- ``measure_paired``: gpuparam / Gymnasium vector CartPole at the goal N, the median over
  rounds of the per-round ratio.
- ``overhead``: each configuration of ``config.OVERHEADS`` (a fresh CartPole-v1 at the
  goal N) timed interleaved with the bare one: ``median_over_rounds(t_config / t_bare) - 1``.
  ``ObsNorm D=64`` (the normalization alone on 64 features: one update, two outputs) is
  reported as a share of the bare step, ``median_over_rounds(t_norm / t_bare)``.
- ``adapters`` (issue 13): each adapter of ``subjects.ADAPTERS`` stepped as its library
  steps it, timed as the overheads. ``RslRlVecEnv`` (copies into the double buffers and
  the device-side episode statistics included) and ``TorchRLEnv`` (``EnvBase.step`` with a
  TensorDict as TorchRL's loops pass it) have a goal of at most 15% (``report.GOALS``);
  SB3's, skrl's and ``GymnasiumVectorEnv(numpy=True)``'s cost is reported. The NumPy
  adapters build thousands of Python objects a step, which slowed the bare step timed in
  the same rounds by about a quarter: they run in rounds of their own, with their own bare.
"""

from __future__ import annotations

from functools import partial

from benchmarks.config import BARE, FULL, OVERHEADS, THROUGHPUT, RunConfig
from benchmarks.subjects import (
    ADAPTERS,
    PEERS,
    adapter_subject,
    gp_subject,
    gym_vector_subject,
    obs_norm_subject,
    run_group,
)
from benchmarks.timing import median, paired_ratio

GP_VECTOR = "gymnasium vector CartPole-v1"
HOST_PEER_MAX_N = 1 << 20
ADAPTER_GOALS = ("rsl_rl", "torchrl")  # at most 15% (report.GOALS)
NUMPY_ADAPTERS = ("sb3", "gymnasium_numpy")  # timed in rounds of their own


def _sweep_point(builders, n: int, steps, repeats: int) -> dict[str, dict]:
    """Build every subject at N (``builders[name](n)``), time them interleaved, return
    ``{series: point}``. ``steps``: an int, or a function ``steps(subject) -> int``."""
    times, subjects, failed = run_group({k: partial(b, n) for k, b in builders.items()},
                                        steps, repeats)
    points = {name: {"num_envs": n, **why} for name, why in failed.items()}
    for name, ts in times.items():
        count = steps(subjects[name]) if callable(steps) else steps
        per_round = [count * n / t for t in ts]
        points[name] = {"num_envs": n, "steps": count, "env_steps_per_s": median(per_round),
                        "env_steps_per_s_repeats": per_round, "notes": subjects[name].notes}
    return points


def _steps(cfg: RunConfig, n: int):
    return lambda subject: cfg.steps_for(n, host=subject.host)


def _reason(point: dict):
    return point.get("skipped") or point.get("error")


def measure(cfg: RunConfig) -> dict:
    """All series over ``cfg.sizes`` (and the process-per-env peers over ``cfg.peer_sizes``)."""
    builders = {name: partial(gp_subject, setup, device=cfg.device)
                for name, setup in THROUGHPUT.items()}
    builders[GP_VECTOR] = gym_vector_subject
    series = {name: {"kind": "gpuparam" if name.startswith("gpuparam") else "peer",
                     "points": []} for name in [*builders, *PEERS]}
    for n in cfg.sizes:
        here = dict(builders)
        if cfg.is_cuda and n > HOST_PEER_MAX_N:
            here.pop(GP_VECTOR)
            series[GP_VECTOR]["points"].append({"num_envs": n, "skipped": (
                f"CPU numpy peer limited to N <= {HOST_PEER_MAX_N} in CUDA runs (run time)")})
        for name, p in _sweep_point(here, n, _steps(cfg, n), cfg.repeats_for("sweep")).items():
            series[name]["points"].append(p)
    for n in cfg.peer_sizes:
        for name, build in PEERS.items():
            pts = _sweep_point({name: build}, n, cfg.peer_steps(), cfg.repeats_for("peer"))
            series[name]["points"].append(pts[name])
    for s in series.values():
        if s["points"] and not any("env_steps_per_s" in p for p in s["points"]):
            s["skipped"] = _reason(s["points"][0])
    return series


def measure_paired(cfg: RunConfig) -> dict:
    """gpuparam vs Gymnasium vector CartPole at the goal N, interleaved round by round.

    ``ratio`` is the median over rounds of (gpuparam rate / Gymnasium rate).
    """
    n = cfg.goal_n
    repeats = cfg.repeats_for("paired")
    pts = _sweep_point({"gpuparam": partial(gp_subject, BARE, device=cfg.device),
                        "gymnasium": gym_vector_subject,
                        "gpuparam_full": partial(gp_subject, FULL, device=cfg.device)},
                       n, _steps(cfg, n), repeats)
    out: dict = {"num_envs": n, "repeats": repeats, "points": pts}
    gpp, gym, full = pts["gpuparam"], pts["gymnasium"], pts["gpuparam_full"]
    if "env_steps_per_s" not in gpp or "env_steps_per_s" not in gym:
        out["skipped"] = _reason(gpp if "env_steps_per_s" not in gpp else gym)
        return out
    # rates per round: ratio of rates == inverse ratio of times
    out["ratio"] = paired_ratio(gpp["env_steps_per_s_repeats"], gym["env_steps_per_s_repeats"])
    out["ratio_of_medians"] = gpp["env_steps_per_s"] / gym["env_steps_per_s"]
    if "env_steps_per_s" in full:
        out["full_ratio"] = paired_ratio(
            full["env_steps_per_s_repeats"], gym["env_steps_per_s_repeats"])
    else:
        out["full_ratio_skipped"] = _reason(full)
    return out


def _against_bare(cfg: RunConfig, out: dict, groups) -> None:
    """Time each group ``({key: (label, build)}, steps)`` interleaved with a bare CartPole
    step of its own; fill ``out["configs"]`` (and ``out["bare_step_s"]``, the first
    group's) with each configuration's ``overhead`` over the bare step of its rounds."""
    for i, (builders, steps) in enumerate(groups):
        times, subjects, failed = run_group(
            {"bare": partial(gp_subject, BARE, out["num_envs"], cfg.device),
             **{k: build for k, (_, build) in builders.items()}}, steps, out["repeats"])
        out["configs"].update(failed)
        bare = times.pop("bare")
        if i == 0:
            out["bare_step_s"] = median(bare) / steps
        for key, ts in times.items():
            out["configs"][key] = {"label": builders[key][0], "step_s": median(ts) / steps,
                                   "overhead": paired_ratio(ts, bare) - 1.0,
                                   "notes": subjects[key].notes}


def overhead(cfg: RunConfig) -> dict:
    n = cfg.goal_n
    steps, repeats = cfg.steps_for(n), cfg.repeats_for("paired")
    out: dict = {"num_envs": n, "steps": steps, "repeats": repeats, "configs": {}}
    # D=64 moves 16x the data of CartPole's observations: timed in rounds of its own with
    # a bare step, so that it does not evict the other configurations' data
    _against_bare(cfg, out, [
        ({k: (s.label, partial(gp_subject, s, n, cfg.device)) for k, s in OVERHEADS.items()},
         steps),
        ({"ObsNorm_D64": ("ObsNorm D=64 (update + 2 outputs)",
                          partial(obs_norm_subject, n, 64, cfg.device))}, steps)])
    d64 = out["configs"]["ObsNorm_D64"]
    if "overhead" in d64:  # its whole time is the overhead it adds to a step
        d64.update(overhead=d64["overhead"] + 1.0,
                   notes=["timed alone, as a share of the bare CartPole step"])
    return out


def adapters(cfg: RunConfig) -> dict:
    n = cfg.goal_n
    repeats = cfg.repeats_for("paired")
    # the NumPy adapters build per-env Python objects every step (SB3: 0.3 s per step at
    # N=2^20, the CUDA goal N): their group runs the host peers' step counts
    steps = (cfg.steps_for(n), cfg.steps_for(n, host=True))
    out: dict = {"num_envs": n, "steps": steps[0], "steps_numpy": steps[1],
                 "repeats": repeats, "configs": {}}
    groups = [{k: (label, partial(adapter_subject, k, n, cfg.device))
               for k, (label, _, _) in ADAPTERS.items() if (k in NUMPY_ADAPTERS) == numpy}
              for numpy in (False, True)]
    _against_bare(cfg, out, zip(groups, steps, strict=True))
    for key, c in out["configs"].items():
        if "overhead" in c:
            c["goal"] = key in ADAPTER_GOALS
    return out
