"""Legged-robot recipe pieces on the device, for any MuJoCo Warp robot with a free-joint
base and position actuators: PD gains written into the per-world actuator fields, the
action latency ring buffer and PD targets, half-sine kicks, the reset of the base, velocity
commands, observation noise, and the height scan (legged_gym's ``measure_heights``).

Parameters are rows ``[N]`` of the parameter table (vector parameters ``[size, N]``);
MuJoCo Warp's per-world arrays are ``[nworld, k]``. One thread per env (or per env and
component). Draws are counter-based: at a reset keyed by (seed, global env id, a stream,
the episode index), within an episode also by the step of the episode (:func:`step_bits`),
so env ``i`` draws the same whatever ``num_envs`` is, and a reseed repeats them.

The heightfield is read from MuJoCo Warp's model fields (``hfield_size [nhfield] vec4`` =
(radius_x, radius_y, elevation_z, base_z), ``hfield_nrow``, ``hfield_ncol``, ``hfield_adr``,
``hfield_data`` normalized to [0, 1], row-major, rows along y), placed by its geom's
``geom_pos``: a world-body geom with the identity orientation
(``gpuparam.envs.mujoco.terrain.terrain_geom`` checks it).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.actions import action_or_zero, has_nan
from gpuparam.kernels.episode import StepKeys, begin_episode
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.rng import STREAM_TERM0, log_pos, next_bits, rng_key, uniform, uniform_in

# Streams of the legged draws (randomization terms use STREAM_TERM0 + k < 2^20, pushes the
# next one).
STREAM_TASK_RESET = wp.constant(STREAM_TERM0 + (1 << 20) + 1)
STREAM_OBS_NOISE = wp.constant(STREAM_TERM0 + (1 << 20) + 2)
STREAM_COMMAND = wp.constant(STREAM_TERM0 + (1 << 20) + 3)
STREAM_KICK = wp.constant(STREAM_TERM0 + (1 << 20) + 4)
# what an action is relative to (``pre_step``'s ``action_mode``): the default pose, the
# current joint angles, the previous targets
ACTION_MODES = ("default", "current", "cumulative")
# the step index of the draws made by a reset's observation (a step's are 0, 1, ...)
RESET_STEP = wp.constant(-1)

# No floating-point contraction, as every gpuparam kernel that feeds an observation: the
# rotation and interpolation round alike on CPU and GPU.
wp.set_module_options({"fuse_fp": False})


@wp.func
def quat_yaw(q: wp.vec4) -> float:
    """Yaw (rotation about world z, radians) of a unit quaternion ``(w, x, y, z)``, as
    MuJoCo stores a free joint's orientation in ``qpos[3:7]``."""
    return wp.atan2(2.0 * (q[0] * q[3] + q[1] * q[2]), 1.0 - 2.0 * (q[2] * q[2] + q[3] * q[3]))


@wp.func
def hfield_height(size: wp.vec4, nrow: int, ncol: int, adr: int,
                  hfield_data: wp.array(dtype=float), origin: wp.vec3, x: float,
                  y: float) -> float:
    """World height of the heightfield under world ``(x, y)``: bilinear interpolation of
    the four surrounding samples, the point clamped to the heightfield's rectangle (so
    outside it the height of the nearest edge). ``origin``: the geom's world position.

    MuJoCo collides with the heightfield as two triangles per cell; bilinear interpolation
    agrees with that surface at the samples and along the cell edges, and differs inside a
    cell by at most a quarter of the cell's twist, ``|h00 + h11 - h01 - h10| / 4`` (samples
    in metres)."""
    fc = (x - origin[0] + size[0]) * float(ncol - 1) / (2.0 * size[0])
    fr = (y - origin[1] + size[1]) * float(nrow - 1) / (2.0 * size[1])
    fc = wp.clamp(fc, 0.0, float(ncol - 1))
    fr = wp.clamp(fr, 0.0, float(nrow - 1))
    c0 = wp.min(int(wp.floor(fc)), ncol - 2)
    r0 = wp.min(int(wp.floor(fr)), nrow - 2)
    tc = fc - float(c0)
    tr = fr - float(r0)
    i = adr + r0 * ncol + c0
    h00 = hfield_data[i]
    h01 = hfield_data[i + 1]
    h10 = hfield_data[i + ncol]
    h11 = hfield_data[i + ncol + 1]
    lo = h00 + tc * (h01 - h00)
    hi = h10 + tc * (h11 - h10)
    return origin[2] + (lo + tr * (hi - lo)) * size[2]


