"""Pendulum-v1 (Gymnasium's classic_control/pendulum.py) as Warp kernels.

State (theta, theta_dot), theta unwrapped as in the reference; observation
(cos theta, sin theta, theta_dot); action: torque, clipped to [-max_torque, max_torque];
reward -(angle_normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2). Never terminates.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.episode import begin_episode
from gpuparam.kernels.index import thread_index

# No floating-point contraction: NVRTC would fuse ``a + (b - a) * u`` into one FMA that
# the CPU build rounds twice, and its reset draws must be bit-identical on CPU and GPU.
wp.set_module_options({"fuse_fp": False})


@wp.func
def _obs(s: wp.vec2) -> wp.vec3:
    return wp.vec3(wp.cos(s[0]), wp.sin(s[0]), s[1])


@wp.func
def clamp_nan(x: float, lo: float, hi: float) -> float:
    """``clamp`` that lets NaN through (``wp.clamp`` turns it into ``lo``): a NaN action
    shows as NaN observations instead of a silent full torque."""
    if x != x:
        return x
    return wp.clamp(x, lo, hi)


@wp.func
def angle_normalize(x: float) -> float:
    """Python's ((x + pi) % 2pi) - pi: the result takes the divisor's sign."""
    two_pi = 2.0 * wp.pi
    r = wp.mod(x + wp.pi, two_pi)
    if r < 0.0:
        r = r + two_pi
    return r - wp.pi


@wp.kernel
def step(
    # Model (parameter rows [N]):
    g: wp.array(dtype=float),
    m: wp.array(dtype=float),
    l: wp.array(dtype=float),  # noqa: E741 (the reference's name)
    dt: wp.array(dtype=float),
    max_speed: wp.array(dtype=float),
    max_torque: wp.array(dtype=float),
    # Data in (action [N, 1]):
    action: wp.array2d(dtype=float),
    # Data out (``state``: read, then written):
    state: wp.array(dtype=wp.vec2),
    obs_out: wp.array(dtype=wp.vec3),
    final_obs_out: wp.array(dtype=wp.vec3),
    reward_out: wp.array(dtype=float),
    terminated_out: wp.array(dtype=wp.bool),
):
    i = thread_index(wp.tid())
    s = state[i]
    th, thdot = s[0], s[1]
    gi, mi, li, h = g[i], m[i], l[i], dt[i]
    u = clamp_nan(action[i, 0], -max_torque[i], max_torque[i])
    an = angle_normalize(th)
    costs = an * an + 0.1 * thdot * thdot + 0.001 * u * u
    newthdot = thdot + (3.0 * gi / (2.0 * li) * wp.sin(th) + 3.0 / (mi * li * li) * u) * h
    newthdot = clamp_nan(newthdot, -max_speed[i], max_speed[i])
    newth = th + newthdot * h
    s = wp.vec2(newth, newthdot)
    state[i] = s
    o = _obs(s)
    obs_out[i] = o
    final_obs_out[i] = o
    reward_out[i] = -costs
    terminated_out[i] = False


@wp.kernel
def reset(
    # Data in:
    mask: wp.array(dtype=wp.bool),
    seed: wp.array(dtype=wp.int32),
    env_offset: int,
    # Data out (``episode_count``: counted up):
    episode_count: wp.array(dtype=wp.int32),
    state: wp.array(dtype=wp.vec2),
    obs_out: wp.array(dtype=wp.vec3),
):
    """Masked reset: theta ~ U(-pi, pi), theta_dot ~ U(-1, 1), as Gymnasium."""
    i = thread_index(wp.tid())
    if not mask[i]:
        return
    r = begin_episode(i, seed[0], env_offset, episode_count)
    th = wp.randf(r, -wp.pi, wp.pi)
    thdot = wp.randf(r, -1.0, 1.0)
    s = wp.vec2(th, thdot)
    state[i] = s
    obs_out[i] = _obs(s)
