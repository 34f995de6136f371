"""The GPU check's ``capture`` section: captured against eager on the device, and the
experiments that tell apart the causes of the first H200 runs' two failures (Walker2d's
captured and eager steps differ from t=3, with pushes and a step-time term; Go1's from the
first forced reset). One JSON line per experiment as it ends, so a run cut short keeps what
it settled::

    python -m benchmarks.gpu.capture --out DIR --budget 150        # on a CUDA machine
    python -m benchmarks.gpu.capture --out DIR --budget 120 --dry-run   # tiny, on the CPU

It is the first section of ``benchmarks/gpu/gpu_check.sh`` (``gpu_sections.ORDER``) and
appends to ``DIR/results.jsonl`` one line per experiment: ``{"section": "capture",
"experiment", "env", "ok", "seconds", ...}``; ``ok`` is False with ``"error"`` (the
harness's message: the first step and tensor that differ) where captured and eager
disagree, and the exit status is 1 then; a last line ``"experiment": "summary"`` counts
the experiments run, failed and skipped (the budget spent). Experiments:

- ``harness``: ``gpuparam.testing.check_capture`` (random public operations, bit for bit)
  on every env, and with MuJoCo Warp's deterministic mode on the robots;
- ``vs_cpu``: the captured device run against an eager CPU run of the same operations
  (actions, masked writes, forced resets), within ``TOLERANCE`` per step;
- for Walker2d (the GPU test's recipe) and Go1 (forced resets, a reset-time mass term):
  ``all``, ``push_only``, ``step_term_only``, ``mass_term_only``, ``replay_twice`` (two
  runs of replays from one state written in place, with masked mass writes committed inside
  them: a difference is state a replay carries over to the next),
  ``arena_garbage`` (the arena of gated temporaries filled with 0xFF before every step),
  ``no_conditional`` (MuJoCo Warp's ``graph_conditional`` off: its solver loops unrolled)
  and, where the env takes ``gating=``, each gating mode.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
import traceback
from collections.abc import Callable

import torch

import gpuparam as gp
from gpuparam.testing import Op, check_capture

TOLERANCE = 1e-3  # vs_cpu: |device - cpu| <= TOLERANCE * (1 + |cpu|), per step
ENVS = ("CartPole-v1", "Pendulum-v1", "Ant-v5", "Walker2d-v5", "Humanoid-v5",
        "Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1", "Go1Terrain-v0",
        "G1JoystickFlatTerrain-v1", "G1JoystickRoughTerrain-v1", "G1Terrain-v0")
DRY_ENVS = ("CartPole-v1", "Walker2d-v5", "Go1JoystickFlatTerrain-v1")
GRID = dict(terrain_rows=2, tile_size=4.0, terrain_types=("flat", "stairs_up"))


GATING = ("graph", "mask")  # the robots' gating modes, where they take gating=


def _takes_gating() -> bool:
    """Whether the robots take ``gating=`` (``gp.RobotEnv``, the base of every robot)."""
    return "gating" in inspect.signature(gp.RobotEnv).parameters


def _kw(name: str) -> dict:
    return dict(GRID) if name.endswith("Terrain-v0") else {}


def _robot(name: str) -> bool:
    return name not in ("CartPole-v1", "Pendulum-v1")


class Check:
    """Runs experiments and appends one JSON line each to ``out``/capture.jsonl."""

    def __init__(self, out: str, device: str, n: int, steps: int, budget: float):
        self.path = os.path.join(out, "results.jsonl")
        self.device, self.n, self.steps = device, n, steps
        self.deadline = time.monotonic() + budget
        self.failed = self.ran = self.skipped = 0

    def run(self, experiment: str, env: str, fn: Callable[[], dict]) -> None:
        if time.monotonic() > self.deadline:
            self.emit({"experiment": experiment, "env": env, "ok": None,
                       "skipped": "the section's budget is spent"})
            self.skipped += 1
            return
        start = time.monotonic()
        try:
            line = {"ok": True, **fn()}
        except AssertionError as e:  # CaptureMismatch, or a cross-device tolerance
            line = {"ok": False, "error": str(e)[:1500]}
        except Exception as e:  # an experiment that could not run says why
            line = {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500],
                    "traceback": traceback.format_exc()[-1500:]}
        self.failed += line["ok"] is False
        self.ran += 1
        self.emit({"experiment": experiment, "env": env, **line,
                   "seconds": round(time.monotonic() - start, 2)})

    def emit(self, line: dict) -> None:
        line = {"section": "capture", "device": self.device, "num_envs": self.n, **line}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line)[:800], flush=True)

    # ------------------------------------------------------------------ experiments
    def make(self, name: str, capture: bool, device: str | None = None, **kw):
        return gp.make(name, self.n, device=device or self.device, seed=2, capture=capture,
                       **_kw(name), **kw)

    def harness(self, name: str, **kw) -> dict:
        r = check_capture(lambda c: self.make(name, c, **kw), steps=self.steps, seed=1)
        return {"replayed_steps": r.replayed_steps, "captures": r.captures,
                "compared": r.compared}

    def steps_only(self, name: str, setup: Callable, before_step: Callable | None = None,
                   **kw) -> dict:
        """Captured against eager with ``setup(env)`` applied to both and only steps (the
        harness's random actions); ``before_step(env, t)`` before each step."""
        def make(capture):
            env = self.make(name, capture, **kw)
            setup(env)
            return env

        if before_step is None:
            r = check_capture(make, ops=[Op("step", t) for t in range(self.steps)],
                              norms=False)
            return {"replayed_steps": r.replayed_steps, "compared": r.compared}
        envs = [make(True), make(False)]
        g = torch.Generator().manual_seed(0)
        for t in range(self.steps):
            a = _action(envs[0], g)
            for env in envs:
                before_step(env, t)
                env.step(a)
            for key in ("observation", "reward", "done"):
                x, y = envs[0].outputs[key], envs[1].outputs[key]
                if not torch.equal(x, y):
                    raise AssertionError(f"step {t}: {key} differs (max |diff| "
                                         f"{(x.float() - y.float()).abs().max().item():.3g})")
        return {"steps": self.steps, "captured": envs[0].pipeline.captured}

    def replay_twice(self, name: str, before_step: Callable | None = None, **kw) -> dict:
        """Two runs of captured steps from one state written in place (no recapture), with
        masked ``body_mass`` writes between steps (committed inside the replays): a
        difference is state carried from one replay to the next."""
        env = self.make(name, True, **kw)
        g = torch.Generator().manual_seed(0)
        actions = [_action(env, g) for _ in range(self.steps)]
        mask = torch.arange(self.n, device=env.device) % 2 == 0
        for a in actions[:3]:  # warm up, capture, replay
            env.step(a)
        saved = _inplace_state(env)
        runs = []
        for _ in range(2):
            _restore(env, saved)
            run = []
            for t, a in enumerate(actions):
                if t % 3 == 1:
                    env.params.set("body_mass", saved["body_mass"] * (1.0 + 0.05 * t),
                                   mask=mask)
                if before_step is not None:
                    before_step(env, t)
                run.append(env.step(a)["observation"].clone())
            runs.append(run)
        captures = env.pipeline.captures
        for t, (x, y) in enumerate(zip(*runs, strict=True)):
            if not torch.equal(x, y):
                raise AssertionError(f"replay {t}: observation differs between two runs from "
                                     f"one state (max |diff| {(x - y).abs().max().item():.3g})")
        if captures != 1:
            raise AssertionError(f"expected one capture, got {captures}: not a replay test")
        return {"steps": self.steps, "captures": captures}

    def vs_cpu(self, name: str) -> dict:
        """The captured device run against an eager CPU run: actions, masked writes and
        forced resets; the largest difference per output, within TOLERANCE."""
        envs = [self.make(name, True), self.make(name, False, device="cpu")]
        g = torch.Generator().manual_seed(0)
        worst = {}
        for t in range(self.steps):
            a = _action(envs[1], g)
            mask = torch.rand(self.n, generator=g) < 0.3
            for env in envs:
                if t % 4 == 2:
                    p = env.params.names[0]
                    env.params.set(p, env.params[p].clone(), mask=mask.to(env.device))
                if t % 5 == 4:
                    env.episode_length = torch.where(mask, 10**6, 0).to(
                        torch.int32).clamp(max=env.max_episode_steps - 1).to(env.device)
                env.step(a.to(env.device))
            for key in ("observation", "reward"):
                x, y = envs[0].outputs[key].cpu(), envs[1].outputs[key]
                err = ((x - y).abs() / (1 + y.abs())).max().item()
                worst[key] = max(worst.get(key, 0.0), err)
                if not err <= TOLERANCE:
                    raise AssertionError(f"step {t}: {key} differs from the CPU by {err:.3g} "
                                         f"(relative to 1 + |cpu|; tolerance {TOLERANCE})")
        return {"steps": self.steps, "max_rel_diff": worst, "tolerance": TOLERANCE}


def _action(env, g: torch.Generator) -> torch.Tensor:
    spec = env.action_spec
    if isinstance(spec, gp.DiscreteSpec):
        a = torch.randint(0, spec.n, (env.num_envs, *spec.shape), generator=g)
    else:
        a = torch.rand(env.num_envs, *spec.shape, generator=g) * 2 - 1
    return a.to(env.device)


def _inplace_state(env) -> dict:
    st = env.state if isinstance(env.state, dict) else {"state": env.state}
    ctx = env.context
    return {"state": {k: v.clone() for k, v in st.items()},
            "body_mass": env.params["body_mass"].clone(),
            "ctx": {k: getattr(ctx, k).clone() for k in
                    ("step_count", "episode_count", "running_return", "clock")}}


def _restore(env, saved: dict) -> None:
    st = env.state if isinstance(env.state, dict) else {"state": env.state}
    for k, v in saved["state"].items():
        st[k].copy_(v)
    for k, v in saved["ctx"].items():
        getattr(env.context, k).copy_(v)
    env.params.set("body_mass", saved["body_mass"])


def _walker_recipe(push=True, step_term=True, mass_term=True) -> Callable:
    def setup(env):
        if step_term:
            env.randomize(gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="step"))
        if mass_term:
            env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
        if push:
            env.add_event(gp.Push([(-0.5, 0.5)], every=gp.Every(3)))
    return setup


