"""Old against new, bit for bit: the same deterministic runs under two commits of gpuparam,
hashed, and one commit's checkpoints continued by the other.

Three subjects on the CPU: CartPole (N=64, five terms over every distribution kind and
trigger, a curriculum, ObsNorm + RewardNorm, 400 steps), Ant (N=16, mass, friction and
damping terms, 120 steps), Go1 flat (N=16, the recipe's reset terms and a reset-time mass
term, 25-step episodes, 60 steps). Per step the SHA-256 runs over every output tensor and
every parameter; ``run OUT`` prints the digests of each run's two halves and saves a
checkpoint at the half to ``OUT``; ``cont OUT`` loads those checkpoints and prints the
second half's digest. An old commit is imported from a symlink tree (``gpuparam/`` with
``kernels/`` linked in as ``gpuparam/kernels``) put first on ``PYTHONPATH``::

    git worktree add --detach /tmp/old d80df81
    mkdir -p /tmp/oldpath/gpuparam && ln -s /tmp/old/gpuparam/* /tmp/oldpath/gpuparam/ \
        && ln -s /tmp/old/kernels /tmp/oldpath/gpuparam/kernels
    PYTHONPATH=/tmp/oldpath python benchmarks/bits.py run /tmp/o   # old
    python benchmarks/bits.py run /tmp/n                          # new: the same digests
    python benchmarks/bits.py cont /tmp/o                         # old checkpoints, new code
"""
import hashlib
import os
import sys

import torch

import gpuparam as gp

print("gpuparam from", gp.__file__, file=sys.stderr)


def build(name):
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


def base(env):
    return env.env if hasattr(env, "transforms") else env


def digest(h, env, td):
    for k in sorted(td.keys()):
        v = td[k]
        if isinstance(v, torch.Tensor):
            h.update(k.encode())
            h.update(v.contiguous().numpy().tobytes())
    p = base(env).params
    for n in p.names:
        h.update(p[n].contiguous().numpy().tobytes())


def main(mode: str, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for name in ("cartpole", "ant", "go1"):
        env, steps, act = build(name)
        env.reset()
        half = steps // 2
        if mode == "run":
            h1 = hashlib.sha256()
            for t in range(half):
                digest(h1, env, env.step(act(t)))
            env.save(f"{out}/{name}.pt")
        else:
            env.load(f"{out}/{name}.pt")
            h1 = None
        h2 = hashlib.sha256()
        for t in range(half, steps):
            digest(h2, env, env.step(act(t)))
        print(name, "first", h1.hexdigest()[:16] if h1 else "-", "second",
              h2.hexdigest()[:16], flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
