"""Pendulum-v1: Gymnasium's inverted pendulum swing-up, every constant a per-env parameter."""

from __future__ import annotations

import warp as wp

from gpuparam.kernels import pendulum
from gpuparam.spec import BoxSpec, ParamSpec
from gpuparam.vecenv import VecEnv


class PendulumEnv(VecEnv):
    """Gymnasium ``Pendulum-v1`` step for step, 200-step limit, never terminates.

    Observation float32 ``[N, 3]``: cos theta, sin theta, theta_dot. Action float32
    ``[N, 1]``: torque, clipped per env to ``[-max_torque, max_torque]``.
    """

    name = "Pendulum-v1"
    param_specs = (
        ParamSpec("g", 10.0, 0.0, 100.0, unit="m/s^2", doc="gravitational acceleration"),
        ParamSpec("m", 1.0, 1e-3, 1e3, unit="kg", doc="mass of the bob"),
        ParamSpec("l", 1.0, 1e-3, 1e2, unit="m", doc="length of the rod"),
        ParamSpec("dt", 0.05, 1e-5, 1.0, unit="s", doc="time step"),
        ParamSpec("max_speed", 8.0, 0.0, 1e3, unit="rad/s", doc="angular velocity clip"),
        ParamSpec("max_torque", 2.0, 0.0, 1e3, unit="N m", doc="torque clip"),
    )
    observation_spec = BoxSpec(shape=(3,), low=(-1.0, -1.0, -8.0), high=(1.0, 1.0, 8.0))
    action_spec = BoxSpec(shape=(1,), low=-2.0, high=2.0)
    state_dtype = wp.vec2
    obs_dtype = wp.vec3
    max_episode_steps = 200
    time_step_param = "dt"
    step_kernel = pendulum.step
    reset_kernel = pendulum.reset
