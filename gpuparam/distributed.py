"""Sharding one run over ``torch.distributed`` ranks (``torchrun``): global env ids and a
step-count schedule of collective syncs, and an env's set of such schedules (``EnvSyncs``,
behind ``env.sync_every``; the guide: ``docs/distributed.md``). A sync packs
every target into one flat float64 buffer, carries it in one ``all_gather`` between steps
and merges it the same way on every rank. Ranks must register the same targets in the same
order; mismatched ranks all raise the same ``ValueError``, with nothing packed.
"""

from __future__ import annotations

import time
import weakref
import zlib
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import torch
import torch.distributed as dist


class Syncable(Protocol):
    """Anything with a collective ``sync(group)``: ``gp.ObsNorm``, ``gp.RewardNorm``,
    ``gp.Curriculum`` (built with ``sync=True``)."""

    def sync(self, group: dist.ProcessGroup | None = None) -> None: ...


@runtime_checkable
class Exchangeable(Protocol):
    """A sync target split into a pack and an apply, so that a :class:`SyncSchedule` can
    carry all its targets in one collective and overlap it with the steps that follow.

    ``exchange_size()``: float64 values this target sends per rank. ``exchange_pack(out)``:
    write this rank's contribution since the last pack into ``out`` (float64
    ``[exchange_size()]`` on ``exchange_device()``; device ops only). ``exchange_apply(rows)``:
    merge every rank's row (float64 ``[W, exchange_size()]``, rank order, identical on every
    rank) the same way on every rank; data collected since the pack stays this rank's own.
    ``exchange_epoch``: an int that changes when the target's state is replaced (a
    checkpoint load); an exchange packed under another epoch is not applied to it.
    """

    exchange_epoch: int

    def exchange_device(self) -> torch.device: ...

    def exchange_size(self) -> int: ...

    def exchange_pack(self, out: torch.Tensor) -> None: ...

    def exchange_apply(self, rows: torch.Tensor) -> None: ...


_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


_LISTED = 16  # target sizes a header lists


def _check_targets(targets: Sequence[Exchangeable], sizes: tuple[int, ...], group,
                   world: int) -> None:
    """Raise the same ``ValueError`` on every rank unless all gather the same header (count,
    total size, kinds checksum, first sizes); a blocking collective, once per set of targets."""
    kinds = zlib.crc32(",".join(type(t).__name__ for t in targets).encode())
    head = [len(sizes), sum(sizes), kinds, *sizes[:_LISTED]]
    head += [-1] * (3 + _LISTED - len(head))
    dev = targets[0].exchange_device()
    rows = torch.empty(world * len(head), dtype=torch.int64, device=dev)
    _gather(rows, torch.tensor(head, dtype=torch.int64, device=dev), group=group)
    rows = rows.view(world, len(head)).cpu()  # host-ok: once per set of targets
    if bool((rows == rows[0]).all()):
        return
    desc = []
    for r, (count, _, checksum, *listed) in enumerate(rows.tolist()):  # host-ok: error path
        listed = [v for v in listed if v >= 0]
        more = " and more" if count > len(listed) else ""
        desc.append(f"rank {r}: {count} target(s), float64 values per target {listed}{more}, "
                    f"kinds checksum {checksum}")
    raise ValueError(
        "sync: the ranks registered different sync targets (" + "; ".join(desc) + "); "
        "every rank must pass the same targets (ObsNorm, RewardNorm, Curriculum, ...) in "
        "the same order to sync_every / sync"
    )


class _Exchange:
    """One collective carrying the packed rows of several targets (float64 ``[W, total]``,
    rank order), with its buffers and per-target views kept for the next ``start``."""

    def __init__(self, targets: Sequence[Exchangeable], group):
        self.targets, self.group = tuple(targets), group
        self.layout: tuple | None = None
        self.work, self.parts = None, ()

    def start(self) -> None:
        """Apply any exchange in flight carrying a target (a sync by hand never overtakes a
        scheduled one), pack every target into the send buffer (made again when the sizes or
        the world change) and launch the gather in the background (``async_op=True``; in a
        world of one nothing: the send buffer is the one row)."""
        for t in self.targets:
            if t in _IN_FLIGHT:
                _IN_FLIGHT[t].finish()
        if not self.targets:
            return
        initialized = dist.is_available() and dist.is_initialized()
        world = dist.get_world_size(self.group) if initialized else 1
        sizes = tuple(t.exchange_size() for t in self.targets)
        if (sizes, world) != self.layout:
            if world > 1:
                _check_targets(self.targets, sizes, self.group, world)
            total = sum(sizes)
            send = torch.empty(total, dtype=torch.float64,
                               device=self.targets[0].exchange_device())
            recv = send.new_empty(world * total) if world > 1 else send
            rows = recv.view(world, total).split(sizes, dim=1)
            self.views = list(zip(send.split(sizes), rows, strict=True))
            self.send, self.recv, self.layout = send, recv, (sizes, world)
        parts = []
        for t, (out, rows) in zip(self.targets, self.views, strict=True):
            t.exchange_pack(out)
            parts.append((t, t.exchange_epoch, rows))
            _IN_FLIGHT[t] = self
        self.parts = parts
        if world > 1:
            self.work = _gather(self.recv, self.send, group=self.group, async_op=True)

    def finish(self) -> float:
        """Wait for the collective (returns the host seconds it blocked) and apply it to every
        target still in the epoch it was packed in; a no-op when nothing is in flight."""
        t0 = time.perf_counter()
        if self.work is not None:
            self.work.wait()
            self.work = None
        waited = time.perf_counter() - t0
        parts, self.parts = self.parts, ()
        for t, epoch, rows in parts:
            if _IN_FLIGHT.get(t) is self:
                del _IN_FLIGHT[t]
            if t.exchange_epoch == epoch:
                t.exchange_apply(rows)
        return waited


