"""Go1 Getup and Handstand against envpool's C++ ports of MuJoCo Playground's tasks, through
``tests/fixtures/go1_{getup,handstand}_envpool.npz`` (``record_go1_tasks_envpool.py``) and
``go1_tasks_zero_action.json`` (``record_go1_tasks_zero_action.py``), as
``test_go1_parity.py`` does for the joystick.

A. Task parity, every valid env-step: MuJoCo Warp's data set to what envpool's task read
   after step t (after its final ``mj_forward``), the task state to its value before step
   t, the scenario's parameters per env; only the task runs. Every observation value,
   reward term, the reward and the termination at float32 round-off.
B. Reset observation from envpool's reset state.
C. Physics and action modes: one env step from each recorded state; the PD targets
   (Getup: current angles + 0.5 a; Handstand: previous targets + 0.3 a) equal envpool's,
   the state after the step agrees with MuJoCo C at most steps (1 solver iteration).
D. Zero actions: reward per env-step within a few percent of envpool's (Playground's
   defaults, noise on: draws differ, so a statistic is compared).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp
from tests.envs.robots.parity import (
    FIXTURES,
    OBS_TOL,
    fixture_meta,
    forward_reset_state,
    load,
    observe_only,
    qvel_error,
    scenario_configs,
    set_recorded_state,
    set_reward_scales,
    tensor,
    valid_steps,
    write_data_after_step,
    write_task_state,
)

pytest.importorskip("mujoco_warp")

NAMES = {"getup": "Go1Getup-v1", "handstand": "Go1Handstand-v1"}


def _set_scenarios(env, f) -> None:
    """Each env's reward scales and thresholds from its scenario's envpool config."""
    set_reward_scales(env, f)
    thr = [min(c["energy_termination_threshold"], 1e30) for c in scenario_configs(f)]
    env.params.set("energy_termination_threshold", tensor(thr).float())


@pytest.fixture(scope="module", params=["getup", "handstand"])
def case(request):
    f = load(f"go1_{request.param}_envpool")
    env = gp.make(NAMES[request.param], f["valid"].shape[1], device="cpu", seed=0,
                  noise_level=0.0, max_episode_steps=10**6, gating="graph")
    _set_scenarios(env, f)
    return request.param, f, env


def _write_after_step(env, f, t: int) -> None:
    write_data_after_step(env, f, t, ("sensordata", "actuator_force", "qacc"), imu="imu")
    wp.to_torch(env.backend.d.site_xpos)[:, env.mjm.site("imu").id] = tensor(f["imu_xpos"][t])
    write_task_state(env, f, t, [k for k in ("last_act", "last_last_act") if k in f])
    env.context.action.copy_(tensor(f["action"][t]))


def test_sizes_match_envpool(case):
    task, f, env = case
    meta = fixture_meta(f)
    assert env.observation_spec.shape == (meta["state_dim"],)
    assert env.outputs["privileged_observation"].shape[1] == f["privileged_state"].shape[2]
    assert env.action_spec.shape == (12,)
    assert env.reward_term_names == tuple(f["term_names"])
    names = env.params.names
    for p in ("kp", "kd", "action_delay", "kick_enable", "added_mass", "dof_frictionloss",
              "noise_level", "energy_termination_threshold"):
        assert p in names, p


def test_task_matches_envpool_every_step_and_term(case):
    task, f, env = case
    k = fixture_meta(f)["state_dim"]
    checked, active = 0, np.zeros(len(f["term_names"]), int)
    for t, ok in valid_steps(f):
        _write_after_step(env, f, t)
        env.task.compute(env.context)
        out = env.outputs
        priv = out["privileged_observation"].numpy()[ok]
        np.testing.assert_allclose(priv, f["privileged_state"][t][ok], **OBS_TOL,
                                   err_msg=f"{task} step {t}")
        np.testing.assert_array_equal(out["observation"].numpy()[ok], priv[:, :k])
        terms = out["reward_terms"].numpy()[ok]
        want = f["reward_terms"][t][ok]
        for j, name in enumerate(f["term_names"]):
            np.testing.assert_allclose(terms[:, j], want[:, j], rtol=2e-4, atol=1e-6,
                                       err_msg=f"{task} step {t} term {name}")
        active += (np.abs(want) > 0).sum(0)
        np.testing.assert_allclose(out["reward"].numpy()[ok], f["reward"][t][ok], rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_array_equal(out["terminated"].numpy()[ok], f["terminated"][t][ok])
        checked += int(ok.sum())
    assert checked == int(f["valid"].sum()) > 100
    assert active.min() >= 2, dict(zip(f["term_names"], active, strict=True))
    assert f["terminated"][f["valid"]].sum() >= 2  # terminations are compared too


def test_reset_observation_matches_envpool(case):
    task, f, env = case
    # the recorded warm start: 1 solver iteration
    forward_reset_state(env, f, f["reset_ctrl"], f["reset_qacc_warmstart"])
    observe_only(env, zero=tuple(env.task.state))
    got, want = env.outputs["privileged_observation"].numpy(), f["reset_privileged_state"]
    acc = fixture_meta(f)["state_dim"] + 3  # the accelerometer's 3 values
    rest = np.r_[:acc, acc + 3 : want.shape[1]]
    np.testing.assert_allclose(got[:, rest], want[:, rest], **OBS_TOL)
    # the accelerometer reads qacc of a 1-iteration solve (a fallen Getup robot: many
    # contacts), where MuJoCo Warp (float32) and MuJoCo C part (physics: see below)
    np.testing.assert_allclose(got[:, acc : acc + 3], want[:, acc : acc + 3], atol=0.25)


def test_one_env_step_matches_mujoco_c(case):
    """The targets of the action mode exactly; the state and the post-step forward's
    sensors (``forward_after_step``) at most steps."""
    task, f, env = case
    d = env.backend.d
    errs, sens = [], []
    for t in range(30):
        set_recorded_state(env, f, t)
        wp.to_torch(d.ctrl).copy_(tensor(f["ctrl"][t]))
        env.step(tensor(f["action"][t]))
        ok = f["valid"][t] & ~f["terminated"][t]
        np.testing.assert_allclose(wp.to_torch(d.ctrl).numpy()[ok], f["ctrl"][t + 1][ok],
                                   rtol=1e-6, atol=1e-6)
        errs.extend(qvel_error(env, f, t)[ok].tolist())
        sd = wp.to_torch(d.sensordata).numpy()[:, :3]  # the gyro, after the final forward
        sens.extend(np.abs(sd - f["sensordata"][t][:, :3]).max(1)[ok].tolist())
    errs, sens = np.array(errs), np.array(sens)
    assert errs.size > 60
    assert np.median(errs) < 1e-3, np.median(errs)
    assert np.median(sens) < 1e-3, np.median(sens)
    assert (errs < 1e-2).mean() > 0.5, (errs < 1e-2).mean()


def test_zero_action_reward_matches_envpool(case):
    """envpool's zero-action statistic (64 envs, 50 steps, noise on) against 8 envs here.
    Handstand: the mean reward per env-step within 5%. Getup's two reset branches differ
    (a dropped robot lies in a random pose), so each is compared on its own: 6 envs from
    home, 2 dropped (``drop_from_height_prob`` per env), each group's mean within 3
    standard errors of envpool's spread over envs (home: about 12%; dropped: loose)."""
    task = case[0]
    ref = json.loads((FIXTURES / "go1_tasks_zero_action.json").read_text())[NAMES[task]]
    n = 8
    env = gp.make(NAMES[task], n, device="cpu", seed=1, max_episode_steps=10**6,
                  gating="graph")
    groups = {"all": torch.ones(n, dtype=torch.bool)}
    if task == "getup":
        groups = {"home": torch.arange(n) < 6, "dropped": torch.arange(n) >= 6}
        env.params.set("drop_from_height_prob", groups["dropped"].float())
    env.reset()
    rewards, fell = [], torch.zeros(n, dtype=torch.bool)
    for _ in range(ref["steps"]):
        env.step(torch.zeros(n, 12))
        rewards.append(env.outputs["reward"].clone())
        fell |= env.outputs["terminated"]
    per_env = torch.stack(rewards).mean(0)
    assert float(fell.float().mean()) == ref["fall_fraction"]
    for name, sel in groups.items():
        mean = float(per_env[sel].mean())
        want = ref[name] if name != "all" else ref
        tol = (0.05 * abs(want["mean_reward"]) if name == "all"
               else 3.0 * want["std_over_envs"] / float(sel.sum()) ** 0.5)
        assert abs(mean - want["mean_reward"]) < tol, (name, mean, want)


