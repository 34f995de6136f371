"""Adding an env: a 2-D point mass that must reach a per-env target, as a physics backend
plus a task, with a vector action ``[N, 2]`` and a vector parameter (the target).

    python examples/custom_env.py [--num-envs 1024] [--steps 300] [--device cpu|cuda]

The env plugs into gpuparam's step pipeline: ``backend.step`` and ``task.compute`` run in
the physics stage, the pipeline does episode bookkeeping (step counter, truncation, done,
returns), reset-time randomization and auto-reset (``backend.reset`` + ``task.observe`` for
the done envs), and captures the whole step (one CUDA graph; Warp CPU graphs on CPU).
"""

from __future__ import annotations

import argparse
import time

import torch
import warp as wp
from gpuparam.kernels.episode import (
    begin_episode,  # keyed initial-state draws (seed, global id, episode)
)

import gpuparam as gp

# ----------------------------------------------------------------------------- kernels
# Pure, fully typed: parameters ([N] or [size, N] rows of the parameter table), state in/out.


@wp.kernel
def point_step(
    mass: wp.array(dtype=float),
    dt: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    max_force: wp.array(dtype=float),
    action: wp.array2d(dtype=float),  # [N, 2]
    pos: wp.array(dtype=wp.vec2),
    vel: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    f = wp.vec2(action[i, 0], action[i, 1])
    fmax = max_force[i]
    f = wp.vec2(wp.clamp(f[0], -fmax, fmax), wp.clamp(f[1], -fmax, fmax))
    v = vel[i] + dt[i] * (f / mass[i] - damping[i] * vel[i])
    vel[i] = v
    pos[i] = pos[i] + dt[i] * v


@wp.kernel
def point_reset(
    mask: wp.array(dtype=wp.bool),
    seed: wp.array(dtype=wp.int32),
    env_offset: int,
    episode_count: wp.array(dtype=wp.int32),
    pos: wp.array(dtype=wp.vec2),
    vel: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    if not mask[i]:
        return
    r = begin_episode(i, seed[0], env_offset, episode_count)
    pos[i] = wp.vec2(wp.randf(r, -1.0, 1.0), wp.randf(r, -1.0, 1.0))
    vel[i] = wp.vec2(0.0, 0.0)


@wp.func
def _observe(i: int, target: wp.array2d(dtype=float), p: wp.vec2, v: wp.vec2,
             obs: wp.array2d(dtype=float)):
    obs[i, 0] = p[0]
    obs[i, 1] = p[1]
    obs[i, 2] = v[0]
    obs[i, 3] = v[1]
    obs[i, 4] = target[0, i] - p[0]
    obs[i, 5] = target[1, i] - p[1]


@wp.kernel
def point_task(
    target: wp.array2d(dtype=float),  # [2, N]: one row per component
    radius: wp.array(dtype=float),
    pos: wp.array(dtype=wp.vec2),
    vel: wp.array(dtype=wp.vec2),
    obs_out: wp.array2d(dtype=float),
    final_obs_out: wp.array2d(dtype=float),
    reward_out: wp.array(dtype=float),
    terminated_out: wp.array(dtype=wp.bool),
):
    i = wp.tid()
    p = pos[i]
    _observe(i, target, p, vel[i], obs_out)
    _observe(i, target, p, vel[i], final_obs_out)
    dist = wp.length(wp.vec2(target[0, i], target[1, i]) - p)
    reward_out[i] = -dist
    terminated_out[i] = dist < radius[i]


@wp.kernel
def point_observe(
    mask: wp.array(dtype=wp.bool),
    target: wp.array2d(dtype=float),
    pos: wp.array(dtype=wp.vec2),
    vel: wp.array(dtype=wp.vec2),
    obs_out: wp.array2d(dtype=float),
):
    i = wp.tid()
    if mask[i]:
        _observe(i, target, pos[i], vel[i], obs_out)


# ----------------------------------------------------------------------------- the env
class PointBackend(gp.Backend):
    """Semi-implicit Euler point mass; state ``pos``, ``vel`` float32 ``[N, 2]``."""

    def bind(self, b):
        # b: a gp.BindContext (sizes, device, parameters, the step context, the spaces)
        self.state = {k: torch.zeros(b.num_envs, 2, device=b.device) for k in ("pos", "vel")}
        self.pos = wp.from_torch(self.state["pos"], dtype=wp.vec2)
        self.vel = wp.from_torch(self.state["vel"], dtype=wp.vec2)
        # b.param_rows(name): the effective values, [N] (scalar) or [size, N], a live view
        params = [wp.from_torch(b.param_rows(k)) for k in ("mass", "dt", "damping", "max_force")]
        self.step_args = [*params, wp.from_torch(b.step.action), self.pos, self.vel]
        self.masks = {}

    def step(self, ctx):
        wp.launch(point_step, ctx.num_envs, self.step_args, device=ctx.wp_device,
                  stream=ctx.stream)

    def reset(self, ctx, mask):
        m = self.masks.setdefault(id(mask), wp.from_torch(mask))
        wp.launch(point_reset, ctx.num_envs, [m, wp.from_torch(ctx.seed), ctx.env_offset,
                  wp.from_torch(ctx.episode_count), self.pos, self.vel],
                  device=ctx.wp_device, stream=ctx.stream)


class ReachTask(gp.Task):
    """Observation (pos, vel, target - pos), reward -distance, success within radius."""

    def bind(self, b, backend):
        self.backend, self.target = backend, wp.from_torch(b.param_rows("target"))
        out = b.step.outputs
        self.obs = wp.from_torch(out["observation"])
        self.args = [self.target, wp.from_torch(b.param_rows("radius")), backend.pos,
                     backend.vel, self.obs,
                     wp.from_torch(out["final_observation"]), wp.from_torch(out["reward"]),
                     wp.from_torch(out["terminated"])]

    def compute(self, ctx):
        wp.launch(point_task, ctx.num_envs, self.args, device=ctx.wp_device, stream=ctx.stream)

    def observe(self, ctx, mask):
        wp.launch(point_observe, ctx.num_envs, [wp.from_torch(mask), self.target,
                  self.backend.pos, self.backend.vel, self.obs],
                  device=ctx.wp_device, stream=ctx.stream)


@gp.register
class PointMassEnv(gp.VecEnv):
    """Reach a per-env target with a force-controlled 2-D point mass.

    Observation float32 ``[N, 6]``: position, velocity, target - position. Action float32
    ``[N, 2]``: force. Reward ``-|target - position|``; terminated within ``radius``.
    """

    name = "PointMass-v0"
    param_specs = (
        gp.ParamSpec("mass", 1.0, 0.01, 100.0, unit="kg", doc="point mass"),
        gp.ParamSpec("dt", 0.05, 1e-4, 1.0, unit="s", doc="time step"),
        gp.ParamSpec("damping", 0.5, 0.0, 10.0, unit="1/s", doc="linear drag"),
        gp.ParamSpec("max_force", 2.0, 0.0, 100.0, unit="N", doc="force clip per axis"),
        gp.ParamSpec("target", (0.5, 0.5), -2.0, 2.0, shape=(2,), unit="m", doc="goal"),
        gp.ParamSpec("radius", 0.05, 1e-3, 1.0, unit="m", doc="success radius"),
    )
    observation_spec = gp.BoxSpec(shape=(6,), low=-10.0, high=10.0)
    action_spec = gp.BoxSpec(shape=(2,), low=-2.0, high=2.0)
    max_episode_steps = 200
    time_step_param = "dt"

    def make_backend(self):
        return PointBackend()

    def make_task(self):
        return ReachTask()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    env = gp.make("PointMass-v0", num_envs=args.num_envs, device=args.device, seed=0)
    env.randomize(gp.Uniform("target", -1.0, 1.0, on="reset"),  # a new goal every episode
                  gp.LogUniform("mass", 0.5, 2.0, op="scale", on="reset"))
    obs = env.reset()["observation"]
    returns, episodes = torch.zeros((), device=env.device), torch.zeros((), device=env.device)
    start = time.perf_counter()
    for _ in range(args.steps):
        td = env.step((3.0 * obs[:, 4:6] - obs[:, 2:4]).clamp(-2.0, 2.0))  # a PD controller
        obs = td["observation"]
        returns += (td["episode_return"] * td["done"]).sum()
        episodes += td["done"].sum()
    rate = args.num_envs * args.steps / (time.perf_counter() - start)
    print(f"{env}: stages {env.pipeline.names}")
    print(f"episodes finished: {int(episodes)}, mean return {float(returns / episodes):.2f}, "
          f"{rate:,.0f} env-steps/s")


if __name__ == "__main__":
    main()
