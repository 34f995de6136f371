"""The legged recipe on G1, unchanged (``gpuparam.envs.mujoco.legged``, ``kernels/g1.py``):
masked writes of the recipe's and the task's parameters, the reset's joint scale, pushes,
the command law, draws independent of the number of envs, checkpoints."""

from __future__ import annotations

import pytest
import torch
import warp as wp

import gpuparam as gp

pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

FLAT = "G1JoystickFlatTerrain-v1"
N = 4
MASK = torch.tensor([False, True, False, True])
# every piece active within a few steps: kicks after 1-2 steps, a push every 2-3 steps, a
# new command every 3 steps
ACTIVE = dict(kick_enable=1.0, kick_wait=[0.02, 0.04], kick_duration=[0.04, 0.1],
              push_interval=[0.04, 0.06], command_resample_steps=2.0)


def _env(n: int = N, **kw):
    return gp.make(FLAT, n, device="cpu", seed=3, **{**ACTIVE, **kw})


def _actions(steps: int, n: int = N, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(steps, n, 29, generator=g) * 2 - 1) * 0.3


def _run(env, actions) -> list[dict[str, torch.Tensor]]:
    out = []
    for a in actions:
        td = env.step(a)
        rec = {k: td[k].clone() for k in ("observation", "privileged_observation",
                                          "reward_terms", "reward", "terminated")}
        rec["qvel"] = env.state["qvel"].clone()
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def base():
    env = _env(max_episode_steps=10**6)
    return env, env.state_dict(), _actions(5)


# (parameter, value written for MASK): each changes the masked envs within 5 steps
PARAMS = [
    ("kp", 50.0), ("kd", 1.0), ("torque_limit", 5.0), ("motor_strength", 0.7),
    ("base_com_offset", [0.03, -0.02, 0.01]), ("action_scale", 0.3), ("action_delay", 2.0),
    ("kick_enable", 0.0), ("kick_velocity", [2.0, 2.5]), ("reset_xy_range", 0.1),
    ("reset_yaw_range", 0.5), ("reset_velocity_range", 0.1), ("reset_joint_scale", [1.0, 1.0]),
    ("noise_level", 0.5), ("noise_joint_vel", 0.5), ("tracking_sigma", 0.5),
    ("max_foot_height", 0.05), ("soft_joint_limit_factor", 0.5), ("command_high", [0.2] * 3),
    ("command_zero_prob", 1.0), ("command_resample_steps", 100.0), ("gait_frequency", [2, 3]),
    ("push_enable", 0.0), ("push_velocity", [1.0, 1.5]), ("push_interval", [1.0, 2.0]),
    ("reward_feet_phase", 3.0), ("reward_pose", -1.0), ("reward_alive", 1.0),
    ("pair_friction", [0.05, 0.05, 1.0, 1.0, 1.0]),
    ("dof_frictionloss", 0.5), ("joint_offset", 0.04), ("added_mass", 0.8), ("body_ipos", 0.01),
]


@pytest.mark.parametrize("name,value", PARAMS, ids=[p[0] for p in PARAMS])
def test_masked_write_changes_exactly_the_masked_envs(base, name, value):
    env, s0, actions = base
    env.load_state_dict(s0)
    env.reset()
    ref = _run(env, actions)
    env.load_state_dict(s0)
    env.params.set(name, value, mask=MASK)
    env.reset()  # reset-time parameters (reset ranges, kicks, gait, pushes) act here
    got = _run(env, actions)
    differs = False
    for r, g in zip(ref, got, strict=True):
        for k in r:
            assert torch.equal(r[k][~MASK], g[k][~MASK]), (name, k)
            differs |= not torch.equal(r[k][MASK], g[k][MASK])
    assert differs, name


