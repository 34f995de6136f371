"""Quickstart: 4096 CartPoles, half of them get a longer pole mid-run with one masked write.

    python examples/quickstart.py [--num-envs 4096] [--steps 400] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import time

import torch

import gpuparam as gp


def run(env, steps: int, half: torch.Tensor) -> None:
    """Step with a simple lean-following policy; report per-half mean episode length."""
    length_sum = torch.zeros(2, device=env.device)
    episodes = torch.zeros(2, device=env.device)
    groups = half.long()  # 0: first half, 1: second half
    obs = env.reset()["observation"]
    start = time.perf_counter()
    for _ in range(steps):
        action = (obs[:, 2] > 0).long()  # push toward the side the pole leans to
        td = env.step(action)
        obs = td["observation"]
        done = td["done"].float()
        length_sum.index_add_(0, groups, td["episode_length"].float() * done)
        episodes.index_add_(0, groups, done)
    if env.device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    mean_len = (length_sum / episodes.clamp(min=1)).tolist()
    print(
        f"  {env.num_envs * steps / elapsed:,.0f} env-steps/s | mean episode length: "
        f"first half {mean_len[0]:.1f}, second half {mean_len[1]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    args = parser.parse_args()

    env = gp.make("CartPole-v1", num_envs=args.num_envs, device=args.device, seed=0)
    print(f"{env.num_envs} x {env.name} on {env.device}; parameters: {', '.join(env.params.names)}")
    second_half = torch.arange(env.num_envs, device=env.device) >= env.num_envs // 2

    print("pole half-length 0.5 m everywhere:")
    run(env, args.steps, second_half)

    env.params.set("length", 2.0, mask=second_half)  # one masked write, on the device
    print("after env.params.set('length', 2.0, mask=second_half):")
    run(env, args.steps, second_half)
    print("lengths now:", env.params["length"][[0, -1]].tolist(), "(first env, last env)")


if __name__ == "__main__":
    main()
