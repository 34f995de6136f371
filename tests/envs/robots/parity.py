"""Shared setup of the envpool parity tests (``test_{go1,g1,t1,h1,spot,go1_tasks}_parity.py``):
reading a recorded fixture into the env (per-env scenario parameters, MuJoCo Warp's data,
the task state). The tests keep their own assertions and tolerances."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import warp as wp

import gpuparam as gp

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
OBS_TOL = dict(rtol=1e-5, atol=1e-5)
# the legged tasks' per-foot state, zero at a reset
FOOT_STATE = ("last_act", "air_time", "swing_peak", "last_contact")
BIPED_FEET = ("left_foot", "right_foot")


def tensor(x) -> torch.Tensor:
    """``x`` as a contiguous tensor (no copy where it already is one)."""
    return torch.as_tensor(np.ascontiguousarray(x))


def load(name: str) -> dict:
    """The fixture ``tests/fixtures/<name>.npz`` as a dict of arrays."""
    return dict(np.load(FIXTURES / f"{name}.npz"))


def fixture_meta(f) -> dict:
    """The fixture's recorder metadata (its JSON ``meta``)."""
    return json.loads(str(f["meta"]))


def scenario_configs(f) -> list[dict]:
    """Each env's envpool config (its scenario's)."""
    m = fixture_meta(f)
    return [m["scenarios"][str(s)]["config"] for s in f["scenario"]]


def set_reward_scales(env, f) -> None:
    """Each env's reward scales, as recorded (``<term>_scale`` of its scenario's config)."""
    cfgs = scenario_configs(f)
    for k in f["term_names"]:
        scales = np.array([c[f"{k}_scale"] for c in cfgs], np.float32)
        env.params.set(f"reward_{k}", tensor(scales))


def set_action_scale(env, f) -> None:
    """Each env's action scale from its scenario's config (the "flail" envs use 1.0), the
    parameter's default where the config has none."""
    default = env.params.spec["action_scale"].default
    scale = [c.get("action_scale", default) for c in scenario_configs(f)]
    env.params.set("action_scale", torch.tensor(scale, dtype=torch.float32))


def biped_case(robot: str, terrain: str, name: str) -> tuple:
    """G1's and T1's module fixture: the fixture ``<robot>_envpool_<terrain>`` and env
    ``name`` with one env per recorded env, noise and pushes off, the recorded reward
    scales; as ``(terrain, f, meta, env)``."""
    f = load(f"{robot}_envpool_{terrain}")
    n = f["valid"].shape[1]
    env = gp.make(name, n, device="cpu", seed=0, noise_level=0.0, push_enable=0.0)
    set_reward_scales(env, f)
    return terrain, f, fixture_meta(f), env


def valid_steps(f):
    """The recorded steps with a valid env: ``(t, ok)``, ``ok`` the valid envs of step t."""
    for t in range(f["valid"].shape[0]):
        ok = f["valid"][t]
        if ok.any():
            yield t, ok


def write_data_after_step(env, f, t: int, data=("sensordata", "actuator_force"),
                          feet=(), imu: str | None = None) -> None:
    """MuJoCo Warp's data as MuJoCo C left it after step t: ``qpos``/``qvel`` of row t + 1,
    the ``data`` fields of row t, the ``feet`` sites' ``site_xpos`` (``feet_xpos``) and the
    ``imu`` site's ``site_xmat`` (``imu_xmat``)."""
    d, mjm = env.backend.d, env.mjm
    for k in ("qpos", "qvel"):
        wp.to_torch(getattr(d, k)).copy_(tensor(f[k][t + 1]))
    for k in data:
        wp.to_torch(getattr(d, k)).copy_(tensor(f[k][t]))
    xpos = wp.to_torch(d.site_xpos)
    for k, foot in enumerate(feet):
        xpos[:, mjm.site(foot).id] = tensor(f["feet_xpos"][t][:, k])
    if imu is not None:
        wp.to_torch(d.site_xmat)[:, mjm.site(imu).id] = tensor(f["imu_xmat"][t]).reshape(-1, 3, 3)


