"""Where a step's time goes: each stage of the CartPole step at the goal N, timed alone.

For the bare step, reset-time randomization and ObsNorm+RewardNorm, the stages of
``env.pipeline`` are captured one by one (each its own Warp CPU graph; a stage that runs
torch ops or Python runs as it is) and replayed in order, step after step, so each stage
sees the done masks its episodes produce. Each replay is timed with
``time.perf_counter_ns`` (minus the median cost of the two timer calls). The real step, one graph
of all the stages, is timed in the same rounds: the stages add up to it within about one
launch each. Per stage: the median over rounds of its mean time per step.

CPU only: on CUDA the stages run asynchronously inside one graph; a profiler
(``torch.profiler``, Nsight Systems) times them there.
"""

from __future__ import annotations

import time

import warp as wp

from benchmarks.config import STAGES, RunConfig
from benchmarks.subjects import gp_actions, gp_subject
from benchmarks.timing import median, outcome


def _timer_cost_ns(reps: int = 2000, clock=time.perf_counter_ns) -> float:
    """The time two back-to-back ``clock()`` calls measure with nothing between: the median
    over ``reps`` pairs. (A mean took in any preemption that fell between a pair: one 90 ms
    pause in 2000 pairs made it 45 us, more than a whole stage, and printed a stage time of
    -4.45e+04 ns.)"""
    deltas = []
    for _ in range(reps):
        t0 = clock()
        deltas.append(clock() - t0)
    return median(deltas)


def _stage_runs(env) -> list[tuple[str, object]]:
    """``(name, run)`` per stage of ``env.pipeline``, in order: a captured graph's replay
    for a Warp-only stage, else the stage itself. Repeated names get ``#2``, ``#3``."""
    ctx, runs, seen = env.context, [], {}
    for stage in env.pipeline.stages:
        seen[stage.name] = seen.get(stage.name, 0) + 1
        name = stage.name + (f"#{seen[stage.name]}" if seen[stage.name] > 1 else "")
        if stage.kind == "warp":
            with wp.ScopedCapture(device="cpu") as cap:
                stage.run(ctx)
            runs.append((name, lambda g=cap.graph: wp.capture_launch(g)))
        else:
            runs.append((name, lambda s=stage: s.run(ctx)))
    return runs


def profile(env, steps: int, repeats: int) -> dict:
    """Per-stage and whole-step seconds per step of ``env`` (a CPU gpuparam env, or a
    ``TransformedEnv`` of one), over ``repeats`` rounds of ``steps`` steps each."""
    ctx = env.context
    actions = gp_actions(env, env.num_envs, env.device)
    runs = _stage_runs(env)
    clock, cost = time.perf_counter_ns, _timer_cost_ns()
    per_stage: dict[str, list[float]] = {name: [] for name, _ in runs}
    whole: list[float] = []
    for _ in range(repeats):
        acc = dict.fromkeys(per_stage, 0.0)
        for i in range(steps):
            ctx.action.copy_(actions[i % len(actions)])
            for name, run in runs:
                t0 = clock()
                run()
                acc[name] += clock() - t0 - cost
        for name, total in acc.items():
            per_stage[name].append(total * 1e-9 / steps)
        t0 = clock()
        for i in range(steps):
            env.step(actions[i % len(actions)])
        whole.append((clock() - t0) * 1e-9 / steps)
    stages = {name: median(ts) for name, ts in per_stage.items()}
    return {"stages_s": stages, "sum_s": sum(stages.values()), "step_s": median(whole)}


def measure(cfg: RunConfig) -> dict:
    n = cfg.goal_n
    steps, repeats = cfg.steps_for(n), cfg.repeats_for("paired")
    out: dict = {"num_envs": n, "steps": steps, "repeats": repeats, "configs": {}}
    if cfg.is_cuda:
        out["skipped"] = ("CPU only: CUDA stages run asynchronously inside one graph "
                          "(time them with torch.profiler or Nsight Systems)")
        return out
    for key, setup in STAGES.items():
        out["configs"][key] = {"label": setup.label, **outcome(
            lambda s=setup: profile(gp_subject(s, n, cfg.device).env, steps, repeats))}
    return out