@wp.kernel
def height_scan(
    # Data in (the scan's base and points):
    base_pos: wp.array(dtype=wp.vec3),
    base_yaw: wp.array(dtype=float),
    points: wp.array(dtype=wp.vec2),
    # Model (mujoco_warp.Model's heightfield fields) and its geom:
    hfield_size: wp.array(dtype=wp.vec4),
    hfield_nrow: wp.array(dtype=int),
    hfield_ncol: wp.array(dtype=int),
    hfield_adr: wp.array(dtype=int),
    hfield_data: wp.array(dtype=float),
    geom_pos: wp.array2d(dtype=wp.vec3),
    hfield_id: int,
    geom_id: int,
    # Data out:
    heights_out: wp.array2d(dtype=float),
):
    """World height (metres) of the terrain under each scan point, ``heights_out [N, P]``,
    one thread per (env, point): ``points [P]`` are ``(x, y)`` in the yaw frame of the
    base at ``base_pos [N]`` with yaw ``base_yaw [N]`` (rotated by the yaw only, as
    legged_gym's ``quat_apply_yaw``); heightfield ``hfield_id`` of geom ``geom_id``, world
    ``i`` placed by ``geom_pos[i % geom_pos.shape[0]]`` (module docstring)."""
    env, p = wp.tid()
    pos = base_pos[env]
    yaw = base_yaw[env]
    c = wp.cos(yaw)
    s = wp.sin(yaw)
    point = points[p]
    x = pos[0] + c * point[0] - s * point[1]
    y = pos[1] + s * point[0] + c * point[1]
    origin = geom_pos[env % geom_pos.shape[0], geom_id]
    heights_out[env, p] = hfield_height(hfield_size[hfield_id], hfield_nrow[hfield_id],
                                        hfield_ncol[hfield_id], hfield_adr[hfield_id],
                                        hfield_data, origin, x, y)


# ----------------------------------------------------------------- random draws
@wp.func
def step_bits(seed: int, env: int, stream: int, episode: int, step: int) -> wp.uint32:
    """32 random bits keyed by (seed, global env id, stream, episode index, step of the
    episode); further values of the same event come from ``next_bits``."""
    return wp.rand_init(int(rng_key(seed, env, stream, episode)), step)


@wp.func
def noisy(x: float, h: wp.uint32, level: float, scale: float) -> float:
    """MuJoCo Playground's observation noise: ``x + (2u - 1) * level * scale`` with ``u``
    uniform from ``h``; exactly ``x`` (bit for bit, -0.0 included) when the noise is 0."""
    n = (2.0 * uniform(h) - 1.0) * level * scale
    return wp.where(n == 0.0, x, x + n)


@wp.func
def round_steps(seconds: float, dt: float) -> int:
    """``round(seconds / dt)`` (half away from zero) as a step count, at least 0."""
    return wp.max(int(wp.floor(seconds / dt + 0.5)), 0)


@wp.func
def exponential_steps(h: wp.uint32, mean_s: float, dt: float) -> int:
    """``round(Exponential(1) * mean_s / dt)`` (Playground's command countdown); the
    exponential draw ``-ln(1 - u)`` uses ``log_pos`` (the same bits on every device)."""
    return round_steps(-log_pos(1.0 - uniform(h)) * mean_s, dt)


