"""Unitree Go1 velocity tracking with rsl_rl's PPO on gpuparam (MuJoCo Warp), with the
legged sim-to-real recipe on, a curriculum, and a privileged critic.

The task is MuJoCo Playground's Go1 joystick task (``Go1JoystickFlatTerrain-v1``, default)
or its rewards on a terrain grid with a height scan (``Go1Terrain-v0``). The recipe:

- observation noise (Playground's scales, ``noise_level`` 1) and action latency of 0 or 1
  env step (``action_delay ~ U(0, 1)`` per episode, rounded);
- per episode: floor friction U(0.4, 1.0), base mass +U(-1, 1) kg, base centre of mass
  +U(-5, 5) cm, motor strength x U(0.9, 1.1), kp and kd x U(0.9, 1.1) per joint
  (Playground's ranges where it has them);
- velocity commands (Playground's law); kicks with ``--kicks``;
- a curriculum: on the flat task over the command ranges (``command_low`` /
  ``command_high``, from a third of Playground's ranges up to them, promoted when an
  episode's mean linear
  tracking reward passes ``--promote``), on the terrain grid legged_gym's terrain
  curriculum (``env.terrain_curriculum()``);
- an asymmetric actor-critic: the actor sees ``"observation"`` (48 values, 235 with the
  height scan), the critic the noise-free ``"privileged_observation"`` (123 / 310),
  both normalized by rsl_rl.

torch runs on ``--threads`` threads (default 1): the results depend on the thread count.
Everything is written under ``--out`` (default ``runs/go1/``), at every ``--save-every``
iterations and at the end: ``model.pt`` (rsl_rl checkpoint: actor, critic with their
observation normalizers, optimizer), ``env.pt`` (``env.save``: the env's state with its
randomization and curriculum), ``train.pt`` (the tracking metric's buffers and torch's
random state), ``history.json`` (per iteration: env steps, mean linear tracking reward per
step, mean episode length, mean curriculum level, seconds), TensorBoard logs (the same
figures; ``tensorboard --logdir runs/go1``) and ``curve.png``. ``--resume runs/go1``
continues a run from those files, bit for bit (the same iterations as one uninterrupted run,
on the same device and thread count), up to ``--iterations`` in all. ``--export FILE``
writes the policy as TorchScript: raw 48-float observation ``[B, 48]`` in (the
normalization inside), the 12 actions in ``[-1, 1]`` out.

    python examples/go1_train.py                              # CPU: N=128, a few minutes
    python examples/go1_train.py --resume runs/go1 --iterations 400   # 200 more
    python examples/go1_train.py --task Go1Terrain-v0 --num-envs 4096 --iterations 1500 \\
        --device cuda                                         # the real run is a GPU job
    python examples/go1_train.py --device cuda --num-envs 4096 --hidden 512,256,128 \\
        --levels 0 --iterations 100000 --max-seconds 500 --export go1_policy.pt
                                  # examples/go1_policy.pt: 99.9 M steps, 401 s on an H200
    python examples/go1_train.py --play runs/go1/model.pt     # runs/go1/play.gif

``--play`` renders a few envs of a saved policy with MuJoCo's offscreen renderer
(``mujoco.Renderer``; the model has no visual meshes, so the collision geoms, group 3, are
drawn). Without a display (no ``DISPLAY``) and without ``MUJOCO_GL`` it uses EGL
(``MUJOCO_GL=egl``: the system packages ``libegl1`` and ``libgl1-mesa-dri`` on
Debian/Ubuntu; Mesa renders on the CPU without a GPU); where EGL cannot start it says which
line fixes it (``MUJOCO_GL=osmesa`` with ``libosmesa6``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time

if "--play" in sys.argv and not os.environ.get("DISPLAY") and "MUJOCO_GL" not in os.environ:
    os.environ["MUJOCO_GL"] = "egl"  # headless: MuJoCo reads it when first imported

import torch
from rsl_rl.runners import OnPolicyRunner  # noqa: I001 - after gpuparam, as users write it
from train_cli import (
    check_writable_dir,
    check_writable_file,
    episode_length,
    float_at_least,
    hidden_sizes,
    int_at_least,
)

import gpuparam as gp
from gpuparam.integrations.rsl_rl import RslRlVecEnv

STARTED = time.perf_counter()  # --max-seconds counts from here: builds and compiles too
HARD = (1.5, 0.8, 1.2)  # Playground's command ranges (vx, vy, yaw rate)
EASY = tuple(a / 3 for a in HARD)


class Tracking:
    """Per-episode mean of the linear tracking term (``reward_terms[:, 0]``) as a device
    metric for the command curriculum, and its per-iteration mean for the log: an
    ``after_step`` hook of device work only (recorded into the captured step)."""

    def __init__(self, env):
        n, dev = env.num_envs, env.device
        self.sum = torch.zeros(n, device=dev)
        self.len = torch.zeros(n, device=dev)
        self.metric = torch.zeros(n, device=dev)
        self.total = torch.zeros(2, device=dev)  # this iteration: sum, steps

    def __call__(self, env, td) -> None:
        term = td["reward_terms"][:, 0]
        self.sum.add_(term)
        self.len.add_(1.0)
        torch.div(self.sum, self.len, out=self.metric)  # read by the curriculum at done
        keep = 1.0 - td["done"].float()
        self.sum.mul_(keep)
        self.len.mul_(keep)
        self.total[0].add_(term.sum())
        self.total[1].add_(term.numel())

    def take(self) -> float:
        v = (self.total[0] / self.total[1]).item()  # one host sync per iteration
        self.total.zero_()
        return v

    def state_dict(self) -> dict:
        return {k: getattr(self, k).clone() for k in ("sum", "len", "metric", "total")}

    def load_state_dict(self, state: dict) -> None:
        for k, v in state.items():
            getattr(self, k).copy_(v)


def make_env(args, num_envs: int):
    kw = dict(terrain_rows=args.terrain_rows) if args.task == "Go1Terrain-v0" else {}
    env = gp.make(args.task, num_envs, device=args.device, seed=args.seed, **kw)
    trunk = [-1.0] + [0.0] * (env.mjm.nbody - 2)  # body_mass components: the trunk only
    env.randomize(
        gp.Uniform("geom_friction", 0.4, 1.0, on="reset"),  # the floor's wins (priority)
        gp.Uniform("body_mass", trunk, [-x for x in trunk], op="add", on="reset"),
        gp.Uniform("base_com_offset", -0.05, 0.05, on="reset"),
        gp.Uniform("motor_strength", 0.9, 1.1, on="reset"),
        gp.Uniform("kp", 0.9, 1.1, op="scale", on="reset"),
        gp.Uniform("kd", 0.9, 1.1, op="scale", on="reset"),
        gp.Uniform("action_delay", 0.0, 1.0, on="reset"),
    )
    if args.kicks:
        env.params.set("kick_enable", 1.0)
    tracking = Tracking(env)
    env.after_step(tracking, kind="torch")
    if args.task == "Go1Terrain-v0":
        curriculum = env.terrain_curriculum()
        env.add_curriculum(curriculum)
        start = torch.randint(0, min(args.terrain_rows, 4), (num_envs,),
                              generator=torch.Generator().manual_seed(args.seed))
        curriculum.set_level(start.to(torch.int32).to(env.device))  # legged_gym: rows 0-3
    elif args.levels:
        neg = tuple(-x for x in EASY), tuple(-x for x in HARD)
        curriculum = gp.Curriculum(args.levels, params={"command_low": neg,
                                                        "command_high": (EASY, HARD)},
                                   metric=tracking.metric, promote=args.promote,
                                   demote=args.demote)
        env.add_curriculum(curriculum)
    else:
        curriculum = None  # Playground's full command ranges from the start
    env.reset()
    # actions clamped to [-1, 1] (Playground's PPO squashes them with tanh; the task itself
    # does not clip)
    wrapped = RslRlVecEnv(env, clip_actions=True, log_interval=args.steps_per_env)
    return env, wrapped, curriculum, tracking


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


def make_runner(wrapped, args) -> OnPolicyRunner:
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the models
        return OnPolicyRunner(wrapped, train_cfg(args), log_dir=None, device=str(wrapped.device))


class Policy(torch.nn.Module):
    """The exported policy: rsl_rl's TorchScript actor (observation normalization, MLP,
    the distribution's mean) with the adapter's action clamp: ``[B, 48]`` raw observations
    in, ``[B, 12]`` actions in ``[-1, 1]`` out, as the env received them."""

    def __init__(self, actor: torch.nn.Module):
        super().__init__()
        self.actor = actor

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.actor(observation), -1.0, 1.0)


def export(runner: OnPolicyRunner, path: str) -> None:
    """Write the actor as TorchScript (on the CPU) to ``path``."""
    actor = runner.alg.get_policy().as_jit().to("cpu").eval()
    torch.jit.script(Policy(actor)).save(path)
    print(f"TorchScript policy -> {path}")


def save(args, runner, env, tracking, history) -> None:
    """Everything a resumed run needs, under ``--out``."""
    runner.save(os.path.join(args.out, "model.pt"))
    env.save(os.path.join(args.out, "env.pt"))
    torch.save({"tracking": tracking.state_dict(), "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available()
                else None}, os.path.join(args.out, "train.pt"))
    with open(os.path.join(args.out, "history.json"), "w") as f:
        json.dump({"args": vars(args), "history": history}, f, indent=1)


def resume(args, runner, env, wrapped, tracking) -> list[dict]:
    """Load what :func:`save` wrote in ``--resume`` (a run folder or its ``model.pt``);
    returns the history so far."""
    where = args.resume if os.path.isdir(args.resume) else os.path.dirname(args.resume)
    runner.load(os.path.join(where, "model.pt"), map_location=str(env.device))
    wrapped.load(os.path.join(where, "env.pt"))  # the env, and the adapter's observations
    state = torch.load(os.path.join(where, "train.pt"), weights_only=False)
    tracking.load_state_dict(state["tracking"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    with open(os.path.join(where, "history.json")) as f:
        history = json.load(f)["history"]
    print(f"resumed {where} at iteration {len(history)}")
    return history


def train(args) -> list[dict]:
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    env, wrapped, curriculum, tracking = make_env(args, args.num_envs)
    runner = make_runner(wrapped, args)
    history = resume(args, runner, env, wrapped, tracking) if args.resume else []
    writer = SummaryWriter(log_dir=args.out)
    t0 = time.perf_counter() - (history[-1]["seconds"] if history else 0.0)
    for it in range(len(history), args.iterations):
        runner.learn(1, init_at_random_ep_len=it == 0)
        log = wrapped.last_log  # device tensors: read once per iteration
        row = {
            "iteration": it,
            "env_steps": (it + 1) * args.steps_per_env * args.num_envs,
            "tracking_lin_vel": tracking.take(),
            "episode_length": float(log["Episode/length"]),
            "level": curriculum.levels.float().mean().item() if curriculum else 0.0,
            "seconds": time.perf_counter() - t0,
        }
        last = (it == args.iterations - 1
                or 0 < args.max_seconds <= time.perf_counter() - STARTED)
        history.append(row)
        for key in ("tracking_lin_vel", "episode_length", "level"):
            writer.add_scalar(f"go1/{key}", row[key], row["env_steps"])
        if it % args.log_every == 0 or last:
            print(f"iter {it:4d} | env steps {row['env_steps']:8d} | tracking "
                  f"{row['tracking_lin_vel']:.3f} | episode length "
                  f"{episode_length(row['episode_length'])}"
                  f" | level {row['level']:.2f} | {row['seconds']:6.1f} s", flush=True)
        if (it + 1) % args.save_every == 0 or last:
            save(args, runner, env, tracking, history)
        if last:
            break
    writer.close()
    if history:
        plot(history, os.path.join(args.out, "curve.png"), args)
    if args.export:
        export(runner, args.export)
    return history


def plot(history: list[dict], path: str, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    steps = [h["env_steps"] for h in history]
    what = "terrain level" if args.task == "Go1Terrain-v0" else "command range level"
    panels = [("tracking_lin_vel", "linear tracking reward per step"),
              ("episode_length", "episode length (steps)"), ("level", f"mean {what}")]
    if args.task != "Go1Terrain-v0" and not args.levels:
        panels.pop()  # no curriculum: Playground's full command ranges throughout
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 3.4))
    for ax, (key, label) in zip(axes, panels, strict=True):
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
            ax.set_title(label + " (first iterations: random initial lengths)", fontsize=9)
    fig.suptitle(f"rsl_rl PPO on gpuparam {args.task}, N={args.num_envs}, {args.device}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def renderer_for(mjm, height: int, width: int):
    """``mujoco.Renderer``, or ``SystemExit`` with the line that fixes a missing platform."""
    import mujoco

    try:
        return mujoco.Renderer(mjm, height, width)
    except Exception as e:
        gl = os.environ.get("MUJOCO_GL", "glfw")
        raise SystemExit(
            f"--play: MuJoCo's offscreen renderer did not start with MUJOCO_GL={gl} ({e}). "
            "Install EGL (Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri) or run "
            "with MUJOCO_GL=osmesa (apt-get install libosmesa6)") from e


def label(tile, lines: list[str]):
    """``tile`` (an RGB array) with ``lines`` written at its top left, on a dark band."""
    import numpy as np
    from PIL import Image, ImageDraw

    img = Image.fromarray(tile)
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, img.width, 12 * len(lines) + 4), fill=(0, 0, 0))
    for k, line in enumerate(lines):
        draw.text((4, 2 + 12 * k), line, fill=(255, 255, 255))
    return np.asarray(img)


def saved_kind(path: str) -> str | None:
    """What ``path`` holds: ``"torchscript"`` (an exported policy), ``"checkpoint"`` (an
    rsl_rl checkpoint: a dict with ``"actor_state_dict"``) or None (neither loads)."""
    try:
        torch.jit.load(path, map_location="cpu")
        return "torchscript"
    except Exception:  # noqa: BLE001 - any failure: try the other kind
        pass
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # noqa: BLE001 - a file of neither kind, whatever its bytes
        return None
    return "checkpoint" if isinstance(saved, dict) and "actor_state_dict" in saved else None


def load_policy(args, wrapped):
    """The policy of ``--play``: an exported TorchScript one (``--export``: raw ``[B, 48]``
    observations in) or rsl_rl's inference policy of a checkpoint (``model.pt``, built with
    ``--hidden``); either maps the adapter's observations to actions."""
    if args.play_kind == "torchscript":
        scripted = torch.jit.load(args.play, map_location=str(wrapped.device)).eval()
        return lambda obs: scripted(obs["policy"])
    runner = make_runner(wrapped, args)
    try:
        runner.load(args.play, map_location=str(wrapped.device))
    except RuntimeError:  # the saved layers' sizes are not --hidden's
        raise SystemExit(f"--play: {args.play} holds a network of other layer sizes than "
                         f"--hidden {','.join(map(str, args.hidden))}: pass the run's "
                         "--hidden") from None
    return runner.get_inference_policy(str(wrapped.device))


