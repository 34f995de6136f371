"""``python -m gpuparam.train``: rsl_rl's PPO on a gpuparam task, with IsaacLab's flags,
timestamped run folders, checkpoints of the model and the env together, resume, rsl_rl's
TensorBoard logger (losses, FPS, action std, learning rate, ``Episode_Reward/<term>``,
``Episode_Termination/<cause>``, curriculum level), periodic videos and an exported policy
at the end; under ``torchrun`` each rank trains its shard of the envs (rsl_rl's multi-GPU
mode: gradients averaged across ranks). docs/legged.md is the guide.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import time

STARTED = time.perf_counter()  # --max-seconds counts from here: builds and compiles too

__all__ = ["main", "train"]


@contextlib.contextmanager
def _single_process():
    """rsl_rl's runner sets up multi-GPU itself from ``WORLD_SIZE`` (NCCL, ``cuda:<local
    rank>`` only); this entry sets up the process group itself (NCCL or, on the CPU, gloo)
    and hands the runner its ranks, so the runner is built as a single process."""
    saved = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["WORLD_SIZE"]
        else:
            os.environ["WORLD_SIZE"] = saved


def runner_cfg(cfg) -> dict:
    """rsl_rl's ``OnPolicyRunner`` config of a ``TrainCfg``."""
    a = cfg.agent

    def model(m, actor: bool) -> dict:
        d = {"class_name": "MLPModel", "hidden_dims": list(m.hidden_dims),
             "activation": m.activation, "obs_normalization": m.obs_normalization}
        if actor:
            d["distribution_cfg"] = {"class_name": "GaussianDistribution",
                                     "init_std": a.init_noise_std}
        return d

    return {
        "num_steps_per_env": a.num_steps_per_env,
        "save_interval": 10**9,  # this entry saves (with the env's state), not the runner
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "algorithm": {"class_name": "PPO", **dataclasses.asdict(a.algorithm)},
        "actor": model(a.actor, True),
        "critic": model(a.critic, False),
        "logger": a.logger,
        "wandb_project": a.experiment_name or cfg.task,
        "neptune_project": a.experiment_name or cfg.task,
    }


def make_runner(built, cfg, log_dir: str | None, ranks: tuple[int, int, int] | None = None):
    """rsl_rl's ``OnPolicyRunner`` over ``built.wrapped`` (``ranks``: ``(rank, local_rank,
    world_size)`` of a distributed run, whose process group is set up)."""
    from rsl_rl.runners import OnPolicyRunner
    from rsl_rl.utils.logger import Logger

    rc = runner_cfg(cfg)
    if "critic" not in built.wrapped.get_observations().keys():
        rc["obs_groups"]["critic"] = ["policy"]  # no privileged observation: a symmetric one
    dev = str(built.wrapped.device)
    with contextlib.redirect_stdout(io.StringIO()), _single_process():  # rsl_rl prints models
        runner = OnPolicyRunner(built.wrapped, rc, log_dir=log_dir, device=dev)
    if ranks is not None:  # rsl_rl's multi-GPU mode, on the process group set up here
        rank, local, world = ranks
        runner.cfg["multi_gpu"] = {"global_rank": rank, "local_rank": local,
                                   "world_size": world}
        runner.is_distributed, runner.gpu_world_size = True, world
        runner.gpu_global_rank, runner.gpu_local_rank = rank, local
        runner.alg.is_multi_gpu = True
        runner.alg.gpu_global_rank, runner.alg.gpu_world_size = rank, world
        runner.logger = Logger(log_dir=log_dir, cfg=runner.cfg, env_cfg=built.wrapped.cfg,
                               num_envs=built.wrapped.num_envs, is_distributed=True,
                               gpu_world_size=world, gpu_global_rank=rank, device=dev)
    return runner


def policy_of(runner, built):
    """The exportable policy (``gpuparam.apps.export.Policy``) of a runner."""
    import torch

    from gpuparam.apps.export import Policy
    from gpuparam.spec import BoxSpec

    actor = runner.alg.get_policy().as_jit()
    act = built.env.action_spec
    low = high = None
    if built.wrapped.cfg.clip_actions and isinstance(act, BoxSpec):
        shape = (built.wrapped.num_actions,)
        low = torch.as_tensor(act.low, dtype=torch.float32).expand(shape).clone()
        high = torch.as_tensor(act.high, dtype=torch.float32).expand(shape).clone()
    return Policy(actor, low, high)


