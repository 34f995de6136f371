"""Unitree G1 velocity tracking with rsl_rl's PPO on gpuparam (MuJoCo Warp): the humanoid on
the same legged recipe as ``go1_train.py``, with a privileged critic.

The task is MuJoCo Playground's G1 joystick task (``G1JoystickFlatTerrain-v1``, default, or
``G1JoystickRoughTerrain-v1``; ``G1Terrain-v0``: on the terrain grid, with the height scan
and legged_gym's terrain curriculum): 29 joints, a gait phase in the observation,
Playground's velocity pushes. The recipe:

- observation noise (Playground's scales, ``noise_level`` 1) and an action latency of 0 or
  1 env step (``action_delay ~ U(0, 1)`` per episode, rounded);
- per episode: the feet's floor friction U(0.4, 1.0) (``pair_friction``: G1's feet touch
  the floor through contact pairs, as Playground's ``randomize.py`` does it), motor
  strength x U(0.9, 1.1) and kp x U(0.9, 1.1) per joint;
- an asymmetric actor-critic: the actor sees ``"observation"`` (103 values), the critic
  the noise-free ``"privileged_observation"`` (216; 290 and 403 with the terrain grid's
  height scan), both normalized by rsl_rl.

torch runs on ``--threads`` threads (default 1). Written under ``--out`` (default
``runs/g1/``) at the end: ``model.pt`` (rsl_rl checkpoint), ``history.json`` (per
iteration: env steps, mean reward per step, mean linear tracking reward per step, mean
episode length, seconds) and ``curve.png``.

    python examples/g1_train.py                               # CPU: N=128, 20 minutes
    python examples/g1_train.py --num-envs 4096 --iterations 1500 --device cuda
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import time

import torch
from rsl_rl.runners import OnPolicyRunner  # noqa: I001 - after gpuparam, as users write it
from train_cli import check_writable_dir, episode_length, hidden_sizes, int_at_least

import gpuparam as gp
from gpuparam.integrations.rsl_rl import RslRlVecEnv


class Totals:
    """This iteration's sums of the reward and of the linear tracking term
    (``reward_terms[:, 0]``, before ``dt``) over env-steps: an ``after_step`` hook of
    device work only (recorded into the captured step)."""

    def __init__(self, env):
        self.total = torch.zeros(3, device=env.device)  # reward, tracking, env-steps

    def __call__(self, env, td) -> None:
        self.total[0].add_(td["reward"].sum())
        self.total[1].add_(td["reward_terms"][:, 0].sum())
        self.total[2].add_(td["reward"].numel())

    def take(self) -> tuple[float, float]:
        reward, tracking, steps = self.total.tolist()  # one host sync per iteration
        self.total.zero_()
        return reward / steps, tracking / steps


def make_env(args):
    grid = args.task == "G1Terrain-v0"
    kw = dict(terrain_rows=args.terrain_rows) if grid else {}
    env = gp.make(args.task, args.num_envs, device=args.device, seed=args.seed, **kw)
    if grid:  # an env walking half a tile moves one row up, one that stalls one row down
        env.add_curriculum(env.terrain_curriculum())
    npair = env.params.spec["pair_friction"].shape[0]
    low, high = [1.0] * npair, [1.0] * npair
    low[:2], high[:2] = [0.4, 0.4], [1.0, 1.0]  # pairs 0, 1: left and right foot-floor
    env.randomize(
        gp.Uniform("pair_friction", low, high, on="reset"),
        gp.Uniform("motor_strength", 0.9, 1.1, on="reset"),
        gp.Uniform("kp", 0.9, 1.1, op="scale", on="reset"),
        gp.Uniform("action_delay", 0.0, 1.0, on="reset"),
    )
    totals = Totals(env)
    env.after_step(totals, kind="torch")
    env.reset()
    # actions clamped to [-1, 1] (Playground's PPO squashes them with tanh; the task itself
    # does not clip)
    wrapped = RslRlVecEnv(env, clip_actions=True, log_interval=args.steps_per_env)
    return env, wrapped, totals


def train_cfg(args) -> dict:
    hidden = list(args.hidden)
    return {
        "num_steps_per_env": args.steps_per_env,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "algorithm": {
            "class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4,
            "learning_rate": 1e-3, "gamma": args.gamma, "lam": 0.95, "entropy_coef": 0.01,
            "clip_param": 0.2, "max_grad_norm": 1.0, "desired_kl": 0.01,
            "schedule": "adaptive",
        },
        "actor": {"class_name": "MLPModel", "hidden_dims": hidden, "activation": "elu",
                  "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution",
                                       "init_std": args.init_std}},
        "critic": {"class_name": "MLPModel", "hidden_dims": hidden, "activation": "elu",
                   "obs_normalization": True},
    }


def train(args) -> list[dict]:
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    env, wrapped, totals = make_env(args)
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the models
        runner = OnPolicyRunner(wrapped, train_cfg(args), log_dir=None, device=str(env.device))
    history, t0 = [], time.perf_counter()
    for it in range(args.iterations):
        runner.learn(1, init_at_random_ep_len=it == 0)
        reward, tracking = totals.take()
        row = {"iteration": it, "env_steps": (it + 1) * args.steps_per_env * args.num_envs,
               "reward": reward, "tracking_lin_vel": tracking,
               "episode_length": float(wrapped.last_log["Episode/length"]),
               "seconds": time.perf_counter() - t0}
        history.append(row)
        if it % args.log_every == 0 or it == args.iterations - 1:
            print(f"iter {it:4d} | env steps {row['env_steps']:8d} | reward {reward:+.4f} | "
                  f"tracking {tracking:.3f} | episode length "
                  f"{episode_length(row['episode_length'])} | "
                  f"{row['seconds']:6.1f} s", flush=True)
    runner.save(os.path.join(args.out, "model.pt"))
    with open(os.path.join(args.out, "history.json"), "w") as f:
        json.dump({"args": vars(args), "history": history}, f, indent=1)
    plot(history, os.path.join(args.out, "curve.png"), args)
    return history


def plot(history: list[dict], path: str, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    steps = [h["env_steps"] for h in history]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, key, label in zip(axes, ("reward", "tracking_lin_vel", "episode_length"),
                              ("reward per step", "linear tracking term per step",
                               "episode length (steps)"), strict=True):
        ys = [h[key] for h in history]
        ax.plot(steps, ys)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_locator(MaxNLocator(5))  # few labels, short: they never overlap
        ax.xaxis.set_major_formatter(FuncFormatter(
            lambda x, _: "0" if x == 0 else f"{x / 1e6:g}M" if x >= 1e6 else f"{x / 1e3:g}k"))
        ax.set_title(label, fontsize=9)
        if key == "episode_length" and len(ys) > 10:
            # the first iterations end episodes of random initial lengths
            # (init_at_random_ep_len): scaled to the later ones
            ax.set_ylim(0, 1.2 * max(y for y in ys[5:] if y == y))
            ax.set_title("episode length (first iterations: random lengths)", fontsize=9)
    fig.suptitle(f"rsl_rl PPO on gpuparam {args.task}, N={args.num_envs}, {args.device}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse(argv=None) -> argparse.Namespace:
    """The options, each checked (types, ranges, the ``--out`` folder) before anything is
    built: a bad one is one argparse error line."""
    pos = int_at_least(1)
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="G1JoystickFlatTerrain-v1",
                   choices=("G1JoystickFlatTerrain-v1", "G1JoystickRoughTerrain-v1",
                            "G1Terrain-v0"))
    p.add_argument("--terrain-rows", type=pos, default=10, help="G1Terrain-v0 grid rows")
    p.add_argument("--num-envs", type=pos, default=128)
    p.add_argument("--iterations", type=pos, default=200)
    p.add_argument("--steps-per-env", type=pos, default=24)
    p.add_argument("--hidden", type=hidden_sizes, default=[256, 128],
                   help="hidden layer sizes (actor and critic), e.g. 256,128")
    p.add_argument("--gamma", type=float, default=0.97, help="discount (Playground's)")
    p.add_argument("--init-std", type=float, default=0.5, help="initial action noise")
    p.add_argument("--out", default=os.path.join("runs", "g1"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--log-every", type=pos, default=5)
    p.add_argument("--threads", type=pos, default=1,
                   help="torch threads (results depend on it)")
    args = p.parse_args(argv)
    check_writable_dir(p, "--out", args.out)
    return args


if __name__ == "__main__":
    args = parse()
    torch.set_num_threads(args.threads)
    train(args)