def _go1_recipe(mass_term=True) -> Callable:
    def setup(env):
        if mass_term:
            env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))
    return setup


def _force_resets(env, t: int) -> None:
    if t in (4, 8, 12):
        n = env.num_envs
        env.episode_length = torch.where(torch.arange(n, device=env.device) % 3 == 0,
                                         env.max_episode_steps - 1, 0).to(torch.int32)


def _arena_garbage(env, t: int) -> None:
    arena = getattr(env.backend, "arena", None)
    if arena is not None:
        arena.buffer.fill_(255)


def _no_conditional(setup: Callable) -> Callable:
    def s(env):
        env.backend.m.opt.graph_conditional = False
        setup(env)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder of results.jsonl (must exist)")
    ap.add_argument("--budget", type=float, default=150.0,
                    help="seconds for all experiments (those left then are skipped)")
    ap.add_argument("--dry-run", action="store_true",
                    help="on the CPU, tiny sizes and a few envs: a check of the section itself")
    ap.add_argument("--device", default=None, help="default cuda (cpu with --dry-run)")
    ap.add_argument("--envs", default=None,
                    help=f"comma-separated env names (default all: {','.join(ENVS)}; "
                         f"with --dry-run {','.join(DRY_ENVS)})")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.out):
        print(f"capture: --out expected an existing folder, got {args.out!r}", file=sys.stderr)
        return 2
    envs = [e for e in (args.envs or ",".join(DRY_ENVS if args.dry_run else ENVS)).split(",")
            if e]
    n, steps = (2, 8) if args.dry_run else (64, 16)
    device = args.device or ("cpu" if args.dry_run else "cuda")
    # leave time to write the last line before gpu_check.sh's timeout
    c = Check(args.out, device, n, steps, 0.85 * args.budget)
    robots_ok = True
    try:
        import mujoco_warp  # noqa: F401
    except ImportError:
        robots_ok = False
    if "Walker2d-v5" in envs and robots_ok:  # the two open failures first
        w = "Walker2d-v5"
        c.run("all", w, lambda: c.steps_only(w, _walker_recipe(), deterministic=True))
        c.run("push_only", w, lambda: c.steps_only(
            w, _walker_recipe(step_term=False, mass_term=False), deterministic=True))
        c.run("step_term_only", w, lambda: c.steps_only(
            w, _walker_recipe(push=False, mass_term=False), deterministic=True))
        c.run("mass_term_only", w, lambda: c.steps_only(
            w, _walker_recipe(push=False, step_term=False), deterministic=True))
        c.run("replay_twice", w, lambda: c.replay_twice(w, deterministic=True))
        if not args.dry_run:  # (its kernels compile anew: half a minute on a CPU)
            c.run("no_conditional", w, lambda: c.steps_only(
                w, _no_conditional(_walker_recipe()), deterministic=True))
    g = "Go1JoystickFlatTerrain-v1"
    if g in envs and robots_ok:
        c.run("all", g, lambda: c.steps_only(g, _go1_recipe(), _force_resets))
        c.run("forced_resets_only", g, lambda: c.steps_only(g, _go1_recipe(False),
                                                            _force_resets))
        c.run("replay_twice", g, lambda: c.replay_twice(g, _force_resets))
        # the arena holds the temporaries of gated work: with gating="graph" (the reset's
        # forward behind a conditional node); "mask" gates nothing
        graph = {"gating": "graph"} if _takes_gating() else {}
        c.run("arena_garbage", g, lambda: c.steps_only(
            g, _go1_recipe(), lambda e, t: (_arena_garbage(e, t), _force_resets(e, t)),
            **graph))
        c.run("no_conditional", g, lambda: c.steps_only(g, _no_conditional(_go1_recipe()),
                                                        _force_resets))
        c.run("deterministic", g, lambda: c.steps_only(g, _go1_recipe(), _force_resets,
                                                       deterministic=True))
        for mode in GATING if _takes_gating() else ():
            c.run(f"gating_{mode}", g, lambda mode=mode: c.steps_only(
                g, _go1_recipe(), _force_resets, gating=mode))
    for name in envs:
        if _robot(name) and not robots_ok:
            continue
        c.run("harness", name, lambda name=name: c.harness(name))
        if _robot(name) and not args.dry_run:
            c.run("harness_deterministic", name, lambda name=name: c.harness(
                name, deterministic=True))
        if device != "cpu":
            c.run("vs_cpu", name, lambda name=name: c.vs_cpu(name))
    c.emit({"experiment": "summary", "ok": c.failed == 0, "ran": c.ran, "failed": c.failed,
            "skipped": c.skipped})
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
