"""MuJoCo's model constants derived from mass, inertia, centre of mass and armature
(``mj_setConst``'s ``body_subtreemass``, ``dof_invweight0``, ``body_invweight0``,
``tendon_invweight0``, ``actuator_acc0``), recomputed for the worlds of a mask in one launch.

One thread per world: kinematics at ``qpos0`` (hinge and slide joints sit at their
reference there, so only free and ball joints move a body), subtree centres of mass,
composite rigid body inertias, the joint-space inertia matrix with armature in MuJoCo's
sparse ``L'DL`` layout (each dof's row holds the dof and its ancestors), its factorization
(MuJoCo's ``mj_factorI``), then one triangular solve per right-hand side: ``e' M^-1 e``
for each dof, ``J M^-1 J'`` for each of a body's 6 Jacobian rows at its centre of mass,
``t M^-1 t'`` for each fixed tendon and ``|M^-1 moment|`` for each actuator. The averaging
rules are ``engine_setconst.c``'s (``set0``): a free joint's 3 translational and 3
rotational dofs, a ball joint's 3 dofs, a body's translation and rotation traces, each
divided by 3; a "simple" body without rotations (``body_simple == 2``) gets ``1 / mass``.

Arrays of the model are read at ``worldid % shape[0]`` (MuJoCo Warp's per-world fields have
the world axis first, 1 row when shared); outputs have one row per world. Temporaries are
per-world rows of :class:`Scratch` (allocated once by the caller). Worlds outside the mask
return at once: nothing of theirs is read or written; the mask of a world done is cleared.
"""

from __future__ import annotations

import warp as wp

vec10 = wp.types.vector(length=10, dtype=float)  # a body's inertia about a point: MuJoCo's cinert

JNT_FREE = wp.constant(0)
JNT_BALL = wp.constant(1)
JNT_SLIDE = wp.constant(2)
JNT_HINGE = wp.constant(3)
MINVAL = wp.constant(1.0e-15)  # mjMINVAL


@wp.struct
class Tree:
    """The model's topology and the layout of the factor (static, shared by all worlds).

    ``dof_rowadr``/``dof_rownum``/``dof_anc``: the row of dof ``k`` in ``Scratch.factor``
    starts at ``dof_rowadr[k]`` and holds ``dof_rownum[k]`` entries, for the dofs
    ``dof_anc[rowadr : rowadr + rownum]`` (``k`` first, then its ancestors, nearest first).
    ``body_lastdof``: the last dof moving the body (-1: none). ``act_dof``: the dof an
    actuator's hinge or slide joint drives (-1: a tendon actuator, ``act_ten`` its tendon).
    ``ten_wrapadr``/``ten_wrapnum``, ``wrap_dof``, ``wrap_coef``: fixed tendons' joints."""

    body_parentid: wp.array(dtype=int)
    body_rootid: wp.array(dtype=int)
    body_weldid: wp.array(dtype=int)
    body_simple: wp.array(dtype=int)
    body_jntadr: wp.array(dtype=int)
    body_jntnum: wp.array(dtype=int)
    body_lastdof: wp.array(dtype=int)
    jnt_type: wp.array(dtype=int)
    jnt_qposadr: wp.array(dtype=int)
    jnt_dofadr: wp.array(dtype=int)
    jnt_bodyid: wp.array(dtype=int)
    dof_bodyid: wp.array(dtype=int)
    dof_parentid: wp.array(dtype=int)
    dof_rowadr: wp.array(dtype=int)
    dof_rownum: wp.array(dtype=int)
    dof_anc: wp.array(dtype=int)
    act_dof: wp.array(dtype=int)
    act_ten: wp.array(dtype=int)
    ten_wrapadr: wp.array(dtype=int)
    ten_wrapnum: wp.array(dtype=int)
    wrap_dof: wp.array(dtype=int)
    wrap_coef: wp.array(dtype=float)


