"""The sections of ``benchmarks/gpu/gpu_check.sh``, one process each:

    python -m benchmarks.gpu.gpu_sections NAME --out DIR [--dry-run] [--budget SECONDS]
    python -m benchmarks.gpu.gpu_sections --list     # the table ORDER, as gpu_check.sh reads it

Each appends one JSON line ``{"section": NAME, "ok": ..., ...figures}`` to
``DIR/results.jsonl`` when it ends (a failure is a line with ``ok: false`` and the error),
so a run stopped later keeps what the earlier sections measured. ``--dry-run`` runs the
same code on the CPU at tiny sizes (the CI proof that the script works); without it the
sections need CUDA. ``--budget`` is the section's time: the loops over sizes stop starting
new sizes once most of it is spent (the shell's ``timeout`` is the hard stop).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The check's sections in the order they run (order of value), with their caps in seconds
# on the GPU and in the dry run (benchmarks/gpu/README.md has the estimate; caps from the
# first H200 runs: gpu_tests took 202 s, robots 133 s). ``module`` None: a function of this
# file, run as ``python -m benchmarks.gpu.gpu_sections NAME``. A module name: a section of
# its own, run as ``python -m MODULE --out DIR --budget SECONDS [--dry-run]``; it appends
# its JSON lines (``{"section": NAME, "ok": ..., ...}``, one per experiment if it likes) to
# ``DIR/results.jsonl``, and its exit status says whether it passed (gpu_check.sh writes
# the line of one that exits without writing any). Adding a section is one entry here.
ORDER: tuple[tuple[str, int, int, str | None], ...] = (
    # (name, cap on the GPU, cap in the dry run, module)
    ("versions", 30, 30, None),
    ("capture", 150, 150, "benchmarks.gpu.capture"),  # captured against eager (issue 40)
    ("smoke", 90, 60, None),
    ("gpu_tests", 240, 90, None),
    ("sweep", 75, 60, None),
    ("masked_write", 30, 40, None),
    ("recaptures", 60, 60, None),
    ("mempool", 40, 40, None),
    ("robots", 200, 90, None),
    ("graph_counts", 90, 60, None),
    ("go1_train", 120, 90, None),
)

# (GPU, dry run) sizes. The GPU ones are sized to the 9-minute budget of
# benchmarks/gpu/README.md.
SIZES = {
    "sweep": ((4096, 16384, 65536, 262144, 1 << 20), (64, 256)),
    "sweep_steps": (200, 5),
    "masked_n": (1 << 20, 64),
    "masked_calls": (100, 5),
    "robot_n": ((4096, 16384), (16,)),
    "robot_steps": (50, 3),
    "count_n": (64, 16),  # launches per step: one eager step (the figure is at 64)
    "recapture_steps": (1000, 30),
    "recapture_n": (65536, 64),
    "recapture_robot_n": (4096, 16),
    "mempool_n": (4096, 16),
    # on the GPU: as many iterations as the section's budget allows (--max-seconds)
    "train": (dict(num_envs=4096, iterations=100_000, steps_per_env=24, save_every=50),
              dict(num_envs=16, iterations=2, steps_per_env=4, save_every=1)),
}
ROBOTS = ("Ant-v5", "Go1JoystickFlatTerrain-v1")
GPU_TESTS = ("tests/test_gpu.py", "tests/transforms/test_obs_norm.py",
             "tests/transforms/test_nonfinite.py", "tests/integrations/test_gymnasium.py",
             "tests/integrations/test_torchrl.py")


class Run:
    """What a section knows: device, sizes, time left, where results go."""

    def __init__(self, out: Path, dry: bool, budget: float) -> None:
        self.out, self.dry, self.budget = out, dry, budget
        self.t0 = time.perf_counter()
        self.device = "cpu" if dry else "cuda"

    def size(self, key: str):
        return SIZES[key][1 if self.dry else 0]

    def time_left(self, share: float = 0.8) -> bool:
        """Whether less than ``share`` of the budget is spent (start another size?)."""
        return time.perf_counter() - self.t0 < share * self.budget

    def sync(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()


def record(out: Path, section: str, ok: bool, **figures) -> None:
    line = json.dumps({"section": section, "ok": ok, **figures}, default=str)
    with open(out / "results.jsonl", "a") as f:
        f.write(line + "\n")
    print(line[:2000], flush=True)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# ------------------------------------------------------------------------------ sections


def versions(run: Run) -> dict:
    """nvidia-smi, Python, and the libraries the check uses (missing ones as null)."""
    smi = None
    if shutil.which("nvidia-smi"):
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=30)
        smi = r.stdout.strip() or r.stderr.strip()
    out: dict = {"nvidia_smi": smi, "python": sys.version.split()[0],
                 "platform": platform.platform()}
    for dist in ("torch", "warp-lang", "mujoco-warp", "mujoco", "tensordict", "numpy",
                 "gymnasium", "rsl-rl-lib", "pytest", "pytest-timeout", "matplotlib"):
        out[dist] = _version(dist)
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
        out["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
    except ImportError as e:
        out["torch_error"] = str(e)
    return out


def smoke(run: Run) -> dict:
    """``import gpuparam`` from the checkout (not an installed copy), one step per kind."""
    import torch
    import warp as wp

    import gpuparam as gp

    if run.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    wp.init()
    env = gp.make("CartPole-v1", 64, device=run.device, seed=0)
    for _ in range(3):
        td = env.step(torch.zeros(64, dtype=torch.int64, device=env.device))
    run.sync()
    import mujoco_warp

    src = os.environ.get("GPU_CHECK_SRC")
    if src and not gp.__file__.startswith(src):
        raise AssertionError(f"gpuparam imported from {gp.__file__}, not the checkout {src}")
    return {"gpuparam_file": gp.__file__, "kernels_file": sys.modules["gpuparam.kernels"].__file__,
            "warp_file": wp.__file__, "mujoco_warp_file": mujoco_warp.__file__,
            "cuda_devices": wp.get_cuda_device_count(), "captured": env.pipeline.captured,
            "observation_device": str(td["observation"].device)}


def _full_cartpole(n: int, device: str):
    """CartPole with 3 per-step terms + ObsNorm + RewardNorm, captured (the budgets' full):
    ``(wrapped env, core env, ObsNorm, action batches)``."""
    import gpuparam as gp
    from benchmarks.config import randomization_terms
    from benchmarks.subjects import gp_actions

    core = gp.make("CartPole-v1", n, device=device, seed=0)
    core.randomize(*randomization_terms("step"))
    norm = gp.ObsNorm(core.observation_spec.shape)
    env = gp.TransformedEnv(core, norm, gp.RewardNorm(gamma=0.99))
    return env, core, norm, gp_actions(core, n, core.device)


def _time_steps(run: Run, env, actions, steps: int) -> float:
    run.sync()
    t0 = time.perf_counter()
    for i in range(steps):
        env.step(actions[i % len(actions)])
    run.sync()
    return time.perf_counter() - t0


def sweep(run: Run) -> dict:
    """CartPole env-steps/s over N with per-step DR + ObsNorm + RewardNorm, captured."""
    points, steps = [], run.size("sweep_steps")
    for n in run.size("sweep"):
        if not run.time_left():
            points.append({"num_envs": n, "skipped": "section budget spent"})
            continue
        env, core, _, actions = _full_cartpole(n, run.device)
        env.reset()
        for i in range(3):  # warm up and capture
            env.step(actions[i])
        captures = core.pipeline.captures
        s = _time_steps(run, env, actions, steps)
        points.append({"num_envs": n, "steps": steps, "env_steps_per_s": n * steps / s,
                       "step_us": s / steps * 1e6, "captured": core.pipeline.captured,
                       "plan": [k for k, _ in core.pipeline.plan],
                       "recaptures": core.pipeline.captures - captures})
        del env, core
    return {"points": points}


def masked_write(run: Run) -> dict:
    """``params.set(mask)`` and the same plus ``ObsNorm.reset_stats(mask)`` at 2^20 envs:
    GPU time per call by CUDA events, wall time per call on both devices; on CUDA also the
    device time per call without host pacing and the write's bytes/s against the copy
    bandwidth (``"captured"``: ``benchmarks.host_time.masked_write_device_time``)."""
    import torch

    import gpuparam as gp

    n, calls = run.size("masked_n"), run.size("masked_calls")
    env = gp.make("CartPole-v1", n, device=run.device, seed=0)
    norm = gp.ObsNorm((4,), num_envs=n, device=run.device)
    mask = torch.rand(n, device=env.device) < 0.5
    ops = {
        "set": lambda: env.params.set("length", 0.9, mask=mask, validate=False),
        "set_reset_stats": lambda: (env.params.set("length", 0.9, mask=mask, validate=False),
                                    norm.reset_stats(mask)),
    }
    out: dict = {"num_envs": n, "calls": calls}
    for name, op in ops.items():
        op()  # loads the kernels
        run.sync()
        if run.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            op()
        wall = time.perf_counter() - t0  # host time of the calls (asynchronous on CUDA)
        if run.device == "cuda":
            end.record()
            end.synchronize()
            out[f"{name}_gpu_us"] = start.elapsed_time(end) * 1e3 / calls
        run.sync()
        out[f"{name}_host_us"] = wall / calls * 1e6
        out[f"{name}_wall_us"] = (time.perf_counter() - t0) / calls * 1e6
    # the device time without host pacing (calls captured in one CUDA graph) and the bytes
    # a write moves against the copy bandwidth (issue 41); on the CPU a skip
    from benchmarks.host_time import masked_write_device_time

    try:
        out["captured"] = masked_write_device_time(run.device, n)
    except Exception as e:  # noqa: BLE001 (recorded: the other figures stand)
        out["captured"] = {"error": f"{type(e).__name__}: {e}"}
    return out


def _robot(name: str, n: int, device: str, mass: bool, capture: bool = True):
    import torch

    import gpuparam as gp

    env = gp.make(name, n, device=device, seed=0, capture=capture)
    if mass:  # identity draws: every launch runs, the dynamics stay the bare env's
        env.randomize(gp.Uniform("body_mass", 1.0, 1.0, op="scale", on="reset"))
    g = torch.Generator().manual_seed(0)
    action = (torch.rand(n, env.mjm.nu, generator=g) * 2 - 1).to(env.device)
    return env, action


def _launches(name: str, n: int, device: str, mass: bool) -> dict:
    """Launches of one eager step (benchmarks/budgets.py's recorder): ours and MuJoCo
    Warp's, as the budgets count them."""
    from benchmarks.budgets import count_launches

    env, action = _robot(name, n, device, mass, capture=False)
    c = count_launches(lambda: env.step(action), env)
    return {"launches": c["launches"], "physics_launches": c["physics_launches"],
            "launches_per_step": c["launches"] + c["physics_launches"],
            "graph_segments": c["graph_segments"], "eager_segments": c["eager_segments"]}


def robots(run: Run) -> dict:
    """Ant-v5 and Go1 (flat) env-steps/s at 4k-16k worlds, bare and with a reset-time
    ``body_mass`` term; launches per eager step at N=64 for both."""
    out: dict = {}
    steps = run.size("robot_steps")
    for name in ROBOTS:
        for mass in (False, True):
            key = f"{name} {'mass(reset)' if mass else 'bare'}"
            row: dict = {"launches_at_n": run.size("count_n"),
                         **_launches(name, run.size("count_n"), run.device, mass)}
            for n in run.size("robot_n"):
                if not run.time_left():
                    row[f"N={n}"] = {"skipped": "section budget spent"}
                    continue
                env, action = _robot(name, n, run.device, mass)
                for _ in range(3):
                    env.step(action)
                captures = env.pipeline.captures
                s = _time_steps(run, env, [action], steps)
                row[f"N={n}"] = {"env_steps_per_s": n * steps / s, "step_ms": s / steps * 1e3,
                                 "captured": env.pipeline.captured,
                                 "recaptures": env.pipeline.captures - captures}
                del env
            out[key] = row
        bare, mass = out[f"{name} bare"], out[f"{name} mass(reset)"]
        out[f"{name} launches mass/bare"] = mass["launches_per_step"] / bare["launches_per_step"]
    return out


def recaptures(run: Run) -> dict:
    """``env.pipeline.captures`` over 1,000 steps with masked writes and ``reset_stats``
    between steps (CartPole full), and of Go1 with a reset-time mass term: must not grow."""
    import torch

    steps = run.size("recapture_steps")
    n = run.size("recapture_n")
    env, core, norm, actions = _full_cartpole(n, run.device)
    half = torch.arange(n, device=core.device) % 2 == 0
    for i in range(3):
        env.step(actions[i])
    before = core.pipeline.captures
    for i in range(steps):
        env.step(actions[i % len(actions)])
        if i % 100 == 50:
            core.params.set("length", 0.5 + i / 4000, mask=half, validate=False)
            norm.reset_stats(half)
    run.sync()
    out = {"cartpole_full": {"num_envs": n, "steps": steps,
                             "captures_per_1000_steps": (core.pipeline.captures - before)
                             * 1000 / steps}}
    rn = run.size("recapture_robot_n")
    go1, action = _robot("Go1JoystickFlatTerrain-v1", rn, run.device, mass=True)
    for _ in range(3):
        go1.step(action)
    before = go1.pipeline.captures
    for _ in range(steps):
        go1.step(action)
    run.sync()
    out["go1_mass_reset"] = {"num_envs": rn, "steps": steps,
                             "captures_per_1000_steps": (go1.pipeline.captures - before)
                             * 1000 / steps}
    grew = [k for k, v in out.items() if v["captures_per_1000_steps"]]
    if grew:
        raise AssertionError(f"recaptured while stepping: {grew}: {out}")
    return out


def graph_counts(run: Run) -> dict:
    """Per step: kernel launches recorded from one eager step (benchmarks/budgets.py) and
    the capture plan's segments. Warp's public ``wp.Graph`` exposes no node count, so the
    recorded launches stand in for the kernel nodes a replay runs (work behind
    ``capture_if`` counted as taken)."""
    from benchmarks import budgets

    out: dict = {"what": "recorded launches per eager step (not CUDA graph node counts)",
                 "num_envs": budgets.N}
    for name, fn in budgets.SUBJECTS.items():  # device-independent counts, on the CPU
        if name.startswith("Ant"):
            continue  # the robots' counts are the robots section's
        c = fn()
        out[name] = {k: c[k] for k in ("launches", "physics_launches", "graph_segments",
                                       "eager_segments")}
    return out


def mempool(run: Run) -> dict:
    """Warp's CUDA memory pool (its public queries) and torch's allocator, before and
    after building and stepping Go1 and a full CartPole."""
    import torch
    import warp as wp

    if run.device != "cuda":
        return {"device": "cpu", "note": "Warp's memory pool is CUDA-only: nothing to read"}
    dev = wp.get_device("cuda:0")

    def snap() -> dict:
        run.sync()
        s = {"torch_allocated": torch.cuda.memory_allocated(),
             "torch_reserved": torch.cuda.memory_reserved()}
        if wp.is_mempool_supported(dev):
            s.update(warp_mempool_enabled=wp.is_mempool_enabled(dev),
                     warp_mempool_used=wp.get_mempool_used_mem_current(dev),
                     warp_mempool_high=wp.get_mempool_used_mem_high(dev),
                     warp_mempool_release_threshold=wp.get_mempool_release_threshold(dev))
        return s

    out: dict = {"start": snap()}
    n = run.size("mempool_n")
    go1, action = _robot("Go1JoystickFlatTerrain-v1", n, run.device, mass=True)
    for _ in range(3):
        go1.step(action)
    out["go1_built"] = snap()
    for _ in range(200):
        go1.step(action)
    out["go1_after_200_steps"] = snap()
    env, _, _, actions = _full_cartpole(run.size("sweep")[-1], run.device)
    for i in range(203):
        env.step(actions[i % len(actions)])
    out["cartpole_full_after_200_steps"] = snap()
    out["go1_num_envs"], out["cartpole_num_envs"] = n, run.size("sweep")[-1]
    grew = (out["go1_after_200_steps"].get("warp_mempool_used", 0)
            - out["go1_built"].get("warp_mempool_used", 0))
    out["warp_mempool_growth_over_200_go1_steps"] = grew
    return out


def gpu_tests(run: Run) -> dict:
    """``pytest -m gpu`` over the files that hold GPU tests, each test under a timeout
    (pytest-timeout) when it is installed; the counts and the failures' names."""
    files = [f for f in GPU_TESTS if (ROOT / f).exists()]
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p",
               "no:cacheprovider", f"--junitxml={xml}", *files]
        try:
            import pytest_timeout  # noqa: F401

            cmd.append("--timeout=150")
        except ImportError:
            pass
        # from the symlink tree (gpu_check.sh): pytest puts its rootdir first on sys.path,
        # and the bare checkout's gpuparam has no gpuparam.kernels
        cwd = os.environ.get("GPU_CHECK_SRC") or ROOT
        r = subprocess.run(cmd, cwd=cwd, timeout=max(10.0, run.budget - 5))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        failed = []
        if xml.exists():
            for suite in ET.parse(xml).getroot().iter("testsuite"):
                for k in counts:
                    counts[k] += int(suite.get(k, 0))
            for case in ET.parse(xml).getroot().iter("testcase"):
                for bad in (*case.findall("failure"), *case.findall("error")):
                    msg = (bad.get("message") or "").splitlines()[:1]
                    failed.append(f"{case.get('classname')}::{case.get('name')}: {msg}")
    out = {"files": files, "returncode": r.returncode, **counts, "failed": failed[:20],
           "timeout_per_test": "--timeout=150" in cmd}
    if r.returncode != 0:
        raise AssertionError(json.dumps(out))
    return out


def go1_train(run: Run) -> dict:
    """rsl_rl PPO on Go1 flat by ``python -m gpuparam.train`` for what the section's budget
    allows (the task's train config: Playground's command ranges, 512-256-128 MLPs, the
    legged recipe): its curve (``go1_history.json`` from the run's TensorBoard scalars,
    ``go1_curve.png``), last rsl_rl checkpoint (``go1_model.pt``) and exported policies
    (``go1_policy.pt2``, ``go1_policy.onnx``) go to the output folder."""
    cfg = run.size("train")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "gpuparam.train", "--task", "Go1JoystickFlatTerrain-v1",
               "--device", run.device, "--num-envs", str(cfg["num_envs"]),
               "--max-iterations", str(cfg["iterations"]), "--log-dir", tmp,
               "--agent.num-steps-per-env", str(cfg["steps_per_env"]),
               "--agent.save-interval", str(cfg["save_every"]),
               "--max-seconds", str(max(5.0, run.budget - 40))]
        try:
            rc = subprocess.run(cmd, cwd=ROOT, timeout=max(10.0, run.budget - 10)).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        runs = sorted(Path(tmp).glob("*/*/"))
        history = _train_history(runs[-1], cfg) if runs else []
        if runs:
            models = sorted(runs[-1].glob("model_*.pt"), key=lambda p: int(p.stem[6:]))
            for src, dst in ((models[-1] if models else None, "go1_model.pt"),
                             (runs[-1] / "exported" / "policy.pt2", "go1_policy.pt2"),
                             (runs[-1] / "exported" / "policy.onnx", "go1_policy.onnx")):
                if src is not None and src.exists():
                    shutil.copy(src, run.out / dst)
    (run.out / "go1_history.json").write_text(json.dumps({"history": history}))
    if history:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3))
        ax.plot([h["env_steps"] / 1e6 for h in history],
                [h["tracking_lin_vel"] for h in history])
        ax.set(xlabel="env steps (M)", ylabel="tracking_lin_vel per episode")
        fig.tight_layout()
        fig.savefig(run.out / "go1_curve.png", dpi=100)
        plt.close(fig)
    out = {**cfg, "returncode": rc, "iterations_done": len(history)}
    if history:
        last = history[-1]
        out.update(env_steps=last["env_steps"], train_seconds=last["seconds"],
                   env_steps_per_s=last["env_steps"] / last["seconds"],
                   tracking_lin_vel=[round(h["tracking_lin_vel"], 4) for h in history])
    if rc != 0:
        raise AssertionError(json.dumps(out))
    return out