def test_masked_reset_settles_only_its_envs_and_kp_is_a_parameter(case):
    """Getup's settling reset (125 physics steps over every world) leaves the other envs
    bit for bit; Handstand's reset (no settling) likewise. ``kp`` (a legged recipe
    parameter) 0 for env 0: its actuators exert no force, the others' do."""
    task, f, env = case
    n = env.num_envs
    env.reset()
    for _ in range(3):
        env.step(tensor(f["action"][0]))
    st, d = env.backend.state, env.backend.d
    before = {k: v.clone() for k, v in st.items() if k in ("qpos", "qvel", "qacc_warmstart")}
    ctrl, time = wp.to_torch(d.ctrl).clone(), wp.to_torch(d.time).clone()
    mask = torch.arange(n) == 0
    env.reset(mask)
    keep = ~mask
    for k, v in before.items():
        assert torch.equal(st[k][keep], v[keep]), k
        assert not torch.equal(st[k][mask], v[mask]), k
    assert torch.equal(wp.to_torch(d.ctrl)[keep], ctrl[keep])
    assert torch.equal(wp.to_torch(d.time)[keep], time[keep])
    assert float(wp.to_torch(d.time)[0]) == 0.0
    kp = env.params["kp"].clone()
    env.params.set("kp", 0.0, mask=mask)
    env.step(torch.full((n, 12), 0.5))
    force = wp.to_torch(d.actuator_force)
    assert torch.all(force[0] == 0.0) and torch.all(force[1:].abs().sum(1) > 0.0)
    env.params.set("kp", kp)


