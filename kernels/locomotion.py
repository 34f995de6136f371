"""Locomotion robots on MuJoCo Warp: parameter-table copies into the per-world model
arrays, Gymnasium's reset noise, the v5 observation/reward/termination of Ant, HalfCheetah,
Hopper, Walker2d and Humanoid, and root pushes.

Every parameter is a table row ``[N]`` (float32, one per env); vector parameters are
``[size, N]``. MuJoCo Warp's per-world arrays are ``[N, k]`` (its ``worldid`` axis first).
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.actions import has_nan, nan_row
from gpuparam.kernels.episode import begin_episode
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.rng import STREAM_TERM0, next_bits, normal, rng_key, uniform

# Stream of push draws (randomization terms use STREAM_TERM0 + term index < 2^20).
STREAM_PUSH = wp.constant(STREAM_TERM0 + (1 << 20))

# No floating-point contraction: the reset noise and push draws (``qpos0 + s * (2u - 1)``,
# the normal quantile's polynomials) round alike on CPU and GPU, bit for bit, as every draw.
wp.set_module_options({"fuse_fp": False})

# ----------------------------------------------------------------- parameter copies
@wp.kernel
def copy_rows(rows: wp.array2d(dtype=float), out: wp.array2d(dtype=float)):
    """``out[i, j] = rows[j, i]``: a vector parameter into a per-world model array (``out``
    may be a strided view: a vector field's first component, a slice of bodies)."""
    i, j = wp.tid()
    out[i, j] = rows[j, i]


# ----------------------------------------------------------------- reset
@wp.kernel
def flag_any(mask: wp.array(dtype=wp.bool), flag_out: wp.array(dtype=wp.int32)):
    """``flag_out[0] = 1`` if any env of ``mask`` is set (one thread per env)."""
    if mask[wp.tid()]:
        flag_out[0] = 1


@wp.kernel
def count_overflows(
    # Data in:
    overflow_in: wp.array(dtype=int),
    # In:
    constraint_bits: int,
    contact_bits: int,
    # Data out:
    overflow_out: wp.array(dtype=int),
    # Out:
    contact_seen: wp.array(dtype=wp.int32),
    constraint_overflows: wp.array(dtype=wp.int32),
    contact_overflows: wp.array(dtype=wp.int32),
):
    """After an env step's substeps: count the step for world ``tid`` if MuJoCo Warp's
    overflow bitmask (``d.overflow``, OR-ed over the substeps) holds one of
    ``constraint_bits``, and once (the first world to see one, elected through
    ``contact_seen``, zeroed before the substeps) if any world's holds one of
    ``contact_bits``; then clear the bitmask (``overflow_in`` and ``overflow_out`` are the
    same array), so that the next step counts only its own drops."""
    w = wp.tid()
    bits = overflow_in[w]
    if (bits & constraint_bits) != 0:
        constraint_overflows[w] = constraint_overflows[w] + 1
    if (bits & contact_bits) != 0:
        if wp.atomic_add(contact_seen, 0, 1) == 0:
            contact_overflows[0] = contact_overflows[0] + 1
    overflow_out[w] = 0


@wp.kernel
def count_write(count_out: wp.array(dtype=wp.int32)):
    """Count one write of parameters into the model (one thread)."""
    count_out[0] = count_out[0] + 1


@wp.kernel
def reset_state(
    # Model:
    qpos0: wp.array2d(dtype=float),
    noise_scale: wp.array(dtype=float),
    qvel_normal: int,
    # Data in:
    mask: wp.array(dtype=wp.bool),
    seed: wp.array(dtype=wp.int32),
    env_offset: int,
    # Data out (``episode_count``: counted up):
    episode_count: wp.array(dtype=wp.int32),
    qpos_out: wp.array2d(dtype=float),
    qvel_out: wp.array2d(dtype=float),
):
    """Gymnasium's ``reset_model`` for the masked envs: ``qpos = qpos0 + U(-s, s)``,
    ``qvel = s * N(0, 1)`` (``qvel_normal`` = 1: Ant, HalfCheetah) or ``U(-s, s)``, keyed
    by (seed, global env id, episode index); draws in order qpos[0..nq), qvel[0..nv)."""
    i = thread_index(wp.tid())
    if not mask[i]:
        return
    h = begin_episode(i, seed[0], env_offset, episode_count)
    s = noise_scale[i]
    for k in range(qpos_out.shape[1]):
        qpos_out[i, k] = qpos0[i % qpos0.shape[0], k] + s * (2.0 * uniform(h) - 1.0)
        h = next_bits(h)
    for k in range(qvel_out.shape[1]):
        if qvel_normal == 1:
            qvel_out[i, k] = s * normal(h)
        else:
            qvel_out[i, k] = s * (2.0 * uniform(h) - 1.0)
        h = next_bits(h)


# ----------------------------------------------------------------- helpers
@wp.func
def _ctrl_cost(action: wp.array2d(dtype=float), i: int, weight: float) -> float:
    c = float(0.0)
    for k in range(action.shape[1]):
        c += action[i, k] * action[i, k]
    return weight * c


@wp.func
def copy_row(src: wp.array2d(dtype=float), dst: wp.array2d(dtype=float), i: int):
    """``dst[i] = src[i]`` (a step's observation is also its final observation)."""
    for k in range(src.shape[1]):
        dst[i, k] = src[i, k]


@wp.func
def _contact_obs(cfrc_ext: wp.array2d(dtype=wp.spatial_vector), i: int, observe: int,
                 clip: int, lo: float, hi: float, obs: wp.array2d(dtype=float), o: int) -> float:
    """Write ``cfrc_ext[i, 1:]`` (clipped to ``[lo, hi]`` if ``clip``; 0 right after a
    reset, as after ``mj_resetData`` + ``mj_forward``) to ``obs[i, o:]``; return the sum of
    squares over every body."""
    contact = float(0.0)
    for b in range(cfrc_ext.shape[1]):
        f = cfrc_ext[i, b]
        for c in range(6):
            v = float(0.0)
            if observe == 0:
                v = f[c]
                if clip == 1:
                    v = wp.clamp(v, lo, hi)
            contact += v * v
            if b > 0:
                obs[i, o + (b - 1) * 6 + c] = v
    return contact


@wp.func
def nan_outputs(action: wp.array2d(dtype=float), i: int, obs: wp.array2d(dtype=float),
                final_obs: wp.array2d(dtype=float), reward: wp.array(dtype=float)):
    """After a step: when env ``i``'s action has a NaN component (its physics stepped with
    the zero action), its observation, final observation and reward are NaN."""
    if has_nan(action, i):
        nan_row(obs, i)
        nan_row(final_obs, i)
        reward[i] = wp.nan


@wp.struct
class TaskOutputs:
    """A locomotion task's outputs: observation and final observation ``[N, obs]``,
    reward and terminated ``[N]``."""

    obs: wp.array2d(dtype=float)
    final_obs: wp.array2d(dtype=float)
    reward: wp.array(dtype=float)
    terminated: wp.array(dtype=wp.bool)


# ----------------------------------------------------------------- Ant-v5
@wp.struct
class AntParams:
    """The parameter rows ``[N]`` :func:`ant` reads (``AntEnv.task_specs``, in order)."""

    forward_w: wp.array(dtype=float)
    ctrl_w: wp.array(dtype=float)
    contact_w: wp.array(dtype=float)
    healthy_r: wp.array(dtype=float)
    terminate: wp.array(dtype=float)
    z_min: wp.array(dtype=float)
    z_max: wp.array(dtype=float)
    force_min: wp.array(dtype=float)
    force_max: wp.array(dtype=float)


@wp.kernel
def ant(
    # Model:
    dt: float,
    main_body: int,
    params: AntParams,
    # Data in:
    observe: int,
    mask: wp.array(dtype=wp.bool),
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    xpos: wp.array2d(dtype=wp.vec3),
    cfrc_ext: wp.array2d(dtype=wp.spatial_vector),
    action: wp.array2d(dtype=float),
    # Data out:
    prev_xy_out: wp.array2d(dtype=float),
    outputs: TaskOutputs,
):
    """Ant-v5 (``AntEnv``). ``observe`` = 0: after a step, every env: both observations,
    reward (all NaN for an env whose action has a NaN: :func:`nan_outputs`), terminated,
    the torso's xy for the next step. ``observe`` = 1: the masked envs
    just reset (contact forces 0; the torso xy is ``qpos[0:2]``, a free joint)."""
    # the bundles' fields under the names the math below reads (views: no copies)
    forward_w, ctrl_w, contact_w = params.forward_w, params.ctrl_w, params.contact_w
    healthy_r, terminate = params.healthy_r, params.terminate
    z_min, z_max = params.z_min, params.z_max
    force_min, force_max = params.force_min, params.force_max
    prev_xy = prev_xy_out  # the torso's xy at the last step (read, then written)
    obs_out, final_obs_out = outputs.obs, outputs.final_obs
    reward_out, terminated_out = outputs.reward, outputs.terminated
    i = thread_index(wp.tid())
    if observe == 1 and not mask[i]:
        return
    nq = qpos.shape[1]
    nv = qvel.shape[1]
    ok = wp.isfinite(qpos[i, 0]) and wp.isfinite(qpos[i, 1])  # a finite state
    for k in range(2, nq):
        obs_out[i, k - 2] = qpos[i, k]
        ok = ok and wp.isfinite(qpos[i, k])
    for k in range(nv):
        obs_out[i, nq - 2 + k] = qvel[i, k]
        ok = ok and wp.isfinite(qvel[i, k])
    contact = _contact_obs(cfrc_ext, i, observe, 1, force_min[i], force_max[i], obs_out,
                           nq - 2 + nv)
    if observe == 1:
        prev_xy[i, 0] = qpos[i, 0]
        prev_xy[i, 1] = qpos[i, 1]
        return
    copy_row(obs_out, final_obs_out, i)
    p = xpos[i, main_body]
    x_vel = (p[0] - prev_xy[i, 0]) / dt
    prev_xy[i, 0] = p[0]
    prev_xy[i, 1] = p[1]
    z = qpos[i, 2]
    healthy = ok and z_min[i] <= z and z <= z_max[i]
    h = wp.where(healthy, healthy_r[i], 0.0)
    reward_out[i] = (
        x_vel * forward_w[i] + h - _ctrl_cost(action, i, ctrl_w[i]) - contact_w[i] * contact
    )
    terminated_out[i] = (not healthy) and terminate[i] > 0.5
    nan_outputs(action, i, obs_out, final_obs_out, reward_out)


# ----------------------------------------------------------------- planar walkers
PLANAR_CHEETAH = wp.constant(0)
PLANAR_HOPPER = wp.constant(1)  # (2: Walker2d)


@wp.struct
class PlanarParams:
    """The parameter rows ``[N]`` :func:`planar` reads (a kind's missing health rows: any
    row, never read)."""

    forward_w: wp.array(dtype=float)
    ctrl_w: wp.array(dtype=float)
    healthy_r: wp.array(dtype=float)
    terminate: wp.array(dtype=float)
    z_min: wp.array(dtype=float)
    z_max: wp.array(dtype=float)
    angle_min: wp.array(dtype=float)
    angle_max: wp.array(dtype=float)
    state_min: wp.array(dtype=float)
    state_max: wp.array(dtype=float)


@wp.kernel
def planar(
    # Model:
    dt: float,
    kind: int,
    vel_clip: float,
    params: PlanarParams,
    # Data in:
    observe: int,
    mask: wp.array(dtype=wp.bool),
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    action: wp.array2d(dtype=float),
    # Data out:
    prev_x_out: wp.array(dtype=float),
    outputs: TaskOutputs,
):
    """HalfCheetah-v5 (``kind`` 0), Hopper-v5 (1), Walker2d-v5 (2) (``planar.py``): observation
    ``qpos[1:], clip(qvel, -vel_clip, vel_clip)`` (``vel_clip`` inf: no clip). Health
    (strict inequalities, as Gymnasium; none for HalfCheetah): Hopper ``state_min <
    qpos[2:], qvel < state_max``, z = qpos[1] and angle = qpos[2] in range; Walker2d z and
    angle. ``observe`` as in :func:`ant`."""
    # the bundles' fields under the names the math below reads (views: no copies)
    forward_w, ctrl_w = params.forward_w, params.ctrl_w
    healthy_r, terminate = params.healthy_r, params.terminate
    z_min, z_max = params.z_min, params.z_max
    angle_min, angle_max = params.angle_min, params.angle_max
    state_min, state_max = params.state_min, params.state_max
    prev_x = prev_x_out  # the root's x at the last step (read, then written)
    obs_out, final_obs_out = outputs.obs, outputs.final_obs
    reward_out, terminated_out = outputs.reward, outputs.terminated
    i = thread_index(wp.tid())
    if observe == 1 and not mask[i]:
        return
    nq = qpos.shape[1]
    nv = qvel.shape[1]
    for k in range(1, nq):
        obs_out[i, k - 1] = qpos[i, k]
    for k in range(nv):
        obs_out[i, nq - 1 + k] = wp.clamp(qvel[i, k], -vel_clip, vel_clip)
    x = qpos[i, 0]
    if observe == 1:
        prev_x[i] = x
        return
    copy_row(obs_out, final_obs_out, i)
    x_vel = (x - prev_x[i]) / dt
    prev_x[i] = x
    reward = forward_w[i] * x_vel - _ctrl_cost(action, i, ctrl_w[i])
    healthy = True
    if kind != PLANAR_CHEETAH:
        z = qpos[i, 1]
        angle = qpos[i, 2]
        healthy = z_min[i] < z and z < z_max[i] and angle_min[i] < angle and angle < angle_max[i]
        if kind == PLANAR_HOPPER:
            lo = state_min[i]
            hi = state_max[i]
            for k in range(2, nq):
                healthy = healthy and lo < qpos[i, k] and qpos[i, k] < hi
            for k in range(nv):
                healthy = healthy and lo < qvel[i, k] and qvel[i, k] < hi
        if healthy:
            reward += healthy_r[i]
    reward_out[i] = reward
    terminated_out[i] = (not healthy) and terminate[i] > 0.5
    nan_outputs(action, i, obs_out, final_obs_out, reward_out)


# ----------------------------------------------------------------- Humanoid-v5
@wp.struct
class HumanoidParams:
    """The parameter rows ``[N]`` :func:`humanoid` reads (``HumanoidEnv.task_specs``)."""

    forward_w: wp.array(dtype=float)
    ctrl_w: wp.array(dtype=float)
    contact_w: wp.array(dtype=float)
    contact_cost_max: wp.array(dtype=float)
    healthy_r: wp.array(dtype=float)
    terminate: wp.array(dtype=float)
    z_min: wp.array(dtype=float)
    z_max: wp.array(dtype=float)


@wp.struct
class HumanoidData:
    """What :func:`humanoid` reads of MuJoCo Warp's data ``[N, ...]`` (``cinert``, ``cvel``
    viewed as float ``[N, nbody, 10]`` and ``[N, nbody, 6]``)."""

    qpos: wp.array2d(dtype=float)
    qvel: wp.array2d(dtype=float)
    cinert: wp.array3d(dtype=float)
    cvel: wp.array3d(dtype=float)
    qfrc_actuator: wp.array2d(dtype=float)
    cfrc_ext: wp.array2d(dtype=wp.spatial_vector)
    xipos: wp.array2d(dtype=wp.vec3)


@wp.kernel
def humanoid(
    # Model:
    dt: float,
    body_mass: wp.array2d(dtype=float),
    params: HumanoidParams,
    # Data in:
    observe: int,
    mask: wp.array(dtype=wp.bool),
    data: HumanoidData,
    action: wp.array2d(dtype=float),
    # Data out:
    prev_x_out: wp.array2d(dtype=float),
    outputs: TaskOutputs,
):
    """Humanoid-v5 (``HumanoidEnv``). ``observe`` as in :func:`ant`; ``observe`` = 1 needs
    ``mj_forward``'s quantities (the backend runs forward at reset). ``prev_x`` ``[N,
    nbody]`` keeps each body's ``xipos`` x of the last step: the mass center before a step
    is weighed with the masses in force now, as Gymnasium's (a mass written between two
    steps adds no false velocity)."""
    # the bundles' fields under the names the math below reads (views: no copies)
    forward_w, ctrl_w = params.forward_w, params.ctrl_w
    contact_w, contact_cost_max = params.contact_w, params.contact_cost_max
    healthy_r, terminate = params.healthy_r, params.terminate
    z_min, z_max = params.z_min, params.z_max
    qpos, qvel, cinert, cvel = data.qpos, data.qvel, data.cinert, data.cvel
    qfrc_actuator, cfrc_ext, xipos = data.qfrc_actuator, data.cfrc_ext, data.xipos
    prev_x = prev_x_out  # each body's x at the last step (read, then written)
    obs_out, final_obs_out = outputs.obs, outputs.final_obs
    reward_out, terminated_out = outputs.reward, outputs.terminated
    i = thread_index(wp.tid())
    if observe == 1 and not mask[i]:
        return
    nq = qpos.shape[1]
    nv = qvel.shape[1]
    nb = cinert.shape[1]
    for k in range(2, nq):
        obs_out[i, k - 2] = qpos[i, k]
    for k in range(nv):
        obs_out[i, nq - 2 + k] = qvel[i, k]
    o = nq - 2 + nv  # then cinert[1:] (10 per body), cvel[1:] (6 per body)
    for b in range(1, nb):
        for k in range(10):
            obs_out[i, o + (b - 1) * 10 + k] = cinert[i, b, k]
        for k in range(6):
            obs_out[i, o + (nb - 1) * 10 + (b - 1) * 6 + k] = cvel[i, b, k]
    o += 16 * (nb - 1)
    for k in range(6, nv):
        obs_out[i, o + k - 6] = qfrc_actuator[i, k]
    contact = _contact_obs(cfrc_ext, i, observe, 0, 0.0, 0.0, obs_out, o + nv - 6)
    if observe == 1:
        for b in range(nb):
            prev_x[i, b] = xipos[i, b][0]
        return
    copy_row(obs_out, final_obs_out, i)
    w = i % body_mass.shape[0]
    now = float(0.0)
    before = float(0.0)
    den = float(0.0)
    for b in range(nb):
        m = body_mass[w, b]
        now += m * xipos[i, b][0]
        before += m * prev_x[i, b]
        den += m
        prev_x[i, b] = xipos[i, b][0]
    x_vel = (now / den - before / den) / dt
    z = qpos[i, 2]
    healthy = z_min[i] < z and z < z_max[i]
    h = wp.where(healthy, healthy_r[i], 0.0)
    contact_cost = wp.min(contact_w[i] * contact, contact_cost_max[i])
    reward_out[i] = forward_w[i] * x_vel + h - _ctrl_cost(action, i, ctrl_w[i]) - contact_cost
    terminated_out[i] = (not healthy) and terminate[i] > 0.5
    nan_outputs(action, i, obs_out, final_obs_out, reward_out)


# ----------------------------------------------------------------- pushes
@wp.kernel
def push(
    # In:
    seed: wp.array(dtype=wp.int32),
    env_offset: int,
    first_dof: int,
    low: wp.array(dtype=float),
    high: wp.array(dtype=float),
    k_low: int,
    k_high: int,
    # Out (``timer``, ``count``: read, then written):
    timer: wp.array(dtype=wp.int32),
    count: wp.array(dtype=wp.int32),
    qvel_out: wp.array2d(dtype=float),
):
    """Count down each env's timer; at zero add ``U(low[j], high[j])`` to
    ``qvel[first_dof + j]`` and draw the next interval in ``[k_low, k_high]`` steps. Draws
    keyed by (seed, global env id, push stream, the env's push count). Count 0 (timers and
    counts zeroed: the first launch) pushes nothing and draws the first timer: uniform in
    ``[1, k_high]`` for a fixed period (phase spread, ``k_low == k_high``)."""
    i = thread_index(wp.tid())
    t = timer[i] - 1
    if t > 0:
        timer[i] = t
        return
    c = count[i]
    count[i] = c % 2147483647 + 1  # 1 .. 2^31 - 1, then 1 again (no int32 overflow)
    h = rng_key(seed[0], env_offset + i, STREAM_PUSH, c)
    lo = k_low
    if c == 0:
        if k_low == k_high:
            lo = 1
    else:
        for j in range(low.shape[0]):
            dv = low[j] + (high[j] - low[j]) * uniform(h)
            qvel_out[i, first_dof + j] = qvel_out[i, first_dof + j] + dv
            h = next_bits(h)
    span = k_high - lo + 1  # never past k_high nor int32 (float32 rounding capped)
    timer[i] = lo + wp.min(int(uniform(h) * float(span)), span - 1)
