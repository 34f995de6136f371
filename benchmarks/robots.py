"""Robots on MuJoCo Warp against MuJoCo C, side by side in one run, in interleaved rounds.

- ``throughput``: Ant-v5 and HalfCheetah-v5 (captured step, fixed random action) against
  Gymnasium's ``make_vec(name, num_envs=N, vectorization_mode="sync")``, at N in
  {16, 64, 256} ({16, 64} with --quick).
- ``go1_throughput`` (issue 23): ``Go1JoystickFlatTerrain-v1`` and
  ``Go1JoystickRoughTerrain-v1`` (a fixed small random action) against envpool 1.2.5's C++
  ports of the same MuJoCo Playground tasks (``batch_size = num_envs``) with 1 thread
  (gpuparam's CPU kernels run on one thread) and with every core, at the same N; skipped
  with the install line when ``envpool`` is not importable.
- ``overheads``: over the bare Ant step at N=64, per-step randomization of friction,
  damping and gear, per-step mass randomization (copy + the masked recompute of the derived
  constants every step) and a push every step (``gp.Push`` with ``every=1``).
- ``go1_recipe``: ``Go1Terrain-v0`` at N=64 (8192 on a GPU) with the full recipe
  (observation noise, a 1-step action delay, Playground's command resampling, contact
  sensors, the 187-point height scan, per-reset randomization of friction, base mass,
  centre of mass, motor strength, kp and kd) over the bare step (the same terrain and
  physics, blind, noise off, no delay, commands never resampled, no randomization). The
  randomization draws identity values (x1, +0), as the Ant overheads' do: every launch
  runs, the dynamics stay the bare env's.
- ``host_time``: at N=1, ``env.step`` beyond a Warp CPU graph of its physics stage, split
  into the other stages' device work (task, episode, clock and the masked auto-reset's
  launches) and Python (action checks and copy, pipeline dispatch).

On CPU, MuJoCo C is the best case: MuJoCo Warp runs its kernels serially on the CPU.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from functools import partial

import numpy as np
import torch
import warp as wp

from benchmarks.config import GO1, GO1_RECIPE_N, ROBOT_OVERHEAD_N, ROBOT_SIZES, ROBOTS, RunConfig
from benchmarks.subjects import Subject, rates, run_group
from benchmarks.timing import Skipped, attempt, interleave, median, outcome, paired_ratio

ENVPOOL = "pip install envpool==1.2.5 envpool-assets-mujoco-large"


def _steps(cfg: RunConfig, n: int) -> int:
    if cfg.steps is not None:
        return max(2, cfg.steps // 50)
    if cfg.is_cuda:  # (a GPU steps 1024-65536 worlds at once: rounds long enough to time)
        return 40
    return max(5, min(40, 2048 // n))


def _gp_env(name: str, n: int, device: str, setup: str = "bare", scale: float = 1.0,
            **kwargs) -> Subject:
    """A captured env of ``setup`` stepped with a fixed random action in ``[-scale, scale]``
    (``subject.env``). The overhead setups draw from identity ranges
    (scale U(1, 1), pushes U(0, 0)): every launch runs as with real ranges, the dynamics
    stay those of the bare env, so the difference is the mechanism's cost alone (real ranges
    also change the physics' own cost: pushed or lighter Ants make more contacts and solver
    iterations). ``rand3_real`` uses real ranges (x0.8-1.2) for comparison."""
    import gpuparam as gp

    try:
        env = gp.make(name, n, device=device, seed=0, **kwargs)
    except ImportError as e:
        raise Skipped(str(e)) from None
    lo, hi = (0.8, 1.2) if setup == "rand3_real" else (1.0, 1.0)
    if setup.startswith("rand3"):
        env.randomize(*(gp.Uniform(p, lo, hi, op="scale", on="step")
                        for p in ("geom_friction", "dof_damping", "actuator_gear")))
    elif setup == "mass":
        env.randomize(gp.Uniform("body_mass", 1.0, 1.0, op="scale", on="step"))
    elif setup == "push":
        env.add_event(gp.Push([(0.0, 0.0), (0.0, 0.0)], every=1))
    gen = torch.Generator().manual_seed(0)
    action = ((torch.rand(n, env.mjm.nu, generator=gen) * 2 - 1) * scale).to(env.device)
    return Subject(n, lambda i: env.step(action), device=device, env=env).warm(3)


def _gym_env(name: str, n: int) -> Subject:
    try:
        import gymnasium

        venv = gymnasium.make_vec(name, num_envs=n, vectorization_mode="sync")
    except Exception as e:  # gymnasium or its MuJoCo extras missing
        raise Skipped(f"gymnasium.make_vec({name!r}) failed: {e}") from None
    venv.reset(seed=0)
    action = np.random.default_rng(0).uniform(-1, 1, size=venv.action_space.shape)
    return Subject(n, lambda i: venv.step(action), close=venv.close, host=True).warm(1)


def _versus(cfg: RunConfig, names: tuple[str, ...], peers, scale: float = 1.0) -> dict:
    """For each env and N: gpuparam's rate against each peer of ``peers(name, n)``
    (``{key: (ratio key, build)}``), each peer built in turn and timed round by round with
    gpuparam (one peer alive at a time); gpuparam's rate is the median of all its rounds."""
    out: dict = {}
    repeats = cfg.repeats or 3
    for name in names:
        for n in ROBOT_SIZES[cfg.kind, cfg.quick]:
            steps = _steps(cfg, n)
            row: dict = {"num_envs": n, "steps": steps, "repeats": repeats}
            mine, failed = attempt(_gp_env, name, n, cfg.device, scale=scale)
            if failed:
                row["gpuparam"] = failed
            gp_times: list[float] = []
            for key, (ratio_key, build) in peers(name, n).items():
                if cfg.is_cuda:
                    row[key] = {"skipped": f"{key.split('_')[0]} runs on the CPU; compared "
                                           "in CPU runs"}
                    continue
                mine_too = {"gpuparam": lambda m=mine: m} if mine else {}
                times, _, why = run_group({**mine_too, key: build}, steps, repeats)
                row.update(why)
                if key in times:
                    row[key] = rates(times[key], n, steps)
                if key in times and mine:
                    gp_times += times["gpuparam"]
                    row[ratio_key] = paired_ratio(times[key], times["gpuparam"])
            if mine:
                gp_times = gp_times or [mine.run(steps) for _ in range(repeats)]
                row["gpuparam"] = rates(gp_times, n, steps)
            out[f"{name} N={n}"] = row
    return out


