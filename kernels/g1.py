"""Unitree G1 velocity tracking (MuJoCo Playground's ``G1Joystick*Terrain``): the terms and
state laws of its config (``gpuparam.envs.mujoco.g1``) that the shared ones
(``kernels.legged_terms``) do not cover: the gait phase (its foot-height target:
``legged_terms.foot_target``), the command law (a new command after
``command_resample_steps`` steps, all zero with probability ``command_zero_prob``),
Playground's pushes, and the rewards written Playground's G1 way (torso velocities,
orientation about a tilted upvector, hip and knee deviations).

Indices the terms read: ``Sensors.extra`` = (torso global linear velocity, torso global
angular velocity); ``TaskModel.index`` = actuator indices of (left hip roll, left hip yaw,
right hip roll, right hip yaw, left knee, right knee); ``TaskParams.extra`` rows 0-1
``gait_frequency``, 2-3 ``push_interval``, 4-5 ``push_velocity`` (low, high).

Playground pushes at the start of a step, before the physics; here the same push is written
into ``qvel`` at the end of the step before it (the auto-reset of a finished episode then
overwrites it, as Playground's reset does).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.legged import STREAM_COMMAND, round_steps, step_bits
from gpuparam.kernels.legged_terms import (
    K_CMD_RESAMPLE,
    K_CMD_ZERO_PROB,
    K_FOOT_HEIGHT,
    K_PUSH,
    PI,
    Ctx,
    Sensors,
    TaskData,
    TaskModel,
    TaskParams,
    TaskState,
    command_draw,
    command_drawn,
    joint_deviation,
    phase_error,
    sensor3,
)
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, uniform, uniform_in

wp.set_module_options({"fuse_fp": False})

# the stream of Playground's pushes (the legged streams use + 1 .. + 4)
STREAM_PUSH = wp.constant(STREAM_TERM0 + (1 << 20) + 5)


@wp.func
def sample_command(h: wp.uint32, p: TaskParams, zero_prob: float, i: int) -> wp.vec3:
    """Playground's G1 ``sample_command``: ``U(low_k, high_k)`` per component
    (``legged_terms.command_draw``; Playground's ``U(-a, a)`` by default), all three zeroed
    with probability ``zero_prob``; 4 draws from ``h``."""
    c = command_draw(h, p, i)
    for _k in range(3):
        h = next_bits(h)
    if uniform(h) < zero_prob:
        c = wp.vec3(0.0)
    return c


@wp.func
def g1_reset(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState, h: wp.uint32):
    """Playground's reset of the task state (draws from ``h``): gait frequency
    ``U(gait_frequency)`` (phase advance ``2 pi dt f``, phases (0, pi)), command
    (:func:`sample_command`), push interval ``round(U(push_interval) / dt)`` steps; the
    step counters zero."""
    i = c.i
    f = uniform_in(h, p.extra[0, i], p.extra[1, i])
    h = next_bits(h)
    st.phase_dt[i] = 2.0 * PI * c.dt * f
    st.phase[i, 0] = 0.0
    st.phase[i, 1] = PI
    cmd = sample_command(h, p, c.k[K_CMD_ZERO_PROB], i)
    for _k in range(4):  # past the command's draws
        h = next_bits(h)
    for k in range(3):
        st.command[i, k] = cmd[k]
    st.push_interval[i] = round_steps(uniform_in(h, p.extra[2, i], p.extra[3, i]), c.dt)
    st.countdown[i] = 0
    st.push_step[i] = 0


@wp.func
def g1_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """After a step: the phase advance, a new command once more than
    ``command_resample_steps`` steps have passed (the counter restarts then and at a
    termination), Playground's push for the next step (``(push_step + 1) % interval ==
    0``, when ``push_enable``)."""
    i = c.i
    n = st.countdown[i] + 1
    ps = st.push_step[i] + 1
    st.push_step[i] = ps
    for f in range(st.phase.shape[1]):
        st.phase[i, f] = wp.mod(st.phase[i, f] + st.phase_dt[i] + PI, 2.0 * PI) - PI
    resample = float(n) > c.k[K_CMD_RESAMPLE]
    if resample:
        hc = step_bits(c.seed, c.gid, STREAM_COMMAND, c.episode, c.step)
        cmd = sample_command(hc, p, c.k[K_CMD_ZERO_PROB], i)
        for k in range(3):
            st.command[i, k] = cmd[k]
        command_drawn(c, p, st, c.step)  # standing and heading envs
    if resample or c.done:
        n = 0
    st.countdown[i] = n
    iv = st.push_interval[i]
    if c.k[K_PUSH] > 0.5 and iv > 0:
        if (ps + 1) % iv == 0:
            hp = step_bits(c.seed, c.gid, STREAM_PUSH, c.episode, c.step)
            theta = uniform(hp) * 2.0 * PI
            hp = next_bits(hp)
            mag = uniform_in(hp, p.extra[4, i], p.extra[5, i])
            d.qvel[i, 0] = d.qvel[i, 0] + wp.cos(theta) * mag
            d.qvel[i, 1] = d.qvel[i, 1] + wp.sin(theta) * mag


@wp.func
def g1_lin_vel_z(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``torso global linvel_z^2 + pelvis global linvel_z^2``."""
    tlin = sensor3(d.sensordata, c.i, sn.extra[0])
    return tlin[2] * tlin[2] + c.glin[2] * c.glin[2]


