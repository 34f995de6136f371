"""The height scan kernel (``gpuparam.kernels.legged.height_scan``) against a NumPy sampling
of the same heightfield, read from MuJoCo Warp's model arrays as the kernel reads them."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from gpuparam.kernels import legged

mujoco = pytest.importorskip("mujoco")
mjw = pytest.importorskip("mujoco_warp")

from gpuparam.envs.mujoco import terrain as tr  # noqa: E402

KW = {"tile_size": 4.0, "horizontal_scale": 0.1, "border": 1.0, "platform_size": 1.0}


def numpy_heights(mjm: mujoco.MjModel, gid: int, hid: int, x: np.ndarray,
                  y: np.ndarray) -> np.ndarray:
    """Bilinear interpolation (float64) of MuJoCo's heightfield ``hid`` of geom ``gid`` at
    world points ``(x, y)``, clamped to its rectangle."""
    nrow, ncol = int(mjm.hfield_nrow[hid]), int(mjm.hfield_ncol[hid])
    adr = int(mjm.hfield_adr[hid])
    data = mjm.hfield_data[adr:adr + nrow * ncol].astype(np.float64).reshape(nrow, ncol)
    rx, ry, ez, _ = mjm.hfield_size[hid]
    ox, oy, oz = mjm.geom_pos[gid]
    fc = np.clip((x - ox + rx) / (2 * rx) * (ncol - 1), 0, ncol - 1)
    fr = np.clip((y - oy + ry) / (2 * ry) * (nrow - 1), 0, nrow - 1)
    c0 = np.minimum(np.floor(fc).astype(int), ncol - 2)
    r0 = np.minimum(np.floor(fr).astype(int), nrow - 2)
    tc, tr_ = fc - c0, fr - r0
    z = (data[r0, c0] * (1 - tc) * (1 - tr_) + data[r0, c0 + 1] * tc * (1 - tr_)
         + data[r0 + 1, c0] * (1 - tc) * tr_ + data[r0 + 1, c0 + 1] * tc * tr_)
    return oz + z * ez


def scan_reference(env) -> np.ndarray:
    """A terrain env's noise-free height-scan values at its current base poses, float64
    ``[N, P]``: ``clip(base_z - 0.5 - h, -1, 1) * 5`` (the default offset and scale), ``h``
    the heightfield under the scan points rotated by the base's yaw (NumPy, from MuJoCo's
    model)."""
    q = env.state["qpos"].numpy().astype(np.float64)
    gid, hid = tr.terrain_geom(env.mjm, "floor")
    pts = tr.scan_points().astype(np.float64)
    w, x, y, z = q[:, 3], q[:, 4], q[:, 5], q[:, 6]
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    px = q[:, :1] + c * pts[:, 0] - s * pts[:, 1]
    py = q[:, 1:2] + s * pts[:, 0] + c * pts[:, 1]
    return np.clip(q[:, 2:3] - 0.5 - numpy_heights(env.mjm, gid, hid, px, py), -1, 1) * 5.0


@pytest.fixture(scope="module")
def scene():
    t = tr.generate_terrain(rows=3, seed=11, **KW)
    spec = mujoco.MjSpec()
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.1, 0, 0])  # geom 0
    tr.add_terrain_hfield(spec, t)
    mjm = spec.compile()
    gid, hid = tr.terrain_geom(mjm, "terrain")
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm)
    return t, mjm, m, gid, hid


def scan(m, gid, hid, pos, yaw, points, geom_pos=None):
    n, p = len(pos), len(points)
    out = wp.zeros((n, p), dtype=float, device="cpu")
    wp.launch(legged.height_scan, dim=(n, p), device="cpu", inputs=[
        wp.array(pos.astype(np.float32), dtype=wp.vec3, device="cpu"),
        wp.array(yaw.astype(np.float32), dtype=float, device="cpu"),
        wp.array(points.astype(np.float32), dtype=wp.vec2, device="cpu"),
        m.hfield_size, m.hfield_nrow, m.hfield_ncol, m.hfield_adr, m.hfield_data,
        m.geom_pos if geom_pos is None else geom_pos, hid, gid], outputs=[out])
    return out.numpy()


def world_points(pos, yaw, points):
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    x = pos[:, 0:1] + c * points[None, :, 0] - s * points[None, :, 1]
    y = pos[:, 1:2] + s * points[None, :, 0] + c * points[None, :, 1]
    return x, y


def test_height_scan_equals_numpy_sampling(scene):
    t, mjm, m, gid, hid = scene
    rng = np.random.default_rng(0)
    n = 64
    # bases all over the grid and beyond it (clamped at the edges), any yaw
    pos = np.stack([rng.uniform(-3.0, t.size[0] + 1.0, n),
                    rng.uniform(-3.0, t.size[1] + 1.0, n), rng.uniform(0.0, 1.0, n)], axis=1)
    yaw = rng.uniform(-np.pi, np.pi, n)
    points = tr.scan_points()
    got = scan(m, gid, hid, pos, yaw, points)
    assert got.shape == (n, len(points))
    x, y = world_points(pos.astype(np.float32).astype(np.float64),
                        yaw.astype(np.float32).astype(np.float64), points.astype(np.float64))
    want = numpy_heights(mjm, gid, hid, x, y)
    # float32 in the kernel: the point's position (about 2e-6 m over 30 m) times the
    # steepest slope (a stair riser: up to 0.12 m over one 0.1 m cell), plus rounding
    # (seen: 4.5e-6)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)
    assert np.median(np.abs(got - want)) < 1e-6
    # the scan saw every kind of ground: flat, clamped outside, and rough/stairs
    assert (np.abs(want) > 0.01).mean() > 0.2


def test_height_scan_at_samples_is_the_terrain_and_turns_with_yaw(scene):
    t, mjm, m, gid, hid = scene
    h = t.horizontal_scale
    # a base on sample (r, c), yaw 0 and 90 degrees, points on the sample grid
    r, c = 123, 77
    base = np.array([[t.corner[0] + c * h, t.corner[1] + r * h, 0.4]] * 2)
    yaw = np.array([0.0, np.pi / 2])
    points = np.array([[0.0, 0.0], [0.3, 0.0], [0.0, 0.2], [-0.5, 0.4]])
    got = scan(m, gid, hid, base, yaw, points)
    dc = np.rint(points[:, 0] / h).astype(int)
    dr = np.rint(points[:, 1] / h).astype(int)
    np.testing.assert_allclose(got[0], t.heights[r + dr, c + dc], atol=2e-5)
    # yaw +90 degrees: the base's x axis is the world's +y, its y axis the world's -x
    np.testing.assert_allclose(got[1], t.heights[r + dc, c - dr], atol=2e-5)


def test_height_scan_outside_is_clamped_to_the_edge(scene):
    t, mjm, m, gid, hid = scene
    far = np.array([[-50.0, 5.0, 0.0], [t.size[0] + 50.0, t.size[1] + 50.0, 0.0]])
    got = scan(m, gid, hid, far, np.zeros(2), np.zeros((1, 2)))
    np.testing.assert_allclose(got[:, 0], [t.heights[round((5.0 + 1.0) / 0.1), 0],
                                           t.heights[-1, -1]], atol=1e-6)


def test_height_scan_reads_each_worlds_geom_position(scene):
    """MuJoCo Warp's geom_pos is [nworld or 1, ngeom]: world i reads row i % rows."""
    t, mjm, m, gid, hid = scene
    gp = np.repeat(m.geom_pos.numpy(), 2, axis=0)  # 2 worlds
    gp[1, gid] += np.array([0.0, 0.0, 0.25], np.float32)  # world 1's terrain 25 cm higher
    geom_pos = wp.array(gp, dtype=wp.vec3, device="cpu")
    pos = np.array([[3.0, 5.0, 0.0]] * 4)
    got = scan(m, gid, hid, pos, np.zeros(4), tr.scan_points(), geom_pos=geom_pos)
    np.testing.assert_allclose(got[1] - got[0], 0.25, atol=1e-6)
    np.testing.assert_array_equal(got[2], got[0])
    np.testing.assert_array_equal(got[3], got[1])