# ----------------------------------------------------------------- PD actuators
@wp.kernel
def copy_pd(
    # In (parameter rows, the dof -> actuator map):
    kp: wp.array2d(dtype=float),
    kd: wp.array2d(dtype=float),
    limit: wp.array2d(dtype=float),
    motor_strength: wp.array2d(dtype=float),
    damping: wp.array2d(dtype=float),
    dof_actuator: wp.array(dtype=int),
    # Model out:
    gainprm_out: wp.array2d(dtype=wp.types.vector(length=10, dtype=float)),
    biasprm_out: wp.array2d(dtype=wp.types.vector(length=10, dtype=float)),
    forcerange_out: wp.array2d(dtype=wp.vec2),
    damping_out: wp.array2d(dtype=float),
):
    """The PD law's model fields, per (world, dof): the joint's damping is the passive
    ``damping`` (rows ``[nv, N]``) plus the D part ``kd * motor_strength`` of the actuator
    driving the dof (``dof_actuator[d]``, -1 for none), whose position actuator gets the P
    gain ``kp * motor_strength`` (MuJoCo's ``gainprm[0] = kp``, ``biasprm[1] = -kp``) and
    ``forcerange = (-limit, limit)``; ``kp``, ``kd``, ``limit``, ``motor_strength``: rows
    ``[nu, N]``. The actuator's other parameters are kept."""
    i, d = wp.tid()
    v = damping[d, i]
    a = dof_actuator[d]
    if a >= 0:
        ms = motor_strength[a, i]
        v = v + kd[a, i] * ms
        k = kp[a, i] * ms
        g = gainprm_out[i, a]
        g[0] = k
        gainprm_out[i, a] = g
        bp = biasprm_out[i, a]
        bp[1] = -k
        biasprm_out[i, a] = bp
        forcerange_out[i, a] = wp.vec2(-limit[a, i], limit[a, i])
    damping_out[i, d] = v


@wp.kernel
def copy_pair_friction(rows: wp.array2d(dtype=float),
                       friction_out: wp.array2d(dtype=wp.types.vector(length=5, dtype=float))):
    """The sliding friction of each explicit contact pair, per (world, pair): both
    tangential components of MuJoCo's ``pair_friction`` from ``rows [npair, N]``; the
    torsional and rolling ones are kept."""
    i, p = wp.tid()
    f = friction_out[i, p]
    f[0] = rows[p, i]
    f[1] = rows[p, i]
    friction_out[i, p] = f


@wp.kernel
def copy_body_ipos(rows: wp.array2d(dtype=float), offset: wp.array2d(dtype=float), base: int,
                   ipos_out: wp.array2d(dtype=wp.vec3)):
    """The centre of mass of each moving body in its frame, per (world, body ``j + 1``):
    the ``body_ipos`` rows ``[3 (nbody - 1), N]`` (body ``j``'s x, y, z at rows ``3j ..
    3j + 2``), plus the ``base_com_offset`` rows ``[3, N]`` on body ``base``."""
    i, j = wp.tid()
    p = wp.vec3(rows[3 * j, i], rows[3 * j + 1, i], rows[3 * j + 2, i])
    if j + 1 == base:
        p = p + wp.vec3(offset[0, i], offset[1, i], offset[2, i])
    ipos_out[i, j + 1] = p


@wp.kernel
def copy_body_mass(rows: wp.array2d(dtype=float), added: wp.array(dtype=float), torso: int,
                   min_mass: float, mass_out: wp.array2d(dtype=float)):
    """The mass of each moving body, per (world, body ``j + 1``; ``mass_out`` is the view
    of bodies 1..): the ``body_mass`` rows ``[nbody - 1, N]``, plus ``added`` ``[N]`` on
    body ``torso``, not below ``min_mass`` there (the sum is the only value a write cannot
    bound alone). Other bodies get their row unchanged, bit for bit."""
    i, j = wp.tid()
    m = rows[j, i]
    if j + 1 == torso:
        m = wp.max(m + added[i], min_mass)
    mass_out[i, j] = m