_IN_FLIGHT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def exchange(targets: Sequence[Exchangeable], group: dist.ProcessGroup | None = None) -> None:
    """Sync ``targets`` now, in one blocking collective (targets' ``sync()`` call it), after
    applying any overlapped exchange still in flight that carries one of them; without an
    initialized process group, a world of one."""
    ex = _Exchange(targets, group)
    ex.start()
    ex.finish()


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
    """Sync ``targets`` every ``every`` steps (made by ``env.sync_every``).

    Args:
        every: steps between syncs, ``>= 1``.
        targets: objects with a collective ``sync(group)`` method, synced in this order.
            :class:`Exchangeable` ones travel together in one ``all_gather`` per sync;
            others get their own blocking ``sync(group)`` call.
        group: the ``torch.distributed`` process group (default: the world); without an
            initialized process group the targets sync as a world of one, on the same
            schedule, so W ranks match one process.
        overlap: ``True`` (default): the exchange packed after step ``j * every`` runs in
            the background during the next ``every`` steps and is applied after step
            ``(j + 1) * every``, just before the next one is packed. ``False``: each
            exchange is applied at once (blocking).

    ``step()`` counts one env step on the host (no device sync) and syncs at every
    ``every``-th call. ``steps`` is the count so far; ``syncs``, ``host_seconds`` (host
    time in the scheduled syncs) and ``wait_seconds`` (of which blocked on collectives)
    measure what syncing costs.
    """

    def __init__(
        self,
        every: int,
        targets: Sequence[Syncable],
        group: dist.ProcessGroup | None = None,
        overlap: bool = True,
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
        if not isinstance(overlap, bool):
            raise ValueError(f"sync_every: overlap must be a bool, got {overlap!r}")
        self.every, self.targets, self.group, self.overlap = every, tuple(targets), group, overlap
        self._exchange = _Exchange([t for t in targets if isinstance(t, Exchangeable)], group)
        self._others = tuple(t for t in targets if not isinstance(t, Exchangeable))
        self.steps = self.syncs = 0
        self.host_seconds = self.wait_seconds = 0.0

    def step(self) -> None:
        """Count one step; sync when the count is a multiple of ``every``."""
        self.steps += 1
        if self.steps % self.every == 0:
            t0 = time.perf_counter()
            self.settle()  # the exchange in flight, if any
            self._exchange.start()
            if not self.overlap:
                self.settle()
            for t in self._others:
                t.sync(self.group)
            self.syncs += 1
            self.host_seconds += time.perf_counter() - t0

    def reset_costs(self) -> None:
        """Zero ``syncs``, ``host_seconds`` and ``wait_seconds`` (not ``steps``)."""
        self.syncs, self.host_seconds, self.wait_seconds = 0, 0.0, 0.0

    def settle(self) -> None:
        """Wait for and apply the exchange in flight, if any (no new collective)."""
        self.wait_seconds += self._exchange.finish()

    def sync(self) -> None:
        """Settle the exchange in flight and sync every target now (collective: all ranks
        must call it); afterwards the statistics are the same on every rank."""
        self.settle()
        self._exchange.start()
        self._exchange.finish()
        for t in self._others:
            t.sync(self.group)

    def __repr__(self) -> str:
        names = ", ".join(type(t).__name__ for t in self.targets)
        return f"SyncSchedule(every={self.every}, targets=[{names}], overlap={self.overlap})"


class EnvSyncs:
    """The sync schedules of one env (an object every ``VecEnv`` owns), in the order added
    by ``env.sync_every``; ``step()`` runs after every env step that ran to its end."""

    def __init__(self) -> None:
        self.schedules: list[SyncSchedule] = []

    def add(self, every: int, targets: Sequence[Syncable], group: object = None,
            overlap: bool = True) -> Callable[[], None]:
        """``env.sync_every(every, *targets, group, overlap)``: a ``gp.SyncSchedule`` (its
        docstring: the arguments) syncing ``targets`` (``gp.ObsNorm``, ``gp.RewardNorm``,
        ``gp.Curriculum(..., sync=True)``) over the ranks; every rank makes the same calls.
        Returns a function removing it (after settling its exchange in flight)."""
        for t in targets:
            # refused now, not at the first sync (e.g. a curriculum built with sync=False
            # whose ADR decides at every step on each rank); one schedule per target (an
            # exchange applied by one would clear what another has in flight)
            check, other = getattr(t, "check_syncable", None), self.schedule_of(t)
            if callable(check):
                check()
            if other is not None:
                raise ValueError(f"sync_every: {type(t).__name__} is already synced by "
                                 f"{other!r}; a target belongs to one schedule")
        sched = SyncSchedule(every, targets, group, overlap)
        self.schedules.append(sched)

        def remove() -> None:
            if sched in self.schedules:
                sched.settle()
                self.schedules.remove(sched)

        return remove

    def schedule_of(self, target: object) -> SyncSchedule | None:
        """The schedule syncing ``target``, or None."""
        return next((s for s in self.schedules if any(t is target for t in s.targets)), None)

    def step(self) -> None:
        """Count one env step in every schedule (each syncs at its ``every``-th)."""
        for s in self.schedules:
            s.step()

    def sync(self) -> None:
        """``env.sync_now``: settle and sync every schedule now (collective)."""
        for s in self.schedules:
            s.sync()