def test_quat_yaw():
    @wp.kernel
    def yaw_of(q: wp.array(dtype=wp.vec4), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = legged.quat_yaw(q[i])

    rng = np.random.default_rng(1)
    n = 100
    yaw, pitch, roll = (rng.uniform(-np.pi, np.pi, n), rng.uniform(-1.2, 1.2, n),
                        rng.uniform(-1.2, 1.2, n))
    quats = np.zeros((n, 4))
    for k in range(n):  # z-y-x (yaw, pitch, roll) composition
        qz = np.array([np.cos(yaw[k] / 2), 0, 0, np.sin(yaw[k] / 2)])
        qy = np.array([np.cos(pitch[k] / 2), 0, np.sin(pitch[k] / 2), 0])
        qx = np.array([np.cos(roll[k] / 2), np.sin(roll[k] / 2), 0, 0])
        tmp = np.zeros(4)
        mujoco.mju_mulQuat(tmp, qz, qy)
        mujoco.mju_mulQuat(quats[k], tmp, qx)
    out = wp.zeros(n, dtype=float, device="cpu")
    wp.launch(yaw_of, dim=n, inputs=[wp.array(quats.astype(np.float32), dtype=wp.vec4,
                                              device="cpu")], outputs=[out], device="cpu")
    np.testing.assert_allclose(out.numpy(), yaw, atol=1e-5)