@wp.kernel
def copy_joint_offset(offset: wp.array2d(dtype=float), qposadr: wp.array(dtype=int),
                      qpos0: wp.array(dtype=float), qpos0_out: wp.array2d(dtype=float)):
    """MuJoCo's ``qpos0`` of each actuated joint, per (world, actuator ``j``): the model's
    ``qpos0`` plus the ``joint_offset`` rows ``[nu, N]``, at the joint's ``qposadr``
    (the other coordinates keep the model's values)."""
    i, j = wp.tid()
    a = qposadr[j]
    qpos0_out[i, a] = qpos0[a] + offset[j, i]


# ----------------------------------------------------------------- before the physics
@wp.func
def _kick(i: int, h: wp.uint32, dt: float, mass: float, kick_i: wp.array2d(dtype=wp.int32),
          kick_f: wp.array2d(dtype=float)) -> wp.vec3:
    """One step of Playground's kick state machine (``_maybe_apply_perturbation``); returns
    the force on the base this step. ``kick_i[i]``: steps since the last kick, steps until
    the next, steps into the kick, kick duration in steps; ``kick_f[i]``: duration in
    seconds, velocity magnitude, direction x, y."""
    since = kick_i[i, 0]
    until = kick_i[i, 1]
    steps = kick_i[i, 2]
    force = wp.vec3(0.0)
    if since >= until:  # kicking: a half sine over the kick's duration
        t = float(steps) * dt
        T = kick_f[i, 0]
        u_t = 0.5 * wp.sin(3.14159265358979 * t / T)
        f = u_t * mass * kick_f[i, 1] / T
        force = wp.vec3(f * kick_f[i, 2], f * kick_f[i, 3], 0.0)
        if steps >= kick_i[i, 3]:
            kick_i[i, 0] = 0
        kick_i[i, 2] = steps + 1
    else:  # waiting; a new direction when the wait is over
        since = since + 1
        kick_i[i, 0] = since
        if since >= until:
            kick_i[i, 2] = 0
            angle = uniform(h) * 6.28318530717959
            kick_f[i, 2] = wp.cos(angle)
            kick_f[i, 3] = wp.sin(angle)
    return force


@wp.struct
class LeggedState:
    """The legged backend's state, ``[N, ...]``: the action ring buffer ``history [N, K +
    1, nu]`` and its slot ``head [N]``, the kick's counters ``kick_i [N, 4]`` and shape
    ``kick_f [N, 4]`` (:func:`_kick`)."""

    history: wp.array3d(dtype=float)
    head: wp.array(dtype=wp.int32)
    kick_i: wp.array2d(dtype=wp.int32)
    kick_f: wp.array2d(dtype=float)


@wp.struct
class ActionParams:
    """The parameter rows ``[N]`` :func:`pre_step` reads."""

    action_scale: wp.array(dtype=float)
    action_delay: wp.array(dtype=float)
    kick_enable: wp.array(dtype=float)
    # constants of the env: ``clip`` != 0: targets clipped to ``[ctrl_low, ctrl_high] [nu]``
    clip: int
    ctrl_low: wp.array(dtype=float)
    ctrl_high: wp.array(dtype=float)


