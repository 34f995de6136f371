"""rsl_rl's OnPolicyRunner (PPO) on gpuparam's Pendulum-v1 or a MuJoCo Warp robot, through
``RslRlVecEnv``.

The recipe robot learners use: per-step domain randomization, a per-env curriculum, and an
asymmetric actor-critic whose critic also sees the privileged parameter group (each env's
randomized parameters, scaled to [-1, 1]). Observations and rewards are normalized on the
device by gp.ObsNorm / gp.RewardNorm; the returns printed and plotted are raw returns.

``--task Pendulum-v1`` (default): Gaussian noise on gravity every step, a curriculum moving
the pendulum mass from 0.6 up to 1.4 as episodes get better, privileged mass and gravity
(scaled by their spec ranges). Raw returns: about -1200 for a random policy, about -150 to
-200 once it swings up and balances.

``--task HalfCheetah-v5`` (or Hopper-v5, Walker2d-v5, Ant-v5; needs ``gpuparam[mujoco]``):
every step each env's actuator gears are scaled by a fresh draw (motor strength noise); each
episode draws body masses and geom frictions; a curriculum widens the gear and mass ranges
level by level (x0.95-1.05 at level 0 up to x0.7-1.3 gears, x0.6-1.4 masses at the top) as
an env's episode returns pass ``--promote``; the critic sees the privileged masses, gears and
frictions, each scaled from the widest range it can take. Episodes are truncated at
``--episode-steps`` (250 here, Gymnasium's 1000 otherwise) so the curriculum sees episode
ends often.

torch runs on --threads threads (default 1): the results depend on the thread count. The
learning curve (rsl_rl_pendulum.png, rsl_rl_halfcheetah.png, ...) and MuJoCo's log, if it
writes one, go to --out (default runs/rsl_rl_train).

    python examples/rsl_rl_train.py                    # N=256, 80 iterations (examples/README.md)
    python examples/rsl_rl_train.py --task HalfCheetah-v5      # N=64, 200 iterations
    python examples/rsl_rl_train.py --iterations 2 --num-envs 16 --out /tmp/rsl
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from pathlib import Path

import torch
from rsl_rl.runners import OnPolicyRunner  # noqa: I001 - after gpuparam, as users write it

import gpuparam as gp
from gpuparam.integrations.rsl_rl import RslRlVecEnv

# per-task defaults for the flags left unset
DEFAULTS = {
    "Pendulum-v1": {"num_envs": 256, "iterations": 80, "episode_steps": 200,
                    "promote": -400.0, "demote": -1000.0},
    "robot": {"num_envs": 64, "iterations": 200, "episode_steps": 250,
              "promote": 300.0, "demote": 0.0},
}
# robot randomization, as scale factors of the nominal values: (level 0, top level)
GEAR_RANGE = ((0.95, 1.05), (0.7, 1.3))  # every step
MASS_RANGE = ((0.95, 1.05), (0.6, 1.4))  # every episode
FRICTION_RANGE = (0.7, 1.3)  # every episode, all levels


def make_env(args) -> tuple[RslRlVecEnv, gp.Curriculum]:
    if args.task != "Pendulum-v1":
        return make_robot_env(args)
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


def make_robot_env(args) -> tuple[RslRlVecEnv, gp.Curriculum]:
    env = gp.make(args.task, num_envs=args.num_envs, device=args.device, seed=args.seed,
                  max_episode_steps=args.episode_steps)
    gear = gp.Uniform("actuator_gear", *GEAR_RANGE[0], op="scale", on="step")
    mass = gp.Uniform("body_mass", *MASS_RANGE[0], op="scale", on="reset")
    env.randomize(gear, mass,
                  gp.Uniform("geom_friction", *FRICTION_RANGE, op="scale", on="reset"))
    curriculum = gp.Curriculum(
        args.levels,
        ranges={gear: GEAR_RANGE, mass: MASS_RANGE},  # easy -> hard, interpolated
        metric="episode_return",
        promote=args.promote,
        demote=args.demote,
    )
    env.add_curriculum(curriculum)
    nominal = env.params.nominal
    # scale each privileged parameter from the widest range it can take (spec ranges of
    # physical parameters are validation bounds, e.g. body_mass 1e-6 .. 1e6)
    privileged = {
        name: ((nominal[name][0] * lo).tolist(), (nominal[name][0] * hi).tolist())
        for name, (lo, hi) in (("body_mass", (MASS_RANGE[1][0], MASS_RANGE[1][1])),
                               ("actuator_gear", (GEAR_RANGE[1][0], GEAR_RANGE[1][1])),
                               ("geom_friction", FRICTION_RANGE))
    }
    obs_dim = env.observation_spec.shape[0]
    normalized = gp.TransformedEnv(env, gp.ObsNorm(obs_dim, clip=10.0), gp.RewardNorm(gamma=0.99))
    wrapped = RslRlVecEnv(normalized, privileged=privileged, clip_actions=True,
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
        "actor": {"class_name": "MLPModel", "hidden_dims": [args.hidden] * 2,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [args.hidden] * 2},
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


def mujoco_log_into(out: Path) -> None:
    """MuJoCo's log file (it writes one when it logs a warning) into ``out``, not the
    working directory (MuJoCo's public ``MjLogConfig``; robots only)."""
    import mujoco

    log = mujoco.MjLogConfig.get()
    log.logfile = str((out / "MUJOCO_LOG.TXT").resolve())
    log.set()


def plot_name(task: str) -> str:
    """``rsl_rl_pendulum.png``, ``rsl_rl_halfcheetah.png``, ..."""
    return f"rsl_rl_{task.split('-')[0].lower()}.png"


def plot(history, path: Path, args) -> None:
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
    if args.task == "Pendulum-v1":
        what = "mass 0.6 -> 1.4"
        title = "Pendulum-v1: mass curriculum, gravity noise, privileged critic"
    else:
        what = "gear, mass ranges widen"
        title = (f"{args.task} ({args.episode_steps}-step episodes): gear noise every step,\n"
                 "mass/friction per episode, range curriculum, privileged critic")
    ax2.set_ylabel(f"mean curriculum level ({what})", color="tab:orange")
    ax2.set_ylim(0, args.levels - 1)
    ax.set_title(f"rsl_rl PPO on gpuparam {title}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="Pendulum-v1",
                   help="Pendulum-v1, or a robot: HalfCheetah-v5, Hopper-v5, Walker2d-v5, Ant-v5")
    p.add_argument("--num-envs", type=int, help="default 256 (Pendulum), 64 (robots)")
    p.add_argument("--iterations", type=int, help="default 80 (Pendulum), 200 (robots)")
    p.add_argument("--steps-per-env", type=int, default=32)
    p.add_argument("--episode-steps", type=int,
                   help="truncation; default 200 (Pendulum, as Gymnasium), 250 (robots)")
    p.add_argument("--levels", type=int, default=5)
    p.add_argument("--promote", type=float,
                   help="raw return to move up; default -400 (Pendulum), 300 (robots)")
    p.add_argument("--demote", type=float,
                   help="raw return to move down; default -1000 (Pendulum), 0 (robots)")
    p.add_argument("--gravity-noise", type=float, default=0.5,
                   help="Pendulum: std of the per-step gravity noise")
    p.add_argument("--hidden", type=int, default=64, help="units of both hidden layers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    p.add_argument("--out", type=Path, default=Path("runs/rsl_rl_train"),
                   help="folder for everything the run writes (default runs/rsl_rl_train)")
    args = p.parse_args(argv)
    for key, value in DEFAULTS["Pendulum-v1" if args.task == "Pendulum-v1" else "robot"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


if __name__ == "__main__":
    args = parse()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.task != "Pendulum-v1":
        mujoco_log_into(args.out)
    history = main(args)
    plot(history, args.out / plot_name(args.task), args)
    print(f"saved {args.out / plot_name(args.task)}")
