"""The planar walkers' task (HalfCheetah-v5, Hopper-v5, Walker2d-v5)."""

from __future__ import annotations

import math

from gpuparam.envs.mujoco.robot_env import LocomotionTask, RobotEnv
from gpuparam.kernels import locomotion as kloco
from gpuparam.spec import ParamSpec

# kernels.locomotion.planar's parameters; each kind has only its own health ones (from the
# third): one it lacks (never read by the kernel for that kind) stands in as the first
PLANAR_PARAMS = ("forward_reward_weight", "ctrl_cost_weight", "healthy_reward",
                 "terminate_when_unhealthy", "healthy_z_min", "healthy_z_max",
                 "healthy_angle_min", "healthy_angle_max", "healthy_state_min",
                 "healthy_state_max")


def _common(forward: float, ctrl: float, noise: float) -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("forward_reward_weight", forward, -1e3, 1e3, doc="weight of x velocity"),
        ParamSpec("ctrl_cost_weight", ctrl, 0.0, 1e3, doc="weight of |action|^2"),
        ParamSpec("reset_noise_scale", noise, 0.0, 10.0, doc="scale of the reset noise"),
    )


def _health(z: tuple[float, float], angle: tuple[float, float]) -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("healthy_reward", 1.0, -1e3, 1e3, doc="reward per healthy step"),
        ParamSpec("terminate_when_unhealthy", 1.0, 0.0, 1.0, doc="1: unhealthy terminates"),
        ParamSpec("healthy_z_min", z[0], -1e9, 1e9, unit="m", doc="healthy z > this"),
        ParamSpec("healthy_z_max", z[1], -1e9, 1e9, unit="m", doc="healthy z < this"),
        ParamSpec("healthy_angle_min", angle[0], -1e3, 1e3, unit="rad", doc="healthy angle > this"),
        ParamSpec("healthy_angle_max", angle[1], -1e3, 1e3, unit="rad", doc="healthy angle < this"),
    )


class _Planar(RobotEnv):
    kind: int
    vel_clip: float = 10.0

    def obs_size(self) -> int:
        return self.mjm.nq - 1 + self.mjm.nv

    def make_task(self) -> LocomotionTask:
        # observation qpos[1:], clip(qvel, -vel_clip, vel_clip); kept: the root's x
        clip, own = self.vel_clip, {s.name for s in self.task_specs}
        params = tuple(p if p in own or i < 2 else PLANAR_PARAMS[0]  # (the first two: a
                       for i, p in enumerate(PLANAR_PARAMS))  # KeyError if missing)
        fields = ("forward_w", "ctrl_w", "healthy_r", "terminate", "z_min", "z_max",
                  "angle_min", "angle_max", "state_min", "state_max")
        return LocomotionTask(kloco.planar, params, kloco.PlanarParams, fields,
                              lambda b: [self.kind, clip], lambda b: [b.d.qpos, b.d.qvel], ())


class HalfCheetahEnv(_Planar):
    """Gymnasium ``HalfCheetah-v5``: ``half_cheetah.xml``, frame_skip 5, 1000-step limit,
    never terminates. Observation float32 ``[N, 17]`` (``qpos[1:]``, ``qvel``); action
    ``[N, 6]`` in ``[-1, 1]``; reward ``forward_reward_weight * dx/dt - ctrl_cost_weight *
    |a|^2``; reset ``qpos0 + U(-s, s)``, ``s * N(0, 1)`` velocities."""

    name = "HalfCheetah-v5"
    xml_file = "half_cheetah.xml"
    frame_skip = 5
    qvel_normal = True
    kind = 0
    vel_clip = math.inf
    task_specs = _common(1.0, 0.1, 0.1)


class HopperEnv(_Planar):
    """Gymnasium ``Hopper-v5``: ``hopper.xml``, frame_skip 4, 1000-step limit.
    Observation float32 ``[N, 11]`` (``qpos[1:]``, ``qvel`` clipped to +-10); action
    ``[N, 3]``; reward forward + healthy - ctrl; healthy (strict): ``qpos[2:]`` and ``qvel``
    in ``(healthy_state_min, healthy_state_max)``, z in ``(healthy_z_min,
    healthy_z_max)`` (Gymnasium's inf is 1e9 here), angle in its range; reset ``U(-s, s)``."""

    name = "Hopper-v5"
    xml_file = "hopper.xml"
    frame_skip = 4
    kind = 1
    task_specs = _common(1.0, 1e-3, 5e-3) + _health((0.7, 1e9), (-0.2, 0.2)) + (
        ParamSpec("healthy_state_min", -100.0, -1e9, 1e9, doc="healthy state > this"),
        ParamSpec("healthy_state_max", 100.0, -1e9, 1e9, doc="healthy state < this"),
    )


class Walker2dEnv(_Planar):
    """Gymnasium ``Walker2d-v5``: ``walker2d_v5.xml``, frame_skip 4, 1000-step limit.
    Observation float32 ``[N, 17]`` (``qpos[1:]``, ``qvel`` clipped to +-10); action
    ``[N, 6]``; healthy (strict): z in ``(0.8, 2.0)``, angle in ``(-1, 1)``; reset
    ``U(-s, s)``."""

    name = "Walker2d-v5"
    xml_file = "walker2d_v5.xml"
    frame_skip = 4
    kind = 2
    task_specs = _common(1.0, 1e-3, 5e-3) + _health((0.8, 2.0), (-1.0, 1.0))
