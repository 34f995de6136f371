"""Velocity commands as IsaacLab / mjlab users set them (``legged_task.command_specs``,
``kernels.legged_terms.command_*``), on Go1 (and one G1 check): ``(low, high)`` ranges,
standing envs, heading commands, pinned commands by masked write; each mode's law, the
envs outside a mask bit for bit unchanged, the defaults unchanged (Playground's draws: the
parity tests), bad input refused."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import gpuparam as gp

pytest.importorskip("mujoco_warp")

from gpuparam.envs.mujoco.legged_task import COMMAND_PARAMS  # noqa: E402

FLAT = "Go1JoystickFlatTerrain-v1"
N = 8
MASK = torch.tensor([False, True, False, True, True, False, False, True])
CMD = slice(45, 48)  # the command in Go1's observation
STEPS = 6
# commands resampled about every other step
FAST = dict(command_resample_time=0.04)
START: dict = {}


@pytest.fixture(scope="module")
def pair():
    """Two Go1 envs of the same seed: ``ref`` keeps the defaults, ``env`` gets the writes."""
    envs = (gp.make(FLAT, N, device="cpu", seed=11, **FAST),
            gp.make(FLAT, N, device="cpu", seed=11, **FAST))
    for env in envs:
        START[id(env)] = env.state_dict()  # each run starts from here: episode 0 again
    return envs


def _actions(steps: int = STEPS) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.rand(steps, N, 12, generator=g) * 2 - 1


def _run_each(env, writes: dict, mask=MASK):
    """``writes`` set for ``mask`` (the rest of the block at its defaults), a reset, then
    STEPS steps; per step (the reset first) the observation, the command and heading
    states, the base quaternion."""
    env.load_state_dict(START[id(env)])
    for name in (*COMMAND_PARAMS, "command_nonzero_prob", "command_keep_prob"):
        env.params.set(name, torch.tensor(env.params.spec[name].default))
    for name, value in writes.items():
        env.params.set(name, value, mask=mask)
    recs = []

    def rec(td):
        recs.append(dict(obs=td["observation"].clone(),
                         command=env.task.state["command"].clone(),
                         heading=env.task.state["heading"].clone(),
                         quat=env.state["qpos"][:, 3:7].clone()))

    rec(env.reset())
    for a in _actions():
        rec(env.step(a))
    return recs


def _same_outside(ref, got, mask=MASK):
    for r, g in zip(ref, got, strict=True):
        for k in ("obs", "command", "heading", "quat"):
            assert torch.equal(r[k][~mask], g[k][~mask]), k


def test_defaults_are_playgrounds_symmetric_ranges():
    from gpuparam.envs.mujoco.g1 import G1_JOYSTICK
    from gpuparam.envs.mujoco.go1 import GO1_JOYSTICK
    for cfg, a in ((GO1_JOYSTICK, (1.5, 0.8, 1.2)), (G1_JOYSTICK, (1.0, 0.5, 1.0))):
        specs = {s.name: s for s in cfg.params}
        low = specs["command_low"].default_tensor()
        high = specs["command_high"].default_tensor()
        assert torch.equal(high, torch.tensor(a)) and torch.equal(low, -high)
        assert specs["rel_standing_envs"].default == 0.0
        assert specs["rel_heading_envs"].default == 0.0
        assert specs["command_fixed"].default == 0.0


def test_default_run_is_the_reference_and_commands_in_range(pair):
    ref, env = pair
    a, b = _run_each(ref, {}), _run_each(env, {})
    _same_outside(a, b, torch.zeros(N, dtype=torch.bool))
    high = torch.tensor((1.5, 0.8, 1.2))
    for r in a:
        assert (r["command"].abs() <= high).all()
        assert (r["heading"][:, 0] == 0).all()  # no heading env


def test_range_low_high_draws_between_them(pair):
    ref, env = pair
    low, high = [0.5, -0.2, 0.0], [1.0, 0.3, 0.0]
    base = _run_each(ref, {})
    got = _run_each(env, {"command_low": low, "command_high": high,
                          "command_nonzero_prob": [1.0, 1.0, 1.0]})
    _same_outside(base, got)
    lo, hi = torch.tensor(low), torch.tensor(high)
    reset = got[0]["command"][MASK]
    assert ((reset >= lo) & (reset <= hi)).all(), reset
    assert (reset[:, 2] == 0).all()  # low == high: exactly that value
    for r in got:  # resampled, redrawn in [low, high] (non-zero prob 1) or kept
        c = r["command"][MASK]
        assert ((c >= lo) & (c <= hi)).all(), c


def test_low_equal_high_gives_that_command(pair):
    _, env = pair
    v = torch.tensor([0.7, -0.25, 0.3])
    got = _run_each(env, {"command_low": v, "command_high": v,
                          "command_nonzero_prob": [1.0, 1.0, 1.0], "command_keep_prob": 0.0})
    for r in got:
        assert torch.equal(r["command"][MASK], v.expand(int(MASK.sum()), 3))


def test_standing_envs_get_zero_commands(pair):
    ref, env = pair
    base = _run_each(ref, {})
    got = _run_each(env, {"rel_standing_envs": 1.0})
    _same_outside(base, got)
    for r in got:
        assert (r["command"][MASK] == 0).all()
        assert (r["obs"][MASK][:, CMD] == 0).all()


def _yaw(q: torch.Tensor) -> torch.Tensor:
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def test_heading_command_law(pair):
    ref, env = pair
    stiff, lo, hi = 0.8, -0.6, 0.9
    base = _run_each(ref, {})
    got = _run_each(env, {"rel_heading_envs": 1.0, "heading_stiffness": stiff,
                          "heading_range": [-1.0, 2.0],
                          "command_low": [-1.5, -0.8, lo], "command_high": [1.5, 0.8, hi]})
    _same_outside(base, got)
    for r in got:
        h = r["heading"][MASK]
        assert (h[:, 0] == 1).all() and (h[:, 1] >= -1.0).all() and (h[:, 1] <= 2.0).all()
        err = h[:, 1] - _yaw(r["quat"][MASK])
        err = torch.atan2(torch.sin(err), torch.cos(err))
        want = torch.clamp(stiff * err, lo, hi)
        torch.testing.assert_close(r["command"][MASK][:, 2], want, rtol=0, atol=1e-5)
    # targets are redrawn at the resamples: not all equal to the reset's
    assert not all(torch.equal(r["heading"][MASK, 1], got[0]["heading"][MASK, 1])
                   for r in got)


def test_pinned_command_by_masked_write(pair):
    ref, env = pair
    v = [0.6, -0.1, 0.25]
    base = _run_each(ref, {})
    got = _run_each(env, {"command_fixed": 1.0, "command_value": v,
                          "rel_heading_envs": 1.0, "rel_standing_envs": 0.5})
    want = torch.tensor(v).expand(int(MASK.sum()), 3)
    for r in got:  # through resamples (about every other step), heading and standing draws
        assert torch.equal(r["command"][MASK], want)
        assert torch.equal(r["obs"][MASK][:, CMD], want)
    # outside the mask: bit for bit the defaults' run (their standing/heading stay off)
    _same_outside(base, got)


def test_pin_between_steps_takes_effect_at_the_next_step(pair):
    _, env = pair
    _run_each(env, {})
    v = torch.tensor([0.4, 0.2, -0.3])
    env.params.set("command_value", v, mask=MASK)
    env.params.set("command_fixed", 1.0, mask=MASK)
    td = env.step(torch.zeros(N, 12))
    assert torch.equal(td["observation"][MASK][:, CMD], v.expand(int(MASK.sum()), 3))
    assert torch.equal(env.task.state["command"][MASK], v.expand(int(MASK.sum()), 3))
    env.params.set("command_fixed", 0.0)  # released: the law resamples it from then on


@pytest.mark.parametrize("name, value, what", [
    ("command_fixed", 0.5, "whole numbers"),
    ("command_fixed", 2.0, "outside its range"),
    ("rel_standing_envs", 1.5, "outside its range"),
    ("rel_heading_envs", -0.1, "outside its range"),
    ("heading_range", [1.0, -1.0], "low <= high"),
    ("command_low", [float("nan"), 0.0, 0.0], "command_low"),
    ("command_value", [0.0, 0.0], "command_value"),
])
def test_bad_values_are_refused(pair, name, value, what):
    _, env = pair
    before = env.params[name].clone()
    with pytest.raises(ValueError, match=what):
        env.params.set(name, value, mask=MASK)
    assert torch.equal(env.params[name], before)


def test_bad_specs_are_refused():
    from gpuparam.envs.mujoco.go1 import GO1_JOYSTICK
    from gpuparam.envs.mujoco.legged_task import LeggedTask, _command_mode, command_specs
    with pytest.raises(ValueError, match="3 values"):
        command_specs((1.0, 2.0))
    partial = dataclasses.replace(GO1_JOYSTICK, params=tuple(
        s for s in GO1_JOYSTICK.params if s.name != "rel_heading_envs"))
    with pytest.raises(ValueError, match="rel_heading_envs"):
        _command_mode(partial)
    assert LeggedTask  # the task binds the block through _command_mode


def test_g1_pinned_and_standing():
    env = gp.make("G1JoystickFlatTerrain-v1", 2, device="cpu", seed=0)
    mask = torch.tensor([True, False])
    env.params.set("command_fixed", 1.0, mask=mask)
    env.params.set("command_value", [0.5, 0.0, -0.2], mask=mask)
    env.params.set("rel_standing_envs", 1.0, mask=~mask)
    env.params.set("command_resample_steps", 1.0)  # a new command every other step
    env.reset()
    for _ in range(4):
        td = env.step(torch.zeros(2, env.mjm.nu))
        assert torch.equal(td["observation"][0, 9:12], torch.tensor([0.5, 0.0, -0.2]))
        assert (td["observation"][1, 9:12] == 0).all()
    assert math.isfinite(float(td["reward"].sum()))


def test_play_command_pins_every_env(pair, tmp_path):
    """``python -m gpuparam.play --command VX VY YAW``: parsed, checked, then pinned."""
    pytest.importorskip("tyro")
    from gpuparam.apps.cli import parse_play
    from gpuparam.apps.play import pin_command

    args = ["--task", FLAT, "--checkpoint", "examples/go1_policy.pt", "--out", str(tmp_path)]
    assert parse_play([*args, "--command", "0.5", "0", "-0.2"]).cfg.command == (0.5, 0.0, -0.2)
    with pytest.raises(SystemExit):
        parse_play([*args, "--command", "nan", "0", "0"])
    _, env = pair
    _run_each(env, {})
    with pytest.raises(SystemExit, match="--command"):
        pin_command(env, (500.0, 0.0, 0.0))  # outside command_value's range
    assert (env.params["command_fixed"] == 0).all()
    pin_command(env, (0.5, 0.0, -0.2))
    td = env.step(torch.zeros(N, 12))
    assert torch.equal(td["observation"][:, CMD], torch.tensor([0.5, 0.0, -0.2]).expand(N, 3))
    env.params.set("command_fixed", 0.0)