def _distributed(cfg) -> tuple[int, int, int] | None:
    """``(rank, local_rank, world_size)`` under ``torchrun`` (the process group set up:
    NCCL on ``cuda:<local_rank>``, gloo on the CPU), else None."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    import torch
    import torch.distributed as dist

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if cfg.device.startswith("cuda"):
        cfg.device = f"cuda:{local}"
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    return rank, local, world


def _record(cfg, runner, built_video, run_dir: str, it: int, writer) -> str:
    """A clip of the policy on the video env: ``videos/iter_<it>.gif`` and TensorBoard."""
    import torch

    from gpuparam.apps.video import Recorder, write_video

    env, wrapped = built_video.env, built_video.wrapped
    policy = runner.get_inference_policy(str(env.device))
    rec = Recorder(env, cfg.task, num=cfg.video_envs, width=240, height=180)
    try:
        obs = wrapped.reset()[0]
        with torch.inference_mode():
            for t in range(cfg.video_length):
                obs = wrapped.step(policy(obs))[0]
                if t % 2 == 0:
                    rec.capture(t + 1)
    finally:
        rec.close()
    runner.alg.train_mode()
    os.makedirs(os.path.join(run_dir, "videos"), exist_ok=True)
    path = write_video(rec.frames, os.path.join(run_dir, "videos", f"iter_{it}.gif"),
                       2 * env.dt)
    if writer is not None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        h, w = rec.frames[0].shape[:2]
        with open(path, "rb") as f:  # TensorBoard shows a GIF image as a clip (add_video's)
            image = Summary.Image(height=h, width=w, colorspace=3, encoded_image_string=f.read())
        writer.add_summary(Summary(value=[Summary.Value(tag="Video/policy", image=image)]), it)
        writer.flush()
    return path


def train(resolved) -> str:
    """Run a checked train command (``cli.parse_train``); returns the run folder."""
    import torch

    from gpuparam.apps.export import export_policy
    from gpuparam.apps.recipe import build_env
    from gpuparam.apps.runs import save_config

    cfg, run_dir, done = resolved.cfg, resolved.run_dir, resolved.done
    torch.set_num_threads(cfg.threads)
    ranks = _distributed(cfg)
    rank, world = (ranks[0], ranks[2]) if ranks else (0, 1)
    if ranks is not None:  # one run folder: rank 0's
        import torch.distributed as dist

        box = [run_dir]
        dist.broadcast_object_list(box, src=0)
        run_dir = box[0]
    main = rank == 0
    torch.manual_seed(cfg.seed + rank)
    if world > 1 and cfg.num_envs < world:
        raise SystemExit(f"--num-envs: expected at least one env per rank ({world}), got "
                         f"{cfg.num_envs}")
    built = build_env(cfg, shard=(rank, world) if ranks else None)
    if main:
        os.makedirs(run_dir, exist_ok=True)
        save_config(cfg, os.path.join(run_dir, "config.json"))
    runner = make_runner(built, cfg, run_dir if main else None, ranks)
    suffix = "" if rank == 0 else f"_rank{rank}"
    if resolved.checkpoint is not None:
        infos = runner.load(resolved.checkpoint, map_location=cfg.device) or {}
        built.load(os.path.join(run_dir, f"env_{done - 1}{suffix}.pt"), infos.get("hooks"))
        print(f"[gpuparam.train] resumed {resolved.checkpoint} at iteration {done}",
              flush=True)
    video_env = writer = None
    if cfg.video and main:
        from torch.utils.tensorboard.writer import FileWriter

        video_env = build_env(dataclasses.replace(cfg, num_envs=cfg.video_envs))
        writer = FileWriter(run_dir)
    if main:
        print(f"[gpuparam.train] {cfg.task}: {cfg.num_envs} envs on {cfg.device}"
              f"{f' ({world} ranks)' if world > 1 else ''}, run folder {run_dir}",
              flush=True)
    first, per_iter = done == 0, None
    while done < cfg.max_iterations:
        # a chunk: up to the next checkpoint or video, or what --max-seconds leaves
        chunk = min(cfg.max_iterations, (done // cfg.agent.save_interval + 1)
                    * cfg.agent.save_interval) - done
        if cfg.video:
            chunk = min(chunk, (done // cfg.video_interval + 1) * cfg.video_interval - done)
        if cfg.max_seconds > 0:  # one iteration first, to measure one
            left = cfg.max_seconds - (time.perf_counter() - STARTED)
            fit = 1 if per_iter is None else math.floor(left / per_iter)
            chunk = max(1, min(chunk, fit))
        if ranks is not None:  # every rank runs the same chunk (rank 0's clock decides)
            import torch.distributed as dist

            box = [chunk]
            dist.broadcast_object_list(box, src=0)
            chunk = box[0]
        t0 = time.perf_counter()
        runner.current_learning_iteration = done
        runner.learn(chunk, init_at_random_ep_len=first)
        per_iter = (time.perf_counter() - t0) / chunk
        first, done = False, done + chunk
        it = done - 1
        # the model (rank 0) and each rank's env state, saved together
        hooks = built.save(os.path.join(run_dir, f"env_{it}{suffix}.pt"))
        if main:
            runner.save(os.path.join(run_dir, f"model_{it}.pt"), infos={"hooks": hooks})
        if video_env is not None and done % cfg.video_interval == 0:
            _record(cfg, runner, video_env, run_dir, it, writer)
        over = cfg.max_seconds > 0 and time.perf_counter() - STARTED >= cfg.max_seconds
        if ranks is not None:
            import torch.distributed as dist

            box = [over]
            dist.broadcast_object_list(box, src=0)
            over = box[0]
        if over:
            break
    if main:
        pt, onnx = export_policy(policy_of(runner, built), built.wrapped.get_observations()[
            "policy"].shape[-1], os.path.join(run_dir, "exported"))
        print(f"[gpuparam.train] {done} iterations; last checkpoint model_{done - 1}.pt; "
              f"exported {pt}, {onnx}", flush=True)
    if writer is not None:
        writer.close()
    if ranks is not None:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return run_dir


def main(argv: list[str] | None = None) -> None:
    """The console entry (``gpuparam-train``, ``python -m gpuparam.train``)."""
    from gpuparam.apps.cli import parse_train

    resolved = parse_train(argv)  # imports no MuJoCo: MUJOCO_GL can still be picked
    if resolved.cfg.video:
        from gpuparam.apps.video import headless_gl

        headless_gl()
    train(resolved)
