"""G1's options and values refused before anything is built or written (issue 43 items 2 to
4): the terrain grid's ``height_scan`` (a bool, not a truth value) and size, the (low, high)
pairs and the whole terrain level, and checkpoints holding a negative push interval or a
ring-buffer slot past its buffer."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")
from gpuparam.envs.mujoco import terrain  # noqa: E402

FLAT = "G1JoystickFlatTerrain-v1"


@pytest.mark.parametrize("name", ["G1Terrain-v0", "Go1Terrain-v0"])
@pytest.mark.parametrize("value", ["False", "no", 0.5, [], None, 1])
def test_height_scan_must_be_a_bool(monkeypatch, name, value):
    def no_grid(*a, **k):
        raise AssertionError("the terrain was generated before the check")

    monkeypatch.setattr(terrain, "generate_terrain", no_grid)
    with pytest.raises(ValueError, match=r"height_scan: expected a bool, got " + repr(value)
                       .replace("[", r"\[").replace("]", r"\]")):
        gp.make(name, 1, device="cpu", height_scan=value)


@pytest.mark.parametrize("name", ["G1Terrain-v0", "Go1Terrain-v0"])
def test_a_terrain_too_big_is_refused_naming_the_argument(name):
    with pytest.raises(ValueError, match=r"^tile_size: expected at most 569 m .* got "
                                         r"1000000000\.0"):
        gp.make(name, 1, device="cpu", tile_size=1e9)
    with pytest.raises(ValueError, match=r"^terrain_rows, terrain_cols: expected a heightfield "
                                         r"of at most 2\*\*25 samples"):
        gp.make(name, 1, device="cpu", terrain_rows=10**5)


@pytest.fixture(scope="module")
def g1():
    return gp.make(FLAT, 2, device="cpu", seed=0)


@pytest.mark.parametrize("pair", ["gait_frequency", "push_interval", "push_velocity",
                                  "kick_wait", "kick_duration", "kick_velocity",
                                  "reset_joint_scale"])
def test_low_above_high_is_refused(g1, pair):
    before = g1.params[pair].clone()
    lo, hi = before[0].tolist()
    with pytest.raises(ValueError, match=rf"parameter '{pair}': expected .*low <= high, got "
                                         rf"\[{hi}, {lo}\]"):
        g1.params.set(pair, torch.tensor([hi, lo]))
    with pytest.raises(ValueError, match=rf"parameter '{pair}': expected .*low <= high"):
        g1.params.set_components(pair, {0: hi + 0.5 * (hi - lo) + 0.01})
    with pytest.raises(ValueError, match=rf"parameter '{pair}': expected .*low <= high"):
        gp.make(FLAT, 1, device="cpu", **{pair: (hi, lo)})
    assert torch.equal(g1.params[pair], before)
    g1.params.set(pair, torch.tensor([lo, lo]))  # equal is fine
    g1.params.set(pair, before)


def test_checkpoint_values_are_checked(g1):
    state = g1.state_dict()
    for key, value, match in (
        ("state.task_push_interval", -7, r"tensors\.state\.task_push_interval: expected "
                                         r"values in \[0, 2147483647\], got \[-7, "),
        ("state.action_head", 4 + 1000, r"tensors\.state\.action_head: expected values in "
                                        r"\[0, 4\], got \[\d+, 1004\]"),
        ("state.kick_steps", -1, r"tensors\.state\.kick_steps: expected values in"),
    ):
        bad = {**state, "tensors": dict(state["tensors"])}
        t = bad["tensors"][key] = state["tensors"][key].clone()
        t.view(-1)[0] = value
        with pytest.raises(ValueError, match=match):
            g1.load_state_dict(bad)
    bad = {**state, "params": dict(state["params"])}
    tab = bad["params"]["nominal"] = state["params"]["nominal"].clone()
    c0, _ = g1.params.columns("gait_frequency")
    tab[c0, 1], tab[c0 + 1, 1] = 1.5, 1.25
    with pytest.raises(ValueError, match=r"params\.nominal of 'gait_frequency': expected .*"
                                         r"low <= high, got \[1\.5, 1\.25\]"):
        g1.load_state_dict(bad)
    after = g1.state_dict()
    assert all(torch.equal(after["tensors"][k], v) for k, v in state["tensors"].items())
    g1.load_state_dict(state)  # the untouched one loads


def test_terrain_level_is_a_whole_number():
    env = gp.make("G1Terrain-v0", 1, device="cpu", terrain_rows=3, height_scan=False)
    with pytest.raises(ValueError, match=r"parameter 'terrain_level': expected finite values "
                                         r"in \[0\.0, 2\.0\], whole numbers, got 1\.5"):
        env.params.set("terrain_level", 1.5)
    with pytest.raises(ValueError, match=r"terrain_level.*whole numbers"):
        env.params.set("terrain_level", torch.tensor([0.5]))
    with pytest.raises(ValueError, match=r"level 1 value \[0\.5\]: expected .*whole numbers"):
        env.add_curriculum(gp.Curriculum(3, params={"terrain_level": (0.0, 1.0)}))
    env.params.set("terrain_level", 2.0)
    state = env.state_dict()
    c0, _ = env.params.columns("terrain_level")
    state["params"]["effective"][c0, 0] = 0.25
    with pytest.raises(ValueError, match=r"params\.effective of 'terrain_level': expected "
                                         r".*whole numbers, got \[0\.25\]"):
        env.load_state_dict(state)
    assert env.params["terrain_level"].tolist() == [2.0]