def throughput(cfg: RunConfig) -> dict:
    return _versus(cfg, ROBOTS, lambda name, n: {"gymnasium_sync": (
        "ratio_gpuparam_over_gymnasium", partial(_gym_env, name, n))})


def _replay(env, names: set[str]) -> Subject:
    """Replays of a Warp CPU graph of the env's stages named in ``names`` (public Stage.run)."""
    with wp.ScopedCapture(device="cpu") as cap:
        for stage in env.pipeline.stages:
            if stage.name in names:
                stage.run(env.context)
    return Subject(env.num_envs, lambda i: wp.capture_launch(cap.graph))


def overheads(cfg: RunConfig) -> dict:
    """Two views of each configuration's cost over the bare Ant step: ``overhead``, the
    paired end-to-end ratio (whole steps, noisy: +-5% between identical envs on a loaded
    2-core machine), and on CPU ``extra_share``, the replay time of the stages the
    configuration adds (randomize_step with its copies, the mass term's "model_writes"
    stages that recompute the derived constants, or push), timed on their own as a Warp
    CPU graph, over the bare step's time."""
    n = ROBOT_OVERHEAD_N[cfg.kind]
    steps, repeats = _steps(cfg, n), (cfg.repeats or 5)
    labels = {"rand3": "friction+damping+gear every step",
              "rand3_real": "friction+damping+gear every step, x0.8-1.2 (physics changes too)",
              "mass": "body_mass every step (copy + masked recompute)",
              "push": "gp.Push every step"}
    subjects = {k: _gp_env("Ant-v5", n, cfg.device, k) for k in ("bare", *labels)}
    bare_names = set(subjects["bare"].env.pipeline.names)
    for k in labels if not cfg.is_cuda else ():
        env = subjects[k].env
        extra = set(env.pipeline.names) - bare_names
        if k == "mass":  # the recompute runs there (in the bare step it finds no world)
            extra.add("model_writes")
        subjects[f"{k}_extra"] = _replay(env, extra)
    times = interleave({k: (lambda s=s: s.run(steps)) for k, s in subjects.items()}, repeats)
    bare = times["bare"]
    out = {"num_envs": n, "steps": steps, "repeats": repeats, "bare_step_s": median(bare) / steps}
    for k, label in labels.items():
        ts = times[k]
        out[k] = {"label": label, "step_s": median(ts) / steps,
                  "overhead": paired_ratio(ts, bare) - 1.0}
        if f"{k}_extra" in times:
            extra = times[f"{k}_extra"]
            out[k]["extra_stage_s"] = median(extra) / steps
            out[k]["extra_share"] = paired_ratio(extra, bare)
    return out