def play(args) -> str:
    """Run a saved policy on ``--play-envs`` envs and render them side by side to a GIF,
    each labelled with the task, the env, its velocity command and the time."""
    import imageio.v2 as imageio
    import mujoco

    env, wrapped, _, _ = make_env(args, args.play_envs)
    policy = load_policy(args, wrapped)
    mjm = env.mjm
    data = mujoco.MjData(mjm)
    renderer = renderer_for(mjm, args.height, args.width)
    option = mujoco.MjvOption()
    option.geomgroup[3] = 1  # the collision geoms: the model has no visual meshes
    option.sitegroup[5] = 0
    camera = mujoco.MjvCamera()
    camera.distance, camera.azimuth, camera.elevation = 1.6, 120.0, -20.0
    frames = []
    obs = wrapped.get_observations()
    with torch.inference_mode():
        for t in range(args.play_steps):
            obs, _, _, _ = wrapped.step(policy(obs))
            if t % args.frame_every:
                continue
            tiles = []
            command = env.state["task_command"].cpu()
            for i in range(args.play_envs):
                data.qpos[:] = env.state["qpos"][i].cpu().numpy()
                mujoco.mj_forward(mjm, data)
                camera.lookat[:] = data.qpos[:3]
                renderer.update_scene(data, camera=camera, scene_option=option)
                vx, vy, wz = command[i].tolist()
                tiles.append(label(renderer.render(), [  # short lines: small tiles too
                    f"{args.task} env {i}",
                    f"command vx {vx:+.2f} vy {vy:+.2f} m/s",
                    f"yaw {wz:+.2f} rad/s   t = {(t + 1) * env.dt:.2f} s"]))
            frames.append(__import__("numpy").concatenate(tiles, axis=1))
    path = os.path.join(os.path.dirname(args.play) or ".", "play.gif")
    if args.colors < 256:  # a smaller file: one palette of that many colors per frame
        from PIL import Image

        frames = [__import__("numpy").asarray(Image.fromarray(f).quantize(
            colors=args.colors, dither=Image.Dither.NONE).convert("RGB")) for f in frames]
    imageio.mimsave(path, frames, duration=args.frame_every * env.dt, loop=0)
    print(f"{len(frames)} frames of {args.play_envs} envs -> {path}")
    return path


