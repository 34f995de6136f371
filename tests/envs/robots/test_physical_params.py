"""Per-world physical parameters: masked writes reach exactly the masked worlds, match
MuJoCo C with the same model change (derived constants via set_const vs mj_setConst), and
bad input is rejected before anything is written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp
from tests.envs.robots.reference import actions, gym_env, mujoco

N = 4
MASK = torch.tensor([False, True, False, True])


def _twins():
    a = gp.make("Ant-v5", N, device="cpu", seed=3, cone="elliptic")
    b = gp.make("Ant-v5", N, device="cpu", seed=3, cone="elliptic")
    return a, b


def test_masked_mass_friction_gear_write_matches_mujoco_c():
    env, twin = _twins()
    torso = env.component_index("body_mass", "torso")
    floor = env.component_index("geom_friction", "floor")
    gear = env.component_index("actuator_gear", "hip_1")
    mass0 = env.params["body_mass"][0, torso].item()
    env.set_components("body_mass", {"torso": 2.0 * mass0}, mask=MASK)
    env.set_components("geom_friction", {"floor": 0.3}, mask=MASK)
    env.set_components("actuator_gear", {"hip_1": 60.0}, mask=MASK)
    env.params.set("dof_damping", 2.0, mask=MASK)

    # the copies are written at once, the derived constants by the next step's commit
    qpos, qvel = env.state["qpos"][1].clone(), env.state["qvel"][1].clone()
    a = actions(env, 1)[0]
    td, tdt = env.step(a).clone(), twin.step(a).clone()
    m, mt = env.backend.m, twin.backend.m
    derived = ("body_mass", "body_subtreemass", "body_invweight0", "dof_invweight0",
               "actuator_acc0", "dof_damping", "geom_friction", "actuator_gear")
    for f in derived:  # unmasked worlds: bit-identical model arrays
        x, y = getattr(m, f).numpy(), getattr(mt, f).numpy()
        assert np.array_equal(x[~MASK.numpy()], y[~MASK.numpy()]), f
        assert not np.array_equal(x[MASK.numpy()], y[MASK.numpy()]), f

    # MuJoCo C with the same change, then mj_setConst
    g = gym_env("Ant-v5", qpos, qvel)
    g.model.body_mass[1 + torso] = 2.0 * mass0
    g.model.geom_friction[floor, 0] = 0.3
    g.model.actuator_gear[gear, 0] = 60.0
    g.model.dof_damping[:] = 2.0
    mujoco.mj_setConst(g.model, g.data)
    g.set_state(qpos.double().numpy(), qvel.double().numpy())
    for f in ("body_subtreemass", "body_invweight0", "dof_invweight0", "actuator_acc0"):
        ours, ref = getattr(m, f).numpy()[1].reshape(-1), getattr(g.model, f).reshape(-1)
        if f == "actuator_acc0":  # read by muscles only: a gear write keeps it (documented)
            ours, ref = np.delete(ours, gear), np.delete(ref, gear)
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-6, err_msg=f)
    # one step: world 1 matches MuJoCo C; unmasked worlds match the untouched twin exactly
    o, r, term, _, _ = g.step(a[1].double().numpy())
    np.testing.assert_allclose(env.state["qpos"][1].numpy(), g.data.qpos, atol=1e-6)
    np.testing.assert_allclose(env.state["qvel"][1].numpy(), g.data.qvel, atol=1e-4)
    np.testing.assert_allclose(td["final_observation"][1].numpy(), o, atol=1e-4)
    assert abs(td["reward"][1].item() - r) < 1e-4
    keep = ~MASK
    assert torch.equal(td["observation"][keep], tdt["observation"][keep])
    assert torch.equal(env.state["qvel"][keep], twin.state["qvel"][keep])
    assert not torch.equal(env.state["qvel"][MASK], twin.state["qvel"][MASK])


def test_gravity_per_world():
    env, twin = _twins()
    env.params.set("gravity", torch.tensor([0.0, 0.0, -3.0]), mask=MASK)
    g = env.backend.m.opt.gravity.numpy()
    assert np.allclose(g[MASK.numpy(), 2], -3.0) and np.allclose(g[~MASK.numpy(), 2], -9.81)
    ref = gym_env("Ant-v5", env.state["qpos"][3], env.state["qvel"][3])
    ref.model.opt.gravity[:] = (0.0, 0.0, -3.0)
    a = actions(env, 1)[0]
    env.step(a)
    twin.step(a)
    ref.step(a[3].double().numpy())
    np.testing.assert_allclose(env.state["qvel"][3].numpy(), ref.data.qvel, atol=1e-4)
    assert torch.equal(env.state["qvel"][~MASK], twin.state["qvel"][~MASK])


def test_mass_randomized_every_step_inside_the_capture():
    """A per-step mass term is captured with its copy and set_const: every replay writes
    new masses and matching derived constants."""
    env = gp.make("Ant-v5", N, device="cpu", seed=0)
    env.randomize(gp.Uniform("body_mass", 0.5, 1.5, op="scale", on="step"))
    a = torch.zeros(N, 8)
    seen = []
    for _ in range(4):
        env.step(a)
        m = env.backend.m
        mass = m.body_mass.numpy()[:, 1:]
        np.testing.assert_array_equal(mass, env.params["body_mass"].numpy())
        sub = m.body_subtreemass.numpy()
        np.testing.assert_allclose(sub[:, 0], m.body_mass.numpy().sum(1), rtol=1e-5)
        seen.append(mass.copy())
    assert env.pipeline.captured
    assert not np.array_equal(seen[-1], seen[-2])


def test_bad_input_rejected_and_nothing_written():
    env = gp.make("Ant-v5", N, device="cpu", seed=0)
    before = env.params.state_dict()
    model = env.backend.m.body_mass.numpy().copy()
    with pytest.raises(KeyError, match="unknown element 'tail'.*torso"):
        env.set_components("body_mass", {"torso": 1.0, "tail": 2.0})
    with pytest.raises(KeyError, match="not a per-element"):
        env.component_index("gravity", "x")
    with pytest.raises(ValueError, match=r"body_mass.*broadcastable to \(4, 13\).*\(4, 5\)"):
        env.params.set("body_mass", torch.ones(N, 5))
    with pytest.raises(ValueError, match="body_mass.*-1.0 outside its range"):
        env.set_components("body_mass", {"torso": -1.0})
    with pytest.raises(ValueError, match="body_mass.*outside its range"):
        env.params.set("body_mass", torch.full((N, 13), -2.0), mask=MASK)
    with pytest.raises(ValueError, match="actuator_gear.*outside"):
        env.params.set("actuator_gear", 0.0)
    after = env.params.state_dict()
    assert torch.equal(before["nominal"], after["nominal"])
    assert torch.equal(before["effective"], after["effective"])
    assert np.array_equal(model, env.backend.m.body_mass.numpy())


def test_component_names_come_from_the_model():
    env = gp.make("Ant-v5", 1, device="cpu")
    c = env.components
    assert c.bodies[0] == "torso" and len(c.bodies) == 13 and c.geoms[0] == "floor"
    assert c.dofs[:6] == tuple(f"root[{k}]" for k in range(6)) and c.dofs[6] == "hip_1"
    assert env.params["body_mass"].shape == (1, 13)
    assert env.params["geom_friction"].shape == (1, env.mjm.ngeom)
    i = env.component_index("body_mass", "torso")
    assert env.params["body_mass"][0, i].item() == pytest.approx(env.mjm.body_mass[1], rel=1e-6)
    assert wp.to_torch(env.backend.m.body_mass).shape == (1, 14)


def test_task_parameters_are_per_env():
    """Reward weights and health ranges are parameters: a masked write changes the reward
    and termination of exactly the masked envs, as Gymnasium's formula says."""
    env, twin = _twins()
    env.params.set("ctrl_cost_weight", 0.0, mask=MASK)
    env.params.set("healthy_z_min", 5.0, mask=MASK)  # every state is unhealthy there
    a = actions(env, 1)[0]
    td, tdt = env.step(a).clone(), twin.step(a).clone()
    ctrl = 0.5 * (a * a).sum(1)
    healthy = 1.0
    expected = tdt["reward"] + ctrl - healthy
    torch.testing.assert_close(td["reward"][MASK], expected[MASK], rtol=0, atol=1e-5)
    assert torch.equal(td["reward"][~MASK], tdt["reward"][~MASK])
    assert td["terminated"][MASK].all() and not td["terminated"][~MASK].any()


