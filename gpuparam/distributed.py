"""Sharding one run over ``torch.distributed`` ranks (``torchrun``): global env ids and a
step-count schedule of collective syncs.

Each rank steps its own slice of the global envs (``gp.make(..., shard=(rank, world))``,
or ``env_offset=`` directly): env ``i`` of a rank is global env ``env_offset + i``, and every
counter-based draw (initial states, randomization terms, schedules' phases) is keyed by
the global id, so a run of ``W`` ranks x ``N / W`` envs gives, env for env, the trajectories,
parameters and draws of one process with ``N`` envs and the same seed.

What is per rank and what is global:

- per rank (per env, never communicated): the physical state, parameters (nominal and
  effective), randomization counters and clocks, curriculum levels, ``RewardNorm``'s
  per-env discounted returns. They are the same as a single process's for the same
  global envs, so nothing needs merging.
- global (merged by collectives at a sync; identical on every rank afterwards): the
  statistics of ``ObsNorm`` / ``RewardNorm`` (Chan et al.'s parallel merge, exact to
  float64 rounding), ADR range bounds and their decision statistics (integer sums: exact),
  and a curriculum's histogram of levels over all envs (``Curriculum.global_level_counts``).

Collectives are host-launched ``torch.distributed`` calls (NCCL on GPUs, gloo on CPU): they
cannot live inside a captured step (a Warp CPU graph or a CUDA graph replay does not run
Python), so a sync is a call between steps. ``env.sync_every(k, *targets)`` (a
:class:`SyncSchedule`) makes every ``k``-th ``env.step`` call ``target.sync(group)`` for
each target, after the step's replay: the captured step is never touched, and a sync costs
one or two all-reduces of a few hundred bytes per target. Every rank must step the same
number of times and register the same targets in the same order (collectives match by
order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch.distributed as dist


class Syncable(Protocol):
    """Anything with a collective ``sync(group)``: ``gp.ObsNorm``, ``gp.RewardNorm``,
    ``gp.Curriculum`` (built with ``sync=True``)."""

    def sync(self, group: dist.ProcessGroup | None = None) -> None: ...


def shard_range(num_envs: int, rank: int, world_size: int) -> tuple[int, int]:
    """This rank's slice of ``num_envs`` global envs: ``(env_offset, count)``.

    Envs are split into contiguous slices in rank order; when ``num_envs`` does not divide
    evenly, the first ``num_envs % world_size`` ranks hold one env more (as
    ``torch.tensor_split``): 10 envs over 4 ranks are 3, 3, 2, 2 envs at offsets 0, 3, 6, 8.
    Every rank holds at least one env.

    Args:
        num_envs: global number of envs, ``>= world_size``.
        rank: this rank, ``0 <= rank < world_size``.
        world_size: number of ranks, ``>= 1``.

    Returns:
        ``(env_offset, count)``: global ids ``env_offset .. env_offset + count - 1``.
    """
    for name, v in (("num_envs", num_envs), ("rank", rank), ("world_size", world_size)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"shard: {name} must be an int, got {v!r}")
    if world_size < 1:
        raise ValueError(f"shard: world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"shard: rank must be in [0, {world_size}), got {rank}")
    if num_envs < world_size:
        raise ValueError(
            f"shard: num_envs (global) must be >= world_size so that every rank holds an "
            f"env, got num_envs={num_envs}, world_size={world_size}"
        )
    base, extra = divmod(num_envs, world_size)
    return rank * base + min(rank, extra), base + int(rank < extra)


class SyncSchedule:
    """Call ``sync(group)`` of ``targets`` every ``every`` steps (see the module doc).

    Args:
        every: steps between syncs, ``>= 1``.
        targets: objects with a collective ``sync(group)`` method, synced in this order.
        group: the ``torch.distributed`` process group (default: the world); without an
            initialized process group the targets sync as a world of one, so the same
            code runs in one process.

    ``step()`` counts one env step on the host (a Python int: no device sync) and syncs at
    every ``every``-th call; ``sync()`` syncs now. ``steps`` is the count so far.
    """

    def __init__(
        self,
        every: int,
        targets: Sequence[Syncable],
        group: dist.ProcessGroup | None = None,
    ):
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"sync_every: every must be an int >= 1, got {every!r}")
        if not targets:
            raise ValueError("sync_every: pass at least one target (ObsNorm, RewardNorm, ...)")
        for t in targets:
            if not callable(getattr(t, "sync", None)):
                raise ValueError(
                    f"sync_every: targets must have a sync(group) method, got {type(t).__name__}"
                )
        self.every = every
        self.targets = tuple(targets)
        self.group = group
        self.steps = 0

    def step(self) -> None:
        """Count one step; sync when the count is a multiple of ``every``."""
        self.steps += 1
        if self.steps % self.every == 0:
            self.sync()

    def sync(self) -> None:
        """Sync every target now (collective: all ranks must call it)."""
        for t in self.targets:
            t.sync(self.group)

    def __repr__(self) -> str:
        names = ", ".join(type(t).__name__ for t in self.targets)
        return f"SyncSchedule(every={self.every}, targets=[{names}])"
