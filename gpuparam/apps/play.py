"""``python -m gpuparam.play``: run a trained policy (a run's checkpoint, an exported
``policy.pt2`` or a TorchScript policy) on a few envs, render them to a labelled GIF or MP4,
and export the checkpoint's policy (``exported/policy.pt2``, ``exported/policy.onnx``)."""

from __future__ import annotations

import contextlib
import io
import os

__all__ = ["main", "pin_command", "play"]


def pin_command(env, command) -> None:
    """Pin every env's velocity command to ``command`` (vx m/s, vy m/s, yaw rate rad/s):
    ``command_value`` then ``command_fixed`` 1 (the command block of a legged task,
    ``docs/legged.md``; from the next step, never resampled). ``SystemExit`` naming
    ``--command`` if the task has no command block or a value is outside its range."""
    import torch

    if "command_fixed" not in env.params.names:
        raise SystemExit(f"--command: {type(env).__name__} has no velocity command block "
                         f"(command_fixed, command_value)")
    try:
        env.params.set("command_value", torch.tensor([float(x) for x in command]))
    except ValueError as e:
        raise SystemExit(f"--command: {e}") from None
    env.params.set("command_fixed", 1.0)


def play(resolved) -> dict[str, str]:
    """Run a checked play command (``cli.parse_play``); returns ``{what: path}`` of the
    files written."""
    import torch

    from gpuparam.apps.export import export_policy, load_policy_file
    from gpuparam.apps.recipe import build_env
    from gpuparam.apps.train import make_runner, policy_of
    from gpuparam.apps.video import Recorder, write_video

    cfg, out = resolved.cfg, resolved.out
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    built = build_env(resolved.train)
    wrapped, dev = built.wrapped, str(built.wrapped.device)
    written = {}
    if resolved.kind == "checkpoint":
        runner = make_runner(built, resolved.train, None)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                runner.load(resolved.checkpoint, map_location=dev)
        except RuntimeError as e:  # another network than the run's config says
            raise SystemExit(f"--checkpoint: {resolved.checkpoint} does not fit the run's "
                             f"config ({str(e).splitlines()[0]})") from None
        policy = policy_of(runner, built).to(dev).eval()
        pt, onnx = export_policy(policy_of(runner, built),
                                 wrapped.get_observations()["policy"].shape[-1],
                                 os.path.join(out, "exported"))
        written.update(policy_pt=pt, policy_onnx=onnx)
        policy = policy.to(dev)
    else:
        try:
            policy = load_policy_file(resolved.checkpoint, dev)
        except ValueError as e:
            raise SystemExit(str(e)) from None
    rec = None
    if cfg.video:
        rec = Recorder(built.env, cfg.task, num=cfg.video_envs, width=cfg.width,
                       height=cfg.height)
    obs = wrapped.get_observations()
    if cfg.command is not None:  # pinned, then a reset: the first observation shows it
        pin_command(built.env, cfg.command)
        obs, _ = wrapped.reset()
    total = torch.zeros((), device=dev)
    with torch.inference_mode():
        for t in range(cfg.steps):
            obs, reward, _, _ = wrapped.step(policy(obs["policy"]))
            total += reward.mean()
            if rec is not None and t % cfg.frame_every == 0:
                rec.capture(t + 1)
    if rec is not None:
        rec.close()
        path = os.path.join(out, f"play.{cfg.format}")
        write_video(rec.frames, path, cfg.frame_every * built.env.dt)
        written["video"] = path
    print(f"[gpuparam.play] {cfg.task}: {cfg.num_envs} envs x {cfg.steps} steps, mean reward "
          f"per step {float(total) / cfg.steps:.4f}; wrote "
          + ", ".join(written.values()), flush=True)
    return written


def main(argv: list[str] | None = None) -> None:
    """The console entry (``gpuparam-play``, ``python -m gpuparam.play``)."""
    from gpuparam.apps.cli import parse_play

    resolved = parse_play(argv)  # imports no MuJoCo: MUJOCO_GL can still be picked
    if resolved.cfg.video:
        from gpuparam.apps.video import headless_gl

        headless_gl()
    play(resolved)
