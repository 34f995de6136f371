"""Sim-to-sim check of an exported Go1 policy: the same TorchScript policy, run
deterministically on gpuparam's ``Go1JoystickFlatTerrain-v1`` (MuJoCo Warp) and on envpool's
C++ port of the same MuJoCo Playground task (MuJoCo C), against standing still (zero
actions: the home pose).

For each env: ``--steps`` control steps (500: 10 s) from a seeded reset, velocity commands
as the task draws them. Figures, each read from the 48-float observation in Playground's
layout (``[0:3]`` base linear velocity in its frame, ``[45:48]`` the command):

- ``tracking_error``: the mean over steps and envs of ``||command_xy - base_linvel_xy||``;
- ``fell``: the fraction of envs whose episode terminated (the base upside down, MuJoCo
  Playground's termination) at least once.

The policy passes on an env when its tracking error is at most ``--ratio`` (0.5) times
standing still's and at most ``--max-fell`` (10%) of its envs fell. Prints one JSON object
and exits 1 unless it passes on every env checked::

    python examples/go1_sim2sim.py                     # examples/go1_policy.pt, both envs
    python examples/go1_sim2sim.py --envs gpuparam     # without envpool

envpool (about 500 MB with its MuJoCo assets) is no dependency of gpuparam: install it in a
separate virtual environment with torch, ``pip install envpool envpool-assets-mujoco-large``,
and name its Python in ``ENVPOOL_PYTHON`` (``ENVPOOL_PYTHON=/path/to/venv/bin/python``): the
envpool half then runs there (this script with ``--envs envpool``, which imports no
gpuparam). Before anything runs the script checks that envpool imports here or there, and
stops with one line saying what to install otherwise; ``--envs gpuparam`` runs without it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import torch

TASK = "Go1JoystickFlatTerrain-v1"
HERE = os.path.dirname(os.path.abspath(__file__))


def tracking(obs: np.ndarray) -> np.ndarray:
    """``||command_xy - base_linvel_xy||`` per env, from observations ``[N, 48]``."""
    return np.linalg.norm(obs[:, 45:47] - obs[:, 0:2], axis=1)


def run_gpuparam(act, n: int, steps: int, seed: int, device: str) -> dict:
    import gpuparam as gp

    env = gp.make(TASK, n, device=device, seed=seed)
    obs = env.reset()["observation"]
    err, fell = [], torch.zeros(n, dtype=torch.bool, device=env.device)
    for _ in range(steps):
        td = env.step(act(obs))
        # the observation the step reached (before an auto-reset replaced it)
        err.append(tracking(td["final_observation"].cpu().numpy()))
        fell |= td["terminated"]
        obs = td["observation"]
    return {"tracking_error": float(np.mean(err)), "fell": float(fell.float().mean())}


def run_envpool(act, n: int, steps: int, seed: int) -> dict:
    import envpool

    env = envpool.make(TASK, env_type="gymnasium", num_envs=n, seed=seed)
    obs, _ = env.reset()
    obs = state(obs)
    err, fell = [], np.zeros(n, dtype=bool)
    for _ in range(steps):
        a = act(torch.as_tensor(obs)).cpu().numpy().astype(np.float32)
        nxt, _, terminated, truncated, info = env.step(a)
        nxt = state(nxt)
        # a step that ended an episode is left out (what envpool returns there, the
        # reached or the next episode's first observation, depends on its auto-reset)
        ok = ~(terminated | truncated)
        err.append(tracking(nxt)[ok])
        fell |= terminated
        obs = nxt
    return {"tracking_error": float(np.mean(np.concatenate(err))), "fell": float(fell.mean())}


def state(obs) -> np.ndarray:
    """envpool's policy observation ``[N, 48]`` (its observation may be a dict holding it
    as ``"state"`` beside ``"privileged_state"``)."""
    if isinstance(obs, dict):
        obs = obs["state"]
    return np.asarray(obs, dtype=np.float32)[:, :48]


def envpool_python() -> str | None:
    """The other Python that runs the envpool half: None if envpool imports here, else
    ``ENVPOOL_PYTHON`` (``""`` when unset)."""
    if importlib.util.find_spec("envpool") is not None:
        return None
    return os.environ.get("ENVPOOL_PYTHON", "")


def run_envpool_elsewhere(args, python: str) -> dict:
    """The envpool half run by ``python`` (this script with ``--envs envpool``): its
    ``"envpool"`` result."""
    cmd = [python, os.path.abspath(__file__), "--envs", "envpool", "--policy", args.policy,
           "--num-envs", str(args.num_envs), "--steps", str(args.steps), "--seed",
           str(args.seed), "--ratio", str(args.ratio), "--max-fell", str(args.max_fell),
           "--threads", str(args.threads)]
    env = {k: v for k, v in os.environ.items() if k != "ENVPOOL_PYTHON"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode not in (0, 1):
        raise SystemExit(f"ENVPOOL_PYTHON={python}: the envpool half failed (exit "
                         f"{out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)["envpool"]


def evaluate(args) -> dict:
    policy = torch.jit.load(args.policy, map_location="cpu").eval()

    def trained(obs: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return policy(obs.float().cpu()).to(obs.device)

    def still(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], 12, device=obs.device)

    out: dict = {"policy": args.policy, "num_envs": args.num_envs, "steps": args.steps,
                 "seed": args.seed, "ratio_goal": args.ratio, "max_fell": args.max_fell}
    for name in args.envs.split(","):
        if name == "envpool" and args.envpool_python:
            out[name] = run_envpool_elsewhere(args, args.envpool_python)  # ENVPOOL_PYTHON
            continue
        res = {}
        for who, act in (("policy", trained), ("standing_still", still)):
            if name == "gpuparam":
                res[who] = run_gpuparam(act, args.num_envs, args.steps, args.seed, args.device)
            else:
                res[who] = run_envpool(act, args.num_envs, args.steps, args.seed)
        ratio = res["policy"]["tracking_error"] / res["standing_still"]["tracking_error"]
        res["ratio"] = ratio
        res["passed"] = ratio <= args.ratio and res["policy"]["fell"] <= args.max_fell
        out[name] = res
    out["passed"] = all(out[name]["passed"] for name in args.envs.split(","))
    return out


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", default=os.path.join(HERE, "go1_policy.pt"))
    p.add_argument("--envs", default="gpuparam,envpool")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ratio", type=float, default=0.5,
                   help="tracking error goal, as a fraction of standing still's")
    p.add_argument("--max-fell", type=float, default=0.1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    names = args.envs.split(",")
    if not names or any(n not in ("gpuparam", "envpool") for n in names):
        p.error(f"--envs: expected gpuparam and/or envpool (comma-separated), got "
                f"{args.envs!r}")
    if not os.path.isfile(args.policy):
        p.error(f"--policy: expected a TorchScript policy file, got {args.policy!r} (no such "
                "file)")
    args.envpool_python = None
    if "envpool" in names:  # checked before the gpuparam half runs
        python = args.envpool_python = envpool_python()
        if python == "":
            p.error("--envs envpool: envpool does not import in this Python and "
                    "ENVPOOL_PYTHON is not set: pip install envpool envpool-assets-mujoco-"
                    "large (here, or in another environment named by ENVPOOL_PYTHON), or "
                    "run --envs gpuparam")
        if python:
            try:
                probe = subprocess.run([python, "-c", "import envpool, numpy, torch"],
                                       capture_output=True, text=True)
                last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
            except OSError as e:
                probe, last = None, e.strerror or type(e).__name__
            if probe is None or probe.returncode != 0:
                p.error(f"ENVPOOL_PYTHON: expected a Python that imports envpool, numpy and "
                        f"torch, got {python} ({last})")
    return args


if __name__ == "__main__":
    args = parse()
    torch.set_num_threads(args.threads)
    result = evaluate(args)
    print(json.dumps(result, indent=1))
    sys.exit(0 if result["passed"] else 1)
