"""H1 gait tracking against envpool's C++ port of MuJoCo Playground's tasks, through the
fixtures ``tests/fixtures/h1_envpool_{gait,inplace}.npz`` (``record_h1_envpool.py``;
the method of ``test_go1_parity.py``).

A. Task parity, every valid env-step, every observation value and reward term: MuJoCo
   Warp's data is set to what the task reads after step t (``qpos``/``qvel`` of row t + 1,
   ``sensordata``, the feet's ``site_xpos``, ``ctrl`` of row t + 1: the motor targets) and the
   task state to its value before step t; only the task runs (``env.task.compute``).
   Tolerance: float32 round-off of one evaluation. Playground's contact-by-sensor-id
   quirk, its action-rate argument order and the histories are all inside this check.
B. Reset: ``env.reset()`` (deterministic pose, ctrl 0) gives envpool's reset
   observation, but for the gait draws (ours are counter-based) checked for consistency.
C. Physics: one env step of MuJoCo Warp from each recorded state (and, for the
   joystick, its accumulated ctrl) agrees with MuJoCo C at most steps.
D. Zero actions with the default parameters (noise on): envpool's statistics.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp
from tests.envs.robots.parity import (
    BIPED_FEET,
    OBS_TOL,
    fixture_meta,
    load,
    qvel_error,
    set_recorded_state,
    set_reward_scales,
    tensor,
    valid_steps,
    write_data_after_step,
    write_task_state,
)

pytest.importorskip("mujoco_warp")

NAMES = {"gait": "H1JoystickGaitTracking-v1", "inplace": "H1InplaceGaitTracking-v1"}
STATE = ("phase", "last_act", "last_last_act", "qvel_history", "qpos_error_history",
         "swing_peak")


@pytest.fixture(scope="module", params=["gait", "inplace"])
def case(request):
    f = load(f"h1_envpool_{request.param}")
    n = f["valid"].shape[1]
    env = gp.make(NAMES[request.param], n, device="cpu", seed=0, noise_level=0.0,
                  max_episode_steps=10**6)
    set_reward_scales(env, f)  # each scenario's envpool config: its reward scales
    return request.param, f, fixture_meta(f), env


def _write_after_step(env, f, t: int, joystick: bool) -> None:
    """MuJoCo Warp's data as MuJoCo C left it after step t, the task state before it."""
    write_data_after_step(env, f, t, ("sensordata",), BIPED_FEET)
    wp.to_torch(env.backend.d.ctrl).copy_(tensor(f["ctrl"][t + 1]))  # the targets of step t
    write_task_state(env, f, t, STATE)
    st = env.task.state
    for k in ("phase_dt", "gait_freq", "gait", "foot_height"):
        st[k].copy_(tensor(f[k]))
    if joystick:
        write_task_state(env, f, t, ("command", "step", ("air_time", "feet_air_time"),
                                     "last_contact"))
    env.context.action.copy_(tensor(f["action"][t]))


def test_sizes_match_envpool(case):
    task, f, _, env = case
    assert env.observation_spec.shape == (f["obs"].shape[2],)  # 113, 186
    assert env.action_spec.shape == (19,)
    assert env.reward_term_names == tuple(f["term_names"])


def test_task_matches_envpool_every_step_and_term(case):
    task, f, _, env = case
    joystick = task == "gait"
    checked, active = 0, np.zeros(len(f["term_names"]), int)
    for t, ok in valid_steps(f):
        _write_after_step(env, f, t, joystick)
        env.task.compute(env.context)
        out = env.outputs
        np.testing.assert_allclose(out["observation"].numpy()[ok], f["obs"][t][ok], **OBS_TOL,
                                   err_msg=f"{task} step {t}")
        terms = out["reward_terms"].numpy()[ok]
        for k, name in enumerate(f["term_names"]):
            np.testing.assert_allclose(terms[:, k], f["reward_terms"][t][ok, k], rtol=1e-4,
                                       atol=1e-6, err_msg=f"{task} step {t} term {name}")
        active += (np.abs(f["reward_terms"][t][ok]) > 0).sum(0)
        np.testing.assert_allclose(out["reward"].numpy()[ok], f["reward"][t][ok], rtol=1e-4,
                                   atol=1e-7, err_msg=f"{task} step {t}")
        np.testing.assert_array_equal(out["terminated"].numpy()[ok], f["terminated"][t][ok])
        # the state laws: the phase advance and the histories' roll
        nxt = f["valid"][min(t + 1, len(f["valid"]) - 1)] & ok & (t + 1 < len(f["valid"]))
        for k in ("phase", "qvel_history", "qpos_error_history", "last_last_act"):
            np.testing.assert_allclose(env.task.state[k].numpy()[nxt],
                                       f[k][min(t + 1, len(f[k]) - 1)][nxt], rtol=1e-5,
                                       atol=1e-5, err_msg=f"{task} {t} {k}")
        checked += int(ok.sum())
    assert checked == int(f["valid"].sum()) > 200
    assert f["terminated"].any()  # falls and joint-range exits (docs/tasks/h1_gait.md)
    zero = {"feet_air_time"}  # always 0: the contact quirk (module docstring of h1.py)
    assert all(a > 30 or n in zero for n, a in zip(f["term_names"], active, strict=True)), \
        dict(zip(f["term_names"], active, strict=True))


