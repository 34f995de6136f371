"""The masked recompute of mass-derived model constants (``gpuparam.kernels.setconst``)
against MuJoCo C's ``mj_setConst`` and MuJoCo Warp's ``set_const``, on random masses,
inertias, centres of mass, armature and ``qpos0``: the masked worlds within rtol 1e-4 of
both, the others bit for bit unchanged; unsupported models refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")
import mujoco  # noqa: E402
import mujoco_warp as mjw  # noqa: E402

from gpuparam.envs.mujoco.g1_model import load_g1  # noqa: E402
from gpuparam.envs.mujoco.go1_model import load_go1  # noqa: E402
from gpuparam.envs.mujoco.model import load_model  # noqa: E402
from gpuparam.envs.mujoco.setconst import DERIVED, MaskedSetConst, unsupported  # noqa: E402

MODELS = {
    "go1": lambda: load_go1("flat"),
    "g1": lambda: load_g1("flat"),
    "ant": lambda: load_model("ant.xml"),
    "humanoid": lambda: load_model("humanoid.xml", solver=int(mujoco.mjtSolver.mjSOL_NEWTON)),
    "reacher": lambda: load_model("reacher.xml"),  # a body of slide joints only (simple)
}
FIELDS = ("body_mass", "body_inertia", "body_ipos", "dof_armature", "qpos0")
MASK = torch.tensor([True, False, True, False])
N = MASK.shape[0]


def _random_fields(mjm: mujoco.MjModel, seed: int) -> dict[str, np.ndarray]:
    """Per world: masses and inertias x U(0.7, 1.3), centres of mass moved by U(-3, 3) cm
    (not a body without rotations'),
    armature x U(0.5, 1.5) + U(0, 0.01), hinge and slide qpos0 + U(-0.3, 0.3) (float32)."""
    rng = np.random.default_rng(seed)
    out = {}
    for f in FIELDS:
        v = np.stack([getattr(mjm, f)] * N).astype(np.float64)
        if f in ("body_mass", "body_inertia"):
            v = v * rng.uniform(0.7, 1.3, v.shape)
        elif f == "body_ipos":  # (MuJoCo C refuses to move a simple body's: reacher's)
            v = v + rng.uniform(-0.03, 0.03, v.shape) * (mjm.body_simple != 2)[:, None]
        elif f == "dof_armature":
            v = v * rng.uniform(0.5, 1.5, v.shape) + rng.uniform(0.0, 0.01, v.shape)
        else:  # qpos0 of 1-dof joints
            jt = mujoco.mjtJoint
            hinge = np.isin(mjm.jnt_type, (jt.mjJNT_HINGE, jt.mjJNT_SLIDE))
            adr = mjm.jnt_qposadr[hinge]
            v[:, adr] += rng.uniform(-0.3, 0.3, (N, adr.size))
        out[f] = v.astype(np.float32)
    return out


def _put(mjm: mujoco.MjModel, values: dict[str, np.ndarray]):
    m = mjw.put_model(mjm, batch_sizes={f: N for f in (*FIELDS, *DERIVED)})
    for f, v in values.items():
        getattr(m, f).assign(wp.array(v, dtype=getattr(m, f).dtype))
    return m


@pytest.mark.parametrize("name", list(MODELS))
def test_masked_recompute_matches_mujoco_c_and_mujoco_warp(name):
    mjm = MODELS[name]()
    assert unsupported(mjm) is None
    values = _random_fields(mjm, seed=len(name))
    with wp.ScopedDevice("cpu"):
        m = _put(mjm, values)
        before = {f: getattr(m, f).numpy().copy() for f in DERIVED}
        mask = MASK.clone()
        MaskedSetConst(mjm, m, N, mask, torch.device("cpu")).launch()
        # MuJoCo Warp's set_const on a twin with the same fields (all worlds)
        twin = _put(mjm, values)
        mjw.set_const(twin, mjw.make_data(mjm, nworld=N), groups=int(mjw.SetConstGroup.FIXED
                      | mjw.SetConstGroup.INERT0), restore=False)
    for w in range(N):
        for f in DERIVED:
            ours = getattr(m, f).numpy()[w]
            if not MASK[w]:
                assert np.array_equal(ours, before[f][w]), (w, f)  # bit for bit
                continue
            theirs = getattr(twin, f).numpy()[w]
            # MuJoCo C gives a body without rotations (body_simple 2) 1/mass, 0 and its
            # dofs 1/mass; MuJoCo Warp computes them in general: compared with C only
            keep = {"body_invweight0": mjm.body_simple != 2,
                    "dof_invweight0": mjm.body_simple[mjm.dof_bodyid] != 2}.get(f, ...)
            if f != "tendon_invweight0" or mjm.ntendon:
                np.testing.assert_allclose(ours[keep], theirs[keep], rtol=1e-4, atol=1e-7,
                                           err_msg=f"{name} {f} vs mjw")
    for w in np.flatnonzero(MASK.numpy()):
        ref = MODELS[name]()
        for f, v in values.items():
            getattr(ref, f)[:] = v[w]
        mujoco.mj_setConst(ref, mujoco.MjData(ref))
        for f in DERIVED:
            ours = getattr(m, f).numpy()[w]
            np.testing.assert_allclose(ours, getattr(ref, f).reshape(ours.shape), rtol=1e-4,
                                       atol=1e-7, err_msg=f"{name} {f} vs MuJoCo C")
        # and the recompute moved them: the random change is visible
        assert not np.allclose(m.dof_invweight0.numpy()[w], before["dof_invweight0"][w])


def test_recompute_is_idempotent_and_each_world_independent():
    """A world's result depends on its own fields only: recomputing world 0 alone gives
    the bits world 0 got with the others (and again the same bits)."""
    mjm = MODELS["go1"]()
    values = _random_fields(mjm, seed=7)
    with wp.ScopedDevice("cpu"):
        m = _put(mjm, values)
        mask = torch.ones(N, dtype=torch.bool)
        sc = MaskedSetConst(mjm, m, N, mask, torch.device("cpu"))
        sc.launch()
        assert not mask.any()  # consumed
        first = {f: getattr(m, f).numpy().copy() for f in DERIVED}
        mask.copy_(torch.tensor([True, False, False, False]))  # the bound launch reads it
        for f in DERIVED:
            getattr(m, f).fill_(0)
        sc.launch()
    for f in DERIVED:
        got = getattr(m, f).numpy()
        assert np.array_equal(got[0], first[f][0]), f
        assert not got[1:].any(), f  # outside the mask: not written


SITE_ACTUATOR = """
<mujoco><worldbody><body><joint type="hinge"/><geom size="0.1"/><site name="s"/></body>
</worldbody><actuator><general site="s" gear="1 0 0 0 0 0"/></actuator></mujoco>"""
SPATIAL_TENDON = """
<mujoco><worldbody><site name="a"/><body><joint type="slide"/><geom size="0.1"/>
<site name="b"/></body></worldbody><tendon><spatial><site site="a"/><site site="b"/>
</spatial></tendon></mujoco>"""


@pytest.mark.parametrize("xml, why", [(SITE_ACTUATOR, "transmission"),
                                      (SPATIAL_TENDON, "spatial tendons")])
def test_unsupported_models_are_named_and_refused(xml, why):
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert why in unsupported(mjm)
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm, batch_sizes={f: 2 for f in DERIVED})
    with pytest.raises(ValueError, match="mjw.set_const"):
        MaskedSetConst(mjm, m, 2, torch.ones(2, dtype=torch.bool), torch.device("cpu"))


def test_shared_derived_fields_are_refused():
    mjm = MODELS["ant"]()
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm, batch_sizes={"body_mass": 2})
    with pytest.raises(ValueError, match="per world"):
        MaskedSetConst(mjm, m, 2, torch.ones(2, dtype=torch.bool), torch.device("cpu"))