@wp.kernel
def pre_step(
    # Model:
    dt: float,
    kick_body: int,
    default_pose: wp.array(dtype=float),
    body_subtreemass: wp.array2d(dtype=float),
    params: ActionParams,
    action_mode: int,
    qposadr: wp.array(dtype=int),
    # Data in:
    keys: StepKeys,
    action: wp.array2d(dtype=float),
    qpos: wp.array2d(dtype=float),
    # Data out:
    state_out: LeggedState,
    ctrl_out: wp.array2d(dtype=float),
    xfrc_out: wp.array2d(dtype=wp.spatial_vector),
):
    """Before the substeps of an env step, one thread per env. The action goes into the
    ring buffer ``history [N, K + 1, nu]`` (slot ``head[i]``, advanced first; the zero
    action for an action with a NaN component, which the physics never sees); the PD
    targets ``ctrl = base + action * action_scale`` (Playground's, not clipped: the
    actuators clamp to their control range) use the action of ``round(action_delay)``
    steps before (clamped to ``[0, K]``; 0: this one); ``base`` by ``action_mode``
    (:data:`ACTION_MODES`): 0 the default pose, 1 the current joint angles (``qpos`` at
    ``qposadr [nu]``, Playground's Go1 Getup), 2 the previous targets ``ctrl`` (cumulative,
    Go1 Handstand); with ``clip`` the targets are clipped to the control range. Kicks
    (``kick_enable > 0.5``):
    Playground's half-sine force on body ``kick_body`` (mass its subtree's) into
    ``xfrc_applied`` (torque 0); off: that wrench is 0 and the kick state is left alone."""
    # the bundles' fields under the names the math below reads (views: no copies)
    seed, env_offset = keys.seed, keys.env_offset
    episode_count, step_count = keys.episode_count, keys.step_count
    action_scale, action_delay = params.action_scale, params.action_delay
    kick_enable = params.kick_enable
    history, head = state_out.history, state_out.head
    kick_i, kick_f = state_out.kick_i, state_out.kick_f
    i = thread_index(wp.tid())
    K1 = history.shape[1]
    hd = (head[i] + 1) % K1
    head[i] = hd
    nu = action.shape[1]
    bad = has_nan(action, i)  # a NaN action is stepped as the zero action
    for j in range(nu):
        history[i, hd, j] = action_or_zero(action, i, j, bad)
    k = wp.clamp(int(wp.floor(action_delay[i] + 0.5)), 0, K1 - 1)
    slot = (hd - k + K1) % K1
    s = action_scale[i]
    for j in range(nu):
        base = default_pose[j]
        if action_mode == 1:
            base = qpos[i, qposadr[j]]
        elif action_mode == 2:
            base = ctrl_out[i, j]
        target = base + history[i, slot, j] * s
        if params.clip != 0:  # kept clipped (Playground's H1: the cumulative base)
            target = wp.clamp(target, params.ctrl_low[j], params.ctrl_high[j])
        ctrl_out[i, j] = target
    force = wp.vec3(0.0)
    if kick_enable[i] > 0.5:
        h = step_bits(seed[0], env_offset + i, STREAM_KICK, episode_count[i] - 1, step_count[i])
        mass = body_subtreemass[i % body_subtreemass.shape[0], kick_body]
        force = _kick(i, h, dt, mass, kick_i, kick_f)
    xfrc_out[i, kick_body] = wp.spatial_vector(force[0], force[1], force[2], 0.0, 0.0, 0.0)


@wp.kernel
def settle_restore(
    # Data in:
    mask: wp.array(dtype=wp.bool),
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    warm: wp.array2d(dtype=float),
    ctrl: wp.array2d(dtype=float),
    time: wp.array(dtype=float),
    # Data out:
    qpos_out: wp.array2d(dtype=float),
    qvel_out: wp.array2d(dtype=float),
    warm_out: wp.array2d(dtype=float),
    ctrl_out: wp.array2d(dtype=float),
    time_out: wp.array(dtype=float),
):
    """After a reset's settling physics steps (all worlds): the worlds outside ``mask`` get
    their saved ``qpos``, ``qvel``, warm start, ``ctrl`` and ``time`` back, bit for bit;
    the settled worlds' time restarts at 0."""
    i = thread_index(wp.tid())
    if mask[i]:
        time_out[i] = 0.0
        return
    time_out[i] = time[i]
    for k in range(qpos.shape[1]):
        qpos_out[i, k] = qpos[i, k]
    for k in range(qvel.shape[1]):
        qvel_out[i, k] = qvel[i, k]
        warm_out[i, k] = warm[i, k]
    for k in range(ctrl.shape[1]):
        ctrl_out[i, k] = ctrl[i, k]


