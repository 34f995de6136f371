"""``Go1Terrain-v0``: the flat task on a generated terrain grid, with per-env origins, the
height scan in both observations, foot heights above the terrain, undesired contacts and the
terrain curriculum (``gp.Curriculum`` over ``terrain_level``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import warp as wp

import gpuparam as gp

pytest.importorskip("mujoco_warp")
from gpuparam.envs.mujoco.terrain import terrain_geom  # noqa: E402
from tests.envs.robots.test_height_scan import numpy_heights, scan_reference  # noqa: E402

GRID = dict(terrain_rows=3, tile_size=4.0)  # 7 columns, one per type
TILE = 4.0


def _env(n: int = 4, **kw):
    return gp.make("Go1Terrain-v0", n, device="cpu", seed=1, **{**GRID, **kw})


def test_spawn_origin_is_the_envs_column_and_terrain_row():
    env = _env(9, env_offset=3, reset_xy_range=0.0, terrain_level=2.0)
    env.params.set("terrain_level", 1.0, mask=torch.arange(9) < 3)
    env.reset()
    grid = env.grid
    cols = len(grid.types)
    rows = env.params["terrain_level"].round().long()
    col = (3 + torch.arange(9)) % cols  # the global env id picks the column
    want = torch.as_tensor(grid.origins)[rows, col]
    q = env.state["qpos"]
    assert torch.equal(q[:, :2], want[:, :2])
    np.testing.assert_allclose(q[:, 2].numpy(), (want[:, 2] + 0.278 + 0.07).numpy(), atol=1e-6)


def test_height_scan_in_both_observations_is_the_heightfield_sampled():
    env = _env(noise_level=0.0)
    env.step(torch.zeros(4, 12))
    want = scan_reference(env)
    priv = env.outputs["privileged_observation"]
    obs = env.outputs["observation"]
    assert priv.shape == (4, 123 + 187) and obs.shape == (4, 48 + 187)
    np.testing.assert_allclose(priv[:, 123:].numpy(), want, atol=5e-5)
    assert torch.equal(obs[:, 48:], priv[:, 123:])  # noise off: the same values, bit for bit
    env.params.set("noise_level", 1.0)
    env.step(torch.zeros(4, 12))
    diff = (env.outputs["observation"][:, 48:] - env.outputs["privileged_observation"][:, 123:])
    assert (diff.abs() <= 0.1 * 5.0 + 1e-5).all() and (diff != 0).any()


def test_foot_heights_are_above_the_terrain_under_the_foot():
    """Feet 5 cm above the ground of a stairs tile, moving at 1 m/s: the clearance cost is
    |0.05 - max_foot_height| per foot and the swing peak 0.05, whatever the tile's height."""
    env = _env(1)
    mjm, d = env.mjm, env.backend.d
    gid, hid = terrain_geom(mjm, "floor")
    col = env.grid.types.index("stairs_down")  # a hill: its centre well above 0
    ox, oy, oz = env.grid.origins[2, col]
    assert oz > 0.15
    feet = np.array([[ox + 0.2, oy - 0.1], [ox + 0.2, oy + 0.1], [ox - 0.2, oy - 0.1],
                     [ox - 0.2, oy + 0.1]])
    ground = numpy_heights(mjm, gid, hid, feet[:, 0], feet[:, 1])
    xpos = wp.to_torch(d.site_xpos)
    sd = wp.to_torch(d.sensordata)
    for k, foot in enumerate(("FR", "FL", "RR", "RL")):
        xpos[0, mjm.site(foot).id] = torch.tensor([*feet[k], ground[k] + 0.05])
        sd[0, mjm.sensor(f"{foot}_floor_found").adr[0]] = 0.0  # in the air
        adr = mjm.sensor(f"{foot}_global_linvel").adr[0]
        sd[0, adr:adr + 3] = torch.tensor([1.0, 0.0, 0.0])
    env.task.state["swing_peak"].zero_()
    env.task.compute(env.context)
    np.testing.assert_allclose(env.task.state["swing_peak"].numpy(), 0.05, atol=1e-5)
    clearance = env.outputs["reward_terms"][0, 12].item()  # scale -2
    np.testing.assert_allclose(clearance, -2.0 * 4 * 0.05, atol=1e-4)