@wp.struct
class Inertial:
    """The model fields the constants derive from (MuJoCo Warp's arrays, world axis first,
    1 row or one per world)."""

    qpos0: wp.array2d(dtype=float)
    body_pos: wp.array2d(dtype=wp.vec3)
    body_quat: wp.array2d(dtype=wp.quat)
    body_ipos: wp.array2d(dtype=wp.vec3)
    body_iquat: wp.array2d(dtype=wp.quat)
    body_mass: wp.array2d(dtype=float)
    body_inertia: wp.array2d(dtype=wp.vec3)
    jnt_pos: wp.array2d(dtype=wp.vec3)
    jnt_axis: wp.array2d(dtype=wp.vec3)
    dof_armature: wp.array2d(dtype=float)
    actuator_gear: wp.array2d(dtype=wp.spatial_vector)


@wp.struct
class Scratch:
    """Per-world temporaries: ``[N, nbody]`` frames, centres of mass and composite
    inertias, ``[N, njnt]`` joint anchors and axes, ``[N, nv]`` motion axes and two
    vectors, ``[N, nnz]`` the factor (``Tree.dof_rowadr``'s layout)."""

    xpos: wp.array2d(dtype=wp.vec3)
    xquat: wp.array2d(dtype=wp.quat)
    xipos: wp.array2d(dtype=wp.vec3)
    com: wp.array2d(dtype=wp.vec3)
    crb: wp.array2d(dtype=vec10)
    xanchor: wp.array2d(dtype=wp.vec3)
    xaxis: wp.array2d(dtype=wp.vec3)
    cdof: wp.array2d(dtype=wp.spatial_vector)
    factor: wp.array2d(dtype=float)
    vec: wp.array2d(dtype=float)


@wp.struct
class Derived:
    """The recomputed model fields (one row per world)."""

    body_subtreemass: wp.array2d(dtype=float)
    body_invweight0: wp.array2d(dtype=wp.vec2)
    dof_invweight0: wp.array2d(dtype=float)
    tendon_invweight0: wp.array2d(dtype=float)
    actuator_acc0: wp.array2d(dtype=float)


# ----------------------------------------------------------------- MuJoCo's quaternion maths
# (w, x, y, z) in a wp.quat's components 0..3, as MuJoCo Warp stores them
@wp.func
def mul_quat(u: wp.quat, v: wp.quat) -> wp.quat:
    return wp.quat(
        u[0] * v[0] - u[1] * v[1] - u[2] * v[2] - u[3] * v[3],
        u[0] * v[1] + u[1] * v[0] + u[2] * v[3] - u[3] * v[2],
        u[0] * v[2] - u[1] * v[3] + u[2] * v[0] + u[3] * v[1],
        u[0] * v[3] + u[1] * v[2] - u[2] * v[1] + u[3] * v[0],
    )


@wp.func
def rot_vec_quat(vec: wp.vec3, quat: wp.quat) -> wp.vec3:
    s, u = quat[0], wp.vec3(quat[1], quat[2], quat[3])
    r = 2.0 * (wp.dot(u, vec) * u) + (s * s - wp.dot(u, u)) * vec
    return r + 2.0 * s * wp.cross(u, vec)


@wp.func
def quat_to_mat(q: wp.quat) -> wp.mat33:
    q00, q01, q02, q03 = q[0] * q[0], q[0] * q[1], q[0] * q[2], q[0] * q[3]
    q11, q12, q13 = q[1] * q[1], q[1] * q[2], q[1] * q[3]
    q22, q23, q33 = q[2] * q[2], q[2] * q[3], q[3] * q[3]
    return wp.mat33(
        q00 + q11 - q22 - q33, 2.0 * (q12 - q03), 2.0 * (q13 + q02),
        2.0 * (q12 + q03), q00 - q11 + q22 - q33, 2.0 * (q23 - q01),
        2.0 * (q13 - q02), 2.0 * (q23 + q01), q00 - q11 - q22 + q33,
    )


