"""Go1 against envpool's C++ port of MuJoCo Playground's task, through the fixture
``tests/fixtures/go1_envpool_{flat,rough}.npz`` (``record_go1_envpool.py``; the method:
``/work/notes``' spec section 12, summarized here).

A. Task parity, every valid env-step and every term: MuJoCo Warp's data is set to what the
   task reads after step t (``qpos``/``qvel`` of row t + 1, ``sensordata``, the feet's
   ``site_xpos``, the imu's ``site_xmat``, ``actuator_force``) and the task state to its
   value before step t; only the task runs (``env.task.compute``). Tolerances: float32
   round-off of one evaluation (inputs are float32 roundings of MuJoCo C's float64): a
   wrong scale, sign, formula, timing (air time before/after its increment, last contact
   before/after its update) or index (the RL/RR contact sensors are stored swapped)
   changes an active term by 10% or more, 3 to 4 orders of magnitude above them.
B. Physics: one env step of MuJoCo Warp (float32, Playground's 1 solver iteration) from
   each recorded state agrees with MuJoCo C at most steps only (the unconverged solve parts
   the two at about 1 step in 4), so a median and a fraction are asserted, flat only (on
   the heightfield MuJoCo Warp keeps at most 4 contacts per foot by design).
C. Reset: the reset observation from envpool's reset state.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpuparam as gp
from tests.envs.robots.parity import (
    FOOT_STATE,
    OBS_TOL,
    forward_reset_state,
    load,
    observe_only,
    one_step_qvel_errors,
    set_action_scale,
    tensor,
    valid_steps,
    write_data_after_step,
    write_foot_state,
)

pytest.importorskip("mujoco_warp")

NAMES = {"flat": "Go1JoystickFlatTerrain-v1", "rough": "Go1JoystickRoughTerrain-v1"}


@pytest.fixture(scope="module", params=["flat", "rough"])
def case(request):
    f = load(f"go1_envpool_{request.param}")
    n = f["valid"].shape[1]
    env = gp.make(NAMES[request.param], n, device="cpu", seed=0, noise_level=0.0)
    return request.param, f, env


def _write_after_step(env, f, t: int) -> None:
    """MuJoCo Warp's data as MuJoCo C left it after step t, the task state before it."""
    write_data_after_step(env, f, t, feet=("FR", "FL", "RR", "RL"), imu="imu")
    write_foot_state(env, f, t)
    env.task.state["countdown"].fill_(10**6)  # no resampling inside the compared step
    env.context.action.copy_(tensor(f["action"][t]))


def test_task_matches_envpool_every_step_and_term(case):
    terrain, f, env = case
    scales = np.array([env.params.spec[f"reward_{k}"].default for k in f["term_names"]])
    active = np.zeros(16, int)
    checked = 0
    for t, ok in valid_steps(f):
        _write_after_step(env, f, t)
        env.task.compute(env.context)
        out = env.outputs
        priv = out["privileged_observation"].numpy()[ok]
        want = f["privileged_state"][t][ok].copy()
        want[:, 45:48] = f["command"][t][ok]  # Playground shows the command of the step
        np.testing.assert_allclose(priv, want, **OBS_TOL, err_msg=f"{terrain} step {t}")
        np.testing.assert_array_equal(out["observation"].numpy()[ok], priv[:, :48])
        terms = out["reward_terms"].numpy()[ok]
        for k, name in enumerate(f["term_names"]):
            np.testing.assert_allclose(terms[:, k], f["reward_terms"][t][ok, k], rtol=1e-4,
                                       atol=1e-6 * abs(scales[k]),
                                       err_msg=f"{terrain} step {t} term {name}")
        active += (np.abs(f["reward_terms"][t][ok]) > 0).sum(0)
        np.testing.assert_array_equal(terms[:, 16], 0.0)  # no penalized bodies here
        np.testing.assert_allclose(out["reward"].numpy()[ok], f["reward"][t][ok], rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_array_equal(out["terminated"].numpy()[ok], f["terminated"][t][ok])
        checked += int(ok.sum())
    assert checked == int(f["valid"].sum()) > 400
    assert active.min() >= 6, dict(zip(f["term_names"], active, strict=True))


def test_reset_observation_matches_envpool(case):
    terrain, f, env = case
    forward_reset_state(env, f, f["reset_qpos"][:, 7:])
    env.backend.state["kick_steps"].zero_()
    env.backend.state["kick_steps"][:, 1] = 50  # kicks off: not kicking
    observe_only(env, FOOT_STATE, command=tensor(f["reset_command"]))
    np.testing.assert_allclose(env.outputs["privileged_observation"].numpy(),
                               f["reset_privileged_state"], **OBS_TOL)


def test_one_env_step_matches_mujoco_c_at_most_steps():
    """Physics through the env (PD, action scale per env: the "flail" envs use 1.0)."""
    f = load("go1_envpool_flat")
    n = f["valid"].shape[1]
    env = gp.make(NAMES["flat"], n, device="cpu", seed=0, noise_level=0.0,
                  max_episode_steps=10**6)
    set_action_scale(env, f)
    errs = one_step_qvel_errors(env, f, 40)
    assert errs.size > 250
    assert np.median(errs) < 1e-4, np.median(errs)
    assert (errs < 1e-3).mean() > 0.6, (errs < 1e-3).mean()
