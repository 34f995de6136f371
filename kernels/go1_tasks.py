"""Go1 Getup and Handstand's own terms (``gpuparam.envs.mujoco.go1_tasks``; signatures:
``kernels.legged_terms``) and Getup's dropped reset pose. ``h``: the imu site's world z,
``z_des``: the ``base_height`` constant, ``g``: gravity in the imu frame."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels import legged_terms as kt
from gpuparam.kernels.episode import StepKeys
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, normal, rng_key, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

STREAM_DROP = wp.constant(STREAM_TERM0 + (1 << 20) + 32)
# rows of the tasks' ``consts`` block (go1_tasks.py's ``_consts`` order)
ROW_ENERGY, ROW_FORWARD_Z, ROW_UP_MIN = (wp.constant(k) for k in (2, 3, 4))
Act = wp.array2d(dtype=float)


@wp.func
def _h(c: kt.Ctx, sn: kt.Sensors, d: kt.TaskData) -> float:
    return wp.min(d.site_xpos[c.i, sn.imu_site][2], c.k[kt.K_BASE_HEIGHT])


@wp.func
def _ori_err(c: kt.Ctx) -> float:
    e = c.grav[2] + 1.0
    return c.grav[0] * c.grav[0] + c.grav[1] * c.grav[1] + e * e


@wp.func
def upright_exp(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
                d: kt.TaskData, st: kt.TaskState, act: Act) -> float:
    """``exp(-2 |g - (0, 0, -1)|^2)``."""
    return wp.exp(-2.0 * _ori_err(c))


@wp.func
def torso_height(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
                 d: kt.TaskData, st: kt.TaskState, act: Act) -> float:
    """``exp(min(h, z_des)) - 1``."""
    return wp.exp(_h(c, sn, d)) - 1.0


@wp.func
def posture(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams, d: kt.TaskData,
            st: kt.TaskState, act: Act) -> float:
    """``exp(-0.5 |q - home|^2)`` while upright (``|g - (0, 0, -1)|^2 < 0.01``)."""
    pose = kt.pose_l2(c, m, sn, p, d, st, act)
    return wp.where(_ori_err(c) < 0.01, wp.exp(-0.5 * pose), 0.0)


@wp.func
def stand_still_action(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
                       d: kt.TaskData, st: kt.TaskState, act: Act) -> float:
    """``exp(-0.5 |a|^2)`` while upright and ``z_des - min(h, z_des) < 0.005``."""
    a2 = float(0.0)
    for j in range(m.default_pose.shape[0]):
        a2 += act[c.i, j] * act[c.i, j]
    ok = _ori_err(c) < 0.01 and c.k[kt.K_BASE_HEIGHT] - _h(c, sn, d) < 0.005
    return wp.where(ok, wp.exp(-0.5 * a2), 0.0)


@wp.func
def height_exp(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
               d: kt.TaskData, st: kt.TaskState, act: Act) -> float:
    """``exp(-(z_des - min(h, z_des)))``."""
    return wp.exp(-(c.k[kt.K_BASE_HEIGHT] - _h(c, sn, d)))


@wp.func
def forward_orientation(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
                        d: kt.TaskData, st: kt.TaskState, act: Act) -> float:
    """``(0.5 fwd_z t + 0.5)^2``: ``fwd`` the imu x-axis in world, ``t`` the desired
    forward z (consts row ``ROW_FORWARD_Z``; Handstand -1, Footstand 1)."""
    x = 0.5 * (d.site_xmat[c.i, sn.imu_site][2, 0] * p.consts[ROW_FORWARD_Z, c.i]) + 0.5
    return x * x


@wp.func
def stay_still(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
               d: kt.TaskData, st: kt.TaskState, act: Act) -> float:
    """``qvel[0]^2 + qvel[1]^2 + qvel[5]^2`` (world x, y velocity; body yaw rate)."""
    v = wp.vec3(d.qvel[c.i, 0], d.qvel[c.i, 1], d.qvel[c.i, 5])
    return v[0] * v[0] + v[1] * v[1] + v[2] * v[2]


@wp.func
def energy_above(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
                 d: kt.TaskData, st: kt.TaskState) -> bool:
    """``sum |tau v| > energy_termination_threshold`` (consts row ``ROW_ENERGY``)."""
    e = float(0.0)
    for j in range(m.default_pose.shape[0]):
        e += wp.abs(d.actuator_force[c.i, j] * d.qvel[c.i, 6 + j])
    return e > p.consts[ROW_ENERGY, c.i]


@wp.func
def upvector_below(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams,
                   d: kt.TaskData, st: kt.TaskState) -> bool:
    """The upvector's z below consts row ``ROW_UP_MIN`` (Handstand: -0.25)."""
    return c.up[2] < p.consts[ROW_UP_MIN, c.i]


@wp.kernel
def drop_pose(
    # Model:
    prob: wp.array(dtype=float), joint_low: wp.array(dtype=float),
    joint_high: wp.array(dtype=float), qposadr: wp.array(dtype=int),
    # Data in:
    mask: wp.array(dtype=wp.bool), keys: StepKeys,
    # Data out:
    qpos_out: wp.array2d(dtype=float), ctrl_out: wp.array2d(dtype=float),
):
    """Go1 Getup's reset, masked envs, after the legged reset (home pose, base velocities):
    with probability ``prob [N]`` the robot is instead at (0, 0, 0.5), orientation a
    normalized 4-d Gaussian ``q / (|q| + 1e-6)``, each joint ``U(low, high)`` over its
    range (``[nu]``, at ``qposadr``), ``ctrl`` those angles. Draws (own stream, keyed by
    the episode): the switch, 4 normals, ``nu`` uniforms."""
    i = thread_index(wp.tid())
    if not mask[i]:
        return
    h = rng_key(keys.seed[0], keys.env_offset + i, STREAM_DROP, keys.episode_count[i] - 1)
    if uniform(h) >= prob[i]:
        return
    quat = wp.vec4(0.0)
    for k in range(4):
        h = next_bits(h)
        quat[k] = normal(h)
    quat = quat / (wp.length(quat) + 1e-6)
    for k in range(3):
        qpos_out[i, k] = wp.where(k == 2, 0.5, 0.0)
    for k in range(4):
        qpos_out[i, 3 + k] = quat[k]
    for j in range(ctrl_out.shape[1]):
        h = next_bits(h)
        q = uniform_in(h, joint_low[j], joint_high[j])
        qpos_out[i, qposadr[j]] = q
        ctrl_out[i, j] = q