def test_footstand_config(case):
    """``Go1Footstand-v1`` (not recorded by envpool): Handstand's class with the front legs'
    pose cost, the imu x-axis up and z_des 0.53, checked on Handstand's recorded data."""
    task, f, _ = case
    if task != "handstand":
        pytest.skip("Footstand shares Handstand's scene and fixture")
    n = f["valid"].shape[1]
    env = gp.make("Go1Footstand-v1", n, device="cpu", seed=0, noise_level=0.0)
    t = 10
    _write_after_step(env, f, t)
    env.task.compute(env.context)
    terms = dict(zip(env.reward_term_names, env.outputs["reward_terms"].numpy().T, strict=True))
    q, home = f["qpos"][t + 1][:, 7:13], np.tile([0.1, 0.9, -1.8, -0.1, 0.9, -1.8], (n, 1))
    np.testing.assert_allclose(terms["pose"], -0.1 * ((q - home) ** 2).sum(1), rtol=1e-5)
    up = (0.5 * f["imu_xmat"][t][:, 6] + 0.5) ** 2
    np.testing.assert_allclose(terms["orientation"], up, rtol=1e-5, atol=1e-7)
    h = np.minimum(f["imu_xpos"][t][:, 2], 0.53)
    np.testing.assert_allclose(terms["height"], np.exp(-(0.53 - h)), rtol=1e-5)
