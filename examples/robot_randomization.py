"""Ants with per-world mass and friction randomization, pushes and a reward curriculum.

Four groups of Ants walk with a random policy (the point is the env, not the policy):
each group has its own nominal floor friction, every episode draws new body masses
(x0.8-1.2 per body) and every 50 steps a new per-geom friction (x0.9-1.1), a push adds a
random root velocity every 2-4 s, and a curriculum raises each env's ``ctrl_cost_weight``
from 0.1 to 0.5 as its episodes get longer. Everything runs inside the captured step on
the device; the script prints env steps/s and the mean episode return per friction group.

    python examples/robot_randomization.py                      # 64 Ants on CPU
    python examples/robot_randomization.py --num-envs 1024 --device cuda
"""

from __future__ import annotations

import argparse
import time

import torch

import gpuparam as gp

GROUP_FRICTION = (0.4, 0.7, 1.0, 1.3)  # nominal floor friction per group


def make_env(args) -> tuple[gp.VecEnv, gp.Curriculum]:
    env = gp.make("Ant-v5", num_envs=args.num_envs, device=args.device, seed=args.seed)
    n = env.num_envs
    group = torch.arange(n, device=env.device) % len(GROUP_FRICTION)
    floor = env.component_index("geom_friction", "floor")
    friction = env.params.nominal["geom_friction"].clone()
    friction[:, floor] = torch.tensor(GROUP_FRICTION, device=env.device)[group]
    env.params.set("geom_friction", friction)
    env.randomize(
        gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"),
        gp.Uniform("geom_friction", 0.9, 1.1, op="scale", on=gp.Every(50)),
    )
    env.add_event(gp.Push([(-0.5, 0.5), (-0.5, 0.5)], every=gp.Interval(2.0, 4.0)))
    curriculum = gp.Curriculum(
        3, params={"ctrl_cost_weight": (0.1, 0.5)}, metric="episode_length",
        promote=args.promote, demote=min(5.0, args.promote / 2),
    )
    env.add_curriculum(curriculum)
    return env, curriculum


def run(args) -> dict[str, float]:
    torch.manual_seed(args.seed)
    env, curriculum = make_env(args)
    n, dev = env.num_envs, env.device
    groups = len(GROUP_FRICTION)
    group = torch.arange(n, device=dev) % groups
    ret_sum = torch.zeros(groups, device=dev)
    ret_count = torch.zeros(groups, device=dev)
    action = torch.zeros(n, env.mjm.nu, device=dev)
    env.step(action)  # warm-up: loads kernels and captures the step
    start = time.perf_counter()
    for _ in range(args.steps):
        action.uniform_(-1.0, 1.0)
        td = env.step(action)
        done = td["done"].float()
        ret_sum.index_add_(0, group, td["episode_return"] * done)
        ret_count.index_add_(0, group, done)
    elapsed = time.perf_counter() - start
    sps = n * args.steps / elapsed
    print(f"{n} Ants x {args.steps} steps in {elapsed:.1f} s: {sps:,.0f} env-steps/s")
    means = (ret_sum / ret_count.clamp(min=1)).tolist()
    counts = ret_count.tolist()
    for g, mu in enumerate(GROUP_FRICTION):
        print(f"group {g} (floor friction {mu:.1f}): mean episode return {means[g]:8.2f} "
              f"over {int(counts[g])} episodes")
    print(f"mean ctrl_cost_weight {env.params['ctrl_cost_weight'].mean().item():.3f}, "
          f"mean curriculum level {curriculum.levels.float().mean().item():.2f}")
    return {"steps_per_s": sps}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--promote", type=float, default=30.0, help="episode length to level up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    run(p.parse_args())


if __name__ == "__main__":
    main()
