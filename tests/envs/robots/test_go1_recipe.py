"""The legged recipe on Go1 (``gpuparam.envs.mujoco.legged``, ``kernels/go1.py``): masked
writes of every new parameter, action latency, observation noise, kicks, commands, draws
independent of the number of envs, checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

FLAT = "Go1JoystickFlatTerrain-v1"
N = 4
MASK = torch.tensor([False, True, False, True])
# every piece active within a few steps: kicks after 1-2 steps, commands resampled about
# every other step
ACTIVE = dict(kick_enable=1.0, kick_wait=[0.02, 0.04], kick_duration=[0.04, 0.1],
              command_resample_time=0.04)


def _env(n: int = N, **kw):
    return gp.make(FLAT, n, device="cpu", seed=3, **{**ACTIVE, **kw})


def _actions(steps: int, n: int = N, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(steps, n, 12, generator=g) * 2 - 1


def _run(env, actions) -> list[dict[str, torch.Tensor]]:
    out = []
    for a in actions:
        td = env.step(a)
        rec = {k: td[k].clone() for k in ("observation", "privileged_observation",
                                          "reward_terms", "reward", "terminated")}
        rec["qpos"] = env.state["qpos"].clone()
        out.append(rec)
    return out


def _model_fields(env) -> dict[str, torch.Tensor]:
    m = env.backend.m
    return {f: wp.to_torch(getattr(m, f)).clone() for f in (
        "actuator_gainprm", "actuator_biasprm", "actuator_forcerange", "dof_damping",
        "body_ipos", "body_invweight0", "dof_invweight0", "body_mass", "body_subtreemass",
        "dof_frictionloss", "qpos0")}


# (parameter, value written for MASK, the masked envs must differ within 6 steps)
NEW_PARAMS = [
    ("kp", 50.0, True), ("kd", 1.0, True), ("torque_limit", 5.0, True),
    ("motor_strength", 0.7, True), ("base_com_offset", [0.03, -0.02, 0.01], True),
    ("dof_frictionloss", 0.6, True), ("joint_offset", 0.04, True), ("added_mass", 0.8, True),
    ("body_ipos", 0.01, True),  # every body's centre of mass at (0.01, 0.01, 0.01)
    ("action_scale", 0.3, True), ("action_delay", 2.0, True), ("kick_enable", 0.0, True),
    ("kick_velocity", [2.0, 2.5], True), ("kick_duration", [0.1, 0.2], True),
    ("kick_wait", [0.1, 0.2], True), ("reset_xy_range", 0.1, True),
    ("reset_yaw_range", 0.5, True), ("reset_velocity_range", 0.1, True),
    ("noise_level", 0.5, True), ("noise_linvel", 0.3, True), ("noise_gyro", 0.1, True),
    ("noise_gravity", 0.1, True), ("noise_joint_pos", 0.01, True),
    ("noise_joint_vel", 0.5, True), ("tracking_sigma", 0.5, True),
    ("max_foot_height", 0.05, True), ("soft_joint_limit_factor", 0.9, True),
    ("command_keep_prob", 0.9, True), ("command_resample_time", 3.0, True),
    ("command_high", [0.5, 0.5, 0.5], True), ("command_nonzero_prob", [0.1, 0.9, 0.9], True),
    ("command_low", [-0.2, 0.1, 0.0], True), ("rel_standing_envs", 1.0, True),
    ("rel_heading_envs", 1.0, True), ("command_fixed", 1.0, True),
    # (only for heading or pinned envs: none by default)
    ("heading_stiffness", 2.0, False), ("heading_range", [0.0, 1.0], False),
    ("command_value", [0.3, 0.0, 0.0], False),
    # (termination, stand_still, undesired_contacts: their terms are 0 in these steps, no
    # fall, moving commands, no penalized body; the parity tests check their scales)
    *[(f"reward_{t}", 3.0, t not in ("termination", "stand_still", "undesired_contacts"))
      for t in (
        "tracking_lin_vel", "tracking_ang_vel", "lin_vel_z", "ang_vel_xy", "orientation",
        "dof_pos_limits", "pose", "termination", "stand_still", "torques", "action_rate",
        "energy", "feet_clearance", "feet_height", "feet_slip", "feet_air_time",
        "undesired_contacts")],
    # no effect on the flat task's 6 steps here (checked on the terrain env): unmasked envs
    # still bit-identical
    ("noise_height_scan", 0.5, False), ("height_scan_offset", 0.3, False),
    ("height_scan_scale", 2.0, False), ("terminate_on_contact", 0.0, False),
    ("terrain_level", 0.0, False),
]


@pytest.fixture(scope="module")
def base():
    env = _env(max_episode_steps=10**6)
    env.params.set("soft_joint_limit_factor", 0.6)  # joints past the soft limits
    return env, env.state_dict(), _actions(6)


def test_every_new_parameter_is_covered():
    env = _env(1)
    gymnasium_physical = {"body_mass", "geom_friction", "dof_damping", "dof_armature",
                          "actuator_gear", "gravity"}
    assert {p for p, _, _ in NEW_PARAMS} == set(env.params.names) - gymnasium_physical


@pytest.mark.parametrize("name,value,effect", NEW_PARAMS, ids=[p[0] for p in NEW_PARAMS])
def test_masked_write_changes_exactly_the_masked_envs(base, name, value, effect):
    env, s0, actions = base
    env.load_state_dict(s0)
    ref_fields = _model_fields(env)
    env.reset()
    ref = _run(env, actions)
    env.load_state_dict(s0)
    env.params.set(name, value, mask=MASK)
    fields = _model_fields(env)
    for f, v in fields.items():  # the model of unmasked worlds untouched, bit for bit
        assert torch.equal(v[~MASK], ref_fields[f][~MASK]), f
    env.reset()  # reset-time parameters (reset ranges, kicks) act at the next episode
    got = _run(env, actions)
    differs = False
    for r, g in zip(ref, got, strict=True):
        for k in r:
            assert torch.equal(r[k][~MASK], g[k][~MASK]), (name, k)
            differs |= not torch.equal(r[k][MASK], g[k][MASK])
    assert differs == effect, name


def test_pd_parameters_are_the_model_fields_playground_writes():
    env = _env()
    env.params.set({"kp": 40.0, "kd": 0.8, "torque_limit": 20.0}, mask=MASK)
    env.params.set("motor_strength", 0.5, mask=MASK)
    m = env.backend.m
    gain = wp.to_torch(m.actuator_gainprm)[:, :, 0]
    bias = wp.to_torch(m.actuator_biasprm)[:, :, 1]
    damp = wp.to_torch(m.dof_damping)
    rng = wp.to_torch(m.actuator_forcerange)
    assert torch.equal(gain[MASK], torch.full((2, 12), 20.0))  # kp * motor strength
    assert torch.equal(bias[MASK], torch.full((2, 12), -20.0))
    assert torch.equal(damp[MASK][:, 6:], torch.full((2, 12), 0.4))  # passive 0 + kd * ms
    assert torch.equal(damp[:, :6], torch.zeros(N, 6))  # the free joint: passive only
    assert torch.equal(rng[MASK], torch.tensor([-20.0, 20.0]).expand(2, 12, 2))
    # defaults: Playground's Kp 35, Kd 0.5 and the model's force ranges
    assert torch.equal(gain[~MASK], torch.full((2, 12), 35.0))
    assert torch.equal(damp[~MASK][:, 6:], torch.full((2, 12), 0.5))
    limits = env.mjm.actuator_forcerange[:, 1].astype(np.float32)
    np.testing.assert_array_equal(rng[~MASK][:, :, 1].numpy(), np.tile(limits, (2, 1)))
    # the base's centre of mass: a per-world model field, the derived constants follow at
    # the next reset (or step)
    inv0 = wp.to_torch(m.body_invweight0).clone()
    env.params.set("base_com_offset", [0.05, 0.0, 0.0], mask=MASK)
    ipos = wp.to_torch(m.body_ipos)[:, 1]
    want = torch.tensor(env.mjm.body_ipos[1], dtype=torch.float32) + torch.tensor([0.05, 0, 0])
    assert torch.equal(ipos[MASK], want.expand(2, 3))
    env.reset()
    after = wp.to_torch(m.body_invweight0)
    assert not torch.equal(after[MASK], inv0[MASK]) and torch.equal(after[~MASK], inv0[~MASK])


def test_action_delay_zero_is_no_delay_and_k_is_the_action_k_steps_before():
    actions = _actions(8)
    plain = gp.make(FLAT, N, device="cpu", seed=3, max_action_delay=0)
    delayed = gp.make(FLAT, N, device="cpu", seed=3, max_action_delay=4)
    default = torch.tensor(delayed.backend.default_pose)
    for a in actions:  # delay 0 with a 5-action ring buffer = no buffer at all, bit for bit
        assert torch.equal(plain.step(a)["observation"], delayed.step(a)["observation"])
        ctrl = wp.to_torch(delayed.backend.d.ctrl)
        assert torch.equal(ctrl, default + a * 0.5)
    env = gp.make(FLAT, N, device="cpu", seed=3, max_action_delay=4)
    delays = torch.tensor([0.0, 1.0, 2.0, 4.0])
    env.params.set("action_delay", delays)
    env.reset()
    for t, a in enumerate(actions):
        env.step(a)
        ctrl = wp.to_torch(env.backend.d.ctrl)
        for i, k in enumerate(delays.int().tolist()):
            # before the episode's first action the delayed action is 0 (the default pose)
            want = actions[t - k, i] if t >= k else torch.zeros(12)
            assert torch.equal(ctrl[i], default + want * 0.5), (t, i)
    # randomized per env, like any parameter (rounded to whole steps)
    env.randomize(gp.Uniform("action_delay", 0.0, 4.0, on="reset"))
    env.reset()
    d = env.params["action_delay"]
    assert ((d >= 0) & (d <= 4)).all() and len(set(d.tolist())) > 1


def test_noise_off_is_the_clean_observation_bit_for_bit():
    env = _env(noise_level=0.0)
    a = _actions(3)
    for x in a:
        td = env.step(x)
        obs, priv = td["observation"], td["privileged_observation"]
        clean = torch.cat([priv[:, 57:60], priv[:, 48:51], priv[:, 54:57], priv[:, 63:75],
                           priv[:, 75:87]], 1)  # linvel, gyro, gravity, joints, joint vel
        assert torch.equal(obs[:, :33], clean)
        assert torch.equal(priv[:, :48], obs)
    # noise on for the masked envs only: bounded by level * scale per term
    env.params.set("noise_level", 1.0, mask=MASK)
    td = env.step(a[0])
    obs, priv = td["observation"], td["privileged_observation"]
    clean = torch.cat([priv[:, 57:60], priv[:, 48:51], priv[:, 54:57], priv[:, 63:75],
                       priv[:, 75:87]], 1)
    bound = torch.tensor([0.1] * 3 + [0.2] * 3 + [0.05] * 3 + [0.03] * 12 + [1.5] * 12)
    diff = (obs[:, :33] - clean).abs()
    assert torch.equal(obs[~MASK, :33], clean[~MASK])
    assert (diff[MASK] <= bound * (1 + 1e-5) + 1e-6).all() and (diff[MASK] > 0).all()
    # Playground adds the joint-angle noise before subtracting the default pose
    q = env.state["qpos"][:, 7:]
    np.testing.assert_allclose(obs[:, 9:21], q - torch.tensor(env.backend.default_pose),
                               atol=0.03 + 1e-6)


def test_draws_are_the_same_for_env_i_whatever_num_envs():
    small, big = _env(2), _env(5)
    a = _actions(6, 5)
    for x in a:
        ts, tb = small.step(x[:2]), big.step(x)
        for k in ("observation", "privileged_observation", "reward"):
            assert torch.equal(ts[k], tb[k][:2]), k
    assert torch.equal(small.task.state["command"], big.task.state["command"][:2])


def test_commands_follow_playgrounds_law():
    n = 1000
    env = gp.make(FLAT, n, device="cpu", seed=7)
    a = torch.tensor(env.params.spec["command_high"].default)
    assert torch.equal(torch.tensor(env.params.spec["command_low"].default), -a)
    cmd = env.task.state["command"].clone()
    assert (cmd.abs() <= a).all()
    # at a reset: U(-a, a), never zeroed; countdown round(Exp(1) * 5 s / 0.02 s), mean 250
    np.testing.assert_allclose(cmd.abs().mean(0).numpy(), (a / 2).numpy(), rtol=0.08)
    np.testing.assert_allclose(env.task.state["countdown"].float().mean().item(), 250.0,
                               rtol=0.1)
    # resample at every step: each component kept with probability 0.5, else replaced by
    # U(-a, a) with probability b, by 0 otherwise (a 0 replaced by 0 looks kept)
    env.params.set("command_resample_time", 0.0)
    env.task.state["countdown"].zero_()
    b = torch.tensor(env.params.spec["command_nonzero_prob"].default)
    same = want_same = zeroed = want_zeroed = 0
    for _ in range(4):
        before = env.task.state["command"].clone()
        was_zero = (before == 0).float().mean(0)
        env.step(torch.zeros(n, 12))
        after = env.task.state["command"]
        same += (after == before).float().mean(0)
        want_same += 0.5 + 0.5 * (1 - b) * was_zero
        zeroed += ((after == 0) & (before != 0)).float().mean(0)
        want_zeroed += 0.5 * (1 - b) * (1 - was_zero)
    np.testing.assert_allclose((same / 4).numpy(), (want_same / 4).numpy(), atol=0.04)
    np.testing.assert_allclose((zeroed / 4).numpy(), (want_zeroed / 4).numpy(), atol=0.04)
    assert (env.task.state["command"].abs() <= a).all()


def test_command_and_noise_curriculum_over_their_parameters():
    env = gp.make(FLAT, 8, device="cpu", seed=2)
    easy, hard = [0.1, 0.1, 0.1], [1.5, 0.8, 1.2]
    neg = [-x for x in easy], [-x for x in hard]
    cur = gp.Curriculum(2, params={"command_low": neg, "command_high": (easy, hard),
                                   "noise_level": (0.0, 1.0)},
                        metric="episode_return", promote=-1e9, demote=-2e9)
    env.add_curriculum(cur)
    assert torch.equal(env.params["command_high"], torch.tensor(easy).expand(8, 3))
    env.reset()
    assert (env.task.state["command"].abs() <= torch.tensor(easy)).all()
    ended = torch.tensor([True, False] * 4)
    env.episode_length = torch.where(ended, 999, 0).int()
    env.step(torch.zeros(8, 12))  # the ended episodes are promoted, then reset
    assert torch.equal(cur.levels, ended.int())
    assert torch.equal(env.params["command_high"][ended], torch.tensor(hard).expand(4, 3))
    assert torch.equal(env.params["command_high"][~ended], torch.tensor(easy).expand(4, 3))
    assert torch.equal(env.params["command_low"][ended], -torch.tensor(hard).expand(4, 3))
    new = env.task.state["command"][ended]
    assert (new.abs() <= torch.tensor(hard)).all() and (new.abs() > 0.1).any()
    assert env.params["noise_level"].tolist() == ended.float().tolist()  # raised with it
    td = env.step(torch.zeros(8, 12))
    priv = td["privileged_observation"]
    assert torch.equal(td["observation"][~ended, 3:6], priv[~ended, 48:51])  # no noise yet
    assert not torch.equal(td["observation"][ended, 3:6], priv[ended, 48:51])


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match="max_action_delay: expected an int in"):
        gp.make(FLAT, 1, device="cpu", max_action_delay=-1)
    with pytest.raises(ValueError, match=r"penalized_contacts: expected Go1 body names "
                                         r"\(trunk, FR_hip, .*\), got str 'tail'"):
        gp.make(FLAT, 1, device="cpu", penalized_contacts=("tail",))
    with pytest.raises(KeyError, match="unknown parameter 'terrain_rows'"):
        gp.make(FLAT, 1, device="cpu", terrain_rows=3)  # a Go1Terrain-v0 option
    from gpuparam.envs.mujoco.legged import actuated_dofs
    from gpuparam.envs.mujoco.model import load_model

    with pytest.raises(ValueError, match="expected a position actuator.*got transmission"):
        actuated_dofs(load_model("ant.xml"))  # motors, not PD position actuators
    import mujoco

    two_on_one_joint = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint/><geom size=".1"/><body pos="0 0 .2">'
        '<joint name="h"/><geom size=".05"/></body></body></worldbody><actuator>'
        + '<position joint="h" kp="10" forcerange="-5 5" forcelimited="true"/>' * 2
        + "</actuator></mujoco>")
    with pytest.raises(ValueError, match=r"one actuator per joint, got the dofs \[6, 6\]"):
        actuated_dofs(two_on_one_joint)  # the PD copy writes one actuator per dof
    env = _env(1)
    with pytest.raises(ValueError, match="action_delay.*outside its range"):
        env.params.set("action_delay", 5.0)  # max_action_delay 4
    with pytest.raises(ValueError, match="command_nonzero_prob.*outside its range"):
        env.params.set("command_nonzero_prob", [0.5, 1.5, 0.5])


@pytest.mark.parametrize("name, kw, message", [
    (FLAT, dict(penalized_contacts="FR_thigh"), r"penalized_contacts: expected a list or "
     r"tuple of Go1 body names, got str 'FR_thigh' \(one body: \('FR_thigh',\)\)"),
    (FLAT, dict(terminating_contacts=(3,)), r"terminating_contacts: expected Go1 body names "
     r"\(trunk, .*\), got int 3"),
    (FLAT, dict(terminating_contacts={"trunk"}), "terminating_contacts: expected a list or "
     "tuple of Go1 body names, got set"),
    (FLAT, dict(njmax=2**31), r"njmax: expected an int in \[1, 2147483632\] or None "
     r"\(MuJoCo Warp's sizes are int32\), got 2147483648"),
    (FLAT, dict(nconmax=2**30), r"nconmax: expected at most 536870908 with num_envs=4 "
     r"\(the shared contact buffer"),
    (FLAT, dict(cone="ellipse"), r"cone: expected one of \('pyramidal', 'elliptic'\) or None, "
     r"got 'ellipse'"),
    ("Go1Terrain-v0", dict(tile_size=math.nan), "tile_size: expected a finite number, got nan"),
    ("Go1Terrain-v0", dict(terrain_seed=2**31), "terrain_seed: expected an int32 value, got "
     "2147483648"),
    ("Go1Terrain-v0", dict(terrain_rows=0), "terrain_rows: expected an integer >= 1, got 0"),
])
def test_bad_model_arguments_are_refused_by_name_before_anything_is_built(
        monkeypatch, name, kw, message):
    import gpuparam.envs.mujoco.go1 as go1

    def built(*a, **k):
        raise AssertionError("the model was built before the arguments were checked")

    monkeypatch.setattr(go1, "go1_model", built)
    with pytest.raises(ValueError, match=message):
        gp.make(name, N, device="cpu", **kw)


def test_a_negative_terrain_seed_is_taken_modulo_2_32(monkeypatch):
    import gpuparam.envs.mujoco.terrain as terrain  # grid_from_options calls it there

    seeds = []

    def record(*a, seed, **k):
        seeds.append(seed)
        raise RuntimeError("recorded")  # nothing more to build

    monkeypatch.setattr(terrain, "generate_terrain", record)
    for kw in (dict(terrain_seed=-1), dict(seed=-2), dict(seed=5)):
        with pytest.raises(RuntimeError, match="recorded"):
            gp.make("Go1Terrain-v0", 1, device="cpu", **kw)
    assert seeds == [2**32 - 1, 2**32 - 2, 5]


def test_the_elliptic_cone_is_taken():
    from gpuparam.envs.mujoco.go1 import go1_model

    assert go1_model("flat", cone="pyramidal").opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    runs = {}
    for cone in (None, "elliptic"):
        env = gp.make(FLAT, N, device="cpu", seed=0, cone=cone)
        for _ in range(12):
            td = env.step(torch.zeros(N, 12))
        runs[cone] = env.state["qpos"].clone()
        assert not bool(td["terminated"].any()) and not bool(env.overflows["contacts"].any())
        assert bool(torch.isfinite(td["observation"]).all())
    assert env.mjm.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert env.backend.m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC  # the device model's
    assert bool((runs["elliptic"][:, 2] > 0.2).all())  # standing
    assert not torch.equal(runs["elliptic"], runs[None])  # the friction cone is another


def test_kicks_are_half_sine_impulses_on_the_kicked_envs_only():
    kicked = torch.tensor([True, False, True, False])
    env = gp.make(FLAT, N, device="cpu", seed=4, max_episode_steps=10**6,
                  kick_wait=[0.1, 0.2], kick_duration=[0.1, 0.2], kick_velocity=[2.0, 3.0])
    twin = gp.make(FLAT, N, device="cpu", seed=4, max_episode_steps=10**6,
                   kick_wait=[0.1, 0.2], kick_duration=[0.1, 0.2], kick_velocity=[2.0, 3.0])
    env.params.set("kick_enable", 1.0, mask=kicked)
    env.reset()
    twin.reset()
    shape = env.backend.state["kick_shape"].clone()  # duration s, velocity, dir x, y
    mass = float(env.mjm.body_subtreemass[1])
    dt = 0.02
    forces = []
    a = torch.zeros(N, 12)
    for _ in range(30):
        env.step(a)
        twin.step(a)
        forces.append(env.outputs["privileged_observation"][:, 119:123].clone())
        xf = wp.to_torch(env.backend.d.xfrc_applied)[:, 1]
        assert torch.equal(xf[~kicked], torch.zeros(2, 6))
        assert torch.equal(env.state["qpos"][~kicked], twin.state["qpos"][~kicked])
    f = torch.stack(forces)  # [steps, N, 4]: force xyz, kicking
    assert not f[:, ~kicked].any()
    for i in torch.nonzero(kicked).flatten().tolist():
        T, v = shape[i, 0].item(), shape[i, 1].item()
        on = f[:, i, 3] > 0
        assert on.any()
        # the wait ends at step `first` (flag on, no force yet); the kick applies the force
        # of pert_steps 0 .. duration at the next steps
        first = int(torch.nonzero(on)[0]) + 1
        steps = round(T / dt) + 1
        assert not f[first - 1, i, :3].any()
        kick = f[first:first + steps, i, :3]
        direction = kick[steps // 2] / kick[steps // 2].norm()  # one direction per kick
        assert abs(direction[2].item()) < 1e-6
        mag = kick @ direction  # signed: the last step's sine may be past pi
        want = torch.tensor([0.5 * math.sin(math.pi * k * dt / T) * mass * v / T
                             for k in range(steps)])
        np.testing.assert_allclose(mag.numpy(), want.numpy(), rtol=1e-4, atol=1e-3)
        # impulse sum(F dt) ~ m v / pi: a velocity change of about 0.32 v
        np.testing.assert_allclose(mag.sum().item() * dt, mass * v / math.pi, rtol=0.1)
        assert not f[first + steps - 1, i, 3]  # the kick's last step: waiting again
        assert not f[first + steps, i, :3].any()


def test_checkpoint_continues_bit_for_bit(tmp_path):
    def build():
        env = _env(max_action_delay=3)
        env.params.set("action_delay", torch.tensor([0.0, 1.0, 2.0, 3.0]))
        env.randomize(gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="reset"),
                      gp.Uniform("kp", 0.8, 1.2, op="scale", on="step"),
                      gp.Uniform("body_mass", [-0.5] + [0.0] * 12, [0.5] + [0.0] * 12,
                                 op="add", on="reset"),
                      gp.Uniform("base_com_offset", -0.02, 0.02, on="reset"))
        return env

    a = _actions(12)
    env = build()
    _run(env, a[:4])
    state = env.state_dict()
    env.save(tmp_path / "go1.ckpt")
    first = _run(env, a[4:])
    for load in (lambda e: e.load_state_dict(state), lambda e: e.load(tmp_path / "go1.ckpt")):
        other = build()
        load(other)
        again = _run(other, a[4:])
        for r, g in zip(first, again, strict=True):
            for k in r:
                assert torch.equal(r[k], g[k]), k


def test_rsl_rl_adapter_exposes_the_critic_group():
    pytest.importorskip("rsl_rl")
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    env = _env()
    wrapped = RslRlVecEnv(env)
    obs = wrapped.get_observations()
    assert set(obs.keys()) == {"policy", "critic"}
    assert obs["critic"].shape == (N, 123)
    assert torch.equal(obs["critic"], env.outputs["privileged_observation"])
    a = _actions(3)
    for x in a:
        obs, _, dones, _ = wrapped.step(x)
        assert torch.equal(obs["critic"], env.outputs["privileged_observation"])
        assert torch.equal(obs["policy"], env.outputs["observation"])
    # the reset's privileged observation too
    obs, _ = wrapped.reset()
    assert torch.equal(obs["critic"], env.outputs["privileged_observation"])