# what a resumed run must share with the run it continues (each defines the run)
RUN_SETTINGS = ("task", "num_envs", "steps_per_env", "hidden", "levels", "terrain_rows",
                "kicks", "seed")


def parse(argv=None) -> argparse.Namespace:
    """The options, each checked (types, ranges, paths, a resumed run's settings) before
    anything is built: a bad one is one argparse error line."""
    pos, at_least_0 = int_at_least(1), int_at_least(0)
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="Go1JoystickFlatTerrain-v1",
                   choices=("Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1",
                            "Go1Terrain-v0"))
    p.add_argument("--num-envs", type=pos, default=128)
    p.add_argument("--iterations", type=pos, default=200,
                   help="iterations in all (a resumed run: more than it has done)")
    p.add_argument("--steps-per-env", type=pos, default=24)
    p.add_argument("--hidden", type=hidden_sizes, default=[256, 128],
                   help="hidden layer sizes (actor and critic), e.g. 256,128")
    p.add_argument("--gamma", type=float, default=0.97, help="discount (Playground's)")
    p.add_argument("--init-std", type=float, default=0.5,
                   help="initial action noise (the Go1 flips over within about 30 steps "
                        "under N(0, 1) actions, 45 under N(0, 0.25))")
    p.add_argument("--levels", type=at_least_0, default=5,
                   help="command curriculum levels (flat); 0: Playground's full command "
                        "ranges from the start, no curriculum")
    p.add_argument("--max-seconds", type=float_at_least(0.0), default=0.0,
                   help="end the run (saved, exported) after the iteration that passes this "
                        "many seconds since the script started (env build and Warp's compile "
                        "included); 0: no limit")
    p.add_argument("--promote", type=float, default=0.7,
                   help="mean linear tracking reward per step of an episode to move up")
    p.add_argument("--demote", type=float, default=0.2)
    p.add_argument("--terrain-rows", type=pos, default=10, help="Go1Terrain-v0 grid rows")
    p.add_argument("--kicks", action="store_true", help="Playground's kicks on")
    p.add_argument("--out", default=os.path.join("runs", "go1"))
    p.add_argument("--save-every", type=pos, default=50)
    p.add_argument("--seed", type=int, default=None,
                   help="default 0; a resumed run keeps its own (another is refused)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--log-every", type=pos, default=10)
    p.add_argument("--threads", type=pos, default=1,
                   help="torch threads (results depend on it)")
    p.add_argument("--resume", default="", help="a run folder (or its model.pt) to continue")
    p.add_argument("--export", default="", help="write the TorchScript policy here at the end")
    p.add_argument("--play", default="",
                   help="a saved model.pt or an exported policy (--export): render it "
                        "instead of training")
    p.add_argument("--play-envs", type=pos, default=3)
    p.add_argument("--play-steps", type=pos, default=250)
    p.add_argument("--frame-every", type=pos, default=2, help="render every k-th step")
    p.add_argument("--width", type=pos, default=320)
    p.add_argument("--height", type=pos, default=240)
    p.add_argument("--colors", type=int_at_least(2, 256), default=256,
                   help="GIF colors per frame (2-256)")
    args = p.parse_args(argv)
    if args.play:
        if not os.path.isfile(args.play):
            p.error(f"--play: expected a saved policy file, got {args.play!r} (no such file)")
        args.play_kind = saved_kind(args.play)
        if args.play_kind is None:
            p.error(f"--play: expected an exported TorchScript policy (--export) or an rsl_rl "
                    f"checkpoint (model.pt), got {args.play}, which loads as neither")
        check_writable_file(p, "--play (its play.gif)",
                            os.path.join(os.path.dirname(args.play) or ".", "play.gif"))
    else:
        check_writable_dir(p, "--out", args.out)
        if args.export:
            check_writable_file(p, "--export", args.export)
        if args.resume:
            check_resume(p, args)
    if args.seed is None:
        args.seed = 0
    return args


