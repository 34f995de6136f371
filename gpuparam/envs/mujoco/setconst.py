"""MuJoCo's mass-derived model constants recomputed for the worlds of a mask, in one launch
(``gpuparam.kernels.setconst``), instead of ``mjw.set_const`` over every world (one
triangular-solve launch per dof, per body Jacobian row and per actuator: 343 launches for
Go1).

Covered: models whose joints are free, ball, hinge or slide; tendons (if any) fixed, without
armature; actuators with joint (hinge or slide) or tendon transmissions, without actuator
armature; no mocap bodies, no flexes. :func:`unsupported` names what a model has beyond
that (``mjw.set_const`` stays its fallback). Computed: ``body_subtreemass``,
``body_invweight0``, ``dof_invweight0``, ``tendon_invweight0`` and ``actuator_acc0``, from
``body_mass``, ``body_inertia``, ``body_ipos``, ``body_iquat``, ``dof_armature``,
``actuator_gear``, ``qpos0``, ``body_pos``, ``body_quat``, ``jnt_pos`` and ``jnt_axis`` (each
shared or per world).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
import warp as wp

from gpuparam._launch import BoundLaunch
from gpuparam.kernels import setconst as ksetconst

# the model fields the kernel writes; each must be per world (one row per world)
DERIVED = ("body_subtreemass", "body_invweight0", "dof_invweight0", "tendon_invweight0",
           "actuator_acc0")
_INPUTS = ("qpos0", "body_pos", "body_quat", "body_ipos", "body_iquat", "body_mass",
           "body_inertia", "jnt_pos", "jnt_axis", "dof_armature", "actuator_gear")


def unsupported(mjm: mujoco.MjModel) -> str | None:
    """Why :class:`MaskedSetConst` does not cover ``mjm`` (a sentence), or None."""
    trn, wrap = mujoco.mjtTrn, mujoco.mjtWrap
    if mjm.nmocap:
        return "mocap bodies"
    if mjm.nflex:
        return "flexes"
    if mjm.ntendon and (mjm.wrap_type[: mjm.nwrap] != int(wrap.mjWRAP_JOINT)).any():
        return "spatial tendons"
    if mjm.ntendon and np.any(mjm.tendon_armature):
        return "tendon armature"
    if mjm.nu and np.any(getattr(mjm, "actuator_armature", np.zeros(1))):
        return "actuator armature"
    for u in range(mjm.nu):
        t = int(mjm.actuator_trntype[u])
        if t in (int(trn.mjTRN_JOINT), int(trn.mjTRN_JOINTINPARENT)):
            jtype = int(mjm.jnt_type[mjm.actuator_trnid[u, 0]])
            if jtype not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                return f"actuator {u} drives a free or ball joint"
        elif t != int(trn.mjTRN_TENDON):
            return f"actuator {u}'s transmission (type {t}) is not a joint or tendon"
    return None


def _tree(mjm: mujoco.MjModel, device: wp.context.Device) -> ksetconst.Tree:
    """The kernel's static topology of ``mjm`` (see ``ksetconst.Tree``)."""
    nv = mjm.nv
    rowadr, rownum, anc = np.zeros(nv, np.int32), np.zeros(nv, np.int32), []
    for k in range(nv):
        rowadr[k] = len(anc)
        d = k
        while d >= 0:
            anc.append(d)
            d = int(mjm.dof_parentid[d])
        rownum[k] = len(anc) - rowadr[k]
    lastdof = np.full(mjm.nbody, -1, np.int32)
    for b in range(1, mjm.nbody):
        i = b
        while i > 0 and mjm.body_dofnum[i] == 0:
            i = int(mjm.body_parentid[i])
        if i > 0:
            lastdof[b] = mjm.body_dofadr[i] + mjm.body_dofnum[i] - 1
    act_dof = np.full(mjm.nu, -1, np.int32)
    act_ten = np.full(mjm.nu, -1, np.int32)
    for u in range(mjm.nu):
        if int(mjm.actuator_trntype[u]) == int(mujoco.mjtTrn.mjTRN_TENDON):
            act_ten[u] = mjm.actuator_trnid[u, 0]
        else:
            act_dof[u] = mjm.jnt_dofadr[mjm.actuator_trnid[u, 0]]
    wrapadr = mjm.tendon_adr[: mjm.ntendon]
    wrapnum = mjm.tendon_num[: mjm.ntendon]
    wrap_dof = mjm.jnt_dofadr[mjm.wrap_objid[: mjm.nwrap]] if mjm.ntendon else np.zeros(0)
    wrap_coef = mjm.wrap_prm[: mjm.nwrap] if mjm.ntendon else np.zeros(0)

    def ints(a) -> wp.array:
        return wp.array(np.asarray(a, np.int32).reshape(-1), dtype=int, device=device)

    t = ksetconst.Tree()
    for name in ("body_parentid", "body_rootid", "body_weldid", "body_simple", "body_jntadr",
                 "body_jntnum", "jnt_type", "jnt_qposadr", "jnt_dofadr", "jnt_bodyid",
                 "dof_bodyid", "dof_parentid"):
        setattr(t, name, ints(getattr(mjm, name)))
    t.body_lastdof, t.dof_rowadr, t.dof_rownum = ints(lastdof), ints(rowadr), ints(rownum)
    t.dof_anc, t.act_dof, t.act_ten = ints(anc), ints(act_dof), ints(act_ten)
    t.ten_wrapadr, t.ten_wrapnum, t.wrap_dof = ints(wrapadr), ints(wrapnum), ints(wrap_dof)
    t.wrap_coef = wp.array(np.asarray(wrap_coef, np.float32), dtype=float, device=device)
    return t