def host_time(cfg: RunConfig) -> dict:
    if cfg.is_cuda:
        return {"skipped": "measured on CPU (on CUDA the step is one graph launch)"}
    # an Ant resting under a zero action that never terminates or truncates, restored to
    # the same state before every timed run: every run does the same solver work
    ant = _gp_env("Ant-v5", 1, cfg.device, scale=0.0, terminate_when_unhealthy=0.0,
                  max_episode_steps=2**30).warm(40)
    env = ant.env
    steps, rounds = 20, (4 if cfg.quick else 40)
    d = env.backend.d
    state = [wp.to_torch(a) for a in (d.qpos, d.qvel, d.qacc_warmstart, d.act)]
    snapshot = [t.clone() for t in state]

    # Every block of `steps` back-to-back calls starts from the same restored state
    # (restore untimed), so each block does the same solver work; the blocks rotate so none
    # always runs first. Python per step is env.step minus a replay of a graph of all its
    # stages (captured here: the same launches as the pipeline's own graph).
    names = set(env.pipeline.names)
    calls = {"step": ant, "all": _replay(env, names), "physics": _replay(env, {"physics"}),
             "others": _replay(env, names - {"physics"})}
    ts: dict[str, list[float]] = {k: [] for k in calls}
    order = list(calls)
    for i in range(rounds):
        for k in order[i % 4:] + order[: i % 4]:
            for t, saved in zip(state, snapshot, strict=True):
                t.copy_(saved)
            ts[k].append(calls[k].run(steps) / steps)
    med = {k: median(v) for k, v in ts.items()}
    # paired within each round (blocks adjacent in time), as the overheads are: a difference
    # of two separate ~1 ms medians moved by tens of microseconds from run to run
    def paired(a: str, b: str) -> float:
        return median([x - y for x, y in zip(ts[a], ts[b], strict=True)])

    python_s, other_s = paired("step", "all"), med["others"]
    return {"num_envs": 1, "step_s": med["step"], "physics_replay_s": med["physics"],
            "all_stages_replay_s": med["all"], "other_stages_device_s": other_s,
            "python_s": python_s, "beyond_physics_s": paired("step", "physics"),
            "note": "medians over rounds of 20-call blocks, each from the same restored "
                    "state; differences are medians of the per-round differences: beyond "
                    "physics = env.step minus a replay of its physics stage, Python = "
                    "env.step minus a replay of all its stages, other "
                    "stages = a replay of every stage but physics"}