def check_resume(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--resume``: the run's files are there, ``--iterations`` goes past what it has
    done, and every setting of ``RUN_SETTINGS`` is the run's (``--seed`` left out: the
    run's)."""
    where = args.resume if os.path.isdir(args.resume) else os.path.dirname(args.resume)
    missing = [f for f in ("model.pt", "env.pt", "train.pt", "history.json")
               if not os.path.isfile(os.path.join(where, f))]
    if missing:
        p.error(f"--resume: expected a run folder written by this script, got {args.resume} "
                f"(missing {', '.join(missing)})")
    try:
        with open(os.path.join(where, "history.json")) as f:
            saved = json.load(f)
        done, run = len(saved["history"]), dict(saved["args"])
    except (OSError, ValueError, KeyError, TypeError):
        p.error(f"--resume: expected a history.json written by this script in {where}")
    if isinstance(run.get("hidden"), str):  # runs written before --hidden was a list
        run["hidden"] = hidden_sizes(run["hidden"])
    if args.seed is None:
        args.seed = run.get("seed", 0)
    for key in RUN_SETTINGS:
        if key in run and run[key] != getattr(args, key):
            opt = "--" + key.replace("_", "-")
            fix = "leave it out or give the run's" if key == "seed" else "give the run's"
            p.error(f"{opt}: the run in {where} was made with {run[key]!r}, got "
                    f"{getattr(args, key)!r} (a resumed run continues the run as it was: "
                    f"{fix})")
    if args.iterations <= done:
        p.error(f"--iterations: expected more than the {done} iterations the run in {where} "
                f"has done, got {args.iterations}")


if __name__ == "__main__":
    args = parse()
    torch.set_num_threads(args.threads)
    if args.play:
        play(args)
    else:
        train(args)
