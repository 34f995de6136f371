"""The terrain grid (``gpuparam/envs/mujoco/terrain.py``): deterministic per seed, each row
as difficult as its docstring states, origins on the surface, and as a MuJoCo heightfield
the surface MuJoCo collides with; a Go1 on it steps in MuJoCo Warp on CPU."""

from __future__ import annotations

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gpuparam.envs.mujoco import terrain as tr  # noqa: E402
from gpuparam.envs.mujoco.go1_model import go1_spec  # noqa: E402

H = 0.1  # horizontal scale
L = 4.0  # tile size (small tiles keep the tests fast)
P = 1.0  # platform size
KW = {"tile_size": L, "horizontal_scale": H, "border": 1.0, "platform_size": P}


def tile(t: tr.TerrainGrid, i: int, j: int) -> np.ndarray:
    n = round(t.tile_size / H)
    b = round(t.border / H)
    return t.heights[b + j * n:b + (j + 1) * n, b + i * n:b + (i + 1) * n]


def test_layout_sizes_and_origins():
    t = tr.generate_terrain(rows=3, seed=1, **KW)
    n, b = 40, 10
    assert t.heights.dtype == np.float32 and t.origins.dtype == np.float32
    assert t.heights.shape == (7 * n + 2 * b + 1, 3 * n + 2 * b + 1)  # [y: types, x: levels]
    assert t.size == (3 * L + 2.0, 7 * L + 2.0) and t.corner == (-1.0, -1.0)
    assert t.types == tr.TERRAIN_TYPES
    np.testing.assert_array_equal(t.difficulty, np.float32([0, 1 / 3, 2 / 3]))
    assert t.origins.shape == (3, 7, 3)
    i, j = np.meshgrid(np.arange(3), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(t.origins[..., 0], (i + 0.5) * L)
    np.testing.assert_array_equal(t.origins[..., 1], (j + 0.5) * L)
    # the border is flat
    for edge in (t.heights[:b], t.heights[-b:], t.heights[:, :b], t.heights[:, -b:]):
        assert not edge.any()
    # columns cycle through the types
    assert tr.generate_terrain(rows=1, cols=9, **KW).types == tr.TERRAIN_TYPES + ("flat",
                                                                                  "rough")
    assert tr.generate_terrain(rows=1, types=("stairs_up",), **KW).types == ("stairs_up",)


def test_origins_lie_on_the_surface():
    t = tr.generate_terrain(rows=3, seed=2, **KW)
    c = np.rint((t.origins[..., 0] - t.corner[0]) / H).astype(int)
    r = np.rint((t.origins[..., 1] - t.corner[1]) / H).astype(int)
    np.testing.assert_allclose((t.origins[..., 0] - t.corner[0]) / H, c, atol=1e-4)
    np.testing.assert_array_equal(t.origins[..., 2], t.heights[r, c])
    # and on the surface MuJoCo collides with (a downward ray at each origin)
    spec = mujoco.MjSpec()
    tr.add_terrain_hfield(spec, t)
    mjm = spec.compile()
    d = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, d)
    geomid = np.zeros(1, np.int32)
    for o in t.origins.reshape(-1, 3).astype(np.float64):
        dist = mujoco.mj_ray(mjm, d, np.array([o[0], o[1], 10.0]), np.array([0.0, 0.0, -1.0]),
                             None, 1, -1, geomid)
        assert abs((10.0 - dist) - o[2]) < 1e-5, (o, 10.0 - dist)


def test_deterministic_per_seed_and_tiles_independent_of_grid_size():
    a = tr.generate_terrain(rows=3, seed=7, **KW)
    b = tr.generate_terrain(rows=3, seed=7, **KW)
    np.testing.assert_array_equal(a.heights, b.heights)
    np.testing.assert_array_equal(a.origins, b.origins)
    c = tr.generate_terrain(rows=3, seed=8, **KW)
    for j in (1, 6):  # rough, obstacles: random
        assert not np.array_equal(tile(a, 2, j), tile(c, 2, j))
    for j in (0, 2, 3, 4, 5):  # flat, slopes, stairs: no randomness
        np.testing.assert_array_equal(tile(a, 2, j), tile(c, 2, j))
    # a tile's draws are keyed by (seed, level, column): more rows or columns leave it as is
    # (its difficulty is level / rows, so compare grids with the same number of rows)
    big = tr.generate_terrain(rows=3, cols=9, seed=7, **KW)
    for i in range(3):
        for j in range(7):
            np.testing.assert_array_equal(tile(big, i, j), tile(a, i, j))


