"""Overheads over the bare step, as ratios measured round by round against it.

Every configuration is a fresh CartPole-v1 env at the goal N; all are timed interleaved with
the bare one, and the overhead is ``median_over_rounds(t_config / t_bare) - 1``. ``ObsNorm
D=64`` times the normalization alone on 64-feature observations (one update, two outputs: a
``TransformedEnv`` step's work) and reports it as a share of the bare CartPole step,
``median_over_rounds(t_norm / t_bare)``: the overhead it would add to an env as fast.
"""

from __future__ import annotations

from benchmarks.config import BARE, OVERHEADS, RunConfig
from benchmarks.subjects import gp_subject, obs_norm_subject
from benchmarks.timing import attempt, interleave, median, paired_ratio


def measure(cfg: RunConfig) -> dict:
    n = cfg.goal_n
    steps, repeats = cfg.steps_for(n), cfg.repeats_for("paired")
    out: dict = {"num_envs": n, "steps": steps, "repeats": repeats, "configs": {}}
    subjects = {"bare": gp_subject(BARE, n, cfg.device)}
    for key, setup in OVERHEADS.items():
        subject, failed = attempt(gp_subject, setup, n, cfg.device)
        if failed:
            out["configs"][key] = failed
        else:
            subjects[key] = subject
    # D=64 moves 16x the data of CartPole's observations: timed in rounds of its own with
    # the bare step, so that it does not evict the other configurations' data
    d64, failed = attempt(obs_norm_subject, n, 64, cfg.device)
    if failed:
        out["configs"]["ObsNorm_D64"] = failed
    try:
        runs = {k: (lambda s=s: s.run(steps)) for k, s in subjects.items()}
        times = interleave(runs, repeats)
        if not failed:
            alone = interleave({"bare": runs["bare"], "d64": lambda: d64.run(steps)}, repeats)
    finally:
        for s in subjects.values():
            s.close()
    bare = times.pop("bare")
    out["bare_step_s"] = median(bare) / steps
    for key, ts in times.items():
        out["configs"][key] = {
            "label": OVERHEADS[key].label,
            "step_s": median(ts) / steps,
            "overhead": paired_ratio(ts, bare) - 1.0,
            "notes": subjects[key].notes,
        }
    if not failed:  # its whole time is the overhead it adds to a step
        out["configs"]["ObsNorm_D64"] = {
            "label": "ObsNorm D=64 (update + 2 outputs)",
            "step_s": median(alone["d64"]) / steps,
            "overhead": paired_ratio(alone["d64"], alone["bare"]),
            "notes": ["timed alone, as a share of the bare CartPole step"],
        }
    return out