@wp.func
def inert_vec(i: vec10, v: wp.spatial_vector) -> wp.spatial_vector:
    """``mju_mulInertVec``: a 6D motion (rotation, translation) times a cinert."""
    return wp.spatial_vector(
        i[0] * v[0] + i[3] * v[1] + i[4] * v[2] - i[8] * v[4] + i[7] * v[5],
        i[3] * v[0] + i[1] * v[1] + i[5] * v[2] + i[8] * v[3] - i[6] * v[5],
        i[4] * v[0] + i[5] * v[1] + i[2] * v[2] - i[7] * v[3] + i[6] * v[4],
        i[8] * v[1] - i[7] * v[2] + i[9] * v[3],
        i[6] * v[2] - i[8] * v[0] + i[9] * v[4],
        i[7] * v[0] - i[6] * v[1] + i[9] * v[5],
    )


@wp.func
def cinert(mat: wp.mat33, inert: wp.vec3, mass: float, dif: wp.vec3) -> vec10:
    """``mju_inertCom``: principal inertia ``inert`` in frame ``mat`` at offset ``dif``
    from the centre of the body's tree."""
    res = vec10()
    row0, row1, row2 = wp.cw_mul(mat[0], inert), wp.cw_mul(mat[1], inert), wp.cw_mul(mat[2], inert)
    res[0] = wp.dot(row0, mat[0]) + mass * (dif[1] * dif[1] + dif[2] * dif[2])
    res[1] = wp.dot(row1, mat[1]) + mass * (dif[0] * dif[0] + dif[2] * dif[2])
    res[2] = wp.dot(row2, mat[2]) + mass * (dif[0] * dif[0] + dif[1] * dif[1])
    res[3] = wp.dot(row0, mat[1]) - mass * dif[0] * dif[1]
    res[4] = wp.dot(row0, mat[2]) - mass * dif[0] * dif[2]
    res[5] = wp.dot(row1, mat[2]) - mass * dif[1] * dif[2]
    res[6] = mass * dif[0]
    res[7] = mass * dif[1]
    res[8] = mass * dif[2]
    res[9] = mass
    return res


# ----------------------------------------------------------------- the factor
@wp.func
def half_solve(tree: Tree, factor: wp.array2d(dtype=float), vec: wp.array2d(dtype=float),
               w: int) -> float:
    """``vec[w] <- L'^-1 vec[w]`` (mj_solveLD's first pass), returning
    ``sum vec^2 / D``: the quadratic form ``v' M^-1 v`` of the vector ``vec[w]`` held."""
    nv = tree.dof_rowadr.shape[0]
    for kk in range(nv):
        k = nv - 1 - kk
        x = vec[w, k]
        if x != 0.0:
            r = tree.dof_rowadr[k]
            for p in range(1, tree.dof_rownum[k]):
                j = tree.dof_anc[r + p]
                vec[w, j] = vec[w, j] - factor[w, r + p] * x
    q = float(0.0)
    for k in range(nv):
        x = vec[w, k]
        q += x * x / factor[w, tree.dof_rowadr[k]]
    return q


@wp.func
def clear(vec: wp.array2d(dtype=float), w: int):
    for k in range(vec.shape[1]):
        vec[w, k] = 0.0


@wp.func
def tendon_jacobian(tree: Tree, vec: wp.array2d(dtype=float), w: int, t: int, scale: float):
    """``vec[w] += scale * J_t``: fixed tendon ``t``'s Jacobian (its joints' coefficients)."""
    a = tree.ten_wrapadr[t]
    for i in range(a, a + tree.ten_wrapnum[t]):
        d = tree.wrap_dof[i]
        vec[w, d] = vec[w, d] + scale * tree.wrap_coef[i]