def test_difficulty_per_row_as_stated():
    rows = 5
    t = tr.generate_terrain(rows=rows, seed=3, **KW)
    n = 40
    u = np.arange(n) * H - L / 2
    x, y = np.meshgrid(u, u)
    r = np.maximum(np.abs(x), np.abs(y))
    platform = r < P / 2
    inward = L / 2 - np.maximum(r, P / 2)
    prev = {}
    for i in range(rows):
        d = i / rows
        z = {k: tile(t, i, j).astype(np.float64) for j, k in enumerate(tr.TERRAIN_TYPES)}
        assert not z["flat"].any()
        # rough: within [-a, a], spread over most of it
        a = tr.rough_amplitude(d)
        assert np.abs(z["rough"]).max() <= a + 1e-6 and np.ptp(z["rough"]) > a
        # slopes: a pyramid of slope 0.4 d, 0 at the edge, flat platform
        s = tr.slope(d)
        np.testing.assert_allclose(z["slope_down"], s * inward, atol=1e-6)
        np.testing.assert_allclose(z["slope_up"], -s * inward, atol=1e-6)
        # stairs: steps of exactly 0.05 + 0.18 d, as many as fit between edge and platform
        e = tr.step_height(d)
        steps = np.floor((L / 2 - P / 2) / tr.STEP_WIDTH)
        for kind, sign in (("stairs_down", 1.0), ("stairs_up", -1.0)):
            levels = np.unique(np.round(z[kind] / e, 4))
            np.testing.assert_array_equal(levels, sign * np.arange(steps + 1)[::int(sign)])
            jumps = np.abs(np.diff(z[kind], axis=1))
            np.testing.assert_allclose(jumps[jumps > 1e-6], e, rtol=1e-5)
            np.testing.assert_allclose(z[kind][platform], sign * steps * e, rtol=1e-6)
        # obstacles: heights in {0, +-H/2, +-H}, the platform clear
        top = tr.obstacle_height(d)
        got = np.unique(np.round(z["obstacles"], 5))
        assert set(got) <= set(np.round([0.0, -top, -top / 2, top / 2, top], 5)), got
        assert np.abs(z["obstacles"]).max() > 0 and not z["obstacles"][platform].any()
        # every measure grows with the row
        measure = {"rough": np.abs(z["rough"]).max(), "slope": np.abs(z["slope_up"]).max(),
                   "stairs": e, "obstacles": top}
        for k, v in measure.items():
            if k in prev:
                assert v > prev[k], (k, i)
        prev = measure
    # the platform of every slope or stairs tile is where the origin is
    np.testing.assert_allclose(t.origins[:, 3, 2], [tr.slope(i / rows) * (L / 2 - P / 2)
                                                    for i in range(rows)], atol=1e-6)


def test_heightfield_is_the_surface_mujoco_collides_with():
    """The compiled heightfield's samples are the terrain's heights (float32 rounding of
    the normalized data); MuJoCo's ray cast finds them at the sample positions."""
    t = tr.generate_terrain(rows=2, seed=4, **KW)
    spec = mujoco.MjSpec()
    tr.add_terrain_hfield(spec, t, name="ground", base_depth=0.5)
    mjm = spec.compile()
    gid, hid = tr.terrain_geom(mjm, "ground")
    nrow, ncol = t.heights.shape
    assert (mjm.hfield_nrow[hid], mjm.hfield_ncol[hid]) == (nrow, ncol)
    size = mjm.hfield_size[hid]
    np.testing.assert_allclose(size, [t.size[0] / 2, t.size[1] / 2,
                                      np.ptp(t.heights.astype(np.float64)), 0.5], rtol=1e-6)
    world = mjm.geom_pos[gid, 2] + mjm.hfield_data.reshape(nrow, ncol) * size[2]
    np.testing.assert_allclose(world, t.heights, rtol=0, atol=1e-6)
    d = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, d)
    rng = np.random.default_rng(0)
    geomid = np.zeros(1, np.int32)
    for r, c in zip(rng.integers(0, nrow, 200), rng.integers(0, ncol, 200), strict=True):
        x, y = t.corner[0] + c * H, t.corner[1] + r * H
        dist = mujoco.mj_ray(mjm, d, np.array([x, y, 10.0]), np.array([0.0, 0.0, -1.0]), None,
                             1, -1, geomid)
        assert abs((10.0 - dist) - t.heights[r, c]) < 1e-5, (r, c)


def test_flat_terrain_compiles():
    t = tr.generate_terrain(rows=2, types=("flat",), **KW)
    spec = mujoco.MjSpec()
    tr.add_terrain_hfield(spec, t)
    mjm = spec.compile()
    assert not mjm.hfield_data.any() and mjm.geom_pos[0, 2] == 0.0


