"""PPO on CartPole sharded over torch.distributed ranks: one env shard per rank, gradients
averaged by DistributedDataParallel, observation statistics and the curriculum's ADR synced
across ranks every --sync-every steps.

Global env i is the same env on any number of ranks (its draws are keyed by its global id):
``gp.make(..., shard=(rank, world_size))`` builds this rank's slice of --num-envs. Per rank:
physical state, parameters, curriculum levels. Global (identical on every rank after a
sync): ObsNorm statistics, the ADR range of the pole mass, the level histogram.

    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 examples/distributed_ppo.py   # CPU: gloo
    torchrun --nproc-per-node 8 examples/distributed_ppo.py --num-envs 65536   # GPUs: nccl
    python examples/distributed_ppo.py                                # one process works too

Each process runs torch on --threads threads (default 1; the results depend on it). It
writes nothing but its log lines. (OMP_NUM_THREADS=1 only keeps torchrun from printing
that it sets it.)

Multi-node (run on every node, same --rdzv-endpoint):

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint node0:29400 --rdzv-id ppo examples/distributed_ppo.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import gpuparam as gp


class ActorCritic(nn.Module):
    def __init__(self, obs_dim: int, num_actions: int, hidden: int = 64):
        super().__init__()

        def mlp(out: int, gain: float) -> nn.Sequential:
            net = nn.Sequential(
                nn.Linear(obs_dim, hidden), nn.Tanh(),
                nn.Linear(hidden, hidden), nn.Tanh(),
                nn.Linear(hidden, out),
            )
            for layer in net:
                if isinstance(layer, nn.Linear):
                    nn.init.orthogonal_(layer.weight, gain if layer is net[-1] else 2**0.5)
                    nn.init.zeros_(layer.bias)
            return net

        self.actor, self.critic = mlp(num_actions, 0.01), mlp(1, 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [B, A], value [B])``: DDP averages gradients of what goes through here."""
        return self.actor(obs), self.critic(obs).squeeze(-1)