def _train_history(run_dir: Path, cfg: dict) -> list[dict]:
    """Per iteration of a ``gpuparam.train`` run (its TensorBoard scalars): env steps, the
    training seconds so far (rsl_rl's collection plus learning time), and the finished
    episodes' mean ``tracking_lin_vel`` reward (0 before any episode ends)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir)).Reload()
    tags = acc.Tags()["scalars"]
    if "Perf/collection_time" not in tags:
        return []
    track = {e.step: e.value for e in acc.Scalars("Episode_Reward/tracking_lin_vel")} \
        if "Episode_Reward/tracking_lin_vel" in tags else {}
    per_iter, seconds, out = cfg["num_envs"] * cfg["steps_per_env"], 0.0, []
    for c, lt in zip(acc.Scalars("Perf/collection_time"), acc.Scalars("Perf/learning_time"),
                     strict=True):
        seconds += c.value + lt.value
        v = track.get(c.step, 0.0)
        out.append({"iteration": c.step, "env_steps": (c.step + 1) * per_iter,
                    "seconds": max(seconds, 1e-9),
                    "tracking_lin_vel": v if math.isfinite(v) else 0.0})
    return out


SECTIONS = {f.__name__: f for f in (versions, smoke, sweep, masked_write, robots, recaptures,
                                    graph_counts, mempool, gpu_tests, go1_train)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", nargs="?", choices=sorted(SECTIONS))
    p.add_argument("--out")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes")
    p.add_argument("--budget", type=float, default=60.0, help="seconds for this section")
    p.add_argument("--list", action="store_true",
                   help="print ORDER: one 'name cap_gpu cap_dry module' line per section")
    args = p.parse_args(argv)
    if args.list:
        for name, cap_gpu, cap_dry, module in ORDER:
            print(name, cap_gpu, cap_dry, module or "-")
        return 0
    if args.section is None or args.out is None:
        p.error("a section and --out are required (or --list)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out, args.dry_run, args.budget)
    try:
        import torch

        torch.set_num_threads(int(os.environ.get("GPU_CHECK_THREADS", "1")))
        figures = SECTIONS[args.section](run)
    except Exception as e:
        record(out, args.section, False, error=f"{type(e).__name__}: {e}"[:4000],
               seconds=round(time.perf_counter() - run.t0, 2))
        return 1
    record(out, args.section, True, seconds=round(time.perf_counter() - run.t0, 2), **figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
