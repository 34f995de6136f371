"""MuJoCo Playground's randomization on Go1 and G1 (``legged.py``): the parameters
``dof_frictionloss``, ``joint_offset`` (MuJoCo's ``qpos0``), ``body_ipos`` and
``added_mass`` reach the per-world model fields they name, for the masked worlds only; a
joint offset moves the kinematics but not the reset or default pose and nothing
``set_const`` derives; ``playground_randomization`` draws within ``randomize.py``'s ranges,
the same for env ``i`` whatever ``num_envs``; bad input is refused by name.

(Masked writes leaving every output of the other envs bit-identical over steps: the
``NEW_PARAMS`` / ``PARAMS`` lists of ``test_go1_recipe.py`` and ``test_g1_recipe.py``.)"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp

mujoco = pytest.importorskip("mujoco")
mjw = pytest.importorskip("mujoco_warp")

GO1, G1 = "Go1JoystickFlatTerrain-v1", "G1JoystickFlatTerrain-v1"
N = 4
MASK = torch.tensor([False, True, False, True])


def _env(name: str, n: int = N, **kw):
    return gp.make(name, n, device="cpu", seed=11, **kw)


def _field(env, name: str) -> torch.Tensor:
    return wp.to_torch(getattr(env.backend.m, name)).clone()


def _f32(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


@pytest.fixture(scope="module", params=[GO1, G1])
def env(request):
    return _env(request.param)


def test_each_parameter_writes_its_model_field_for_the_masked_worlds_only(env):
    mjm, backend = env.mjm, env.backend
    env.params.reset_to_default()
    env.reset()  # (commits the write above: every world's derived constants recomputed)
    before = {f: _field(env, f) for f in ("dof_frictionloss", "qpos0", "body_ipos",
                                          "body_mass", "body_invweight0", "dof_invweight0",
                                          "body_subtreemass")}
    # defaults: the model's values, float32
    assert torch.equal(before["dof_frictionloss"], _f32(mjm.dof_frictionloss).expand(N, -1))
    assert torch.equal(before["qpos0"], _f32(mjm.qpos0).expand(N, -1))
    assert torch.equal(before["body_ipos"], _f32(mjm.body_ipos).expand(N, -1, -1))
    assert torch.equal(before["body_mass"], _f32(mjm.body_mass).expand(N, -1))

    fl = torch.linspace(0.1, 0.9, mjm.nv)
    off = torch.linspace(-0.04, 0.04, mjm.nu)
    ipos = torch.linspace(-0.05, 0.05, 3 * (mjm.nbody - 1)).reshape(mjm.nbody - 1, 3)
    env.params.set({"dof_frictionloss": fl, "joint_offset": off, "body_ipos": ipos,
                    "added_mass": 0.75}, mask=MASK)
    env.reset(~MASK)  # the derived constants follow at the next reset's (or step's) commit
    after = {f: _field(env, f) for f in before}
    for f, v in after.items():  # the unmasked worlds' model: bit for bit
        assert torch.equal(v[~MASK], before[f][~MASK]), f
    assert torch.equal(after["dof_frictionloss"][MASK], fl.expand(2, -1))
    qadr = mjm.jnt_qposadr[mjm.actuator_trnid[:, 0]]
    want = _f32(mjm.qpos0).clone()
    want[qadr] = want[qadr] + off
    assert torch.equal(after["qpos0"][MASK], want.expand(2, -1))  # the base's 7: the model's
    assert torch.equal(after["body_ipos"][MASK][:, 1:], ipos.expand(2, -1, -1))
    assert torch.equal(after["body_ipos"][MASK][:, 0], before["body_ipos"][MASK][:, 0])
    mass = _f32(mjm.body_mass).clone()
    mass[backend.torso] = mass[backend.torso] + 0.75
    assert torch.equal(after["body_mass"][MASK], mass.expand(2, -1))
    # the derived constants followed for the masked worlds (subtree masses, inertia at qpos0)
    assert torch.allclose(after["body_subtreemass"][MASK][:, 0],
                          before["body_subtreemass"][MASK][:, 0] + 0.75)
    assert not torch.equal(after["body_invweight0"][MASK], before["body_invweight0"][MASK])
    # base_com_offset still adds to the base's centre of mass, body_ipos to every body's
    env.params.set("base_com_offset", [0.01, -0.02, 0.03], mask=MASK)
    b = backend.base
    got = _field(env, "body_ipos")[MASK][:, b]
    assert torch.equal(got, (ipos[b - 1] + torch.tensor([0.01, -0.02, 0.03])).expand(2, 3))
    env.params.reset_to_default()
    env.reset(~MASK)
    for f, v in before.items():  # back to the defaults: the model's values again (the
        # masked worlds' derived constants by the masked recompute: within float32 round-off
        # of mjw.set_const's at construction)
        assert torch.allclose(_field(env, f), v, rtol=1e-4, atol=1e-7), f


def test_derived_constants_match_mujoco_c(env):
    """The derived fields of a centre-of-mass and added-mass write, against MuJoCo C's
    ``mj_setConst`` on the same model (MuJoCo Warp computes in float32)."""
    mjm = env.mjm
    env.params.reset_to_default()
    dipos = np.array([0.03, -0.02, 0.04])
    torso = env.backend.torso
    ipos = env.params.spec["body_ipos"].default_tensor().reshape(-1, 3).clone()
    ipos[torso - 1] += torch.tensor(dipos, dtype=torch.float32)
    env.params.set({"body_ipos": ipos, "added_mass": -0.6}, mask=MASK)
    env.reset(~MASK)  # the derived constants follow at the next commit
    ref = copy.copy(mjm)
    ref.body_ipos[1:] = ipos.double().numpy()
    ref.body_mass[torso] += -0.6
    mujoco.mj_setConst(ref, mujoco.MjData(ref))
    for f in ("body_subtreemass", "body_invweight0", "dof_invweight0"):
        got = _field(env, f)[1].double().numpy()
        np.testing.assert_allclose(got, getattr(ref, f), rtol=2e-4, atol=1e-6, err_msg=f)
        unmasked = _field(env, f)[0].double().numpy()
        assert not np.allclose(unmasked, getattr(ref, f), rtol=1e-6, atol=0), f
    env.params.reset_to_default()


def test_joint_offset_is_playgrounds_qpos0_jitter():
    """A joint offset ``d`` shifts the joint's zero: the links sit at qpos ``q`` as they sit
    at ``q - d`` without it (MuJoCo's kinematics rotate a hinge by ``qpos - qpos0``); the
    reset's joint angles (the keyframe's) and the task's default pose do not move, as in
    Playground, whose reset and default pose read the keyframe."""
    env = _env(GO1, 2)
    off = torch.linspace(-0.05, 0.05, 12)
    env.params.set("joint_offset", off, mask=torch.tensor([True, False]))
    env.reset()
    qpos = env.state["qpos"]
    assert torch.equal(qpos[0, 7:], qpos[1, 7:])  # the reset pose: the keyframe's, both
    home = _f32(env.mjm.key("home").qpos[7:])
    assert torch.equal(qpos[0, 7:], home)
    # world 1 at q - d without an offset: the same link poses as world 0 at q with it
    m, d = env.backend.m, env.backend.d
    q = wp.to_torch(d.qpos)
    q[1] = q[0]
    q[1, 7:] = q[0, 7:] - off
    mjw.kinematics(m, d)
    xpos, xquat = wp.to_torch(d.xpos), wp.to_torch(d.xquat)
    assert torch.allclose(xpos[0], xpos[1], atol=1e-6)
    assert torch.allclose(xquat[0], xquat[1], atol=1e-6)
    assert not torch.allclose(xpos[0, 2:], _kinematics_without_offset(env, q[0]), atol=1e-3)


def _kinematics_without_offset(env, q: torch.Tensor) -> torch.Tensor:
    """Body positions 2.. of MuJoCo C at ``q`` with the model's ``qpos0``."""
    data = mujoco.MjData(env.mjm)
    data.qpos[:] = q.double().numpy()
    mujoco.mj_kinematics(env.mjm, data)
    return torch.as_tensor(data.xpos[2:], dtype=torch.float32)


