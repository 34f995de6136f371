"""G1 against envpool's C++ port of MuJoCo Playground's task, through the fixture
``tests/fixtures/g1_envpool_{flat,rough}.npz`` (``record_g1_envpool.py``; the method is
Go1's, ``test_go1_parity.py``).

A. Task parity, every valid env-step and every one of the 24 terms (the fixture makes the
   terms Playground weighs 0 non-zero): MuJoCo Warp's data is set to what the task reads
   after step t and the task state to its value before step t; only the task runs.
   Tolerances: float32 round-off of one evaluation. envpool's ``joint_deviation_hip`` is
   4 times Playground's (the recorder checks that factor); gpuparam follows Playground.
B. Physics: one env step of MuJoCo Warp from each recorded state agrees with MuJoCo C at
   most steps (a median and a fraction, flat only), statistically: both solves are
   unconverged (3 iterations).
C. Reset: the reset observation from envpool's reset state.
D. The issue's statistical check: under zero actions for 100 steps at N = 32 (the
   defaults: noise and pushes on) the mean reward per step is within 10% of envpool's
   and the fraction of envs that fell within 0.15.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp

pytest.importorskip("mujoco_warp")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NAMES = {"flat": "G1JoystickFlatTerrain-v1", "rough": "G1JoystickRoughTerrain-v1"}
OBS_TOL = dict(rtol=1e-5, atol=1e-5)
FEET = ("left_foot", "right_foot")


def _t(x) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(x))


@pytest.fixture(scope="module", params=["flat", "rough"])
def case(request):
    f = dict(np.load(FIXTURES / f"g1_envpool_{request.param}.npz"))
    meta = json.loads(str(f["meta"]))
    n = f["valid"].shape[1]
    env = gp.make(NAMES[request.param], n, device="cpu", seed=0, noise_level=0.0,
                  push_enable=0.0)
    cfgs = [meta["scenarios"][str(s)]["config"] for s in f["scenario"]]
    for k in f["term_names"]:  # each env's scales, as recorded
        env.params.set(f"reward_{k}", _t(np.array([c[f"{k}_scale"] for c in cfgs],
                                                   np.float32)))
    return request.param, f, meta, env


def _write_after_step(env, f, t: int) -> None:
    """MuJoCo Warp's data as MuJoCo C left it after step t, the task state before it."""
    d, mjm = env.backend.d, env.mjm
    wp.to_torch(d.qpos).copy_(_t(f["qpos"][t + 1]))
    wp.to_torch(d.qvel).copy_(_t(f["qvel"][t + 1]))
    wp.to_torch(d.qacc).copy_(_t(f["qacc"][t]))
    wp.to_torch(d.sensordata).copy_(_t(f["sensordata"][t]))
    wp.to_torch(d.actuator_force).copy_(_t(f["actuator_force"][t]))
    xpos = wp.to_torch(d.site_xpos)
    for k, foot in enumerate(FEET):
        xpos[:, mjm.site(foot).id] = _t(f["feet_xpos"][t][:, k])
    imu = mjm.site("imu_in_pelvis").id
    wp.to_torch(d.site_xmat)[:, imu] = _t(f["imu_xmat"][t]).reshape(-1, 3, 3)
    st = env.task.state
    st["command"].copy_(_t(f["command"][t]))
    st["step"].zero_()  # no resampling inside the compared step
    st["last_act"].copy_(_t(f["last_act"][t]))
    st["air_time"].copy_(_t(f["feet_air_time"][t]))
    st["swing_peak"].copy_(_t(f["swing_peak"][t]))
    st["last_contact"].copy_(_t(f["last_contact"][t].astype(np.float32)))
    st["phase"].copy_(_t(f["phase"][t]))
    st["phase_dt"].copy_(_t(f["phase_dt"]))
    env.context.action.copy_(_t(f["action"][t]))


def test_sizes_equal_envpools(case):
    _, f, _, env = case
    assert env.observation_spec.shape == (103,)
    assert env.action_spec.shape == (29,) == f["action"].shape[2:]
    assert env.outputs["privileged_observation"].shape[1:] == f["privileged_state"].shape[2:]
    assert tuple(env.reward_term_names) == tuple(f["term_names"])