# ----------------------------------------------------------------- reset
@wp.func
def _quat_mul(a: wp.vec4, b: wp.vec4) -> wp.vec4:
    """Hamilton product of ``(w, x, y, z)`` quaternions (MuJoCo's ``mju_mulQuat``)."""
    return wp.vec4(
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    )


@wp.struct
class SpawnParams:
    """The parameter rows :func:`reset_base` reads: ``terrain_level``, the reset ranges
    (``[N]``) and the kick's ranges (``[2, N]``: low, high); with ``joint_scale_on`` 1 the
    joint-angle scale range ``joint_scale [2, N]`` (low, high) and the ``qpos`` address of
    each actuator's joint ``joint_qposadr [nu]`` (off: placeholders, nothing read)."""

    level: wp.array(dtype=float)
    xy_range: wp.array(dtype=float)
    yaw_range: wp.array(dtype=float)
    vel_range: wp.array(dtype=float)
    kick_wait: wp.array2d(dtype=float)
    kick_duration: wp.array2d(dtype=float)
    kick_velocity: wp.array2d(dtype=float)
    joint_scale_on: int
    joint_scale: wp.array2d(dtype=float)
    joint_qposadr: wp.array(dtype=int)


@wp.kernel
def reset_base(
    # Model:
    dt: float,
    home_qpos: wp.array(dtype=float),
    home_ctrl: wp.array(dtype=float),
    origins: wp.array2d(dtype=wp.vec3),
    params: SpawnParams,
    # Data in:
    mask: wp.array(dtype=wp.bool),
    keys: StepKeys,
    # Data out:
    qpos_out: wp.array2d(dtype=float),
    qvel_out: wp.array2d(dtype=float),
    ctrl_out: wp.array2d(dtype=float),
    state_out: LeggedState,
):
    """MuJoCo Playground's legged reset for a free-joint base, masked envs: ``qpos = home``
    moved to the env's origin (terrain row ``round(level)`` clamped to the rows of
    ``origins`` ``[rows, cols]``, column ``(env_offset + i) % cols``), plus ``U(-r, r)`` in
    x and y, a yaw ``U(-yaw_range, yaw_range)`` composed after the home orientation, the 6
    base velocities ``U(-v, v)`` (joints at rest), ``ctrl = home_ctrl``. The action history
    is zeroed (a delayed action before the episode's first is the zero action, the default
    pose) and the episode's kick drawn (Playground: once per episode): the wait
    ``round(U(wait) / dt)`` steps, the duration ``U(duration)`` seconds and
    ``round(duration / dt)`` steps, the velocity magnitude ``U(velocity)``. ``kick_*``: rows
    ``[2, N]`` (low, high). With ``joint_scale_on`` (Playground's G1): each actuated
    joint's angle is the home angle times ``U(joint_scale)``, and its PD target that angle.
    Draw order: x, y, yaw, 6 velocities, wait, duration, velocity, the joint scales."""
    # the bundles' fields under the names the math below reads (views: no copies)
    seed, env_offset, episode_count = keys.seed, keys.env_offset, keys.episode_count
    level, xy_range, yaw_range = params.level, params.xy_range, params.yaw_range
    vel_range, kick_wait = params.vel_range, params.kick_wait
    kick_duration, kick_velocity = params.kick_duration, params.kick_velocity
    history_out, head_out = state_out.history, state_out.head
    kick_i_out, kick_f_out = state_out.kick_i, state_out.kick_f
    i = thread_index(wp.tid())
    if not mask[i]:
        return
    h = begin_episode(i, seed[0], env_offset, episode_count)
    rows = origins.shape[0]
    cols = origins.shape[1]
    row = wp.clamp(int(wp.floor(level[i] + 0.5)), 0, rows - 1)
    o = origins[row, (env_offset + i) % cols]
    r = xy_range[i]
    for k in range(qpos_out.shape[1]):
        qpos_out[i, k] = home_qpos[k]
    qpos_out[i, 0] = home_qpos[0] + o[0] + uniform_in(h, -r, r)
    h = next_bits(h)
    qpos_out[i, 1] = home_qpos[1] + o[1] + uniform_in(h, -r, r)
    h = next_bits(h)
    qpos_out[i, 2] = home_qpos[2] + o[2]
    yr = yaw_range[i]
    yaw = uniform_in(h, -yr, yr)
    h = next_bits(h)
    q0 = wp.vec4(home_qpos[3], home_qpos[4], home_qpos[5], home_qpos[6])
    q = _quat_mul(q0, wp.vec4(wp.cos(0.5 * yaw), 0.0, 0.0, wp.sin(0.5 * yaw)))
    for k in range(4):
        qpos_out[i, 3 + k] = q[k]
    v = vel_range[i]
    for k in range(qvel_out.shape[1]):
        qvel_out[i, k] = 0.0
    for k in range(6):
        qvel_out[i, k] = uniform_in(h, -v, v)
        h = next_bits(h)
    for k in range(ctrl_out.shape[1]):
        ctrl_out[i, k] = home_ctrl[k]
    for s in range(history_out.shape[1]):
        for k in range(history_out.shape[2]):
            history_out[i, s, k] = 0.0
    head_out[i] = 0
    wait = uniform_in(h, kick_wait[0, i], kick_wait[1, i])
    h = next_bits(h)
    T = uniform_in(h, kick_duration[0, i], kick_duration[1, i])
    h = next_bits(h)
    kick_i_out[i, 0] = 0
    kick_i_out[i, 1] = round_steps(wait, dt)
    kick_i_out[i, 2] = 0
    kick_i_out[i, 3] = round_steps(T, dt)
    kick_f_out[i, 0] = T
    kick_f_out[i, 1] = uniform_in(h, kick_velocity[0, i], kick_velocity[1, i])
    kick_f_out[i, 2] = 0.0
    kick_f_out[i, 3] = 0.0
    if params.joint_scale_on != 0:  # after every other draw: robots without it keep theirs
        for j in range(ctrl_out.shape[1]):
            h = next_bits(h)
            a = params.joint_qposadr[j]
            qj = home_qpos[a] * uniform_in(h, params.joint_scale[0, i], params.joint_scale[1, i])
            qpos_out[i, a] = qj
            ctrl_out[i, j] = qj