@pytest.mark.parametrize("name", [GO1, G1])
def test_a_joint_offset_changes_nothing_set_const_computes(name):
    """Why ``joint_offset`` marks no world for the recompute: MuJoCo C's ``mj_setConst`` with
    ``qpos0`` shifted on every actuated joint gives the same derived fields, bit for bit
    (at ``qpos = qpos0`` each hinge sits at its modelled pose whatever ``qpos0`` is)."""
    env = _env(name, 1)
    assert env.mjm.ntendon == 0  # (with tendons a joint offset marks its worlds)
    ref, moved = copy.copy(env.mjm), copy.copy(env.mjm)
    moved.qpos0[7:] += np.linspace(-0.05, 0.05, moved.nq - 7)
    for mm in (ref, moved):
        mujoco.mj_setConst(mm, mujoco.MjData(mm))
    for f in ("body_subtreemass", "body_invweight0", "dof_invweight0", "actuator_acc0"):
        np.testing.assert_array_equal(getattr(moved, f), getattr(ref, f), err_msg=f)


def test_added_mass_keeps_the_torso_mass_positive():
    env = _env(GO1, 2)
    torso = env.backend.torso
    m = env.params["body_mass"][0].clone()
    m[torso - 1] = 0.5
    env.params.set({"body_mass": m, "added_mass": -1.0}, mask=torch.tensor([True, False]))
    mass = _field(env, "body_mass")
    assert mass[0, torso].item() == pytest.approx(1e-6)
    assert mass[1, torso].item() == np.float32(env.mjm.body_mass[torso])


