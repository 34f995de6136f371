"""A legged_gym-style terrain grid as one MuJoCo heightfield, generated at build time.

The grid has ``rows`` difficulty levels times ``cols`` terrain types. Level ``i`` has
difficulty ``d = i / rows`` (0 for the first row, below 1 for the last, as legged_gym's
curriculum) and runs along +x; column ``j`` has type ``types[j % len(types)]`` and runs
along +y. Each tile is ``tile_size`` metres square, sampled every ``horizontal_scale``
metres, and the grid is surrounded by a flat border (height 0) ``border`` metres wide.

Tile types, named by what a robot starting at the tile's centre meets walking outward
(``L``: tile size, ``p``: platform size, ``r``: distance from the centre in the max norm;
each non-flat type except ``rough`` keeps a flat square platform of side ``p`` around the
centre, and the slopes and stairs are 0 at the tile's edge, so neighbours meet there):

- ``flat``: height 0.
- ``rough``: uniform noise in ``[-a, a]``, ``a = 0.01 + 0.09 d``, drawn on a 0.2 m grid
  and interpolated bilinearly.
- ``slope_up`` / ``slope_down``: a square pyramid pit / hill of slope ``s = 0.4 d``
  (rise over run): height ``-/+ s (L/2 - max(r, p/2))``.
- ``stairs_up`` / ``stairs_down``: steps 0.31 m wide and ``e = 0.05 + 0.18 d`` high, down
  into a pit / up onto a hill: height ``-/+ e floor((L/2 - max(r, p/2)) / 0.31)``.
- ``obstacles``: 20 rectangles of sides uniform in [1, 2) m at uniform positions, of height
  ``-H``, ``-H/2``, ``H/2`` or ``H`` (``H = 0.05 + 0.2 d``), the platform cleared to 0.

The constants are legged_gym's (``legged_gym/utils/terrain.py``, ``make_terrain``); the
code is ours. Each tile draws from its own generator keyed by ``(seed, level, column)``, so
a tile is the same whatever the grid's size, and the grid is deterministic per seed.

Layout: ``heights[r, c]`` is the height of the sample at world ``x = corner_x + c * h``,
``y = corner_y + r * h`` (``h = horizontal_scale``): rows along y and columns along x, as
MuJoCo's heightfield data. The corner is ``(-border, -border)``, so tile ``(i, j)``'s centre
is at ``x = (i + 0.5) * tile_size``, ``y = (j + 0.5) * tile_size``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

TERRAIN_TYPES = ("flat", "rough", "slope_up", "slope_down", "stairs_up", "stairs_down",
                 "obstacles")

# legged_gym's constants (make_terrain), per difficulty d in [0, 1)
ROUGH_CELL = 0.2  # m, spacing of the rough terrain's random heights
STEP_WIDTH = 0.31  # m
N_OBSTACLES = 20
OBSTACLE_SIZE = (1.0, 2.0)  # m


def rough_amplitude(d: float) -> float:
    return 0.01 + 0.09 * d


def slope(d: float) -> float:
    return 0.4 * d


def step_height(d: float) -> float:
    return 0.05 + 0.18 * d


def obstacle_height(d: float) -> float:
    return 0.05 + 0.2 * d


@dataclass(frozen=True)
class TerrainGrid:
    """A generated terrain grid (see the module docstring for the layout).

    Attributes:
        heights: float32 ``[nrow, ncol]``, metres; row ``r`` at ``y = corner[1] + r * h``,
            column ``c`` at ``x = corner[0] + c * h``.
        horizontal_scale: ``h``, metres between samples.
        corner: world ``(x, y)`` of sample ``[0, 0]``: ``(-border, -border)``.
        origins: float32 ``[rows, cols, 3]``: each tile's centre at its surface height.
        types: the type of each column, ``[cols]``.
        difficulty: float32 ``[rows]``: ``i / rows``.
        tile_size, border: metres.
    """

    heights: np.ndarray
    horizontal_scale: float
    corner: tuple[float, float]
    origins: np.ndarray
    types: tuple[str, ...]
    difficulty: np.ndarray
    tile_size: float
    border: float

    @property
    def size(self) -> tuple[float, float]:
        """World extent ``(x, y)`` in metres, from the first sample to the last."""
        nrow, ncol = self.heights.shape
        return ((ncol - 1) * self.horizontal_scale, (nrow - 1) * self.horizontal_scale)


def _finite(value: object, name: str) -> float:
    """``value`` as a float if it is a finite real number, else a clear error."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value)):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


