"""Legged-robot recipe pieces on the device: the height scan (legged_gym's
``measure_heights``) read from a MuJoCo Warp heightfield.

The heightfield is read as MuJoCo Warp stores it (``mujoco_warp.Model`` fields):
``hfield_size [nhfield] vec4`` = (radius_x, radius_y, elevation_z, base_z),
``hfield_nrow``, ``hfield_ncol``, ``hfield_adr [nhfield] int`` and ``hfield_data
[nhfielddata] float`` (normalized to [0, 1], row-major, row ``r`` at
``y = -radius_y + r * 2 radius_y / (nrow - 1)``, column ``c`` likewise in x), placed by its
geom's ``geom_pos [nworld or 1, ngeom] vec3``. The geom must be a world-body geom with the
identity orientation (``gpuparam.envs.mujoco.terrain.terrain_geom`` checks it).
"""

from __future__ import annotations

import warp as wp

# No floating-point contraction, as every gpuparam kernel that feeds an observation: the
# rotation and interpolation round alike on CPU and GPU.
wp.set_module_options({"fuse_fp": False})


@wp.func
def quat_yaw(q: wp.vec4) -> float:
    """Yaw (rotation about world z, radians) of a unit quaternion ``(w, x, y, z)``, as
    MuJoCo stores a free joint's orientation in ``qpos[3:7]``."""
    return wp.atan2(2.0 * (q[0] * q[3] + q[1] * q[2]), 1.0 - 2.0 * (q[2] * q[2] + q[3] * q[3]))


@wp.func
def hfield_height(size: wp.vec4, nrow: int, ncol: int, adr: int,
                  hfield_data: wp.array(dtype=float), origin: wp.vec3, x: float,
                  y: float) -> float:
    """World height of the heightfield under world ``(x, y)``: bilinear interpolation of
    the four surrounding samples, the point clamped to the heightfield's rectangle (so
    outside it the height of the nearest edge). ``origin``: the geom's world position.

    MuJoCo collides with the heightfield as two triangles per cell; bilinear interpolation
    agrees with that surface at the samples and along the cell edges, and differs inside a
    cell by at most a quarter of the cell's twist, ``|h00 + h11 - h01 - h10| / 4`` (samples
    in metres)."""
    fc = (x - origin[0] + size[0]) * float(ncol - 1) / (2.0 * size[0])
    fr = (y - origin[1] + size[1]) * float(nrow - 1) / (2.0 * size[1])
    fc = wp.clamp(fc, 0.0, float(ncol - 1))
    fr = wp.clamp(fr, 0.0, float(nrow - 1))
    c0 = wp.min(int(wp.floor(fc)), ncol - 2)
    r0 = wp.min(int(wp.floor(fr)), nrow - 2)
    tc = fc - float(c0)
    tr = fr - float(r0)
    i = adr + r0 * ncol + c0
    h00 = hfield_data[i]
    h01 = hfield_data[i + 1]
    h10 = hfield_data[i + ncol]
    h11 = hfield_data[i + ncol + 1]
    lo = h00 + tc * (h01 - h00)
    hi = h10 + tc * (h11 - h10)
    return origin[2] + (lo + tr * (hi - lo)) * size[2]


@wp.kernel
def height_scan(
    # scan
    base_pos: wp.array(dtype=wp.vec3),
    base_yaw: wp.array(dtype=float),
    points: wp.array(dtype=wp.vec2),
    # heightfield (mujoco_warp.Model fields) and its geom
    hfield_size: wp.array(dtype=wp.vec4),
    hfield_nrow: wp.array(dtype=int),
    hfield_ncol: wp.array(dtype=int),
    hfield_adr: wp.array(dtype=int),
    hfield_data: wp.array(dtype=float),
    geom_pos: wp.array2d(dtype=wp.vec3),
    hfield_id: int,
    geom_id: int,
    # out
    heights_out: wp.array2d(dtype=float),
):
    """Terrain height under each scan point, one thread per (env, point).

    Args:
        base_pos: world position of each env's base, ``[N]``.
        base_yaw: each base's yaw in radians, ``[N]`` (``quat_yaw`` of its orientation).
        points: scan points ``(x, y)`` in the base's yaw frame (rotated by the yaw only, as
            legged_gym's ``quat_apply_yaw``), ``[P]``.
        hfield_size .. hfield_data: MuJoCo Warp's heightfield arrays (model fields).
        geom_pos: MuJoCo Warp's ``geom_pos`` ``[nworld or 1, ngeom]``; world ``i`` reads row
            ``i % geom_pos.shape[0]``.
        hfield_id, geom_id: the heightfield and its geom.
        heights_out: world height of the terrain under each point, ``[N, P]`` (metres;
            legged_gym's observation is ``clip(base_z - 0.5 - height, -1, 1)``, the env's).
    """
    env, p = wp.tid()
    pos = base_pos[env]
    yaw = base_yaw[env]
    c = wp.cos(yaw)
    s = wp.sin(yaw)
    pt = points[p]
    x = pos[0] + c * pt[0] - s * pt[1]
    y = pos[1] + s * pt[0] + c * pt[1]
    origin = geom_pos[env % geom_pos.shape[0], geom_id]
    heights_out[env, p] = hfield_height(hfield_size[hfield_id], hfield_nrow[hfield_id],
                                        hfield_ncol[hfield_id], hfield_adr[hfield_id],
                                        hfield_data, origin, x, y)
