"""Labelled clips of a few envs of a MuJoCo Warp robot, rendered headless with MuJoCo's
offscreen renderer (``mujoco.Renderer``), side by side, and written as GIF or MP4.

Without a display (no ``DISPLAY``) and without ``MUJOCO_GL`` the entry points pick EGL
(``MUJOCO_GL=egl``: the system packages ``libegl1`` and ``libgl1-mesa-dri`` on
Debian/Ubuntu; Mesa renders on the CPU without a GPU); where EGL cannot start the error
says which line fixes it (``MUJOCO_GL=osmesa`` with ``libosmesa6``).
"""

from __future__ import annotations

import os

import numpy as np
import torch

__all__ = ["Recorder", "headless_gl", "write_video"]


def headless_gl() -> None:
    """Pick EGL for MuJoCo's renderer where there is no display and ``MUJOCO_GL`` is
    unset (MuJoCo reads it when first imported: call this before importing it)."""
    if not os.environ.get("DISPLAY") and "MUJOCO_GL" not in os.environ:
        os.environ["MUJOCO_GL"] = "egl"


def _label(tile: np.ndarray, lines: list[str]) -> np.ndarray:
    """``tile`` (RGB uint8 ``[H, W, 3]``) with ``lines`` written at its top left."""
    from PIL import Image, ImageDraw

    img = Image.fromarray(tile)
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, img.width, 12 * len(lines) + 4), fill=(0, 0, 0))
    for k, line in enumerate(lines):
        draw.text((4, 2 + 12 * k), line, fill=(255, 255, 255))
    return np.asarray(img)


class Recorder:
    """Renders envs ``0 .. num - 1`` of a MuJoCo Warp robot env (``env.mjm``,
    ``env.state["qpos"]``) side by side, each tile labelled with the task, the env index,
    its velocity command (where the task has one) and the time.

    Args:
        env: a gpuparam MuJoCo Warp env.
        task: the label's task name.
        num: tiles (``<= env.num_envs``).
        width, height: pixels per tile.
    """

    def __init__(self, env, task: str, num: int = 3, width: int = 320, height: int = 240):
        import mujoco

        self.env, self.task, self.num = env, task, min(int(num), env.num_envs)
        if not hasattr(env, "mjm"):
            raise ValueError(f"--video: expected a MuJoCo Warp robot task, got {task!r} "
                             "(nothing to render)")
        self.mjm = env.mjm
        self.data = mujoco.MjData(self.mjm)
        try:
            self.renderer = mujoco.Renderer(self.mjm, height, width)
        except Exception as e:
            gl = os.environ.get("MUJOCO_GL", "glfw")
            raise RuntimeError(
                f"--video: MuJoCo's offscreen renderer did not start with MUJOCO_GL={gl} "
                f"({e}). Install EGL (Debian/Ubuntu: apt-get install libegl1 "
                "libgl1-mesa-dri) or run with MUJOCO_GL=osmesa (apt-get install "
                "libosmesa6)") from e
        self.option = mujoco.MjvOption()
        self.option.geomgroup[3] = 1  # the collision geoms: the legged models' only ones
        self.camera = mujoco.MjvCamera()
        self.camera.distance, self.camera.azimuth, self.camera.elevation = 2.0, 120.0, -20.0
        self.frames: list[np.ndarray] = []

    def capture(self, t: int) -> None:
        """Append one frame (uint8 ``[H, num * W, 3]``) of the envs' current state; ``t``:
        the step count for the label. Host code: copies the envs' ``qpos`` to the CPU."""
        import mujoco

        qpos = self.env.state["qpos"][: self.num].cpu().numpy()  # host-ok: frames, not a step
        command = self.env.state.get("task_command")
        command = None if command is None else command[: self.num].cpu().tolist()  # host-ok: label
        tiles = []
        for i in range(self.num):
            self.data.qpos[:] = qpos[i]
            mujoco.mj_forward(self.mjm, self.data)
            self.camera.lookat[:] = self.data.qpos[:3]
            self.renderer.update_scene(self.data, camera=self.camera,
                                       scene_option=self.option)
            lines = [f"{self.task} env {i}"]
            if command is not None and len(command[i]) == 3:
                vx, vy, wz = command[i]
                lines.append(f"command vx {vx:+.2f} vy {vy:+.2f} m/s")
                lines.append(f"yaw {wz:+.2f} rad/s   t = {t * self.env.dt:.2f} s")
            else:
                lines.append(f"t = {t * self.env.dt:.2f} s")
            tiles.append(_label(self.renderer.render(), lines))
        self.frames.append(np.concatenate(tiles, axis=1))

    def close(self) -> None:
        self.renderer.close()


def write_video(frames: list[np.ndarray], path: str, frame_seconds: float) -> str:
    """Write ``frames`` (uint8 ``[H, W, 3]`` each) to ``path``: a GIF (``.gif``; each
    frame shown ``frame_seconds``, imageio's pillow writer takes milliseconds) or an MP4
    (``.mp4``, needs ``imageio-ffmpeg``; ``1 / frame_seconds`` frames per second)."""
    import imageio.v2 as imageio

    if path.endswith(".gif"):
        imageio.mimsave(path, frames, duration=round(1000.0 * frame_seconds), loop=0)
    elif path.endswith(".mp4"):
        imageio.mimsave(path, frames, fps=1.0 / frame_seconds)
    else:
        raise ValueError(f"video: expected a .gif or .mp4 path, got {path!r}")
    return path


def to_tensorboard(frames: list[np.ndarray]) -> torch.Tensor:
    """``frames`` as TensorBoard's ``add_video`` tensor, uint8 ``[1, T, 3, H, W]``."""
    return torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2)[None]