@wp.kernel
def set_const(
    # Model:
    tree: Tree,
    model: Inertial,
    # In/out:
    changed: wp.array(dtype=wp.bool),
    # Out:
    scratch: Scratch,
    out: Derived,
):
    """The derived constants of world ``tid`` where ``changed[tid]``, which is then cleared
    (one thread per world)."""
    w = wp.tid()
    if not changed[w]:
        return
    s = scratch
    nbody = tree.body_parentid.shape[0]
    nv = tree.dof_bodyid.shape[0]
    mass_w = w % model.body_mass.shape[0]

    # subtree masses (setFixed)
    for i in range(nbody):
        out.body_subtreemass[w, i] = model.body_mass[mass_w, i]
    for ii in range(nbody - 1):
        i = nbody - 1 - ii
        p = tree.body_parentid[i]
        out.body_subtreemass[w, p] = out.body_subtreemass[w, p] + out.body_subtreemass[w, i]

    # kinematics at qpos0 (mj_kinematics: a hinge or slide joint at qpos0 does not move)
    qpos0_w = w % model.qpos0.shape[0]
    s.xpos[w, 0] = wp.vec3(0.0)
    s.xquat[w, 0] = wp.quat(1.0, 0.0, 0.0, 0.0)
    s.xipos[w, 0] = wp.vec3(0.0)
    for i in range(1, nbody):
        jntadr = tree.body_jntadr[i]
        jntnum = tree.body_jntnum[i]
        xpos = wp.vec3(0.0)
        xquat = wp.quat(1.0, 0.0, 0.0, 0.0)
        if jntnum == 1 and tree.jnt_type[jntadr] == JNT_FREE:
            a = tree.jnt_qposadr[jntadr]
            xpos = wp.vec3(model.qpos0[qpos0_w, a], model.qpos0[qpos0_w, a + 1],
                           model.qpos0[qpos0_w, a + 2])
            xquat = wp.normalize(wp.quat(model.qpos0[qpos0_w, a + 3], model.qpos0[qpos0_w, a + 4],
                                         model.qpos0[qpos0_w, a + 5], model.qpos0[qpos0_w, a + 6]))
            s.xanchor[w, jntadr] = xpos
            s.xaxis[w, jntadr] = model.jnt_axis[w % model.jnt_axis.shape[0], jntadr]
        else:
            p = tree.body_parentid[i]
            xquat = model.body_quat[w % model.body_quat.shape[0], i]
            xpos = rot_vec_quat(model.body_pos[w % model.body_pos.shape[0], i], s.xquat[w, p])
            xpos = xpos + s.xpos[w, p]
            xquat = mul_quat(s.xquat[w, p], xquat)
            for j in range(jntadr, jntadr + jntnum):
                jpos = model.jnt_pos[w % model.jnt_pos.shape[0], j]
                xanchor = rot_vec_quat(jpos, xquat) + xpos
                s.xanchor[w, j] = xanchor
                s.xaxis[w, j] = rot_vec_quat(model.jnt_axis[w % model.jnt_axis.shape[0], j], xquat)
                jtype = tree.jnt_type[j]
                if jtype == JNT_BALL:
                    a = tree.jnt_qposadr[j]
                    qloc = wp.normalize(wp.quat(
                        model.qpos0[qpos0_w, a], model.qpos0[qpos0_w, a + 1],
                        model.qpos0[qpos0_w, a + 2], model.qpos0[qpos0_w, a + 3]))
                    xquat = mul_quat(xquat, qloc)
                    xpos = xanchor - rot_vec_quat(jpos, xquat)
                elif jtype == JNT_HINGE:  # rotated by 0 about its anchor
                    xpos = xanchor - rot_vec_quat(jpos, xquat)
            xquat = wp.normalize(xquat)
        s.xpos[w, i] = xpos
        s.xquat[w, i] = xquat
        s.xipos[w, i] = xpos + rot_vec_quat(model.body_ipos[w % model.body_ipos.shape[0], i], xquat)

    # subtree centres of mass (mj_comPos)
    for i in range(nbody):
        s.com[w, i] = s.xipos[w, i] * model.body_mass[mass_w, i]
    for ii in range(nbody - 1):
        i = nbody - 1 - ii
        p = tree.body_parentid[i]
        s.com[w, p] = s.com[w, p] + s.com[w, i]
    for i in range(nbody):
        m = out.body_subtreemass[w, i]
        if m < MINVAL:
            s.com[w, i] = s.xipos[w, i]
        else:
            s.com[w, i] = s.com[w, i] / m

    # composite rigid body inertias (mj_comPos's cinert, then mj_crb's sums)
    for i in range(nbody):
        iquat = model.body_iquat[w % model.body_iquat.shape[0], i]
        mat = quat_to_mat(mul_quat(s.xquat[w, i], iquat))
        dif = s.xipos[w, i] - s.com[w, tree.body_rootid[i]]
        s.crb[w, i] = cinert(mat, model.body_inertia[w % model.body_inertia.shape[0], i],
                             model.body_mass[mass_w, i], dif)
    for ii in range(nbody - 1):
        i = nbody - 1 - ii
        p = tree.body_parentid[i]
        if p > 0:
            s.crb[w, p] = s.crb[w, p] + s.crb[w, i]

    # motion axes of the dofs (mj_comPos's cdof)
    njnt = tree.jnt_type.shape[0]
    for j in range(njnt):
        b = tree.jnt_bodyid[j]
        d = tree.jnt_dofadr[j]
        xmat = wp.transpose(quat_to_mat(s.xquat[w, b]))
        offset = s.com[w, tree.body_rootid[b]] - s.xanchor[w, j]
        jtype = tree.jnt_type[j]
        axis = s.xaxis[w, j]
        if jtype == JNT_FREE:
            s.cdof[w, d + 0] = wp.spatial_vector(0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
            s.cdof[w, d + 1] = wp.spatial_vector(0.0, 0.0, 0.0, 0.0, 1.0, 0.0)
            s.cdof[w, d + 2] = wp.spatial_vector(0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
            for k in range(3):
                s.cdof[w, d + 3 + k] = wp.spatial_vector(xmat[k], wp.cross(xmat[k], offset))
        elif jtype == JNT_BALL:
            for k in range(3):
                s.cdof[w, d + k] = wp.spatial_vector(xmat[k], wp.cross(xmat[k], offset))
        elif jtype == JNT_SLIDE:
            s.cdof[w, d] = wp.spatial_vector(wp.vec3(0.0), axis)
        else:
            s.cdof[w, d] = wp.spatial_vector(axis, wp.cross(axis, offset))

    # the joint-space inertia M with armature (mj_makeM), row k: M(k, k), M(k, ancestors)
    arm_w = w % model.dof_armature.shape[0]
    for k in range(nv):
        r = tree.dof_rowadr[k]
        cdof = s.cdof[w, k]
        buf = inert_vec(s.crb[w, tree.dof_bodyid[k]], cdof)
        s.factor[w, r] = model.dof_armature[arm_w, k] + wp.dot(cdof, buf)
        for p in range(1, tree.dof_rownum[k]):
            s.factor[w, r + p] = wp.dot(s.cdof[w, tree.dof_anc[r + p]], buf)

    # M = L' D L in place (mj_factorI): D on each row's first entry, L(k, ancestors) after
    for kk in range(nv):
        k = nv - 1 - kk
        r = tree.dof_rowadr[k]
        n = tree.dof_rownum[k]
        if s.factor[w, r] < MINVAL:
            s.factor[w, r] = MINVAL
        dk = s.factor[w, r]
        for p in range(1, n):
            i = tree.dof_anc[r + p]
            tmp = s.factor[w, r + p] / dk
            ri = tree.dof_rowadr[i]
            for c in range(n - p):
                s.factor[w, ri + c] = s.factor[w, ri + c] - tmp * s.factor[w, r + p + c]
            s.factor[w, r + p] = tmp

    # body_invweight0: traces of J M^-1 J' at the body's centre of mass / 3
    out.body_invweight0[w, 0] = wp.vec2(0.0, 0.0)
    for b in range(1, nbody):
        last = tree.body_lastdof[b]
        if tree.body_weldid[b] == 0:
            out.body_invweight0[w, b] = wp.vec2(0.0, 0.0)
        elif tree.body_simple[b] == 2:
            inv_mass = 1.0 / wp.max(MINVAL, model.body_mass[mass_w, b])
            out.body_invweight0[w, b] = wp.vec2(inv_mass, 0.0)
        else:
            offset = s.xipos[w, b] - s.com[w, tree.body_rootid[b]]
            tr = wp.vec2(0.0, 0.0)
            for row in range(6):
                clear(s.vec, w)
                d = last
                while d >= 0:
                    cdof = s.cdof[w, d]
                    ang = wp.spatial_top(cdof)
                    if row < 3:
                        lin = wp.spatial_bottom(cdof) + wp.cross(ang, offset)
                        s.vec[w, d] = lin[row]
                    else:
                        s.vec[w, d] = ang[row - 3]
                    d = tree.dof_parentid[d]
                q = half_solve(tree, s.factor, s.vec, w)
                if row < 3:
                    tr[0] = tr[0] + q
                else:
                    tr[1] = tr[1] + q
            out.body_invweight0[w, b] = tr / 3.0

    # dof_invweight0: diagonal of M^-1, averaged over a free joint's halves, a ball's dofs
    for j in range(njnt):
        d = tree.jnt_dofadr[j]
        jtype = tree.jnt_type[j]
        b = tree.jnt_bodyid[j]
        if tree.body_simple[b] == 2:
            out.dof_invweight0[w, d] = 1.0 / wp.max(MINVAL, model.body_mass[mass_w, b])
        else:
            num = 1
            if jtype == JNT_FREE:
                num = 6
            elif jtype == JNT_BALL:
                num = 3
            diag = wp.vec2(0.0, 0.0)
            for k in range(num):
                clear(s.vec, w)
                s.vec[w, d + k] = 1.0
                q = half_solve(tree, s.factor, s.vec, w)
                if k < 3:
                    diag[0] = diag[0] + q
                else:
                    diag[1] = diag[1] + q
            if num == 1:
                out.dof_invweight0[w, d] = diag[0]
            else:
                for k in range(num):
                    out.dof_invweight0[w, d + k] = wp.where(k < 3, diag[0], diag[1]) / 3.0

    # tendon_invweight0: J M^-1 J' of each (fixed) tendon
    for t in range(tree.ten_wrapadr.shape[0]):
        clear(s.vec, w)
        tendon_jacobian(tree, s.vec, w, t, 1.0)
        out.tendon_invweight0[w, t] = half_solve(tree, s.factor, s.vec, w)

    # actuator_acc0: |M^-1 moment| (mj_solveLD: L'^-1, D^-1, L^-1)
    gear_w = w % model.actuator_gear.shape[0]
    for u in range(tree.act_dof.shape[0]):
        clear(s.vec, w)
        gear = model.actuator_gear[gear_w, u][0]
        if tree.act_dof[u] >= 0:
            s.vec[w, tree.act_dof[u]] = gear
        else:
            tendon_jacobian(tree, s.vec, w, tree.act_ten[u], gear)
        half_solve(tree, s.factor, s.vec, w)
        for k in range(nv):
            s.vec[w, k] = s.vec[w, k] / s.factor[w, tree.dof_rowadr[k]]
        norm = float(0.0)
        for k in range(nv):
            r = tree.dof_rowadr[k]
            x = s.vec[w, k]
            for p in range(1, tree.dof_rownum[k]):
                x = x - s.factor[w, r + p] * s.vec[w, tree.dof_anc[r + p]]
            s.vec[w, k] = x
            norm += x * x
        out.actuator_acc0[w, u] = wp.sqrt(norm)
    changed[w] = False


@wp.kernel
def mark_changed(mask: wp.array(dtype=wp.bool), changed: wp.array(dtype=wp.bool)):
    """``changed[i] |= mask[i]`` (one thread per world): a write's worlds join those whose
    constants the next ``set_const`` launch recomputes."""
    i = wp.tid()
    if mask[i]:
        changed[i] = True