class MaskedSetConst:
    """The derived constants of ``m`` (an ``mjw.Model`` put from ``mjm`` with every field of
    :data:`DERIVED` per world, ``nworld`` rows) recomputed, for the worlds of a mask, by
    :meth:`launch`. Temporaries are allocated here, once: per world ``13 nbody + 6 njnt +
    8 nv + nnz`` floats (``nnz``: the sum over dofs of 1 + its ancestors; Go1: about 1 KB).
    ``ValueError`` for a model :func:`unsupported` refuses or a shared derived field.

    Args:
        mjm: the host model ``m`` was put from.
        m: the ``mjw.Model``.
        nworld: N.
        changed: bool ``[N]`` on the model's device: the worlds the bound launch recomputes
            (read at every launch, so a buffer the caller fills; each world's entry is
            cleared once it is recomputed).
        device: the torch device of ``mask``.
    """

    def __init__(self, mjm: mujoco.MjModel, m, nworld: int, changed: torch.Tensor,
                 device: torch.device):
        why = unsupported(mjm)
        if why is not None:
            raise ValueError(f"MaskedSetConst: the model has {why} (use mjw.set_const)")
        shared = [f for f in DERIVED  # (a field of no elements is never written)
                  if getattr(m, f).shape[0] != nworld and getattr(m, f).size]
        if shared:
            raise ValueError(f"MaskedSetConst: expected {shared} per world ({nworld} rows; "
                             "put_model's batch_sizes), got shared fields")
        dev = m.body_mass.device
        n, nb, nj, nv = nworld, mjm.nbody, mjm.njnt, mjm.nv
        self.tree = _tree(mjm, dev)
        model = ksetconst.Inertial()
        for f in _INPUTS:
            setattr(model, f, getattr(m, f))
        s = ksetconst.Scratch()
        nnz = int(self.tree.dof_anc.shape[0])
        for name, shape, dtype in (
            ("xpos", (n, nb), wp.vec3), ("xquat", (n, nb), wp.quat), ("xipos", (n, nb), wp.vec3),
            ("com", (n, nb), wp.vec3), ("crb", (n, nb), ksetconst.vec10),
            ("xanchor", (n, nj), wp.vec3), ("xaxis", (n, nj), wp.vec3),
            ("cdof", (n, nv), wp.spatial_vector), ("factor", (n, max(nnz, 1)), float),
            ("vec", (n, max(nv, 1)), float),
        ):
            setattr(s, name, wp.zeros(shape, dtype=dtype, device=dev))
        out = ksetconst.Derived()
        for f in DERIVED:
            setattr(out, f, getattr(m, f))
        self.model, self.scratch, self.out = model, s, out
        self.changed = changed
        self._launch = BoundLaunch(ksetconst.set_const, n,
                                   inputs=[self.tree, model, wp.from_torch(changed)],
                                   outputs=[s, out], device=device)

    def launch(self) -> None:
        """Recompute the worlds of ``changed`` and clear it (one launch on the current Warp
        stream scope's stream; device work only)."""
        self._launch.launch()