def setup(device: str | None) -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes (none when run with plain python)."""
    cuda = torch.cuda.is_available() if device is None else device.startswith("cuda")
    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        return rank, world, torch.device("cuda", local)
    return rank, world, torch.device("cpu")


def make_env(args, rank: int, world: int, device: torch.device):
    env = gp.make("CartPole-v1", num_envs=args.num_envs, device=device, seed=args.seed,
                  shard=(rank, world))
    mass = gp.Uniform("masspole", 0.9, 1.1, op="scale", on="reset")
    env.randomize(gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step"), mass)
    curriculum = gp.Curriculum(
        args.levels,
        params={"length": (1.0, 0.25)},  # per env: easy -> hard over the levels
        promote=args.promote,
        demote=args.demote,
        # a global range: widened where episodes drawn near a bound keep returns high
        adr=[gp.ADR(mass, 0.1, (0.25, 4.0), threshold_high=args.promote, samples=32)],
        sync=True,  # ADR decides at syncs from the episodes of all ranks
    )
    env.add_curriculum(curriculum)
    obs_norm = gp.ObsNorm((4,), num_envs=env.num_envs, clip=10.0)
    tenv = gp.TransformedEnv(env, obs_norm)
    env.sync_every(args.sync_every, obs_norm, curriculum)  # collectives between steps
    return tenv, env, curriculum, obs_norm, env.randomization.ranges(mass)


def ppo_update(ddp, opt, batch, args) -> None:
    obs, actions, logp_old, adv, returns = batch
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    n = obs.shape[0]
    for _ in range(args.epochs):
        for idx in torch.randperm(n, device=obs.device).split(n // args.minibatches):
            logits, value = ddp(obs[idx])  # through DDP: gradients are all-reduced
            d = torch.distributions.Categorical(logits=logits)
            ratio = (d.log_prob(actions[idx]) - logp_old[idx]).exp()
            clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
            policy_loss = -torch.min(ratio * adv[idx], clipped * adv[idx]).mean()
            value_loss = (value - returns[idx]).pow(2).mean()
            loss = policy_loss + 0.5 * value_loss - args.entropy * d.entropy().mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(ddp.parameters(), 0.5)
            opt.step()


def train(args) -> None:
    rank, world, dev = setup(args.device)
    torch.manual_seed(args.seed + rank)  # action sampling differs per rank
    env, raw_env, curriculum, obs_norm, mass = make_env(args, rank, world, dev)
    n, t_len = env.num_envs, args.rollout
    model = ActorCritic(4, 2).to(dev)
    ddp = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None) \
        if dist.is_initialized() else model  # DDP broadcasts rank 0's initial weights
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr, eps=1e-5)
    buf = {k: torch.zeros(t_len, n, device=dev) for k in ("logp", "value", "reward", "done")}
    obs_buf = torch.zeros(t_len, n, 4, device=dev)
    act_buf = torch.zeros(t_len, n, dtype=torch.long, device=dev)
    stats = torch.zeros(2, dtype=torch.float64, device=dev)  # return sum, episodes (global)
    obs = env.reset()["observation"].clone()
    start = time.perf_counter()
    for it in range(1, args.iterations + 1):
        stats.zero_()
        with torch.no_grad():
            for t in range(t_len):
                logits, value = model(obs)
                d = torch.distributions.Categorical(logits=logits)
                action = d.sample()
                td = env.step(action)
                obs_buf[t], act_buf[t] = obs, action
                buf["logp"][t], buf["value"][t] = d.log_prob(action), value
                done = td["done"]
                trunc = td["truncated"] & ~td["terminated"]
                bootstrap = args.gamma * model(td["final_observation"])[1] * trunc
                buf["reward"][t] = td["reward"] + bootstrap
                buf["done"][t] = done.float()
                stats[0] += (td["episode_return"] * done).sum()
                stats[1] += done.sum()
                obs = td["observation"].clone()
            adv = torch.zeros(t_len, n, device=dev)
            last, next_value = torch.zeros(n, device=dev), model(obs)[1]
            for t in reversed(range(t_len)):
                alive = 1.0 - buf["done"][t]
                delta = buf["reward"][t] + args.gamma * next_value * alive - buf["value"][t]
                last = delta + args.gamma * args.lam * alive * last
                adv[t], next_value = last, buf["value"][t]
            returns = adv + buf["value"]
        flat = (obs_buf.flatten(0, 1), act_buf.flatten(), buf["logp"].flatten(),
                adv.flatten(), returns.flatten())
        ppo_update(ddp, opt, flat, args)
        if dist.is_initialized():
            dist.all_reduce(stats)  # for the log line only
        if rank == 0 and (it % args.log_every == 0 or it == args.iterations):
            levels = curriculum.global_level_counts.double()
            mean_level = (levels * torch.arange(args.levels, device=dev)).sum() / levels.sum()
            ret = (stats[0] / stats[1].clamp(min=1)).item()
            lo, hi = mass[0, 0].tolist()
            print(f"iter {it:4d} | env steps {it * t_len * args.num_envs:>10,} | mean episode "
                  f"return {ret:7.1f} | mean level {mean_level.item():.2f} / {args.levels - 1} "
                  f"| masspole scale [{lo:.2f}, {hi:.2f}] | "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
    raw_env.sync_now()  # settle the overlapped exchange in flight, sync the rest (collective)
    lo, hi = mass[0, 0].tolist()
    weights = sum(p.double().sum() for p in model.parameters()).item()
    line = (f"rank {rank}/{world} final | envs {raw_env.env_offset}.."
            f"{raw_env.env_offset + n - 1} | obs count {obs_norm.count[0].item():.0f} mean "
            f"{[round(v, 9) for v in obs_norm.mean[0].tolist()]} | masspole scale [{lo}, {hi}]"
            f" | weights {weights!r}\n")
    sys.stdout.write(line)  # one write: ranks share stdout, lines must not interleave
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=512, help="global, over all ranks")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--rollout", type=int, default=32)
    p.add_argument("--sync-every", type=int, default=8, help="steps between syncs")
    p.add_argument("--levels", type=int, default=5)
    p.add_argument("--promote", type=float, default=150.0)
    p.add_argument("--demote", type=float, default=40.0)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--entropy", type=float, default=0.0)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per process (results depend on it)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    train(args)
    if dist.is_initialized():  # after train's DDP and env are gone (their teardown uses it)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
