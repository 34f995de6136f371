"""rsl_rl's OnPolicyRunner (PPO) on gpuparam's Pendulum-v1 through ``RslRlVecEnv``.

The recipe robot learners use, on a small scale: per-step domain randomization (Gaussian
noise on gravity every step), a per-env curriculum (pendulum mass from 0.6 up to 1.4 as
episodes get better), and an asymmetric actor-critic whose critic also sees the privileged
parameter group (each env's mass and gravity, scaled to [-1, 1] by their spec ranges).
Observations and rewards are normalized on the device by gp.ObsNorm / gp.RewardNorm; the
returns printed and plotted are raw Pendulum returns (about -1200 for a random policy,
about -150 to -200 once it swings up and balances).

    python examples/rsl_rl_train.py                  # N=256, about 70 s on 2 idle CPU cores
    python examples/rsl_rl_train.py --iterations 2 --num-envs 16 --plot /tmp/rsl.png
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import torch
from rsl_rl.runners import OnPolicyRunner  # noqa: I001 - after gpuparam, as users write it

import gpuparam as gp
from gpuparam.integrations.rsl_rl import RslRlVecEnv


def make_env(args) -> tuple[RslRlVecEnv, gp.Curriculum]:
    env = gp.make("Pendulum-v1", num_envs=args.num_envs, device=args.device, seed=args.seed,
                  max_episode_steps=args.episode_steps)
    env.randomize(gp.Gaussian("g", 0.0, args.gravity_noise, op="add", on="step"))
    curriculum = gp.Curriculum(
        args.levels,
        params={"m": (0.6, 1.4)},  # easy -> hard, interpolated over the levels
        metric="episode_return",
        promote=args.promote,
        demote=args.demote,
    )
    env.add_curriculum(curriculum)
    normalized = gp.TransformedEnv(env, gp.ObsNorm(3, clip=10.0), gp.RewardNorm(gamma=0.99))
    wrapped = RslRlVecEnv(normalized, privileged=("m", "g"), clip_actions=True,
                          log_interval=args.steps_per_env)
    return wrapped, curriculum


def train_cfg(args) -> dict:
    return {
        "num_steps_per_env": args.steps_per_env,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]},
        "algorithm": {
            "class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4,
            "learning_rate": 1e-3, "gamma": 0.99, "lam": 0.95, "entropy_coef": 0.0,
            "desired_kl": 0.01, "schedule": "adaptive",
        },
        "actor": {"class_name": "MLPModel", "hidden_dims": [64, 64],
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [64, 64]},
    }


def main(args) -> list[tuple[int, float, float]]:
    torch.manual_seed(args.seed)
    env, curriculum = make_env(args)
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the models
        runner = OnPolicyRunner(env, train_cfg(args), log_dir=None, device=str(env.device))
    history, t0 = [], time.perf_counter()
    for it in range(args.iterations):
        runner.learn(1, init_at_random_ep_len=it == 0)
        log = env.last_log  # device tensors: one host sync per iteration, here
        ret, length = float(log["Episode/return"]), float(log["Episode/length"])
        level = curriculum.levels.float().mean().item()
        steps = (it + 1) * args.steps_per_env * args.num_envs
        history.append((steps, ret, level))
        if it % args.log_every == 0 or it == args.iterations - 1:
            print(f"iter {it:4d} | env steps {steps:9d} | mean return {ret:8.1f} "
                  f"(length {length:5.1f}) | mean level {level:.2f} / {args.levels - 1} | "
                  f"{time.perf_counter() - t0:6.1f} s")
    return history


def plot(history, path: str, levels: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, returns, level = zip(*history, strict=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, returns, color="tab:blue")
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean raw episode return", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(steps, level, color="tab:orange")
    ax2.set_ylabel("mean curriculum level (mass 0.6 -> 1.4)", color="tab:orange")
    ax2.set_ylim(0, levels - 1)
    ax.set_title("rsl_rl PPO on gpuparam Pendulum-v1: mass curriculum, gravity noise, "
                 "privileged critic", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--iterations", type=int, default=80)
    p.add_argument("--steps-per-env", type=int, default=32)
    p.add_argument("--episode-steps", type=int, default=200, help="truncation (Gymnasium: 200)")
    p.add_argument("--levels", type=int, default=5)
    p.add_argument("--promote", type=float, default=-400.0, help="raw return to move up")
    p.add_argument("--demote", type=float, default=-1000.0, help="raw return to move down")
    p.add_argument("--gravity-noise", type=float, default=0.5, help="std of per-step noise")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--plot", default="", help="PNG path for the learning curve ('' for none)")
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    history = main(args)
    if args.plot:
        plot(history, args.plot, args.levels)
