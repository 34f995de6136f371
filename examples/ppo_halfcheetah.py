"""PPO on gpuparam's HalfCheetah-v5 (MuJoCo Warp), plain torch, a few minutes on a CPU.

A Gaussian MLP policy learns from N parallel cheetahs whose observations are normalized
on the device by gp.ObsNorm; each iteration collects ``rollout`` steps of every env, then
runs clipped PPO epochs. The printed return is the mean reward per step of the iteration's
rollout times 1000 (an episode's length), so progress shows before 1000-step episodes end;
the log lines also give the mean return of the episodes completed since the previous line
(HalfCheetah never terminates: every env completes one each 1000 steps).

torch runs on --threads threads (default 1): the results depend on the thread count. The
learning curve and MuJoCo's log, if it writes one, go to --out (default
runs/ppo_halfcheetah).

    python examples/ppo_halfcheetah.py                 # N=64, 60 iterations (examples/README.md)
    python examples/ppo_halfcheetah.py --iterations 2 --num-envs 8 --out /tmp/hc
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import mujoco
import torch
from torch import nn

import gpuparam as gp


class ActorCritic(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64):
        super().__init__()

        def mlp(out: int, gain: float) -> nn.Sequential:
            net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out))
            for layer in net:
                if isinstance(layer, nn.Linear):
                    nn.init.orthogonal_(layer.weight, gain if layer is net[-1] else math.sqrt(2))
                    nn.init.zeros_(layer.bias)
            return net

        self.mu, self.critic = mlp(act_dim, 0.01), mlp(1, 1.0)
        self.log_std = nn.Parameter(torch.full((act_dim,), -0.5))

    def dist(self, obs: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.mu(obs), self.log_std.exp())

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)


def mujoco_log_into(out: Path) -> None:
    """MuJoCo's log file (it writes one when it logs a warning) into ``out``, not the
    working directory (MuJoCo's public ``MjLogConfig``)."""
    log = mujoco.MjLogConfig.get()
    log.logfile = str((out / "MUJOCO_LOG.TXT").resolve())
    log.set()


def train(args) -> list[tuple[int, float]]:
    torch.manual_seed(args.seed)
    base = gp.make("HalfCheetah-v5", num_envs=args.num_envs, device=args.device, seed=args.seed,
                   max_episode_steps=args.episode_steps)
    obs_dim, act_dim = base.observation_spec.shape[0], base.action_spec.shape[0]
    env = gp.TransformedEnv(base, gp.ObsNorm((obs_dim,), num_envs=base.num_envs, clip=10.0))
    n, t_len, dev = base.num_envs, args.rollout, base.device
    model = ActorCritic(obs_dim, act_dim).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)
    obs_buf = torch.zeros(t_len, n, obs_dim, device=dev)
    act_buf = torch.zeros(t_len, n, act_dim, device=dev)
    buf = {k: torch.zeros(t_len, n, device=dev) for k in ("logp", "value", "reward", "done")}
    raw_reward = torch.zeros(t_len, n, device=dev)
    ended = torch.zeros(2, device=dev)  # sum of returns, count of episodes completed
    obs = env.reset()["observation"].clone()
    history, start = [], time.perf_counter()
    for it in range(1, args.iterations + 1):
        with torch.no_grad():
            for t in range(t_len):
                d = model.dist(obs)
                action = d.sample()
                td = env.step(action.clamp(-1.0, 1.0))
                obs_buf[t], act_buf[t] = obs, action
                buf["logp"][t], buf["value"][t] = d.log_prob(action).sum(-1), model.value(obs)
                trunc = td["truncated"] & ~td["terminated"]
                bootstrap = args.gamma * model.value(td["final_observation"]) * trunc
                raw_reward[t] = td["reward"]
                buf["reward"][t] = td["reward"] + bootstrap
                buf["done"][t] = td["done"].float()
                ended[0] += (td["episode_return"] * td["done"]).sum()
                ended[1] += td["done"].sum()
                obs = td["observation"].clone()
            adv = torch.zeros(t_len, n, device=dev)
            last, next_value = torch.zeros(n, device=dev), model.value(obs)
            for t in reversed(range(t_len)):
                alive = 1.0 - buf["done"][t]
                delta = buf["reward"][t] + args.gamma * next_value * alive - buf["value"][t]
                last = delta + args.gamma * args.lam * alive * last
                adv[t], next_value = last, buf["value"][t]
            returns = adv + buf["value"]
        flat = (obs_buf.flatten(0, 1), act_buf.flatten(0, 1), buf["logp"].flatten(),
                adv.flatten(), returns.flatten())
        update(model, opt, flat, args)
        ret = raw_reward.mean().item() * 1000.0
        history.append((it * t_len * n, ret))
        if it % args.log_every == 0 or it == args.iterations:
            total, count = ended.tolist()
            episodes = (f" | {int(count)} episodes completed, mean return {total / count:7.1f}"
                        if count else "")
            ended.zero_()
            print(f"iter {it:4d} | env steps {it * t_len * n:>9,} | return per 1000 steps "
                  f"{ret:8.1f}{episodes} | {time.perf_counter() - start:6.1f} s", flush=True)
    return history


def update(model, opt, batch, args) -> None:
    obs, actions, logp_old, adv, returns = batch
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    n = obs.shape[0]
    for _ in range(args.epochs):
        for idx in torch.randperm(n, device=obs.device).split(max(1, n // args.minibatches)):
            d = model.dist(obs[idx])
            ratio = (d.log_prob(actions[idx]).sum(-1) - logp_old[idx]).exp()
            clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
            policy_loss = -torch.min(ratio * adv[idx], clipped * adv[idx]).mean()
            value_loss = (model.value(obs[idx]) - returns[idx]).pow(2).mean()
            loss = policy_loss + 0.5 * value_loss
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()


def plot(history, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, returns = zip(*history, strict=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, returns, color="tab:blue")
    ax.set_xlabel("env steps")
    ax.set_ylabel("return per 1000 steps (rollout mean reward x 1000)")
    ax.set_title("PPO on gpuparam HalfCheetah-v5 (MuJoCo Warp, CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"saved {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--rollout", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--minibatches", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--episode-steps", type=int, default=1000, help="truncation (Gymnasium's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    p.add_argument("--out", type=Path, default=Path("runs/ppo_halfcheetah"),
                   help="folder for everything the run writes (default runs/ppo_halfcheetah)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    mujoco_log_into(args.out)
    history = train(args)
    first, last = history[0][1], sum(r for _, r in history[-5:]) / len(history[-5:])
    print(f"return per 1000 steps: first iteration {first:.1f}, last 5 iterations {last:.1f}")
    plot(history, args.out / "ppo_halfcheetah.png")


if __name__ == "__main__":
    main()
