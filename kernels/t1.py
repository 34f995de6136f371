"""Booster T1 velocity tracking (MuJoCo Playground's ``T1Joystick*Terrain``): the terms and
state law of its config (``gpuparam.envs.mujoco.t1``) that neither the shared ones
(``kernels.legged_terms``) nor G1's (``kernels.g1``) cover. ``TaskModel.index`` and
``TaskParams.extra`` are laid out as G1's (hip roll, yaw left and right, knees; gait
frequency, push interval, push velocity)."""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.g1 import g1_feet_air_time, g1_update, index_deviation
from gpuparam.kernels.legged_terms import (
    K_FOOT_HEIGHT,
    PI,
    Ctx,
    Sensors,
    TaskData,
    TaskModel,
    TaskParams,
    TaskState,
    joint_deviation,
    phase_error,
)

wp.set_module_options({"fuse_fp": False})


@wp.func
def t1_update(c: Ctx, m: TaskModel, p: TaskParams, d: TaskData, st: TaskState):
    """G1's law after a step (phase advance, command resample, push), then both phases
    held at pi while this step's command is (near) zero, ``|cmd| <= 0.01``."""
    g1_update(c, m, p, d, st)
    if c.cmd_norm <= 0.01:
        for f in range(st.phase.shape[1]):
            st.phase[c.i, f] = PI


@wp.func
def lin_vel_z_local(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                    st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``local linvel_z^2`` (the imu's)."""
    return c.lin[2] * c.lin[2]


@wp.func
def ang_vel_xy_gyro(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                    st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``gyro_x^2 + gyro_y^2``."""
    return c.gyro[0] * c.gyro[0] + c.gyro[1] * c.gyro[1]


@wp.func
def dof_vel(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData, st: TaskState,
            act: wp.array2d(dtype=float)) -> float:
    """``|joint qvel|^2``."""
    v2 = float(0.0)
    for j in range(m.default_pose.shape[0]):
        v = d.qvel[c.i, 6 + j]
        v2 += v * v
    return v2


@wp.func
def feet_air_time(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """G1's ``sum min(air time - 0.2, 0.3)`` at first contacts, if ``|cmd| > 0.1``."""
    return wp.where(c.cmd_norm > 0.1, g1_feet_air_time(c, m, sn, p, d, st, act), 0.0)


@wp.func
def feet_phase(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
               st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``exp(-sum (foot z - gait target(phase))^2 / 0.01)``, always (G1's: if moving)."""
    return wp.exp(-phase_error(c, sn, st, c.k[K_FOOT_HEIGHT]) / 0.01)


@wp.func
def stand_still(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` when ``|cmd| < 0.1``."""
    return wp.where(c.cmd_norm < 0.1, joint_deviation(c, m, d), 0.0)


@wp.func
def joint_deviation_hip(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                        st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``sum |q - default|`` of the hips' roll and yaw (``index[0:4]``) if ``|cmd_y| >
    0.1``, else 0."""
    return wp.where(wp.abs(c.cmd[1]) > 0.1, index_deviation(c, m, d, 0, 4), 0.0)


@wp.func
def feet_distance(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                  st: TaskState, act: wp.array2d(dtype=float)) -> float:
    """``clip(0.2 - |feet 0, 1 lateral distance in the imu site's yaw frame|, 0, 0.1)``."""
    xm = d.site_xmat[c.i, sn.imu_site]
    yaw = wp.atan2(xm[1, 0], xm[0, 0])
    dl = d.site_xpos[c.i, sn.foot_site[0]] - d.site_xpos[c.i, sn.foot_site[1]]
    dist = wp.abs(wp.cos(yaw) * dl[1] - wp.sin(yaw) * dl[0])
    return wp.clamp(0.2 - dist, 0.0, 0.1)
