"""PPO on CartPole with a pole-length curriculum, per-step force noise and ObsNorm.

Every env has its own curriculum level (pole half-length from 1.0 m down to 0.25 m);
an env moves up a level when an episode returns >= --promote and down when it returns
<= --demote. Every step adds Gaussian noise to each env's push force. Observations are
normalized on the device by gp.ObsNorm. Nothing leaves the device inside the loop but
the numbers printed once per iteration.

torch runs on --threads threads (default 1): PPO's results depend on the thread count
(float sums in another order), so a run is reproducible only at the same setting. The
learning curve goes to OUT/ppo_curriculum.png (--out, default runs/ppo_curriculum).

    python examples/ppo_curriculum.py                  # N=1024, 150 iterations (examples/README.md)
    python examples/ppo_curriculum.py --iterations 3 --num-envs 64 --out /tmp/ppo
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

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

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor):
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        action = dist.sample()
        return action, dist.log_prob(action), self.value(obs)


def make_env(args) -> tuple[gp.TransformedEnv, gp.Curriculum]:
    env = gp.make("CartPole-v1", num_envs=args.num_envs, device=args.device, seed=args.seed)
    env.randomize(gp.Gaussian("force_mag", 0.0, args.force_noise, op="add", on="step"))
    curriculum = gp.Curriculum(
        args.levels,
        params={"length": (1.0, 0.25)},  # easy -> hard, interpolated over the levels
        metric="episode_return",
        promote=args.promote,
        demote=args.demote,
    )
    env.add_curriculum(curriculum)
    return gp.TransformedEnv(env, gp.ObsNorm((4,), num_envs=env.num_envs, clip=10.0)), curriculum


def ppo_update(model, opt, batch, args) -> None:
    obs, actions, logp_old, adv, returns = batch
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    n = obs.shape[0]
    for _ in range(args.epochs):
        for idx in torch.randperm(n, device=obs.device).split(n // args.minibatches):
            dist = torch.distributions.Categorical(logits=model.actor(obs[idx]))
            ratio = (dist.log_prob(actions[idx]) - logp_old[idx]).exp()
            clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
            policy_loss = -torch.min(ratio * adv[idx], clipped * adv[idx]).mean()
            value_loss = (model.value(obs[idx]) - returns[idx]).pow(2).mean()
            loss = policy_loss + 0.5 * value_loss - args.entropy * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()


def train(args) -> list[tuple[int, float, float]]:
    torch.manual_seed(args.seed)
    env, curriculum = make_env(args)
    n, t_len, dev = env.num_envs, args.rollout, env.device
    model = ActorCritic(4, 2).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-5)
    buf = {k: torch.zeros(t_len, n, device=dev) for k in ("logp", "value", "reward", "done")}
    obs_buf = torch.zeros(t_len, n, 4, device=dev)
    act_buf = torch.zeros(t_len, n, dtype=torch.long, device=dev)
    ret_sum, ret_count = torch.zeros((), device=dev), torch.zeros((), device=dev)
    mean_return_t = torch.zeros((), device=dev)  # last iteration's, kept when none ended
    obs = env.reset()["observation"].clone()
    history, start = [], time.perf_counter()
    for it in range(1, args.iterations + 1):
        with torch.no_grad():
            for t in range(t_len):
                action, logp, value = model.act(obs)
                td = env.step(action)
                obs_buf[t], act_buf[t] = obs, action
                buf["logp"][t], buf["value"][t] = logp, value
                done = td["done"]
                # bootstrap through time limits from the pre-reset observation
                trunc = td["truncated"] & ~td["terminated"]
                bootstrap = args.gamma * model.value(td["final_observation"]) * trunc
                buf["reward"][t] = td["reward"] + bootstrap
                buf["done"][t] = done.float()
                ret_sum += (td["episode_return"] * done).sum()
                ret_count += done.sum()
                obs = td["observation"].clone()
            # generalized advantage estimation
            adv = torch.zeros(t_len, n, device=dev)
            last, next_value = torch.zeros(n, device=dev), model.value(obs)
            for t in reversed(range(t_len)):
                alive = 1.0 - buf["done"][t]
                delta = buf["reward"][t] + args.gamma * next_value * alive - buf["value"][t]
                last = delta + args.gamma * args.lam * alive * last
                adv[t], next_value = last, buf["value"][t]
            returns = adv + buf["value"]
        flat = (obs_buf.flatten(0, 1), act_buf.flatten(), buf["logp"].flatten(),
                adv.flatten(), returns.flatten())
        ppo_update(model, opt, flat, args)
        steps = it * t_len * n
        ended = ret_count > 0
        mean_return_t = torch.where(ended, ret_sum / ret_count.clamp(min=1), mean_return_t)
        mean_return = mean_return_t.item()
        mean_level = curriculum.levels.float().mean().item()
        ret_sum.zero_(), ret_count.zero_()
        history.append((steps, mean_return, mean_level))
        if it % args.log_every == 0 or it == args.iterations:
            print(f"iter {it:4d} | env steps {steps:>10,} | mean episode return "
                  f"{mean_return:7.1f} | mean level {mean_level:.2f} / {args.levels - 1} | "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
    return history


def plot(history, path: Path, levels: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, returns, level = zip(*history, strict=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, returns, color="tab:blue")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean episode return", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(steps, level, color="tab:orange")
    ax2.set_ylabel("mean curriculum level", color="tab:orange")
    ax2.set_ylim(0, levels - 1)
    ax.set_title("PPO on gpuparam CartPole-v1: pole-length curriculum + force noise")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"saved {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--rollout", type=int, default=32)
    p.add_argument("--levels", type=int, default=5)
    p.add_argument("--promote", type=float, default=400.0)
    p.add_argument("--demote", type=float, default=50.0)
    p.add_argument("--force-noise", type=float, default=1.0, help="std of the force noise, N")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lam", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--entropy", type=float, default=0.0)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    p.add_argument("--out", type=Path, default=Path("runs/ppo_curriculum"),
                   help="folder for everything the run writes (default runs/ppo_curriculum)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    history = train(args)
    args.out.mkdir(parents=True, exist_ok=True)
    plot(history, args.out / "ppo_curriculum.png", args.levels)


if __name__ == "__main__":
    main()
