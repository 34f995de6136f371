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
"""

from __future__ import annotations

from benchmarks.config import RunConfig
from benchmarks.subjects import BARE, GpSetup, gp_subject
from benchmarks.timing import interleave, median, sync

FULL = GpSetup("rand3(step)+ObsNorm+RewardNorm", randomize="step",
               transforms=("ObsNorm", "RewardNorm"))
STEPS = 2000


def measure(cfg: RunConfig, bar) -> dict:
    bar.set_postfix_str("host time per captured step, N=1")
    subjects = {"bare": gp_subject(BARE, 1, cfg.device), "full": gp_subject(FULL, 1, cfg.device)}
    inner = subjects["full"].env.env  # the TransformedEnv's VecEnv
    try:
        runs = {k: (lambda s=s: s.run(STEPS)) for k, s in subjects.items()}
        runs["replay_only"] = lambda: _replay(inner, cfg.device)
        times = interleave(runs, cfg.repeats_for("paired"))
    finally:
        for s in subjects.values():
            s.close()
    out = {"num_envs": 1, "steps": STEPS, "config": FULL.label,
           "measures": "host+device" if cfg.is_cuda else "host",
           "plan": [list(names) + [graphed] for names, graphed in inner.pipeline.plan]}
    for k, ts in times.items():
        out[f"{k}_step_s"] = min(ts) / STEPS
        out[f"{k}_step_median_s"] = median(ts) / STEPS
    bar.update(1)
    return out


def _replay(env, device: str) -> float:
    import time

    call = env.pipeline
    sync(device)
    t0 = time.perf_counter()
    for _ in range(STEPS):
        call()
    sync(device)  # (as Subject.run: on CUDA, to completion)
    return time.perf_counter() - t0


def units(cfg: RunConfig) -> int:
    return 1