def test_go1_on_the_terrain_steps_in_mujoco_warp_on_cpu():
    mjw = pytest.importorskip("mujoco_warp")
    import warp as wp

    t = tr.generate_terrain(rows=2, types=("stairs_down", "rough"), seed=5, **KW)
    spec = go1_spec("flat")
    geom = tr.add_terrain_hfield(spec, t, replace="floor")
    assert geom.name == "floor" and geom.friction[0] == 0.6 and geom.contype == 1
    mjm = spec.compile()
    gid, _ = tr.terrain_geom(mjm, "floor")
    assert mjm.geom_priority[gid] == 1 and mjm.geom_conaffinity[gid] == 0
    key = mjm.key("home")
    qpos = np.tile(key.qpos, (2, 1))
    qpos[:, :3] = t.origins[1, :, :] + np.array([0.0, 0.0, 0.3])  # level 1, both types
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow = 0
        d = mjw.make_data(mjm, nworld=2, nconmax=16, njmax=64)
        d.qpos.assign(qpos.astype(np.float32))
        d.ctrl.assign(np.tile(key.ctrl, (2, 1)).astype(np.float32))
        for _ in range(50):  # 0.2 s: falls 2 cm, lands, stands
            mjw.step(m, d)
        q = d.qpos.numpy()
        found = d.sensordata.numpy()[:, -4:]  # the feet's contact sensors (with "floor")
    assert np.isfinite(q).all()
    height = q[:, 2] - t.origins[1, :, 2]
    assert ((height > 0.2) & (height < 0.35)).all(), height
    assert (found > 0).sum() >= 4, found


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match=r"types: expected a non-empty sequence .* got \('ice',\)"):
        tr.generate_terrain(types=("ice",), **KW)
    with pytest.raises(ValueError, match="rows: expected an integer >= 1, got 0"):
        tr.generate_terrain(rows=0, **KW)
    with pytest.raises(ValueError, match="cols: expected an integer >= 1, got 2.5"):
        tr.generate_terrain(cols=2.5, **KW)
    with pytest.raises(ValueError, match=r"tile_size: expected a positive even multiple of "
                                         r"horizontal_scale=0.1, got 4.05"):
        tr.generate_terrain(**(KW | {"tile_size": 4.05}))
    with pytest.raises(ValueError, match="border: expected a non-negative whole multiple"):
        tr.generate_terrain(**(KW | {"border": -0.1}))
    for name, bad in (("tile_size", float("nan")), ("tile_size", float("inf")),
                      ("border", "5"), ("platform_size", float("nan"))):
        with pytest.raises(ValueError, match=f"{name}: expected a finite number, got"):
            tr.generate_terrain(**(KW | {name: bad}))
    with pytest.raises(ValueError, match="seed: expected an int >= 0, got -1"):
        tr.generate_terrain(seed=-1, **KW)
    with pytest.raises(ValueError, match=r"platform_size: expected a value in \(0, tile_size"):
        tr.generate_terrain(**(KW | {"platform_size": 5.0}))
    t = tr.generate_terrain(rows=1, types=("flat",), **KW)
    with pytest.raises(ValueError, match="replace: expected the name of a geom .* got 'grass'"):
        tr.add_terrain_hfield(go1_spec("flat"), t, replace="grass")
    with pytest.raises(ValueError, match="base_depth: expected a positive number"):
        tr.add_terrain_hfield(mujoco.MjSpec(), t, base_depth=0.0)
    mjm = go1_spec("flat").compile()
    with pytest.raises(ValueError, match="expected a heightfield geom, got type mjGEOM_PLANE"):
        tr.terrain_geom(mjm, "floor")
    with pytest.raises(ValueError, match="name: expected a geom of the model, got 'x'"):
        tr.terrain_geom(mjm, "x")
    with pytest.raises(ValueError, match="x, y: expected non-empty 1-D sequences"):
        tr.scan_points(x=[])


def test_scan_points_are_legged_gyms_grid():
    p = tr.scan_points()
    assert p.shape == (17 * 11, 2) and p.dtype == np.float32
    np.testing.assert_allclose(p[0], [-0.8, -0.5])
    np.testing.assert_allclose(p[1], [-0.8, -0.4])  # x major
    np.testing.assert_allclose(p[-1], [0.8, 0.5])
    np.testing.assert_allclose(np.unique(p[:, 0]), np.arange(-8, 9) * 0.1, atol=1e-7)