def test_task_matches_envpool_every_step_and_term(case):
    terrain, f, meta, env = case
    hip = list(f["term_names"]).index("joint_deviation_hip")
    active = np.zeros(24, int)
    checked = 0
    for t in range(f["valid"].shape[0]):
        ok = f["valid"][t]
        if not ok.any():
            continue
        _write_after_step(env, f, t)
        env.task.compute(env.context)
        out = env.outputs
        priv = out["privileged_observation"].numpy()[ok]
        np.testing.assert_allclose(priv, f["privileged_state"][t][ok], **OBS_TOL,
                                   err_msg=f"{terrain} step {t}")
        np.testing.assert_array_equal(out["observation"].numpy()[ok], priv[:, :103])
        terms = out["reward_terms"].numpy()[ok]
        want = f["reward_terms"][t][ok].copy()
        want[:, hip] /= meta["hip_factor"]  # envpool's hip term is 4x Playground's
        for k, name in enumerate(f["term_names"]):
            scale = float(np.abs(env.params[f"reward_{name}"].numpy()[ok]).max())
            np.testing.assert_allclose(terms[:, k], want[:, k], rtol=1e-4, atol=1e-6 * scale,
                                       err_msg=f"{terrain} step {t} term {name}")
        active += (np.abs(want) > 0).sum(0)
        reward = f["reward"][t][ok] - (meta["hip_factor"] - 1) * want[:, hip] * 0.02
        np.testing.assert_allclose(out["reward"].numpy()[ok], reward, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(out["terminated"].numpy()[ok], f["terminated"][t][ok])
        checked += int(ok.sum())
    assert checked == int(f["valid"].sum()) > 400
    assert active.min() >= 5, dict(zip(f["term_names"], active, strict=True))


def test_reset_observation_matches_envpool(case):
    terrain, f, _, env = case
    d = env.backend.d
    wp.to_torch(d.qpos).copy_(_t(f["reset_qpos"]))
    wp.to_torch(d.qvel).copy_(_t(f["reset_qvel"]))
    wp.to_torch(d.ctrl).copy_(_t(f["reset_qpos"][:, 7:]))
    wp.to_torch(d.xfrc_applied).zero_()
    import mujoco_warp as mjw

    with env.backend.scope():
        mjw.forward(env.backend.m, d)
    st = env.task.state
    for k in ("last_act", "air_time", "swing_peak", "last_contact"):
        st[k].zero_()
    st["command"].copy_(_t(f["reset_command"]))
    st["phase"].copy_(torch.tensor([0.0, np.pi]).expand(env.num_envs, 2))
    env.task.observe_only(env.context, torch.ones(env.num_envs, dtype=torch.bool))
    got, want = env.outputs["privileged_observation"].numpy(), f["reset_privileged_state"]
    # the accelerometer reads qacc of the reset's forward: with a foot on the ground, the
    # contact solve of each engine (float32 MuJoCo Warp, float64 MuJoCo C; 3 iterations;
    # seen up to 0.15 m/s^2 on flat ground); on the heightfield their contact sets differ
    # by design (as Go1's), so there it is not compared
    acc = slice(106, 109)
    np.testing.assert_allclose(np.delete(got, np.r_[acc], 1), np.delete(want, np.r_[acc], 1),
                               **OBS_TOL)
    if terrain == "flat":
        np.testing.assert_allclose(got[:, acc], want[:, acc], rtol=0.0, atol=0.25)


def test_one_env_step_matches_mujoco_c_at_most_steps():
    """Physics through the env (PD, action scale per env: the "flail" envs use 1.0)."""
    f = dict(np.load(FIXTURES / "g1_envpool_flat.npz"))
    meta = json.loads(str(f["meta"]))
    n = f["valid"].shape[1]
    env = gp.make(NAMES["flat"], n, device="cpu", seed=0, noise_level=0.0, push_enable=0.0,
                  max_episode_steps=10**6)
    scale = torch.tensor([meta["scenarios"][str(s)]["config"]["action_scale"]
                          for s in f["scenario"]], dtype=torch.float32)
    env.params.set("action_scale", scale)
    st = env.backend.state
    errs = []
    for t in range(40):
        for k in ("qpos", "qvel", "qacc_warmstart"):
            st[k].copy_(_t(f[k][t]))
        env.step(_t(f["action"][t]))
        ok = f["valid"][t] & ~f["terminated"][t]
        e = np.abs(st["qvel"].numpy() - f["qvel"][t + 1]).max(1)
        errs.extend(e[ok].tolist())
    # Playground's 3 Newton iterations per substep leave each engine's solve unconverged
    # (10 substeps per env step): seen a median of 2.7e-3 rad/s (relative 7e-4), 71% of
    # the steps under 1e-2, the worst tenth above 7e-2 (falls, feet striking)
    errs = np.array(errs)
    assert errs.size > 250
    assert np.median(errs) < 1e-2, np.median(errs)
    assert (errs < 1e-2).mean() > 0.6, (errs < 1e-2).mean()


@pytest.mark.parametrize("terrain", ["flat", "rough"])
def test_zero_actions_reward_and_falls_match_envpool(terrain):
    f = np.load(FIXTURES / f"g1_envpool_{terrain}.npz")
    ref = json.loads(str(f["meta"]))["zero_action"]
    n, steps = ref["num_envs"], ref["steps"]
    env = gp.make(NAMES[terrain], n, device="cpu", seed=ref["seed"])
    env.reset()
    rewards, fell = [], torch.zeros(n, dtype=torch.bool)
    for _ in range(steps):
        td = env.step(torch.zeros(n, 29))
        rewards.append(td["reward"].clone())
        fell |= td["terminated"]
    mean = torch.stack(rewards).mean().item()
    assert abs(mean - ref["mean_reward"]) <= 0.1 * abs(ref["mean_reward"]), (mean, ref)
    assert abs(fell.float().mean().item() - ref["fall_fraction"]) <= 0.15, ref
    assert not env.overflows["constraints"].any() and not env.overflows["contacts"].any()