def _samples(value: float, h: float, name: str, even: bool = False) -> int:
    """``value / h`` as an exact integer (even if asked), or a clear error."""
    value = _finite(value, name)
    k = value / h
    n = int(round(k))
    if value < 0 or abs(k - n) > 1e-6 or (even and (n == 0 or n % 2)):
        what = "a positive even" if even else "a non-negative whole"
        raise ValueError(f"{name}: expected {what} multiple of horizontal_scale={h}, "
                         f"got {value}")
    return n


def _tile(kind: str, d: float, n: int, h: float, platform: float,
          rng: np.random.Generator) -> np.ndarray:
    """Heights ``[n (y), n (x)]`` of one tile, sample ``k`` at ``k * h - L / 2``."""
    half = n * h / 2
    u = np.arange(n) * h - half
    x, y = np.meshgrid(u, u)  # [y, x]
    r = np.maximum(np.abs(x), np.abs(y))
    inward = half - np.maximum(r, platform / 2)  # distance from the edge, stops at platform
    if kind == "flat":
        z = np.zeros((n, n))
    elif kind == "rough":
        m = int(np.ceil(2 * half / ROUGH_CELL)) + 1
        coarse = rng.uniform(-rough_amplitude(d), rough_amplitude(d), size=(m, m))
        g = np.linspace(-half, -half + (m - 1) * ROUGH_CELL, m)
        rows = np.stack([np.interp(u, g, coarse[k]) for k in range(m)])  # [m (y), n (x)]
        z = np.stack([np.interp(u, g, rows[:, c]) for c in range(n)], axis=1)
    elif kind in ("slope_up", "slope_down"):
        z = slope(d) * inward * (-1.0 if kind == "slope_up" else 1.0)
    elif kind in ("stairs_up", "stairs_down"):
        steps = np.floor(inward / STEP_WIDTH + 1e-9)
        z = step_height(d) * steps * (-1.0 if kind == "stairs_up" else 1.0)
    else:  # obstacles
        z = np.zeros((n, n))
        top = obstacle_height(d)
        for _ in range(N_OBSTACLES):
            sx, sy = (int(round(v / h)) for v in rng.uniform(*OBSTACLE_SIZE, size=2))
            x0, y0 = rng.integers(0, n - min(sx, n) + 1), rng.integers(0, n - min(sy, n) + 1)
            z[y0:y0 + sy, x0:x0 + sx] = rng.choice([-top, -top / 2, top / 2, top])
        z[r < platform / 2] = 0.0
    return z


# The most height samples a grid may hold (float32 on the device, float64 while generated:
# 256 MiB): 25 times legged_gym's 10 x 20 tiles of 8 m at 0.1 m.
MAX_SAMPLES = 2**25


