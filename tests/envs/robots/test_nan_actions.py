"""NaN actions on the robots (issue 43 item 1, docs/guarantees.md "Invalid actions are
counted"): an env whose action has a NaN component is stepped as with the zero action (MuJoCo
Warp would clamp a NaN control to a bound: every joint at its torque limit), and every output
of that env at that step is NaN: observation, final observation, privileged observation,
reward, reward terms. The other envs, and every later step, are those of the zero action, bit
for bit."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

ROBOTS = ("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Humanoid-v5",
          "Go1JoystickFlatTerrain-v1", "G1JoystickFlatTerrain-v1")
KEYS = ("observation", "final_observation", "privileged_observation", "reward", "reward_terms")


def _step(env, action) -> dict[str, torch.Tensor]:
    td = env.step(action)
    out = {k: td[k].clone() for k in (*KEYS, "terminated") if k in td.keys()}
    out["qpos"] = env.state["qpos"].clone()
    out["qvel"] = env.state["qvel"].clone()
    return out


@pytest.mark.parametrize("name", ROBOTS)
def test_nan_action_shows_in_that_envs_outputs_only(name):
    env = gp.make(name, 2, device="cpu", seed=1)
    env.reset()
    nu = env.action_spec.shape[0]
    g = torch.Generator().manual_seed(0)
    first = (torch.rand(2, nu, generator=g) * 2 - 1) * 0.3
    then = (torch.rand(2, nu, generator=g) * 2 - 1) * 0.3
    start = env.state_dict()
    bad = first.clone()
    bad[1] = 0.0
    bad[1, nu // 2] = float("nan")
    ref = first.clone()
    ref[1] = 0.0  # what the NaN env is stepped with
    got = [_step(env, bad), _step(env, then)]
    assert int(env.invalid_actions) == 1
    env.load_state_dict(start)
    want = [_step(env, ref), _step(env, then)]
    for k in KEYS:
        if k not in got[0]:
            continue
        assert torch.isnan(got[0][k][1]).all(), k  # every value of env 1, this step
        assert torch.equal(got[0][k][0], want[0][k][0]), k  # env 0 untouched
        assert torch.equal(got[1][k], want[1][k]), k  # the next step: the zero action's
    for k in ("qpos", "qvel", "terminated"):  # the physics got the zero action
        assert torch.equal(got[0][k], want[0][k]) and torch.equal(got[1][k], want[1][k]), k
    assert torch.isfinite(got[0]["qpos"]).all() and torch.isfinite(got[0]["qvel"]).all()


def test_go1_reward_is_nan_beside_nan_terms():
    """Go1's reward is ``clip(sum * dt, 0, 1e4)``: a NaN sum (here a NaN velocity, a
    diverged state) gives a NaN reward, not 0.0 (``wp.clamp`` of NaN)."""
    env = gp.make("Go1JoystickFlatTerrain-v1", 2, device="cpu", seed=1)
    env.reset()
    env.state["qvel"][1, 0] = float("nan")  # MuJoCo Warp's data, in place
    td = env.step(torch.zeros(2, 12))
    assert torch.isnan(td["reward_terms"][1]).any() and torch.isnan(td["reward"][1])
    assert torch.isfinite(td["reward_terms"][0]).all() and torch.isfinite(td["reward"][0])


def test_validated_robot_actions_stay_inside_the_control_ranges():
    """Issue 43 item 5: with ``validate_actions=True`` a robot refuses an action outside
    its per-actuator ``[low, high]`` (the control ranges), infinite or NaN, stepping
    nothing."""
    env = gp.make("HalfCheetah-v5", 2, device="cpu", seed=0, validate_actions=True)
    env.reset()
    qpos = env.state["qpos"].clone()
    for value, what in ((1.01, r"outside action_spec's \[low, high\] actions for envs \[1\]"),
                        (float("-inf"), r"infinite actions for envs \[1\]"),
                        (float("nan"), r"NaN actions for envs \[1\]")):
        a = torch.zeros(2, 6)
        a[1, 3] = value
        with pytest.raises(ValueError, match=what):
            env.step(a)
    assert torch.equal(env.state["qpos"], qpos)
    env.step(torch.ones(2, 6))  # the bounds themselves are inside