_ENVPOOL_CHILD = """
import sys, time
import numpy as np
import envpool
name, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = envpool.make(name, env_type="gymnasium", num_envs=n, batch_size=n,
                   num_threads=threads, seed=0)
env.reset()
action = (np.random.default_rng(0).uniform(-1, 1, (n, 12)) * 0.3).astype(np.float64)
env.step(action)
print("ready", flush=True)
for line in sys.stdin:  # "run STEPS": time STEPS steps; anything else ends the process
    if not line.startswith("run "):
        break
    t0 = time.perf_counter()
    for _ in range(int(line.split()[1])):
        env.step(action)
    print(time.perf_counter() - t0, flush=True)
"""


class _EnvpoolPeer(Subject):
    """envpool's port of a Go1 task in a process of its own (its Go1 port holds about 50 MB
    per env: 13 GB at N=256, returned to the system when the process ends), timed round by
    round on request, so its rounds interleave with gpuparam's in the same run."""

    def __init__(self, name: str, n: int, threads: int):
        if importlib.util.find_spec("envpool") is None:
            raise Skipped(f"envpool not installed: {ENVPOOL}")
        super().__init__(n, step=None, close=self._quit, host=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ENVPOOL_CHILD, name, str(n), str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            err = self.proc.stderr.read()[-2000:]
            self.close()
            raise RuntimeError(f"envpool {name} N={n}: {line or err}")

    def run(self, steps: int) -> float:
        self.proc.stdin.write(f"run {steps}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def _quit(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def go1_throughput(cfg: RunConfig) -> dict:
    """Against envpool with 1 thread and with every core, one envpool process at a time."""
    return _versus(cfg, GO1, lambda name, n: {
        f"envpool_{t}_threads": (f"ratio_gpuparam_over_envpool_{t}_threads",
                                 partial(_EnvpoolPeer, name, n, t))
        for t in dict.fromkeys((1, os.cpu_count() or 1))}, scale=0.3)


def go1_recipe(cfg: RunConfig) -> dict:
    import gpuparam as gp

    n = GO1_RECIPE_N[cfg.kind]
    steps, repeats = _steps(cfg, n), (cfg.repeats or 5)
    name = "Go1Terrain-v0"
    bare = _gp_env(name, n, cfg.device, scale=0.3, height_scan=False, noise_level=0.0,
                   command_resample_time=1e5)
    full = _gp_env(name, n, cfg.device, scale=0.3, action_delay=1.0)
    full.env.randomize(  # identity draws: every launch runs, the dynamics stay the bare env's
        gp.Uniform("geom_friction", 1.0, 1.0, op="scale", on="reset"),
        gp.Uniform("body_mass", 0.0, 0.0, op="add", on="reset"),
        gp.Uniform("base_com_offset", 0.0, 0.0, op="add", on="reset"),
        gp.Uniform("motor_strength", 1.0, 1.0, op="scale", on="reset"),
        gp.Uniform("kp", 1.0, 1.0, op="scale", on="reset"),
        gp.Uniform("kd", 1.0, 1.0, op="scale", on="reset"),
    )
    full.warm(3)
    times = interleave({"bare": lambda: bare.run(steps), "full": lambda: full.run(steps)},
                       repeats)
    return {"num_envs": n, "steps": steps, "repeats": repeats, "env": name,
            "bare_env_steps_per_s": rates(times["bare"], n, steps)["env_steps_per_s"],
            "full_env_steps_per_s": rates(times["full"], n, steps)["env_steps_per_s"],
            "overhead": paired_ratio(times["full"], times["bare"]) - 1.0,
            "label": "noise, 1-step delay, commands, contact sensors, height scan (187), "
                     "per-reset DR of friction, base mass and CoM, motor strength, kp, kd"}


def measure(cfg: RunConfig) -> dict:
    return {key: outcome(fn, cfg) for key, fn in (
        ("throughput", throughput), ("overhead", overheads), ("host_time", host_time),
        ("go1_throughput", go1_throughput), ("go1_recipe", go1_recipe))}