def generate_terrain(rows: int = 10, cols: int | None = None, *,
                     types: Sequence[str] = TERRAIN_TYPES, tile_size: float = 8.0,
                     horizontal_scale: float = 0.1, border: float = 5.0,
                     platform_size: float = 3.0, seed: int = 0) -> TerrainGrid:
    """Generate a ``rows x cols`` terrain grid (pure NumPy, deterministic per ``seed``).

    Args:
        rows: difficulty levels (along +x), level ``i`` of difficulty ``i / rows``.
        cols: terrain columns (along +y), column ``j`` of type ``types[j % len(types)]``;
            ``None``: one column per type.
        types: terrain types, from ``TERRAIN_TYPES``.
        tile_size: side of a tile in metres, an even multiple of ``horizontal_scale``.
            The whole grid, border included, holds at most ``MAX_SAMPLES`` (2**25) height
            samples: a larger ``tile_size`` (or ``rows x cols``) is refused before
            anything is allocated.
        horizontal_scale: metres between height samples.
        border: width of the flat border, a multiple of ``horizontal_scale``.
        platform_size: side of the flat square around each tile's centre, in (0, tile_size].
        seed: the generator's seed, an int >= 0.
    """
    types = tuple(types)
    bad = [t for t in types if t not in TERRAIN_TYPES]
    if not types or bad:
        raise ValueError(f"types: expected a non-empty sequence of {TERRAIN_TYPES}, "
                         f"got {types!r}")
    cols = len(types) if cols is None else cols
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    if not _finite(horizontal_scale, "horizontal_scale") > 0:
        raise ValueError(f"horizontal_scale: expected a positive number, got {horizontal_scale}")
    n = _samples(tile_size, horizontal_scale, "tile_size", even=True)
    b = _samples(border, horizontal_scale, "border")
    if (n + 2 * b + 1) ** 2 > MAX_SAMPLES:  # one tile alone is too big
        most = ((math.isqrt(MAX_SAMPLES) - 2 * b - 1) // 2) * 2 * horizontal_scale
        raise ValueError(f"tile_size: expected at most {most:g} m (a heightfield of at most "
                         f"2**{MAX_SAMPLES.bit_length() - 1} samples at horizontal_scale="
                         f"{horizontal_scale}), got {tile_size}")
    total = (cols * n + 2 * b + 1) * (rows * n + 2 * b + 1)
    if total > MAX_SAMPLES:
        raise ValueError(f"rows, cols: expected a heightfield of at most "
                         f"2**{MAX_SAMPLES.bit_length() - 1} samples, got {rows} x {cols} tiles "
                         f"of {n} x {n} samples ({total} with the border)")
    if not 0 < _finite(platform_size, "platform_size") <= tile_size:
        raise ValueError(f"platform_size: expected a value in (0, tile_size={tile_size}], "
                         f"got {platform_size}")

    h = float(horizontal_scale)
    heights = np.zeros((cols * n + 2 * b + 1, rows * n + 2 * b + 1))  # [y, x]
    origins = np.zeros((rows, cols, 3))
    for i in range(rows):
        d = i / rows
        for j in range(cols):
            rng = np.random.default_rng(np.random.SeedSequence((seed, i, j)))
            tile = _tile(types[j % len(types)], d, n, h, platform_size, rng)
            heights[b + j * n:b + (j + 1) * n, b + i * n:b + (i + 1) * n] = tile
            origins[i, j] = ((i + 0.5) * tile_size, (j + 0.5) * tile_size, tile[n // 2, n // 2])
    return TerrainGrid(
        heights=heights.astype(np.float32), horizontal_scale=h, corner=(-b * h, -b * h),
        origins=origins.astype(np.float32),
        types=tuple(types[j % len(types)] for j in range(cols)),
        difficulty=(np.arange(rows) / rows).astype(np.float32), tile_size=float(tile_size),
        border=b * h)


# Collision and look of a geom that the terrain takes over when it replaces one.
_INHERITED = ("contype", "conaffinity", "condim", "priority", "friction", "solref", "solimp",
              "solmix", "margin", "gap", "material", "rgba", "group")


def grid_from_options(seed: int, kwargs: dict) -> tuple[TerrainGrid, int]:
    """A terrain env's grid from its keyword arguments, popped from ``kwargs``:
    ``terrain_rows`` (10), ``terrain_cols`` (one per type), ``terrain_types``, ``tile_size``
    (8 m), ``terrain_seed`` (an int32, default the env's ``seed``; a negative one is taken
    modulo 2**32). Returns the grid and its seed as given; each option is checked
    (``generate_terrain``'s rules, named as here) before the terrain is generated."""
    opts = {k: kwargs.pop(k) for k in ("terrain_rows", "terrain_cols", "terrain_types",
                                       "tile_size", "terrain_seed") if k in kwargs}
    tseed = opts.get("terrain_seed", seed)
    if not isinstance(tseed, int) or isinstance(tseed, bool) or not -(2**31) <= tseed < 2**31:
        what = "terrain_seed" if "terrain_seed" in opts else "seed"
        raise ValueError(f"{what}: expected an int32 value, got {tseed!r}")
    extra = {"types": opts["terrain_types"]} if "terrain_types" in opts else {}
    try:
        grid = generate_terrain(opts.get("terrain_rows", 10), opts.get("terrain_cols"),
                                tile_size=opts.get("tile_size", 8.0), seed=tseed % 2**32,
                                **extra)
    except ValueError as e:  # generate_terrain's argument names -> the env's
        name, _, rest = str(e).partition(":")
        names = {"rows": "terrain_rows", "cols": "terrain_cols", "types": "terrain_types"}
        name = ", ".join(names.get(k, k) for k in name.split(", "))
        raise ValueError(f"{name}:{rest}") from None
    return grid, tseed


def add_terrain_hfield(spec: mujoco.MjSpec, terrain: TerrainGrid, name: str = "terrain",
                       base_depth: float = 1.0, replace: str | None = None) -> mujoco.MjsGeom:
    """Add ``terrain`` to ``spec`` as a heightfield asset and a world geom; return the geom.

    MuJoCo's conventions: a heightfield of ``nrow x ncol`` samples is centred on its geom,
    spans ``[-size[0], size[0]] x [-size[1], size[1]]`` (column ``c`` at
    ``x = -size[0] + c * 2 size[0] / (ncol - 1)``, row ``r`` likewise in y) and its data,
    normalized to [0, 1], is scaled by ``size[2]`` above the geom; ``size[3]`` is the depth
    of the solid base below the lowest point. So the data is ``(heights - min) / (max - min)``,
    the geom sits at the grid's centre at height ``min``, and the world heights are those of
    ``terrain.heights`` up to float32 rounding of the normalized data.

    Args:
        name: name of the hfield asset and of the geom.
        base_depth: ``size[3]``, metres.
        replace: name of an existing geom (e.g. a ``"floor"`` plane) that the terrain
            replaces: it takes that geom's collision and look attributes and its name (so
            sensors and contact pairs naming it keep working), and the old geom is deleted.
    """
    if not base_depth > 0:
        raise ValueError(f"base_depth: expected a positive number of metres, got {base_depth}")
    old = None
    if replace is not None:
        old = spec.geom(replace)
        if old is None:
            names = [g.name for g in spec.geoms if g.name]
            raise ValueError(f"replace: expected the name of a geom in the spec {names}, "
                             f"got {replace!r}")
        name = replace
    z = terrain.heights.astype(np.float64)
    zmin, zmax = float(z.min()), float(z.max())
    elevation = zmax - zmin if zmax > zmin else 1.0  # all flat: data 0, any positive scale
    data = (z - zmin) / elevation
    nrow, ncol = z.shape
    sx, sy = terrain.size
    hf = spec.add_hfield(name=name, nrow=nrow, ncol=ncol,
                         size=[sx / 2, sy / 2, elevation, base_depth])
    hf.userdata = data.astype(np.float32).ravel().tolist()  # host-ok: NumPy, model build
    attrs = {} if old is None else {a: getattr(old, a) for a in _INHERITED}
    if old is not None:
        spec.delete(old)
    geom = spec.worldbody.add_geom(
        name=name, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name,
        pos=[terrain.corner[0] + sx / 2, terrain.corner[1] + sy / 2, zmin])
    for a, v in attrs.items():
        setattr(geom, a, v)
    return geom


def scan_points(x: Sequence[float] | None = None,
                y: Sequence[float] | None = None) -> np.ndarray:
    """Height-scan points in the base's yaw frame, float32 ``[len(x) * len(y), 2]`` (x
    major): legged_gym's grid by default, 17 x 11 points over [-0.8, 0.8] x [-0.5, 0.5] m."""
    x = np.round(np.arange(-8, 9) * 0.1, 6) if x is None else np.asarray(x, np.float64)
    y = np.round(np.arange(-5, 6) * 0.1, 6) if y is None else np.asarray(y, np.float64)
    if x.ndim != 1 or y.ndim != 1 or not x.size or not y.size:
        raise ValueError(f"x, y: expected non-empty 1-D sequences, got shapes {x.shape}, "
                         f"{y.shape}")
    gx, gy = np.meshgrid(x, y, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)


def terrain_geom(mjm: mujoco.MjModel, name: str) -> tuple[int, int]:
    """``(geom id, hfield id)`` of the heightfield geom ``name``, checked to be what the
    height scan (``gpuparam.kernels.legged.height_scan``) reads: a world-body heightfield
    with the identity orientation and at least 2 x 2 samples."""
    gid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, name)
    if gid < 0:
        raise ValueError(f"name: expected a geom of the model, got {name!r}")
    if mjm.geom_type[gid] != mujoco.mjtGeom.mjGEOM_HFIELD:
        raise ValueError(f"geom {name!r}: expected a heightfield geom, got type "
                         f"{mujoco.mjtGeom(mjm.geom_type[gid]).name}")
    if mjm.geom_bodyid[gid] != 0 or not np.array_equal(mjm.geom_quat[gid], [1, 0, 0, 0]):
        raise ValueError(f"geom {name!r}: expected a world-body geom with identity "
                         f"orientation, got body {mjm.geom_bodyid[gid]}, quat "
                         f"{mjm.geom_quat[gid].tolist()}")  # host-ok: NumPy, error
    hid = int(mjm.geom_dataid[gid])
    if mjm.hfield_nrow[hid] < 2 or mjm.hfield_ncol[hid] < 2:
        raise ValueError(f"geom {name!r}: expected a heightfield of at least 2 x 2 samples, "
                         f"got {mjm.hfield_nrow[hid]} x {mjm.hfield_ncol[hid]}")
    return gid, hid
