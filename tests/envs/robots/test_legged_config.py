"""A legged task is a config (``gpuparam.envs.mujoco.legged_task``): the configs of Go1 and
G1 give the observation sizes and parameter tables their tasks have always had, a config
variant is a ``dataclasses.replace``, and a task can bring its own ``@wp.func`` term. The
kernels themselves are checked against envpool by ``test_go1_parity.py`` and
``test_g1_parity.py``; these checks build no kernel."""

from __future__ import annotations

import dataclasses

import pytest
import warp as wp

pytest.importorskip("mujoco_warp")

from gpuparam.kernels import legged_terms as kt  # noqa: E402

from gpuparam.envs.mujoco import g1, go1  # noqa: E402
from gpuparam.envs.mujoco.legged_task import Reward, _size  # noqa: E402


def _sizes(cfg, nu: int) -> tuple[int, int]:
    nf = len(cfg.feet)
    o = sum(_size(t.size, nu, nf) for t in cfg.obs)
    return o, o + sum(_size(t.size, nu, nf) for t in cfg.priv)


def test_the_configs_give_the_tasks_observation_sizes():
    assert _sizes(go1.GO1_JOYSTICK, 12) == (48, 123)
    assert _sizes(g1.G1_JOYSTICK, 29) == (103, 216)


def test_the_configs_parameter_tables_keep_their_order():
    names = [s.name for s in go1.go1_task_specs()]
    assert names[:17] == [f"reward_{t}" for t in go1.REWARD_TERMS]
    assert names[17] == "noise_level" and names[-9:] == ["command_low", "command_high",
        "rel_standing_envs", "rel_heading_envs", "heading_stiffness", "heading_range",
        "command_fixed", "command_value", "command_nonzero_prob"]
    scan = [s.name for s in g1.g1_task_specs(True)]
    plain = [s.name for s in g1.g1_task_specs()]
    assert scan == plain[:30] + [s.name for s in g1.SCAN_SPECS] + plain[30:]


@wp.func
def upright(c: kt.Ctx, m: kt.TaskModel, sn: kt.Sensors, p: kt.TaskParams, d: kt.TaskData,
            st: kt.TaskState, act: wp.array2d(dtype=float)) -> float:
    return c.up[2]


def test_a_new_task_is_a_config_with_its_own_term():
    cfg = dataclasses.replace(go1.GO1_JOYSTICK, command=None,
                              rewards=(Reward("upright", 1.0, upright, "upvector z"),
                                       go1.REWARDS[10]))
    assert cfg.reward_names == ("upright", "action_rate")
    names = [s.name for s in cfg.param_specs()]
    assert names[:2] == ["reward_upright", "reward_action_rate"]
    assert go1.GO1_JOYSTICK.reward_names == go1.REWARD_TERMS  # the original untouched


def test_bad_contact_bodies_are_refused_by_name():
    with pytest.raises(ValueError, match=r"penalized: expected Go1 body names .* got str 'x'"):
        go1.go1_model("flat", penalized=("x",))
    with pytest.raises(ValueError, match=r"one body: \('trunk',\)"):
        go1.check_contact_bodies("terminating_contacts", "trunk")
