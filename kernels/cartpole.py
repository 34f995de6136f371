"""CartPole-v1 (Gymnasium's classic_control/cartpole.py, Euler integration) as Warp kernels.

Observation (x, x_dot, theta, theta_dot); action 0 pushes left, 1 pushes right; reward 1
per step including the terminating one. Total mass and pole mass-length are derived here
from the current parameters, never stored.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.episode import begin_episode
from gpuparam.kernels.index import thread_index

# No floating-point contraction: NVRTC would fuse ``a + (b - a) * u`` into one FMA that
# the CPU build rounds twice, and its reset draws must be bit-identical on CPU and GPU.
wp.set_module_options({"fuse_fp": False})


@wp.func
def sincos(x: float):
    """``(sin x, cos x)`` in float32: for ``|x| <= pi/4`` (a CartPole pole angle always is:
    it terminates at 0.21 rad) two short polynomials inline (Cephes' ``sinf``/``cosf``
    minimax coefficients, within 1e-7 of float64), elsewhere the library functions. Inline
    code keeps the CPU compiler from spilling registers around a library call (the step
    runs about 15% faster on Warp's CPU device)."""
    if wp.abs(x) <= 0.7853982:
        z = x * x
        s = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * x + x
        c = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * (
            z * z
        ) - 0.5 * z + 1.0
        return s, c
    return wp.sin(x), wp.cos(x)


@wp.struct
class Params:
    """The parameter rows ``[N]`` the step reads (``CartPoleEnv.param_specs``' names)."""

    gravity: wp.array(dtype=float)
    masscart: wp.array(dtype=float)
    masspole: wp.array(dtype=float)
    length: wp.array(dtype=float)
    force_mag: wp.array(dtype=float)
    tau: wp.array(dtype=float)
    x_threshold: wp.array(dtype=float)
    theta_threshold_radians: wp.array(dtype=float)


@wp.kernel
def step(
    # Model:
    params: Params,
    # Data in:
    action: wp.array(dtype=wp.int64),
    # Data out (``state``: read, then written):
    state: wp.array(dtype=wp.vec4),
    obs_out: wp.array(dtype=wp.vec4),
    final_obs_out: wp.array(dtype=wp.vec4),
    reward_out: wp.array(dtype=float),
    terminated_out: wp.array(dtype=wp.bool),
):
    # the parameter view's fields under the names the math below reads (views: no copies)
    gravity, masscart, masspole = params.gravity, params.masscart, params.masspole
    length, force_mag, tau = params.length, params.force_mag, params.tau
    x_threshold, theta_threshold_radians = params.x_threshold, params.theta_threshold_radians
    i = thread_index(wp.tid())
    s = state[i]
    x, x_dot, theta, theta_dot = s[0], s[1], s[2], s[3]
    mp = masspole[i]
    total_mass = mp + masscart[i]
    polemass_length = mp * length[i]
    force = wp.where(action[i] > wp.int64(0), force_mag[i], -force_mag[i])
    sintheta, costheta = sincos(theta)
    inv_total_mass = 1.0 / total_mass
    temp = (force + polemass_length * theta_dot * theta_dot * sintheta) * inv_total_mass
    thetaacc = (gravity[i] * sintheta - costheta * temp) / (
        length[i] * (4.0 / 3.0 - mp * costheta * costheta * inv_total_mass)
    )
    xacc = temp - polemass_length * thetaacc * costheta * inv_total_mass
    dt = tau[i]
    x = x + dt * x_dot
    x_dot = x_dot + dt * xacc
    theta = theta + dt * theta_dot
    theta_dot = theta_dot + dt * thetaacc
    s = wp.vec4(x, x_dot, theta, theta_dot)
    state[i] = s
    obs_out[i] = s
    final_obs_out[i] = s
    reward_out[i] = 1.0
    terminated_out[i] = wp.abs(x) > x_threshold[i] or wp.abs(theta) > theta_threshold_radians[i]


@wp.kernel
def reset(
    # Data in:
    mask: wp.array(dtype=wp.bool),
    seed: wp.array(dtype=wp.int32),
    env_offset: int,
    # Data out (``episode_count``: counted up):
    episode_count: wp.array(dtype=wp.int32),
    state: wp.array(dtype=wp.vec4),
    obs_out: wp.array(dtype=wp.vec4),
):
    """Masked reset: state ~ U(-0.05, 0.05)^4, as Gymnasium."""
    i = thread_index(wp.tid())
    if not mask[i]:
        return
    r = begin_episode(i, seed[0], env_offset, episode_count)
    s = wp.vec4()
    for k in range(4):
        s[k] = wp.randf(r, -0.05, 0.05)
    state[i] = s
    obs_out[i] = s