def _recipe_env(name: str, n: int, on: str = "startup"):
    env = _env(name, n)
    env.randomize(*env.playground_randomization(on=on))
    env.reset()
    return env


@pytest.mark.parametrize("name", [GO1, G1])
def test_recipe_draws_are_the_same_for_env_i_whatever_num_envs(name):
    small, large = _recipe_env(name, 2, on="reset"), _recipe_env(name, 4, on="reset")
    for p in ("dof_frictionloss", "dof_armature", "body_ipos", "body_mass", "added_mass",
              "joint_offset", "geom_friction", *(("pair_friction",) if name == G1 else ())):
        assert torch.equal(small.params[p], large.params[p][:2]), p
    for f in ("body_mass", "body_ipos", "qpos0", "dof_frictionloss", "body_invweight0"):
        assert torch.equal(_field(small, f), _field(large, f)[:2]), f


@pytest.mark.parametrize("name", [GO1, G1])
def test_recipe_draws_within_playgrounds_ranges(name):
    """``randomize.py``'s ranges (Go1: frictionloss x U(0.9, 1.1), the trunk's centre of
    mass + U(-0.05, 0.05), the floor geom's friction; G1: frictionloss x U(0.5, 2.0), the
    feet pairs' friction, torso_link's added mass), drawn once at startup."""
    n = 64
    env = _recipe_env(name, n)
    p, spec, mjm = env.params, env.params.spec, env.mjm
    eps = 1e-6

    def default(param: str) -> torch.Tensor:
        return spec[param].default_tensor().reshape(spec[param].shape)

    def within(x: torch.Tensor, lo: float, hi: float, what: str) -> None:
        assert x.min() >= lo - eps and x.max() <= hi + eps, (what, x.min(), x.max())
        assert x.max() - x.min() > 0.5 * (hi - lo), (what, "draws spread over the range")

    act = np.zeros(mjm.nv, bool)
    act[env.backend.dof_actuator >= 0] = True
    lo, hi = (0.9, 1.1) if name == GO1 else (0.5, 2.0)
    fl0 = default("dof_frictionloss")
    within(p["dof_frictionloss"][:, act] / fl0[act], lo, hi, "frictionloss")
    assert torch.equal(p["dof_frictionloss"][:, ~act], fl0[~act].expand(n, -1))
    arm0 = default("dof_armature")
    within(p["dof_armature"][:, act] / arm0[act], 1.0, 1.05, "armature")
    assert torch.equal(p["dof_armature"][:, ~act], arm0[~act].expand(n, -1))
    within(p["body_mass"] / default("body_mass"), 0.9, 1.1, "body mass scale")
    within(p["added_mass"], -1.0, 1.0, "added mass")
    within(p["joint_offset"], -0.05, 0.05, "joint offset")
    torso = env.backend.torso
    assert mjm.body(torso).name == ("trunk" if name == GO1 else "torso_link")
    dipos = p["body_ipos"] - default("body_ipos")
    if name == GO1:
        within(dipos[:, torso - 1], -0.05, 0.05, "trunk com")
        floor = env.component_index("geom_friction", "floor")
        within(p["geom_friction"][:, floor], 0.4, 1.0, "floor friction")
        others = torch.arange(mjm.ngeom) != floor
        assert torch.equal(p["geom_friction"][:, others],
                           default("geom_friction")[others].expand(n, -1))
        dipos[:, torso - 1] = 0.0
    else:
        within(p["pair_friction"][:, :2], 0.4, 1.0, "feet pair friction")
        assert torch.equal(p["pair_friction"][:, 2:], default("pair_friction")[2:].expand(n, -1))
        assert torch.equal(p["geom_friction"], default("geom_friction").expand(n, -1))
    assert torch.equal(dipos, torch.zeros_like(dipos))  # no other centre of mass moves
    # the model: the torso's mass is the scaled mass plus the added mass
    mass = _field(env, "body_mass")
    assert torch.equal(mass[:, torso], p["body_mass"][:, torso - 1] + p["added_mass"])
    # startup draws stay through resets
    before = {k: p[k].clone() for k in ("body_mass", "joint_offset")}
    env.reset()
    for k, v in before.items():
        assert torch.equal(p[k], v), k


