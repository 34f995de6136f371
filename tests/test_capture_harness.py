"""Issue 40: captured equals eager, bit for bit, on every env, under random sequences of
public operations drawn by hypothesis (``gpuparam.testing.check_capture``), and the harness
itself catches what breaks the contract."""

from __future__ import annotations

import pytest
import warp as wp
from gpuparam.kernels import episode

import gpuparam as gp
from gpuparam.testing import OPS, CaptureMismatch, Op, check_capture, random_ops

pytest.importorskip("hypothesis")  # a dev extra
import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

STEP = Op("step", 0)
# a sequence: the warm-up and capture steps, then operations of every kind with steps
# between them (a capture dropped by an operation is made again by later steps), and steps
# enough at the end for a warm-up, a capture and replays
def sequences(max_ops: int):
    return st.lists(st.builds(Op, st.sampled_from(OPS), st.integers(0, 2**31 - 1)),
                    min_size=4, max_size=max_ops).map(
        lambda ops: [STEP, STEP, *(x for op in ops for x in (op, Op("step", op.seed))),
                     *[STEP] * 4])



slow_settings = settings(max_examples=1, deadline=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))

CLASSIC = ("CartPole-v1", "Pendulum-v1")
ROBOTS = {
    "Ant-v5": {},
    "Walker2d-v5": {},
    "Humanoid-v5": {},
    "Go1JoystickFlatTerrain-v1": {},
    "Go1JoystickRoughTerrain-v1": {},
    "Go1Terrain-v0": dict(terrain_rows=2, tile_size=4.0, terrain_types=("flat", "stairs_up")),
    "G1JoystickFlatTerrain-v1": {},
    "G1JoystickRoughTerrain-v1": {},
    "G1Terrain-v0": dict(terrain_rows=2, tile_size=4.0, terrain_types=("flat", "stairs_up")),
}


def _maker(name: str, n: int, **kw):
    return lambda capture: gp.make(name, n, device="cpu", seed=3, capture=capture, **kw)


@pytest.mark.parametrize("name", CLASSIC)
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(ops=sequences(24))
def test_classic_envs_captured_equal_eager(name, ops):
    report = check_capture(_maker(name, 8), ops=ops)
    assert report.replayed_steps >= 1 and report.compared > 0


@pytest.mark.parametrize("name", sorted(ROBOTS))
@slow_settings
@given(ops=sequences(10))
def test_robots_captured_equal_eager(name, ops):
    pytest.importorskip("mujoco_warp")
    report = check_capture(_maker(name, 2, **ROBOTS[name]), ops=ops)
    assert report.replayed_steps >= 1


def test_a_random_sequence_has_every_kind_of_operation():
    ops = random_ops(200, seed=0)
    assert [op.kind for op in ops[:2]] == ["step", "step"]
    assert sum(op.kind == "step" for op in ops) == 200
    assert {op.kind for op in ops} == set(OPS)


def test_the_harness_catches_a_hook_a_capture_drops():
    """The silent case of issue 40, seen by the harness as a contract refusal: a ``"warp"``
    hook doing a torch op raises at capture in the captured env only."""
    def make(capture):
        env = gp.make("CartPole-v1", 4, device="cpu", seed=0, capture=capture)
        env.after_step(lambda env, td: td["reward"].mul_(3.0), kind="warp")
        return env

    with pytest.raises(CaptureMismatch, match=r"op 1 .*captured raised RuntimeError.*mul_ "
                                              r"writes.*eager raised None"):
        check_capture(make, ops=[STEP, STEP, STEP], norms=False)


def test_the_harness_catches_host_state_a_replay_does_not_update():
    """A ``"warp"`` stage that reads a host value at capture (here the Python counter of
    steps, baked into the launch) replays the old value: the harness names the output."""
    def make(capture):
        env = gp.make("CartPole-v1", 4, device="cpu", seed=0, capture=capture)
        steps = [0]

        def stage(ctx):
            steps[0] += 1
            wp.launch(episode.scale, dim=4, inputs=[float(steps[0])],
                      outputs=[wp.from_torch(ctx.outputs["reward"])], device=ctx.wp_device)

        env.add_stage(gp.Stage("host_counter", stage, "warp"))
        return env

    with pytest.raises(CaptureMismatch, match=r"op 2 .*reward differs at rows \[0, 1, 2, 3\]: "
                                              r"captured \[2.0\], eager \[3.0\]"):
        check_capture(make, ops=[STEP] * 5, norms=False)


def test_check_capture_refuses_bad_arguments():
    with pytest.raises(TypeError, match="make_env expected a callable"):
        check_capture(None)
    with pytest.raises(ValueError, match="steps expected an int >= 3"):
        check_capture(_maker("CartPole-v1", 2), steps=2)
    with pytest.raises(TypeError, match="ops expected gp.testing.Op items"):
        check_capture(_maker("CartPole-v1", 2), ops=["step"])
    with pytest.raises(ValueError, match="must build a captured env"):
        check_capture(lambda capture: gp.make("CartPole-v1", 2, device="cpu"), steps=3)
    with pytest.raises(ValueError, match="kind expected one of"):
        Op("jump", 0)


def test_a_check_without_a_replay_is_refused():
    with pytest.raises(CaptureMismatch, match="no step was replayed"):
        check_capture(_maker("CartPole-v1", 2), ops=[STEP, STEP], norms=False)


def test_unknown_op_kinds_are_named():
    """``kinds`` naming an operation the harness does not have: a ``ValueError`` that names
    it and the known ones, before anything is built."""
    with pytest.raises(ValueError, match=r"kinds expected names in .*got \['teleport'\]"):
        random_ops(10, kinds=("step", "teleport"))
    with pytest.raises(ValueError, match="teleport"):
        check_capture(lambda capture: pytest.fail("built"), steps=4, kinds=("teleport",))