@wp.func
def g1_ang_vel_xy(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|torso global angvel_xy|^2``."""
    tang = sensor3(d.sensordata, c.i, sn.extra[1])
    return tang[0] * tang[0] + tang[1] * tang[1]


@wp.func
def g1_orientation(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|torso upvector - (0.073, 0, 1)|^2``."""
    ux = c.up[0] - 0.073
    uz = c.up[2] - 1.0
    return ux * ux + c.up[1] * c.up[1] + uz * uz


@wp.func
def g1_feet_air_time(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                     st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum min(air time - 0.2, 0.3)`` at first contacts (T1's gated: ``kernels.t1``)."""
    air = float(0.0)
    for f in range(sn.foot_site.shape[0]):
        air += wp.min(st.air_time[c.i, f] - 0.2, 0.3) * c.first[f]
    return air


@wp.func
def _body_speed(c: Ctx) -> float:
    return wp.sqrt(c.glin[0] * c.glin[0] + c.glin[1] * c.glin[1])


@wp.func
def g1_feet_slip(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                 st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``|pelvis linvel_xy|`` times the feet in contact."""
    return _body_speed(c) * (c.contact[0] + c.contact[1])


@wp.func
def g1_feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum (foot z - gait target)^2 / 0.01)`` if moving or commanded, else 0."""
    err = phase_error(c, sn, st, c.k[K_FOOT_HEIGHT])
    moving = _body_speed(c) > 0.1 or wp.abs(c.gang[2]) > 0.1 or c.cmd_norm > 0.01
    return wp.where(moving, wp.exp(-err / 0.01), 0.0)


@wp.func
def g1_stand_still(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                   st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` when ``|cmd| < 0.01``, else 0."""
    return wp.where(c.cmd_norm < 0.01, joint_deviation(c, m, d), 0.0)


@wp.func
def index_deviation(c: Ctx, m: TaskModel, d: TaskData, first: int, count: int) -> float:
    """``sum |q - default|`` of the actuators ``index[first : first + count]``."""
    dev = float(0.0)
    for k in range(first, first + count):
        j = m.index[k]
        dev += wp.abs(d.qpos[c.i, 7 + j] - m.default_pose[j])
    return dev


@wp.func
def g1_knee(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
            act: wp.array2d(dtype=float)) -> float:
    """``sum |q_knee - default|``."""
    return index_deviation(c, m, d, 4, 2)


@wp.func
def g1_hip(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
           act: wp.array2d(dtype=float)) -> float:
    """``sum |q_hip roll, yaw - default|``, the roll free when ``cmd_y > 0.1``."""
    hip = float(0.0)
    for k in range(4):
        j = m.index[k]
        w = wp.where(c.cmd[1] > 0.1 and k % 2 == 0, 0.0, 1.0)  # roll free when moving left
        hip += wp.abs(d.qpos[c.i, 7 + j] - m.default_pose[j]) * w
    return hip