def test_set_components_keeps_the_other_components_randomized_values():
    env = gp.make("Ant-v5", N, device="cpu", seed=0)
    env.randomize(gp.Uniform("body_mass", 0.5, 1.5, op="scale", on="reset"))
    env.reset()
    before = env.params["body_mass"].clone()
    nominal = env.params.nominal["body_mass"].clone()
    torso = env.component_index("body_mass", "torso")
    env.set_components("body_mass", {"torso": 0.5}, mask=MASK)
    after = env.params["body_mass"]
    others = torch.arange(after.shape[1]) != torso
    assert torch.equal(after[:, others], before[:, others])  # the draws stay
    assert torch.all(after[MASK, torso] == 0.5) and torch.equal(after[~MASK], before[~MASK])
    assert torch.all(env.params.nominal["body_mass"][MASK, torso] == 0.5)
    assert torch.equal(env.params.nominal["body_mass"][:, others], nominal[:, others])
    np.testing.assert_allclose(env.backend.m.body_mass.numpy()[:, 1:],
                               after.numpy(), rtol=0, atol=0)  # the model follows


def test_param_table_set_components_checks_everything_first():
    env = gp.make("Ant-v5", N, device="cpu", seed=0)
    before = env.params.state_dict()
    for values, words in (({13: 1.0}, "component index"), ({0: 1.0, 1: -1.0}, "outside"),
                          ({0: torch.ones(N + 1)}, "expected a number or a float tensor"),
                          ({0: torch.tensor([1.0, float("nan"), 1.0, 1.0])}, "not finite"),
                          ({}, "non-empty")):
        with pytest.raises(ValueError, match=words):
            env.params.set_components("body_mass", values)
    after = env.params.state_dict()
    assert torch.equal(before["nominal"], after["nominal"])
    assert torch.equal(before["effective"], after["effective"])


def test_humanoid_mass_write_between_steps_adds_no_false_forward_velocity():
    # Gymnasium weighs the mass center before and after a step with the same (current)
    # masses: tripling a foot's mass between two steps changes the reward by its small
    # physical effect only (weighing the old center with the old masses added ~0.12 here)
    env = gp.make("Humanoid-v5", num_envs=2, device="cpu", seed=0, reset_noise_scale=0.0)
    env.reset()
    a = torch.zeros(2, 17)
    first = env.step(a)["reward"].clone()
    assert first[0] == first[1]
    j = env.component_index("body_mass", "right_foot")
    mass = float(env.params["body_mass"][0, j])
    env.set_components("body_mass", {"right_foot": 3.0 * mass}, mask=torch.tensor([True, False]))
    second = env.step(a)["reward"]
    assert abs(float(second[0] - second[1])) < 0.02