# ----------------------------------------------------------------- commands
@wp.func
def reset_command(h: wp.uint32, a: wp.array2d(dtype=float), i: int) -> wp.vec3:
    """A command drawn at a reset: ``U(-a_k, a_k)`` per component (``a`` rows ``[3, N]``);
    uses 3 draws from ``h``."""
    c = wp.vec3(0.0)
    for k in range(3):
        c[k] = uniform_in(h, -a[k, i], a[k, i])
        h = next_bits(h)
    return c


# ----------------------------------------------------------------- height scan input
@wp.kernel
def base_pose(qpos: wp.array2d(dtype=float), pos_out: wp.array(dtype=wp.vec3),
              yaw_out: wp.array(dtype=float)):
    """A free-joint base's world position ``qpos[0:3]`` and yaw (of ``qpos[3:7]``), the
    inputs of :func:`height_scan`."""
    i = thread_index(wp.tid())
    pos_out[i] = wp.vec3(qpos[i, 0], qpos[i, 1], qpos[i, 2])
    yaw_out[i] = quat_yaw(wp.vec4(qpos[i, 3], qpos[i, 4], qpos[i, 5], qpos[i, 6]))


# ----------------------------------------------------------------- terrain under a task
@wp.struct
class Terrain:
    """The heightfield under a terrain env, as a legged task reads it (``on`` 0: flat or
    Playground's scenes: foot heights are world z, no curriculum metric) and its scan
    (``heights`` ``[N, P]``, P = ``nscan`` points, written by :func:`height_scan` before the
    task); ``tile``: the tile side in metres (the terrain curriculum's yardstick)."""

    on: int
    nscan: int
    heights: wp.array2d(dtype=float)
    size: wp.array(dtype=wp.vec4)
    nrow: wp.array(dtype=int)
    ncol: wp.array(dtype=int)
    adr: wp.array(dtype=int)
    data: wp.array(dtype=float)
    geom_pos: wp.array2d(dtype=wp.vec3)
    hfield: int
    geom: int
    tile: float