def test_contact_sensors_see_the_trunk_on_the_ground():
    env = _env(2, reset_xy_range=0.0, reset_yaw_range=0.0, reset_velocity_range=0.0)
    q = env.state["qpos"]
    q[:, 2] = float(env.grid.origins[0, 0, 2]) + 0.055  # upside down on the flat tile
    q[:, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])
    import mujoco_warp as mjw

    with env.backend.scope():
        mjw.forward(env.backend.m, env.backend.d)
    mjm = env.mjm
    adr = [mjm.sensor(f"trunk_{k}_floor_found").adr[0] for k in range(3)]
    assert (wp.to_torch(env.backend.d.sensordata)[:, adr] > 0).any(1).all()


def test_undesired_contacts_are_penalized_per_body_and_the_trunk_terminates():
    """The task's logic from the contact sensors' values: a penalized body counts once
    however many of its geoms touch; a terminating one ends the episode where
    ``terminate_on_contact`` is 1."""
    env = _env(3)
    env.params.set("terminate_on_contact", 0.0, mask=torch.tensor([False, True, False]))
    mjm = env.mjm
    sd = wp.to_torch(env.backend.d.sensordata)

    def adr(name: str) -> int:
        return int(mjm.sensor(name).adr[0])

    sd[:, adr("upvector") + 2] = 1.0  # upright
    for k in range(3):
        sd[:2, adr(f"trunk_{k}_floor_found")] = 0.0
        sd[:2, adr(f"FR_thigh_{k}_floor_found")] = 1.0  # one body, three geoms
    sd[:2, adr("FL_calf_1_floor_found")] = 2.0
    sd[0, adr("trunk_1_floor_found")] = 1.0
    sd[1, adr("trunk_0_floor_found")] = 1.0
    sd[2] = 0.0
    sd[2, adr("upvector") + 2] = 1.0
    env.task.compute(env.context)
    out = env.outputs
    assert out["terminated"].tolist() == [True, False, False]
    assert out["reward_terms"][:, 16].tolist() == [-2.0, -2.0, 0.0]  # scale -1, 2 bodies


def test_terrain_curriculum_promotes_and_demotes_by_the_rule():
    """Promote: walked farther than half a tile; demote: covered less than half the
    distance commanded during the episode; else stay. The new row applies at the reset."""
    env = _env(3, reset_xy_range=0.0, max_episode_steps=10**6)
    cur = env.terrain_curriculum(initial_level=1)
    env.add_curriculum(cur)
    env.reset()
    st = env.task.state
    st["countdown"].fill_(10**6)
    st["command"].copy_(torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0]]))
    st["cmd_distance"].copy_(torch.tensor([0.0, 10.0, 0.0]))
    q = env.state["qpos"]
    q[0, 0] += 0.5 * TILE + 0.3  # env 0 walked past half a tile
    q[2, 0] += 0.5 * TILE - 0.3  # env 2 not quite, but nothing was commanded
    env.episode_length = torch.full((3,), env.max_episode_steps - 1, dtype=torch.int32)
    env.step(torch.zeros(3, 12))  # every episode ends here
    assert cur.levels.tolist() == [2, 0, 1]
    assert env.params["terrain_level"].tolist() == [2.0, 0.0, 1.0]
    # the reset put each env on its new row
    rows = torch.tensor([2, 0, 1])
    want = torch.as_tensor(env.grid.origins)[rows, torch.arange(3)]
    assert torch.equal(env.state["qpos"][:, :2], want[:, :2])
    assert torch.equal(env.terrain_metric, torch.zeros(3))  # a new episode's bookkeeping