def write_task_state(env, f, t: int, keys) -> None:
    """The task state before step t: each state key from row t of the fixture (a pair
    ``(state_key, fixture_key)`` where the names differ)."""
    st = env.task.state
    for k in keys:
        k, fk = (k, k) if isinstance(k, str) else k
        st[k].copy_(tensor(f[fk][t]))


def write_foot_state(env, f, t: int) -> None:
    """The legged joystick's command and per-foot state before step t."""
    write_task_state(env, f, t, ("command", "last_act", ("air_time", "feet_air_time"),
                                 "swing_peak"))
    env.task.state["last_contact"].copy_(tensor(f["last_contact"][t].astype(np.float32)))


def write_biped_after_step(env, f, t: int, imu: str) -> None:
    """G1's and T1's: MuJoCo Warp's data as MuJoCo C left it after step t (with ``qacc``),
    the task state before it (phase included) and the action of step t."""
    write_data_after_step(env, f, t, ("qacc", "sensordata", "actuator_force"), BIPED_FEET, imu)
    write_foot_state(env, f, t)
    st = env.task.state
    st["step"].zero_()  # no resampling inside the compared step
    st["phase"].copy_(tensor(f["phase"][t]))
    st["phase_dt"].copy_(tensor(f["phase_dt"]))
    env.context.action.copy_(tensor(f["action"][t]))


def forward_reset_state(env, f, ctrl, qacc_warmstart=None) -> None:
    """MuJoCo Warp's data at envpool's reset state (``reset_qpos``, ``reset_qvel``, the
    targets ``ctrl``, the warm start if given, no applied force), forwarded."""
    import mujoco_warp as mjw

    d = env.backend.d
    wp.to_torch(d.qpos).copy_(tensor(f["reset_qpos"]))
    wp.to_torch(d.qvel).copy_(tensor(f["reset_qvel"]))
    wp.to_torch(d.ctrl).copy_(tensor(ctrl))
    if qacc_warmstart is not None:
        wp.to_torch(d.qacc_warmstart).copy_(tensor(qacc_warmstart))
    wp.to_torch(d.xfrc_applied).zero_()
    with env.backend.scope():
        mjw.forward(env.backend.m, d)


def observe_only(env, zero=(), **state) -> None:
    """The task's observation of every env, its state keys ``zero`` zeroed and the others
    given set first."""
    st = env.task.state
    for k in zero:
        st[k].zero_()
    for k, v in state.items():
        st[k].copy_(v)
    env.task.observe_only(env.context, torch.ones(env.num_envs, dtype=torch.bool))


def observe_biped_reset(env, f) -> None:
    """G1's and T1's reset observation from envpool's reset state (targets: the reset pose,
    per-foot state zero, the recorded command, the feet's phases 0 and pi)."""
    forward_reset_state(env, f, f["reset_qpos"][:, 7:])
    observe_only(env, FOOT_STATE, command=tensor(f["reset_command"]),
                 phase=torch.tensor([0.0, np.pi]).expand(env.num_envs, 2))


def set_recorded_state(env, f, t: int) -> None:
    """The env's physics state (``qpos``, ``qvel``, the warm start) of row t."""
    st = env.backend.state
    for k in ("qpos", "qvel", "qacc_warmstart"):
        st[k].copy_(tensor(f[k][t]))


def qvel_error(env, f, t: int) -> np.ndarray:
    """Per env, the largest difference of ``qvel`` from MuJoCo C's after step t."""
    return np.abs(env.backend.state["qvel"].numpy() - f["qvel"][t + 1]).max(1)


def one_step_qvel_errors(env, f, steps: int) -> np.ndarray:
    """One env step from each recorded state t < ``steps`` with its recorded action: the
    ``qvel`` errors of the envs valid and not terminated at t."""
    errs = []
    for t in range(steps):
        set_recorded_state(env, f, t)
        env.step(tensor(f["action"][t]))
        ok = f["valid"][t] & ~f["terminated"][t]
        errs.extend(qvel_error(env, f, t)[ok].tolist())
    return np.array(errs)