@wp.func
def ground(tr: Terrain, i: int, x: float, y: float) -> float:
    """Terrain height under world ``(x, y)`` in world ``i`` (0 without a terrain)."""
    if tr.on == 0:
        return 0.0
    return hfield_height(tr.size[tr.hfield], tr.nrow[tr.hfield], tr.ncol[tr.hfield],
                         tr.adr[tr.hfield], tr.data, tr.geom_pos[i % tr.geom_pos.shape[0],
                                                                tr.geom], x, y)


@wp.func
def write_height_scan(tr: Terrain, i: int, base_z: float, offset: float, scale: float,
                      level: float, noise_scale: float, hn: wp.uint32,
                      obs_out: wp.array2d(dtype=float), obs_col: int,
                      priv_out: wp.array2d(dtype=float), priv_col: int) -> wp.uint32:
    """legged_gym's height observation of env ``i``: per scan point ``k``, ``v =
    clip(base_z - offset - heights[i, k], -1, 1)``; ``v * scale`` into ``priv_out[i,
    priv_col + k]``, ``noisy(v) * scale`` (one draw per point, from ``hn`` on) into
    ``obs_out[i, obs_col + k]``. Returns the bits after the last draw."""
    for k in range(tr.nscan):
        v = wp.clamp(base_z - offset - tr.heights[i, k], -1.0, 1.0)
        priv_out[i, priv_col + k] = v * scale
        obs_out[i, obs_col + k] = noisy(v, hn, level, noise_scale) * scale
        hn = next_bits(hn)
    return hn


@wp.func
def terrain_start(i: int, qpos: wp.array2d(dtype=float), start_xy: wp.array2d(dtype=float),
                  cmd_distance: wp.array(dtype=float), metric: wp.array(dtype=float)):
    """At a reset: the episode's start xy (the base's), commanded distance and metric 0."""
    start_xy[i, 0] = qpos[i, 0]
    start_xy[i, 1] = qpos[i, 1]
    cmd_distance[i] = 0.0
    metric[i] = 0.0


@wp.func
def terrain_progress(i: int, qpos: wp.array2d(dtype=float), cmd_x: float, cmd_y: float,
                     dt: float, tile: float, start_xy: wp.array2d(dtype=float),
                     cmd_distance: wp.array(dtype=float), metric: wp.array(dtype=float)):
    """The terrain curriculum's metric after a step: the commanded distance grows by
    ``|cmd_xy| dt``; ``metric`` is +1 when the base is farther than half a ``tile`` from
    the episode's start, -1 when nearer than half the commanded distance, else 0."""
    dx = qpos[i, 0] - start_xy[i, 0]
    dy = qpos[i, 1] - start_xy[i, 1]
    walked = wp.sqrt(dx * dx + dy * dy)
    cmd_distance[i] = cmd_distance[i] + wp.sqrt(cmd_x * cmd_x + cmd_y * cmd_y) * dt
    m = float(0.0)
    if walked > 0.5 * tile:
        m = 1.0
    elif walked < 0.5 * cmd_distance[i]:
        m = -1.0
    metric[i] = m
