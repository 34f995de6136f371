"""Switch a parameter for a subset of envs under a running TorchRL collector.

Thousands of CartPole envs are split into task groups; every few batches a task choice (here
random, in practice a curriculum or a bandit) gives one group a new pole length and
resets the observation-normalization statistics of exactly that group. The collector keeps
running: a switch is a masked parameter write plus a masked statistics reset on the device.

    python examples/torchrl_param_switch.py                    # N=4096, 12 batches
    python examples/torchrl_param_switch.py --compare          # also time the old workaround

``--compare`` measures, in the same run, what TorchRL users do today to change an env
parameter: shut down a ``MultiAsyncCollector`` (2 workers over ``GymEnv("CartPole-v1")``) and
build a new one, until its first batch arrives.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from torchrl.collectors import Collector, MultiAsyncCollector, RandomPolicy
from torchrl.envs import GymEnv, TransformedEnv

import gpuparam as gp
from gpuparam.integrations.torchrl import ObsNormTransform, TorchRLEnv

TASKS = (0.3, 0.5, 0.8, 1.2)  # pole half-lengths (m) a group can be switched to


def episode_length(batch, mask: torch.Tensor) -> float:
    """Mean episode length of the envs in ``mask`` over a batch ``[N, T]``: frames / ends."""
    done = batch["next", "done"][mask]
    return done.numel() / max(1, int(done.sum()))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--groups", type=int, default=8, help="task groups (one stats group each)")
    p.add_argument("--steps", type=int, default=16, help="steps per env per batch")
    p.add_argument("--batches", type=int, default=12)
    p.add_argument("--switch-every", type=int, default=2, help="batches between switches")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compare", action="store_true", help="also time collector recreation")
    p.add_argument("--recreates", type=int, default=2, help="recreations timed by --compare")
    return p.parse_args()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_env(args: argparse.Namespace) -> tuple[TransformedEnv, torch.Tensor]:
    """CartPole envs in TorchRL, observations normalized with one statistics group per task
    group. Returns the env and ``group`` (long ``[N]``, each env's group)."""
    core = gp.make("CartPole-v1", num_envs=args.num_envs, device=args.device, seed=args.seed)
    group = torch.arange(args.num_envs, device=core.device) * args.groups // args.num_envs
    norm = gp.ObsNorm(4, group_ids=group, num_groups=args.groups, clip=10.0)
    return TransformedEnv(TorchRLEnv(core), ObsNormTransform(norm)), group


def run_switches(args: argparse.Namespace) -> list[float]:
    """The collector loop; returns the seconds each switch took."""
    env, group = make_env(args)
    n, frames = args.num_envs, args.num_envs * args.steps
    print(f"gpuparam: CartPole-v1, {n} envs on {env.device}, {args.groups} task groups, "
          f"{args.steps} steps per env per batch")
    collector = Collector(env, None, frames_per_batch=frames, total_frames=frames * args.batches)
    rng, switch_times, g = random.Random(args.seed), [], 0
    t_batch = time.perf_counter()
    for i, batch in enumerate(collector):
        dt = time.perf_counter() - t_batch
        mask = group == g  # bool [N] on the env's device: the last group switched
        print(f"batch {i + 1:3d}: {batch.numel()} frames in {dt:.3f} s "
              f"({batch.numel() / dt / 1e3:.0f}k frames/s); group {g}: length "
              f"{env.params['length'][mask][0].item():.1f} m, mean episode length "
              f"{episode_length(batch, mask):.1f} steps")
        # ... a training update on `batch` would go here ...
        if (i + 1) % args.switch_every == 0 and i + 1 < args.batches:
            g = rng.randrange(args.groups)  # the task choice: which group, which task
            length = rng.choice([t for t in TASKS if t != env.params["length"][group == g][0]])
            mask = group == g
            sync(env.device)
            t0 = time.perf_counter()
            env.params.set("length", length, mask=mask)  # masked write, nothing restarts
            env.transform.reset_stats(mask)  # only group g's statistics start over
            sync(env.device)
            switch_times.append(time.perf_counter() - t0)
            print(f"           switch: group {g} ({int(mask.sum())} envs) -> length "
                  f"{length} m in {switch_times[-1] * 1e3:.3f} ms")
        t_batch = time.perf_counter()
    collector.shutdown()
    return switch_times


def make_gym_cartpole() -> GymEnv:
    return GymEnv("CartPole-v1")


def time_recreate(recreates: int) -> list[float]:
    """Shut down a 2-worker MultiAsyncCollector and build a new one, to its first batch."""
    policy = RandomPolicy(make_gym_cartpole().action_spec)

    def build() -> MultiAsyncCollector:
        c = MultiAsyncCollector([make_gym_cartpole] * 2, policy, frames_per_batch=64,
                                total_frames=-1)
        next(iter(c))  # the first batch: workers are up and stepping
        return c

    collector, times = build(), []
    for k in range(recreates):
        t0 = time.perf_counter()
        collector.shutdown()  # what changing a parameter takes without gpuparam
        collector = build()
        times.append(time.perf_counter() - t0)
        print(f"TorchRL recreate {k + 1}: shutdown + new MultiAsyncCollector + first batch "
              f"in {times[-1]:.2f} s")
    collector.shutdown()
    return times


def main() -> None:
    args = parse_args()
    switch_times = run_switches(args)
    if not switch_times:
        print("no switch happened: raise --batches or lower --switch-every")
        return
    switch = statistics.median(switch_times)
    print(f"switch (param write + ObsNorm.reset_stats, N={args.num_envs}): median "
          f"{switch * 1e3:.3f} ms over {len(switch_times)} switches")
    if args.compare:
        recreate = statistics.median(time_recreate(args.recreates))
        print(f"recreate (2-worker MultiAsyncCollector, GymEnv CartPole-v1): median "
              f"{recreate:.2f} s")
        print(f"ratio: a gpuparam switch is {recreate / switch:,.0f}x faster")


if __name__ == "__main__":
    main()
