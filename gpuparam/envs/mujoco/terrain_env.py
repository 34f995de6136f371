"""A legged task on the terrain grid, robot-independent: what Go1's and G1's tasks share
there (``Go1Terrain-v0``, ``G1Terrain-v0``; a third robot's terrain env is the same two
pieces).

- :class:`TaskTerrain`: the task kernel's view of the terrain (``kernels.legged.Terrain``:
  the heightfield, for foot heights above the ground under the foot; the height scan,
  read by two bound launches before the task; the tile size, the curriculum's yardstick).
- :class:`TerrainGridEnv`: the env side, mixed in before the robot's env class: the
  grid's options (``terrain_rows``, ``terrain_cols``, ``terrain_types``, ``tile_size``,
  ``terrain_seed``, ``height_scan``), its ``model_config``, the scan's size, and the
  terrain curriculum over ``terrain_level`` (legged_gym's) from the task state's
  ``"metric"`` (``kernels.legged.terrain_progress``).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
import warp as wp

from gpuparam._launch import BoundLaunch
from gpuparam.envs.mujoco.legged import LeggedBackend
from gpuparam.envs.mujoco.terrain import TerrainGrid, grid_from_options, scan_points, terrain_geom
from gpuparam.kernels import legged as kleg
from gpuparam.pipeline import StepContext


class TaskTerrain:
    """The terrain a legged task kernel reads: ``terrain`` (a ``kernels.legged.Terrain``,
    ``on`` 0 without a grid), and the height scan's launches (the base pose, then the
    heights under ``points`` ``[P, 2]`` in the base's yaw frame into ``heights`` float32
    ``[N, max(P, 1)]``), bound once; ``scan(ctx)`` runs them (nothing without points).

    Build it inside the task's ``bind``, under the env's Warp device; ``grid`` None: a
    scene without the terrain grid (Playground's flat or rough: heights are world z)."""

    def __init__(self, mjm: mujoco.MjModel, backend: LeggedBackend, grid: TerrainGrid | None,
                 points, num_envs: int, device: torch.device):
        m, d, n = backend.m, backend.d, num_envs
        tr = self.terrain = kleg.Terrain()
        tr.size, tr.nrow, tr.ncol = m.hfield_size, m.hfield_nrow, m.hfield_ncol
        tr.adr, tr.data, tr.geom_pos = m.hfield_adr, m.hfield_data, m.geom_pos
        if grid is not None:
            gid, hid = terrain_geom(mjm, "floor")
            tr.on, tr.hfield, tr.geom, tr.tile = 1, hid, gid, grid.tile_size
        else:  # no heightfield read (placeholders of the right types)
            if mjm.nhfield == 0:
                tr.size = wp.zeros(1, dtype=wp.vec4)
                tr.nrow = tr.ncol = tr.adr = wp.zeros(1, dtype=int)
                tr.data = wp.zeros(1, dtype=float)
            tr.on, tr.hfield, tr.geom, tr.tile = 0, 0, 0, 0.0
        p = 0 if points is None else len(points)
        tr.nscan = p
        self.heights = torch.zeros(n, max(p, 1), dtype=torch.float32, device=device)
        tr.heights = wp.from_torch(self.heights)
        self._scans = []
        if p:
            pos, yaw = wp.zeros(n, dtype=wp.vec3), wp.zeros(n, dtype=float)
            self._scans = [
                BoundLaunch(kleg.base_pose, n, inputs=[d.qpos], outputs=[pos, yaw],
                            device=device),
                BoundLaunch(kleg.height_scan, (n, p),
                            inputs=[pos, yaw, wp.array(points, dtype=wp.vec2),
                                    m.hfield_size, m.hfield_nrow, m.hfield_ncol, m.hfield_adr,
                                    m.hfield_data, m.geom_pos, hid, gid],
                            outputs=[tr.heights], device=device)]

    def scan(self, ctx: StepContext) -> None:
        """The height scan at the current base poses (before the task kernel reads it)."""
        for launch in self._scans:
            launch.launch(ctx.stream)


class TerrainGridEnv:
    """Mixin for a legged env on the terrain grid (``class G1TerrainEnv(TerrainGridEnv,
    G1Env)``): the robot's env reads ``self.grid`` (from :meth:`make_grid`) and
    ``self.num_scan_points``, and its task keeps the curriculum metric as
    ``task.state["metric"]`` float32 ``[N]``.

    Options (popped before the robot env's): ``terrain_rows`` (10), ``terrain_cols`` (one
    per type), ``terrain_types``, ``tile_size`` (8 m), ``terrain_seed`` (an int32 as
    ``seed``, its default; a negative one is taken modulo 2**32, as NumPy's generator takes
    only seeds >= 0), each checked (``generate_terrain``'s rules) before the terrain is
    generated; ``height_scan`` (a bool, default True; False: blind, the observations
    without the scan)."""

    def make_grid(self, seed: int, kwargs: dict) -> TerrainGrid:
        scan = kwargs.pop("height_scan", True)
        if not isinstance(scan, (bool, np.bool_)):  # not its truth value: "False" is true
            raise ValueError(f"height_scan: expected a bool, got {scan!r}")
        self.height_scan = bool(scan)
        grid, self.terrain_seed = grid_from_options(seed, kwargs)  # the grid's seed, as built
        return grid

    @property
    def num_scan_points(self) -> int:
        """P, the height-scan points in the observation (0 when blind)."""
        return len(scan_points()) if self.height_scan else 0

    def model_config(self) -> dict[str, object]:
        """The robot env's and the terrain grid's settings: ``terrain_rows``, its column
        types (``terrain_types``, one per column), ``tile_size``, ``terrain_seed`` (as
        built: the env's seed by default), ``height_scan``."""
        g = self.grid
        return {**super().model_config(), "terrain_rows": len(g.difficulty),
                "terrain_types": tuple(g.types), "tile_size": float(g.tile_size),
                "terrain_seed": int(self.terrain_seed), "height_scan": bool(self.height_scan)}

    @property
    def terrain_metric(self) -> torch.Tensor:
        """float32 ``[num_envs]``: at each step, +1 for an env that walked (from its
        episode's start) farther than half a tile, -1 for one that covered less than half
        its commanded distance so far (the sum of ``|command_xy| * dt`` over its steps),
        else 0; read by :meth:`terrain_curriculum` at episode ends."""
        return self.task.state["metric"]

    def terrain_curriculum(self, initial_level: int = 0):
        """legged_gym's terrain curriculum as a ``gp.Curriculum`` over ``terrain_level``
        (one level per terrain row): at the end of an episode an env that walked farther
        than half a tile moves one row up, one that covered less than half its commanded
        distance one row down (legged_gym measures against the command times the episode's
        full length; this env against the distance commanded during the episode), clamped
        to the grid (legged_gym sends an env past the last row to a random row). Add it
        with ``env.add_curriculum(cur)``; the new row applies from the next reset."""
        from gpuparam.curriculum import Curriculum

        rows = len(self.grid.difficulty)
        return Curriculum(rows, params={"terrain_level": [float(r) for r in range(rows)]},
                          metric=self.terrain_metric, promote=0.5, demote=-0.5,
                          initial_level=initial_level)