def test_pair_friction_is_the_feet_pairs_model_field():
    """Playground randomizes G1's floor friction through its feet-floor contact pairs
    (``randomize.py``: ``pair_friction[0:2, 0:2]``), which ``geom_friction`` does not
    reach: ``pair_friction`` writes both tangential components per world."""
    env = _env()
    env.randomize(gp.Uniform("pair_friction", [0.4, 0.4, 1.0, 1.0, 1.0],
                             [1.0, 1.0, 1.0, 1.0, 1.0], on="reset"))
    env.reset()
    f = wp.to_torch(env.backend.m.pair_friction)  # [N, npair, 5]
    want = env.params["pair_friction"]
    assert torch.equal(f[:, :, 0], want) and torch.equal(f[:, :, 1], want)
    assert torch.equal(f[:, :, 2:], torch.as_tensor(env.mjm.pair_friction[:, 2:],
                                                    dtype=torch.float32).expand(N, -1, -1))
    assert want[:, :2].std() > 0.05 and torch.equal(want[:, 2:], torch.ones(N, 3))


def test_reset_scales_each_joint_and_its_pd_target():
    env = _env(8)
    env.reset()
    home = torch.as_tensor(env.backend.home_qpos[7:])
    q = env.state["qpos"][:, 7:]
    ctrl = wp.to_torch(env.backend.d.ctrl)
    moved = home != 0
    ratio = q[:, moved] / home[moved]
    assert ratio.min() >= 0.5 and ratio.max() <= 1.5 and ratio.std() > 0.1
    assert torch.equal(ctrl, q)  # Playground: ctrl = qpos[7:] at the reset
    env.params.set("reset_joint_scale", [1.0, 1.0])
    env.reset()
    assert torch.equal(env.state["qpos"][:, 7:], home.expand(8, -1))


def test_command_law_and_pushes():
    env = _env(max_episode_steps=10**6, push_interval=[0.02, 0.02])
    env.reset()
    st = env.task.state
    c0 = st["command"].clone()
    a = torch.zeros(N, 29)
    env.step(a)
    env.step(a)
    assert torch.equal(st["command"], c0) and torch.equal(st["step"], torch.full((N,), 2))
    env.step(a)  # a third step: more than command_resample_steps (2) since the last command
    assert not torch.equal(st["command"], c0) and torch.equal(st["step"], torch.zeros(N))
    bound = env.params["command_high"]
    assert (st["command"].abs() <= bound).all()
    # a push every step (interval 1 step): qvel after the task differs from the physics'
    env.reset()
    s0, qvel = env.state_dict(), []
    for on in (0.0, 1.0):
        env.load_state_dict(s0)
        env.params.set("push_enable", on)
        env.step(a)
        qvel.append(env.state["qvel"].clone())
    dv = qvel[1] - qvel[0]  # the same physics, then a push of U(0.1, 2) m/s in x, y
    assert torch.equal(dv[:, 2:], torch.zeros(N, 33))
    assert ((dv[:, :2].norm(dim=1) > 0.0999) & (dv[:, :2].norm(dim=1) < 2.0001)).all(), dv


def test_draws_do_not_depend_on_num_envs():
    """The reset, the task's reset draws (command, gait, push interval) and the commands
    resampled within an episode are env i's whatever N. (The physics of world i is not
    bit-identical across N here: MuJoCo Warp's solve of G1's contact pairs differs at
    float32 round-off, seen 3e-5 in the observation after a step, and so do the reset's
    accelerometer and actuator forces in the privileged observation.)"""
    a = _actions(3, 4)
    small, big = _env(2), _env(4)
    ts, tb = small.reset(), big.reset()
    assert torch.equal(ts["observation"], tb["observation"][:2])
    assert torch.equal(small.state["qpos"], big.state["qpos"][:2])
    for t in range(3):  # a command resampled after the third step
        small.step(a[t, :2])
        big.step(a[t])
    for k, v in small.task.state.items():
        if k in ("command", "step", "phase_dt", "push_interval"):
            assert torch.equal(v, big.task.state[k][:2]), k


def test_checkpoint_continues_bit_for_bit():
    env = _env()
    a = _actions(6)
    for t in range(3):
        env.step(a[t])
    s = env.state_dict()
    ref = _run(env, a[3:])
    env.load_state_dict(s)
    got = _run(env, a[3:])
    for r, g in zip(ref, got, strict=True):
        for k in r:
            assert torch.equal(r[k], g[k]), k


@pytest.mark.parametrize("bad", [-1, 1.5, True, 2000])
def test_bad_max_action_delay_is_refused(bad):
    with pytest.raises(ValueError, match="max_action_delay"):
        gp.make(FLAT, 2, device="cpu", max_action_delay=bad)