def test_recipe_at_reset_redraws_only_the_resetting_envs():
    env = _recipe_env(GO1, N, on="reset")
    before = {k: env.params[k].clone() for k in ("body_mass", "added_mass", "joint_offset",
                                                  "body_ipos")}
    model = {f: _field(env, f) for f in ("body_mass", "qpos0", "body_ipos", "body_invweight0")}
    env.reset(MASK)
    for k, v in before.items():
        assert torch.equal(env.params[k][~MASK], v[~MASK]), k
        assert not torch.equal(env.params[k][MASK], v[MASK]), k
    for f, v in model.items():
        assert torch.equal(_field(env, f)[~MASK], v[~MASK]), f
        assert not torch.equal(_field(env, f)[MASK], v[MASK]), f


def test_bad_input_is_refused_by_name():
    env = _env(GO1, 2)
    with pytest.raises(ValueError, match="added_mass.*outside its range"):
        env.params.set("added_mass", 5000.0)
    with pytest.raises(ValueError, match="joint_offset.*broadcastable to \\(2, 12\\).*\\(5,\\)"):
        env.params.set("joint_offset", [0.1] * 5)
    with pytest.raises(ValueError, match="body_ipos.*broadcastable to \\(2, 13, 3\\)"):
        env.params.set("body_ipos", torch.zeros(13))
    with pytest.raises(ValueError, match="dof_frictionloss.*outside its range"):
        env.params.set("dof_frictionloss", -0.1)
    with pytest.raises(ValueError, match="joint_offset.*outside its valid range"):
        env.randomize(gp.Uniform("joint_offset", -2.0, 2.0))
    with pytest.raises(ValueError, match="body_ipos' has 39 components, low has 5"):
        env.randomize(gp.Uniform("body_ipos", [0.0] * 5, [0.1] * 5, op="add"))
    with pytest.raises(ValueError, match="playground added_mass on='bogus': on must be"):
        env.playground_randomization(on="bogus")
    with pytest.raises(ValueError, match="low 1.1 > high 0.9"):
        env.randomize(gp.Uniform("dof_frictionloss", 1.1, 0.9, op="scale"))


def test_frictionloss_components_are_named_by_dof(env):
    env.params.reset_to_default()
    k = env.component_index("dof_frictionloss", env.components.dofs[7])
    assert k == 7
    env.set_components("dof_frictionloss", {env.components.dofs[7]: 0.25}, mask=MASK)
    fl = _field(env, "dof_frictionloss")
    assert torch.equal(fl[MASK][:, 7], torch.full((2,), 0.25))
    assert torch.equal(fl[~MASK], _f32(env.mjm.dof_frictionloss).expand(2, -1))
    with pytest.raises(KeyError, match="dof_frictionloss: unknown element 'nope'"):
        env.component_index("dof_frictionloss", "nope")
    with pytest.raises(KeyError, match="'joint_offset' is not a per-element"):
        env.component_index("joint_offset", "x")
    env.params.reset_to_default()


def test_bad_torso_body_is_refused_by_name():
    from gpuparam.envs.mujoco.legged import LeggedBackend

    env = _env(GO1, 1)
    for bad in ("no_such_body", "world"):
        with pytest.raises(ValueError, match=f"torso_body: expected a moving body.*{bad!r}"):
            LeggedBackend(env.mjm, 5, "trunk", 0, torso_body=bad)