def test_reset_observation_matches_envpool(case):
    task, f, _, env = case
    td = env.reset()
    obs = td["observation"].numpy()
    n_obs = obs.shape[1]
    drawn = np.zeros(n_obs, bool)  # command (joystick), phase, gait: our own draws
    drawn[n_obs - 7:] = True
    if task == "gait":
        drawn[63:66] = True
        np.testing.assert_allclose(obs[:, 63:66], env.task.state["command"].numpy())
    np.testing.assert_allclose(obs[:, ~drawn], f["reset_obs"][:, ~drawn], **OBS_TOL)
    st = {k: env.task.state[k].numpy() for k in ("gait", "gait_freq", "foot_height")}
    phase_r = np.where(st["gait"] == 0, np.pi, 0.0)
    np.testing.assert_allclose(obs[:, -7:], np.stack(
        [np.ones_like(phase_r), np.cos(phase_r), np.zeros_like(phase_r), np.sin(phase_r),
         st["gait_freq"], st["gait"], st["foot_height"]], 1), atol=1e-6)


def test_one_env_step_matches_mujoco_c_at_most_steps(case):
    task, f, _, env = case
    st = env.backend.state
    errs = []
    for t in range(40):
        set_recorded_state(env, f, t)
        if task == "gait":
            st["ctrl"].copy_(tensor(f["ctrl"][t]))
        td = env.step(tensor(f["action"][t]))
        # (ours auto-reset where our step ended the episode: a joint past its range)
        ok = f["valid"][t] & ~f["terminated"][t] & ~td["done"].numpy()
        errs.extend(qvel_error(env, f, t)[ok].tolist())
        if task == "gait":  # the accumulated, clipped targets
            np.testing.assert_allclose(st["ctrl"].numpy()[ok], f["ctrl"][t + 1][ok], atol=1e-6)
    errs = np.array(errs)
    assert errs.size > 100
    assert np.median(errs) < 1e-4, np.median(errs)
    assert (errs < 1e-3).mean() > 0.85, (errs < 1e-3).mean()


def test_zero_actions_match_envpool_statistics(case):
    """envpool's defaults (noise on) under zero actions for 100 steps: the mean reward per
    env-step and the fraction of envs that fell (envpool: 32 envs, here 6)."""
    task, f, meta, env = case
    for k in (*env.reward_term_names, "noise_level"):
        name = k if k == "noise_level" else f"reward_{k}"
        env.params.set(name, env.params.spec[name].default)
    want = meta["zero_action"]
    env.reset()
    rewards, fell = [], torch.zeros(env.num_envs, dtype=torch.bool)
    zero = torch.zeros(env.num_envs, 19)
    for _ in range(want["steps"]):
        td = env.step(zero)
        rewards.append(td["reward"].clone())
        fell |= td["terminated"]
    per_env = torch.stack(rewards).mean(0).numpy()  # the gait and command draws differ
    assert fell.float().mean().item() == want["fall_fraction"]  # joystick 1, inplace 0
    # 6 envs: the per-env means' spread (about 10% of the mean in standard error; at 64
    # envs the means agree within 2 standard errors: docs/robots.md) makes the bound
    # 3 standard errors of the difference of the two means (envpool's: its 32 envs)
    se = per_env.std(ddof=1) * np.sqrt(1 / len(per_env) + 1 / want["num_envs"])
    assert abs(per_env.mean() - want["mean_reward"]) < 3 * se, (per_env.mean(), se, want)
    assert se < 0.15 * want["mean_reward"]


def test_recipe_parameters_come_from_the_framework(case):
    """The legged recipe's parameters are H1's too; ``kd`` is the joints' damping (H1's
    actuators keep their own kv, as the model has it): a masked write reaches
    ``dof_damping`` of the masked worlds only; Playground's randomization terms apply."""
    task, _, _, env = case
    recipe = ("kp", "kd", "torque_limit", "motor_strength", "action_scale", "action_delay",
              "kick_enable", "body_mass", "added_mass", "dof_frictionloss", "joint_offset",
              "geom_friction", "dof_armature", "noise_level")
    assert set(recipe) <= set(env.params.names)
    m, mjm = env.backend.m, env.mjm
    kd = mjm.dof_damping[6:].astype(np.float32)  # 1 on every joint
    np.testing.assert_array_equal(env.params["kd"].numpy()[0], kd)
    mask = torch.zeros(env.num_envs, dtype=torch.bool)
    mask[1] = True
    env.params.set("kd", 3.0 * torch.as_tensor(kd), mask=mask)
    env.step(torch.zeros(env.num_envs, 19))  # the write is committed before the physics
    damping = m.dof_damping.numpy()
    np.testing.assert_array_equal(damping[1, 6:], 3.0 * kd)
    np.testing.assert_array_equal(damping[0, 6:], kd)  # unmasked worlds: bit for bit
    kv = m.actuator_biasprm.numpy()[..., 2]
    np.testing.assert_array_equal(kv, np.broadcast_to(mjm.actuator_biasprm[:, 2], kv.shape)
                                  .astype(np.float32))  # MuJoCo 3.6's kv, untouched
    env.params.set("kd", torch.as_tensor(kd))
    env.randomize(*env.playground_randomization("reset"))
    env.reset()
    mass = env.params["body_mass"].numpy() / mjm.body_mass[1:]
    assert ((mass > 0.9 - 1e-6) & (mass < 1.1 + 1e-6)).all() and mass.std() > 0.01
