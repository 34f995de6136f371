"""CartPole-v1: Gymnasium's cart-pole, every constant a per-env parameter."""

from __future__ import annotations

import math

import warp as wp

from gpuparam.backend import KernelBackend
from gpuparam.kernels import cartpole
from gpuparam.spec import BoxSpec, DiscreteSpec, ParamSpec
from gpuparam.vecenv import VecEnv

_THETA = 12 * 2 * math.pi / 360


class CartPoleEnv(VecEnv):
    """Gymnasium ``CartPole-v1`` step for step: Euler integration, 500-step limit.

    Observation float32 ``[N, 4]``: cart position, cart velocity, pole angle, pole angular
    velocity. Action int64 ``[N]`` in {0, 1} (push left, push right). Reward 1.0 per step.
    """

    name = "CartPole-v1"
    param_specs = (
        ParamSpec("gravity", 9.8, 0.0, 100.0, unit="m/s^2", doc="gravitational acceleration"),
        ParamSpec("masscart", 1.0, 1e-3, 1e3, unit="kg", doc="mass of the cart"),
        ParamSpec("masspole", 0.1, 1e-4, 1e2, unit="kg", doc="mass of the pole"),
        ParamSpec("length", 0.5, 1e-3, 1e2, unit="m", doc="half the pole's length"),
        ParamSpec("force_mag", 10.0, 0.0, 1e3, unit="N", doc="magnitude of the push"),
        ParamSpec("tau", 0.02, 1e-5, 1.0, unit="s", doc="time step"),
        ParamSpec("x_threshold", 2.4, 1e-3, 1e3, unit="m", doc="|x| beyond which it fails"),
        ParamSpec(
            "theta_threshold_radians", _THETA, 1e-4, math.pi, unit="rad",
            doc="|theta| beyond which it fails",
        ),
    )
    # Gymnasium bounds the observation at twice the default thresholds.
    observation_spec = BoxSpec(
        shape=(4,),
        low=(-4.8, -math.inf, -2 * _THETA, -math.inf),
        high=(4.8, math.inf, 2 * _THETA, math.inf),
    )
    action_spec = DiscreteSpec(n=2)
    state_dtype = wp.vec4
    obs_dtype = wp.vec4
    max_episode_steps = 500
    time_step_param = "tau"
    step_kernel = cartpole.step
    reset_kernel = cartpole.reset

    def make_backend(self) -> KernelBackend:
        # this step kernel takes its parameters as one view (``kernels.cartpole.Params``);
        # a subclass's own kernel, as VecEnv's default passes them
        names = self.kernel_params or tuple(s.name for s in self.param_specs)
        view = cartpole.Params if self.step_kernel is cartpole.step else None
        return KernelBackend(self.step_kernel, self.reset_kernel, self.state_dtype,
                             self.obs_dtype, names, params_type=view)

