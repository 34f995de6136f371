"""``G1Terrain-v0``: G1's task on Go1's terrain grid, through the robot-independent pieces
(``terrain_env.py``, ``kernels.legged``): spawn on the env's tile and level, the height
scan in both observations, foot heights above the terrain under the foot, the terrain
curriculum, blind and flat variants unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp

pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

from gpuparam.envs.mujoco.g1_model import FEET  # noqa: E402
from gpuparam.envs.mujoco.terrain import terrain_geom  # noqa: E402
from tests.envs.robots.test_height_scan import numpy_heights, scan_reference  # noqa: E402

TERRAIN = "G1Terrain-v0"
GRID = dict(terrain_rows=3, tile_size=4.0)  # 7 columns, one per type
TILE = 4.0
OBS, PRIV, P = 103, 216, 187


def _env(n: int = 4, **kw):
    return gp.make(TERRAIN, n, device="cpu", seed=1, **{**GRID, **kw})


def test_terrain_grid_spawns_each_env_on_its_tile_and_level():
    """Env i starts on column ``i % cols`` of row ``terrain_level``, its feet collide with
    the heightfield (through Playground's pairs, which now name it), nothing overflows."""
    env = gp.make(TERRAIN, 4, device="cpu", seed=1, terrain_rows=2, tile_size=4.0,
                  terrain_types=("flat", "stairs_up"), reset_xy_range=0.0)
    env.params.set("terrain_level", torch.tensor([0.0, 0.0, 1.0, 1.0]))
    env.reset()
    origins = torch.as_tensor(env.grid.origins)  # [rows, cols, 3]
    want = torch.stack([origins[0, 0], origins[0, 1], origins[1, 0], origins[1, 1]])
    home = torch.as_tensor(env.backend.home_qpos[:3])
    got = env.state["qpos"][:, :3]
    assert torch.allclose(got[:, :2], want[:, :2] + home[:2], atol=1e-5)
    assert torch.allclose(got[:, 2], want[:, 2] + home[2] + env.spawn_height, atol=1e-5)
    for _ in range(5):
        td = env.step(torch.zeros(4, 29))
    assert torch.isfinite(td["reward"]).all()
    contacts = td["privileged_observation"][:, PRIV - 10:PRIV - 8]
    assert contacts.sum() > 0  # foot contacts: on the terrain
    assert not env.overflows["constraints"].any() and not env.overflows["contacts"].any()
    assert env.model_config()["terrain_types"] == ("flat", "stairs_up")
    with pytest.raises(ValueError, match="terrain_rows"):
        gp.make(TERRAIN, 2, device="cpu", terrain_rows=0)


def test_height_scan_in_both_observations_is_the_heightfield_sampled():
    """The scan under the pelvis's yaw frame, ``clip(z - 0.5 - h, -1, 1) * 5``, after the
    observation's 103 and the privileged observation's 216 values; bit for bit the same in
    both without noise, within the noise bound with it."""
    env = _env(noise_level=0.0)
    env.step(torch.zeros(4, 29))
    want = scan_reference(env)
    priv = env.outputs["privileged_observation"]
    obs = env.outputs["observation"]
    assert env.num_scan_points == P
    assert priv.shape == (4, PRIV + P) and obs.shape == (4, OBS + P)
    np.testing.assert_allclose(priv[:, PRIV:].numpy(), want, atol=5e-5)
    assert torch.equal(obs[:, OBS:], priv[:, PRIV:])  # noise off: the same values
    env.params.set("noise_level", 1.0)
    env.step(torch.zeros(4, 29))
    diff = env.outputs["observation"][:, OBS:] - env.outputs["privileged_observation"][:, PRIV:]
    assert (diff.abs() <= 0.1 * 5.0 + 1e-5).all() and (diff != 0).any()


def test_blind_terrain_and_flat_keep_the_flat_observations_and_state():
    """``height_scan=False``: the flat task's sizes and parameters; the flat task's
    checkpointed state has no terrain-curriculum entries (older checkpoints load)."""
    blind = _env(2, height_scan=False)
    flat = gp.make("G1JoystickFlatTerrain-v1", 2, device="cpu", seed=1)
    for env in (blind, flat):
        td = env.reset()
        assert td["observation"].shape == (2, OBS)
        assert td["privileged_observation"].shape == (2, PRIV)
        assert "height_scan_scale" not in env.params.names
    assert blind.model_config()["height_scan"] is False
    assert "task_metric" in blind.backend.state and "task_metric" not in flat.backend.state
    assert "height_scan_scale" in _env(2).params.names


def test_foot_heights_are_above_the_terrain_under_the_foot():
    """Feet 5 cm above the ground of a hill tile, in the air, moving at 1 m/s: the swing
    peak is 0.05 and the clearance term |0.05 - max_foot_height| per foot, whatever the
    tile's height."""
    env = _env(1, reward_feet_clearance=1.0)
    mjm, d = env.mjm, env.backend.d
    gid, hid = terrain_geom(mjm, "floor")
    col = env.grid.types.index("stairs_down")  # a hill: its centre well above 0
    ox, oy, oz = env.grid.origins[2, col]
    assert oz > 0.15
    feet = np.array([[ox + 0.1, oy - 0.1], [ox - 0.1, oy + 0.1]])
    ground = numpy_heights(mjm, gid, hid, feet[:, 0], feet[:, 1])
    xpos = wp.to_torch(d.site_xpos)
    sd = wp.to_torch(d.sensordata)
    for k, foot in enumerate(FEET):
        xpos[0, mjm.site(foot).id] = torch.tensor([*feet[k], ground[k] + 0.05])
        sd[0, mjm.sensor(f"{foot}_floor_found").adr[0]] = 0.0  # in the air
        adr = mjm.sensor(f"{foot}_global_linvel").adr[0]
        sd[0, adr:adr + 3] = torch.tensor([1.0, 0.0, 0.0])
    env.task.state["swing_peak"].zero_()
    env.task.compute(env.context)
    np.testing.assert_allclose(env.task.state["swing_peak"].numpy(), 0.05, atol=1e-5)
    clearance = env.outputs["reward_terms"][0, 10].item()  # feet_clearance, scale 1
    np.testing.assert_allclose(clearance, 2 * (0.15 - 0.05), atol=1e-4)


def test_terrain_curriculum_promotes_and_demotes_by_the_rule():
    """Promote: walked farther than half a tile; demote: covered less than half the
    distance commanded during the episode; else stay. The new row applies at the reset."""
    env = _env(3, reset_xy_range=0.0, max_episode_steps=10**6, push_enable=0.0)
    cur = env.terrain_curriculum(initial_level=1)
    env.add_curriculum(cur)
    env.reset()
    st = env.task.state
    st["command"].copy_(torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0]]))
    st["cmd_distance"].copy_(torch.tensor([0.0, 10.0, 0.0]))
    q = env.state["qpos"]
    q[0, 0] += 0.5 * TILE + 0.3  # env 0 walked past half a tile
    q[2, 0] += 0.5 * TILE - 0.3  # env 2 not quite, but nothing was commanded
    env.episode_length = torch.full((3,), env.max_episode_steps - 1, dtype=torch.int32)
    env.step(torch.zeros(3, 29))  # every episode ends here
    assert cur.levels.tolist() == [2, 0, 1]
    assert env.params["terrain_level"].tolist() == [2.0, 0.0, 1.0]
    rows = torch.tensor([2, 0, 1])  # the reset put each env on its new row
    want = torch.as_tensor(env.grid.origins)[rows, torch.arange(3)]
    home = torch.as_tensor(env.backend.home_qpos[:2])
    assert torch.allclose(env.state["qpos"][:, :2], want[:, :2] + home, atol=1e-5)
    assert torch.equal(env.terrain_metric, torch.zeros(3))  # a new episode's bookkeeping
