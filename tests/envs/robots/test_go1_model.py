"""The shipped Unitree Go1 model (``gpuparam/envs/mujoco/assets/go1``): compiles from the
package alone, is Playground's feet-only variant (12 actuated joints, 12.743 kg, only the
feet and the floor collide, keyframe ``home``), steps in MuJoCo Warp on CPU, and simulates
what envpool's port of Playground's task simulates (``tests/fixtures/go1_envpool_*.npz``,
recorded by ``tests/fixtures/record_go1_envpool.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gpuparam.envs.mujoco.go1_model import ASSET_DIR, FEET, go1_spec, load_go1  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOME = np.array([0.1, 0.9, -1.8, -0.1, 0.9, -1.8, 0.1, 0.9, -1.8, -0.1, 0.9, -1.8])
JOINTS = tuple(f"{leg}_{part}_joint" for leg in FEET for part in ("hip", "thigh", "calf"))


@pytest.mark.parametrize("terrain", ["flat", "rough"])
def test_model_is_playgrounds_feet_only_go1(terrain):
    mjm = load_go1(terrain)
    # 12 position actuators on the 12 hinge joints, in Playground's order (FR, FL, RR, RL)
    assert mjm.nu == 12 and mjm.nq == 19 and mjm.nv == 18
    assert mjm.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    joints = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, int(j))
              for j in mjm.actuator_trnid[:, 0]]
    assert tuple(joints) == JOINTS
    assert (mjm.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT).all()
    np.testing.assert_array_equal(mjm.actuator_gainprm[:, 0], 35.0)  # Kp
    np.testing.assert_array_equal(mjm.actuator_biasprm[:, 1], -35.0)
    np.testing.assert_array_equal(mjm.dof_damping[6:], 0.5)  # Kd
    np.testing.assert_allclose(mjm.body_mass.sum(), 12.743448, rtol=0, atol=1e-9)
    # Playground's options (XML) and ccd_iterations (set by its base.py)
    assert (mjm.opt.timestep, mjm.opt.iterations, mjm.opt.ls_iterations) == (0.004, 1, 5)
    assert mjm.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    assert mjm.opt.ccd_iterations == 20
    assert mjm.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_EULERDAMP
    # no visual meshes; colliding geoms: the floor and the 4 foot spheres
    assert mjm.nmesh == 0 and not (mjm.geom_type == mujoco.mjtGeom.mjGEOM_MESH).any()
    colliding = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(mjm.ngeom)
                 if mjm.geom_contype[g] or mjm.geom_conaffinity[g]]
    assert sorted(colliding) == sorted(("floor",) + FEET)
    for foot in FEET:
        g = mjm.geom(foot)
        assert g.type[0] == mujoco.mjtGeom.mjGEOM_SPHERE and g.size[0] == 0.023
        assert (g.contype[0], g.conaffinity[0]) == (0, 1)
        assert mjm.site(foot).id >= 0
    floor = mjm.geom("floor")
    assert (floor.contype[0], floor.conaffinity[0]) == (1, 0)
    if terrain == "flat":
        assert floor.type[0] == mujoco.mjtGeom.mjGEOM_PLANE and floor.friction[0] == 0.6
    else:
        assert floor.type[0] == mujoco.mjtGeom.mjGEOM_HFIELD and floor.friction[0] == 1.0
        assert (mjm.hfield_nrow[0], mjm.hfield_ncol[0]) == (256, 256)
        np.testing.assert_array_equal(mjm.hfield_size[0], [10.0, 10.0, 0.05, 1.0])
        assert 0.0 <= mjm.hfield_data.min() < mjm.hfield_data.max() <= 1.0
    # the reset pose
    key = mjm.key("home")
    z = {"flat": 0.278, "rough": 0.35}[terrain]
    np.testing.assert_array_equal(key.qpos, np.r_[0.0, 0.0, z, 1.0, 0.0, 0.0, 0.0, HOME])
    np.testing.assert_array_equal(key.ctrl, HOME)


def test_assets_are_self_contained_and_licensed():
    files = {p.relative_to(ASSET_DIR).as_posix() for p in ASSET_DIR.rglob("*") if p.is_file()}
    assert files == {"LICENSE", "NOTICE", "go1_mjx_feetonly.xml", "sensor_feet.xml",
                     "scene_mjx_feetonly_flat_terrain.xml",
                     "scene_mjx_feetonly_rough_terrain.xml", "assets/hfield.png",
                     # Getup / Handstand / Footstand (go1_tasks_model.py)
                     "go1_mjx.xml", "go1_mjx_fullcollisions.xml", "sensor_fullcollision.xml",
                     "scene_mjx_flat_terrain.xml", "scene_mjx_fullcollisions_flat_terrain.xml"}
    assert "BSD 3-Clause" in (ASSET_DIR / "LICENSE").read_text()
    assert "Apache License 2.0" in (ASSET_DIR / "NOTICE").read_text()
    for xml in ASSET_DIR.glob("*.xml"):
        assert ".stl" not in xml.read_text().lower(), xml.name


def test_bad_terrain_names_what_is_expected():
    expected = r"terrain: expected one of \('flat', 'rough'\), got 'hilly'"
    with pytest.raises(ValueError, match=expected):
        load_go1("hilly")
    with pytest.raises(ValueError, match="got 'Flat'"):
        go1_spec("Flat")


@pytest.mark.parametrize("terrain", ["flat", "rough"])
def test_one_step_in_mujoco_c_matches_envpool(terrain):
    """MuJoCo C (float64) on the shipped model, from each recorded state (float32) with the
    recorded action, lands on envpool's next state (envpool: MuJoCo 3.6 on Playground's
    original files). Flat: float32 rounding of the start state only (seen: 3e-5 in qvel);
    rough: the heightfield contacts amplify it at some steps (seen: p95 2e-3, max 5e-2)."""
    f = np.load(FIXTURES / f"go1_envpool_{terrain}.npz")
    meta = json.loads(str(f["meta"]))
    mjm = load_go1(terrain)
    d = mujoco.MjData(mjm)
    default = mjm.key("home").qpos[7:]
    errs = []
    for i, scenario in enumerate(f["scenario"]):
        scale = meta["scenarios"][str(scenario)]["config"]["action_scale"]
        for t in np.nonzero(f["valid"][:, i])[0]:
            d.qpos[:], d.qvel[:] = f["qpos"][t, i], f["qvel"][t, i]
            d.qacc_warmstart[:] = f["qacc_warmstart"][t, i]
            d.ctrl[:] = default + f["action"][t, i].astype(np.float64) * scale
            for _ in range(5):  # ctrl_dt / sim_dt
                mujoco.mj_step(mjm, d)
            errs.append(max(np.abs(d.qpos - f["qpos"][t + 1, i]).max(),
                            np.abs(d.qvel - f["qvel"][t + 1, i]).max()))
            np.testing.assert_allclose(d.sensordata, f["sensordata"][t, i], rtol=0,
                                       atol=1e-3 if terrain == "flat" else 1.0)
    errs = np.array(errs)
    assert errs.size > 400
    if terrain == "flat":
        assert errs.max() < 1e-3, errs.max()
    else:
        assert np.percentile(errs, 50) < 1e-4 and np.percentile(errs, 95) < 1e-2, errs
        assert errs.max() < 0.5, errs.max()


@pytest.mark.parametrize("terrain", ["flat", "rough"])
def test_steps_in_mujoco_warp_on_cpu(terrain):
    mjw = pytest.importorskip("mujoco_warp")
    import warp as wp

    mjm = load_go1(terrain)
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow = 0  # Playground's 1 solver iteration is by design
        d = mjw.make_data(mjm, nworld=2, nconmax=16, njmax=64)
        key = mjm.key("home")
        d.qpos.assign(np.tile(key.qpos, (2, 1)).astype(np.float32))
        d.ctrl.assign(np.tile(key.ctrl, (2, 1)).astype(np.float32))
        for _ in range(25):  # 0.1 s
            mjw.step(m, d)
        qpos = d.qpos.numpy()
    assert np.isfinite(qpos).all()
    np.testing.assert_array_equal(qpos[0], qpos[1])  # same start, same physics
    assert 0.2 < qpos[0, 2] < 0.4  # standing, not fallen through the floor
    # the same 25 steps in MuJoCo C (float64); on the heightfield the engines' contact sets
    # differ by design (MuJoCo Warp keeps at most 4 contacts per geom pair, MuJoCo C 50)
    dc = mujoco.MjData(mjm)
    dc.qpos[:], dc.ctrl[:] = key.qpos, key.ctrl
    for _ in range(25):
        mujoco.mj_step(mjm, dc)
    np.testing.assert_allclose(qpos[0], dc.qpos, rtol=0, atol=2e-3 if terrain == "flat" else 2e-2)


def test_one_step_in_mujoco_warp_matches_envpool_at_most_steps():
    """MuJoCo Warp (float32) from the recorded flat states. With Playground's solver
    settings (1 iteration, 5 line-search iterations) the unconverged solve makes MuJoCo Warp
    and MuJoCo C part at some steps (a contact made or broken, a joint's frictionloss
    switching: seen at about 1 step in 4, up to 5 rad/s in one joint velocity; with 50
    iterations they agree to 1e-5); most steps agree to float32 round-off."""
    mjw = pytest.importorskip("mujoco_warp")
    import warp as wp

    f = np.load(FIXTURES / "go1_envpool_flat.npz")
    meta = json.loads(str(f["meta"]))
    mjm = load_go1("flat")
    n = f["valid"].shape[1]
    scale = np.array([meta["scenarios"][str(s)]["config"]["action_scale"]
                      for s in f["scenario"]], np.float32)
    default = mjm.key("home").qpos[7:].astype(np.float32)
    errs = []
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow = 0
        d = mjw.make_data(mjm, nworld=n, nconmax=16, njmax=64)
        for t in range(40):
            ok = f["valid"][t]
            d.qpos.assign(f["qpos"][t])
            d.qvel.assign(f["qvel"][t])
            d.qacc_warmstart.assign(f["qacc_warmstart"][t])
            d.ctrl.assign(default + f["action"][t] * scale[:, None])
            for _ in range(5):
                mjw.step(m, d)
            e = np.abs(d.qvel.numpy() - f["qvel"][t + 1]).max(1)
            errs.extend(e[ok].tolist())
    errs = np.array(errs)
    assert errs.size > 250
    assert np.median(errs) < 1e-4, np.median(errs)
    assert (errs < 1e-3).mean() > 0.6, (errs < 1e-3).mean()
