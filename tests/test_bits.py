"""Bit for bit, across checkpoints and across commits: three deterministic CPU runs hashed.

The subjects are those of the former ``benchmarks/bits.py`` (unchanged, so the digests
are the ones it printed): CartPole (N=64, five terms over every distribution kind and
trigger, a curriculum, ObsNorm + RewardNorm, 400 steps), Ant (N=16, mass, friction and
damping terms, 120 steps) and Go1 flat (N=16, the recipe's reset terms and a reset-time
mass term, 25-step episodes, 60 steps). Per step the SHA-256 runs over every output tensor
and every parameter, one hash per half of the run.

- A run saved at its half and loaded into a fresh env continues bit for bit like the
  uninterrupted run.
- The digests equal those committed in ``benchmarks/results/bits.json``: a change that
  moves any bit of these runs fails here. When the change is intended and explained,
  re-record them with ``GPUPARAM_RECORD_BITS=1 python -m pytest tests/test_bits.py`` and
  say why in the commit.

With Warp's kernel cache warm the three take about 1 s, 35 s and 12 s on a 2-core CPU;
on a cold cache Ant and Go1 first compile MuJoCo Warp's kernels (minutes).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

import gpuparam as gp

DIGESTS = Path(__file__).resolve().parents[1] / "benchmarks/results/bits.json"
RECORD = os.environ.get("GPUPARAM_RECORD_BITS") == "1"
RERECORD = ("if this change of bits is intended and explained, re-record with "
            "GPUPARAM_RECORD_BITS=1 python -m pytest tests/test_bits.py and say why in the "
            "commit message")


def build(name: str):
    """``(env, steps, action(t))`` of subject ``name``: the definitions of bits.py."""
    if name == "cartpole":
        env = gp.make("CartPole-v1", 64, device="cpu", seed=7)
        env.randomize(
            gp.Uniform("masspole", 0.05, 0.2, on="reset"),
            gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step"),
            gp.LogUniform("masscart", 0.5, 2.0, op="scale", on=gp.Every(17)),
            gp.Uniform("length", 0.4, 0.7, on=gp.Interval(5, 20)),
            gp.Choice("tau", [0.02, 0.01], on="reset"),
        )
        env.add_curriculum(gp.Curriculum(3, params={"gravity": (9.8, 12.0)}, promote=50.0,
                                         demote=10.0))
        tenv = gp.TransformedEnv(env, gp.ObsNorm((4,), clip=10.0), gp.RewardNorm(gamma=0.99))
        return tenv, 400, lambda t: ((t * 7 + torch.arange(64)) % 3 > 0).long()
    if name == "ant":
        env = gp.make("Ant-v5", 16, device="cpu", seed=3)
        env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
                      gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="reset"),
                      gp.Uniform("dof_damping", 0.5, 1.5, op="scale", on=gp.Every(10)))
        return env, 120, lambda t: torch.sin(0.3 * t + torch.arange(16 * 8).reshape(16, 8)) * 0.7
    env = gp.make("Go1JoystickFlatTerrain-v1", 16, device="cpu", seed=5,
                  max_episode_steps=25)
    env.randomize(gp.Uniform("motor_strength", 0.9, 1.1, on="reset"),
                  gp.Uniform("kp", 0.9, 1.1, op="scale", on="reset"),
                  gp.Uniform("action_delay", 0.0, 1.0, on="reset"),
                  gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))
    return env, 60, lambda t: torch.sin(0.2 * t + torch.arange(16 * 12).reshape(16, 12)) * 0.5


def steps_digest(env, act, start: int, stop: int) -> str:
    """SHA-256 over every output tensor (keys sorted) and every parameter, step by step."""
    h = hashlib.sha256()
    params = (env.env if isinstance(env, gp.TransformedEnv) else env).params
    for t in range(start, stop):
        td = env.step(act(t))
        for k in sorted(td.keys()):
            if isinstance(td[k], torch.Tensor):
                h.update(k.encode())
                h.update(td[k].contiguous().numpy().tobytes())
        for n in params.names:
            h.update(params[n].contiguous().numpy().tobytes())
    return h.hexdigest()


def runs(name: str, tmp_path: Path) -> dict[str, str]:
    """The uninterrupted run's two halves (saved at the half), and the second half of a
    fresh env that loaded that checkpoint."""
    env, steps, act = build(name)
    env.reset()
    half = steps // 2
    first = steps_digest(env, act, 0, half)
    env.save(tmp_path / f"{name}.pt")
    second = steps_digest(env, act, half, steps)
    fresh, _, _ = build(name)
    fresh.reset()
    fresh.load(tmp_path / f"{name}.pt")
    return {"first": first, "second": second, "continued": steps_digest(fresh, act, half, steps)}


@pytest.mark.parametrize("name", ["cartpole", "ant", "go1"])
def test_bits(name, tmp_path):
    if name != "cartpole":
        pytest.importorskip("mujoco_warp")
    got = runs(name, tmp_path)
    assert got["continued"] == got["second"], (
        f"{name}: the run loaded from the checkpoint saved at its half does not continue bit "
        "for bit like the uninterrupted run")
    recorded = json.loads(DIGESTS.read_text())
    if RECORD:
        recorded[name] = {k: got[k] for k in ("first", "second")}
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    for half in ("first", "second"):
        assert got[half] == recorded[name][half], (
            f"{name}: the {half} half's digest {got[half]} differs from the recorded "
            f"{recorded[name][half]} ({DIGESTS.name}): some output or parameter moved; "
            + RERECORD)
