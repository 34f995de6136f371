"""The step as an explicit list of stages, captured once and replayed, on CPU and CUDA.

A :class:`Stage` launches the device work of one part of a step (hooks, randomization,
physics, episode bookkeeping, curricula, auto-reset, transforms). Every stage reads and
writes one :class:`StepContext`: the env's static buffers and masks, its seed, its stream.

:class:`Pipeline` runs the stages and captures them through public APIs only:

- CUDA: one ``torch.cuda.graph`` of the whole list, on a stream the pipeline owns, with
  Warp launching on one cached ``wp.Stream`` wrapping it (kept alive as long as the
  pipeline: a dropped ``wp.Stream`` of an external handle unregisters the CUDA stream).
- CPU: each run of consecutive ``warp_only`` stages is one Warp CPU graph
  (``wp.ScopedCapture(device="cpu")``, replayed with ``wp.capture_launch``); stages that
  run torch ops or Python run eagerly between them.

Capture happens at the first call after ``warmup`` eager calls (which load every Warp
module). Anything that changes what a replay would do must drop the capture: stage list
changes (``invalidate``), and host-side settings that a stage declares through its
``key`` (e.g. a transform's eval/freeze/clip flags): when any key differs from its value
when the stages were built or captured, the pipeline builds and captures again.
``invalidate()`` is the one public call that drops the capture.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
import warp as wp

from gpuparam._device import wp_device, wp_stream


@dataclass(eq=False)
class StepContext:
    """What the stages of one env batch share (all tensors on ``device``, allocated once).

    Attributes:
        num_envs: N, envs in this process.
        device: torch device of every tensor here.
        env_offset: global id of this process's env 0 (env ``i`` is global env
            ``env_offset + i``; every counter-based draw is keyed by the global id).
        seed: int32 ``[1]``, the key of every random draw.
        action: the static action buffer ``[N, *action_shape]`` (int64 or float32).
        outputs: the step's output buffers, batch ``[N]``: ``"observation"``,
            ``"final_observation"`` float32 ``[N, *obs_shape]``, ``"reward"`` float32,
            ``"terminated"``, ``"truncated"``, ``"done"`` bool, ``"episode_return"``
            float32, ``"episode_length"`` int32.
        done: bool ``[N]``, the envs whose episode ended at this step (``outputs["done"]``).
        done_words: int64 ``[ceil(N / 8)]``, the same bytes read 8 envs per word.
        reset_mask: bool ``[N]``, the envs of an explicit ``reset(mask)``.
        reset_words: int64 ``[ceil(N / 8)]``, its bytes 8 envs per word.
        step_count: int32 ``[N]``, steps of each env's current episode.
        episode_count: int32 ``[N]``, episodes begun per env (keys the initial-state draw).
        running_return: float32 ``[N]``, reward summed over the current episode.
        clock: int64 ``[1]``, steps taken since the env was built (the global step of
            schedules; advanced by the clock stage).
        stream: the ``wp.Stream`` every launch of a step goes on (None on CPU): one per
            context, wrapping ``torch_stream`` and kept alive with it.
        torch_stream: the ``torch.cuda.Stream`` the env's work runs on (None on CPU).
    """

    num_envs: int
    device: torch.device
    env_offset: int
    seed: torch.Tensor
    action: torch.Tensor
    outputs: dict[str, torch.Tensor]
    done: torch.Tensor
    done_words: torch.Tensor
    reset_mask: torch.Tensor
    reset_words: torch.Tensor
    step_count: torch.Tensor
    episode_count: torch.Tensor
    running_return: torch.Tensor
    clock: torch.Tensor
    stream: object = None
    torch_stream: object = None

    def __post_init__(self) -> None:
        if self.device.type == "cuda" and self.stream is None:
            self.torch_stream = torch.cuda.Stream(device=self.device)
            # one wp.Stream per CUDA stream, kept alive: a dropped wp.Stream of an external
            # handle unregisters the CUDA stream (and any capture state Warp attached to it)
            self.stream = wp_stream(self.torch_stream)

    @property
    def wp_device(self) -> str:
        """Warp's name of ``device``."""
        return wp_device(self.device)


@dataclass(eq=False)
class Stage:
    """One part of a step.

    Attributes:
        name: for errors and ``Pipeline.names``.
        run: ``run(ctx)`` launches the stage's device work; no host sync, no allocation,
            no Python branch on tensor values (a replay repeats the work, not the Python).
        warp_only: True when ``run`` does nothing but Warp launches on ``ctx.stream``:
            such stages replay inside a Warp CPU graph. False for torch ops or Python. A
            callable is asked at capture time (after the warm-up call).
        key: optional ``key()`` returning the host-side settings ``run`` reads (flags,
            module identities); a change drops the capture.

    A stage that raises does not stop the step: the later stages still run (bookkeeping,
    curricula, auto-reset), so no done env is left un-reset, and the first error is raised
    when the step is complete.
    """

    name: str
    run: Callable[[StepContext], None]
    warp_only: bool | Callable[[], bool] = False
    key: Callable[[], Hashable] | None = None


def _warp_only(s: Stage) -> bool:
    return bool(s.warp_only() if callable(s.warp_only) else s.warp_only)


@dataclass(eq=False)
class _Segment:
    stages: tuple[Stage, ...]
    graph: object = None  # wp.Graph of a warp_only run on CPU


class Pipeline:
    """Runs a list of stages over one context; captures and replays them.

    Args:
        ctx: the context handed to every stage.
        build: ``build()`` returns the stage list; called again after every
            ``invalidate()`` (so stages see the current hooks, terms, transforms).
        key: optional ``key()`` of host-side state all stages depend on (like a stage's
            ``key``: a change drops the capture).
        capture: capture after ``warmup`` eager calls (default True); False runs eagerly.
        warmup: eager calls before capturing.
    """

    def __init__(
        self,
        ctx: StepContext,
        build: Callable[[], Sequence[Stage]],
        capture: bool = True,
        warmup: int = 1,
        key: Callable[[], Hashable] | None = None,
    ):
        self.ctx = ctx
        self.build = build
        self.key = key
        self.capture_enabled = capture
        self.warmup = warmup
        self._stages: tuple[Stage, ...] | None = None
        self._segments: list[_Segment] | None = None
        self._cuda_graph = None
        self._wp_capture = None  # keeps the Warp modules the CUDA graph calls loaded
        self._keys: tuple = ()
        self._calls = 0
        self._lock = threading.Lock()
        self._cuda = ctx.device.type == "cuda"

    # ------------------------------------------------------------------ structure
    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages, in run order (built by ``build()`` when first needed)."""
        if self._stages is None:
            stages = tuple(self.build())
            for s in stages:
                if not isinstance(s, Stage):
                    raise TypeError(f"Pipeline: expected Stage objects, got {type(s).__name__}")
            self._stages = stages
            # what the list was built for (e.g. whether every parameter listener is
            # Warp-only): a change before the capture must rebuild it too
            self._keys = self._current_keys()
        return self._stages

    @property
    def names(self) -> tuple[str, ...]:
        """The stage names, in run order."""
        return tuple(s.name for s in self.stages)

    @property
    def captured(self) -> bool:
        """True while replays come from a capture."""
        return self._segments is not None or self._cuda_graph is not None

    @property
    def plan(self) -> tuple[tuple[tuple[str, ...], bool], ...]:
        """How the captured step runs: per segment, its stage names and whether it replays
        as one graph (``True``) or runs eagerly. Empty before capture. On CUDA one graph."""
        if self._cuda_graph is not None:
            return ((self.names, True),)
        if self._segments is None:
            return ()
        return tuple((tuple(s.name for s in g.stages), g.graph is not None)
                     for g in self._segments)

    def invalidate(self) -> None:
        """Drop the capture and the stage list: the next call rebuilds the stages, and
        later calls warm up and capture again. The one call for anything that changes
        what a replay would do."""
        self._segments, self._cuda_graph, self._calls, self._stages = None, None, 0, None
        self._wp_capture = None

    # ------------------------------------------------------------------ running
    def __call__(self) -> None:
        """Run one step's stages (replayed when captured)."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                "env.step/reset called while another call on the same env is running "
                "(two threads stepping one env): an env is not thread-safe; give each "
                "thread its own env or serialize the calls"
            )
        try:
            if self._stages is not None and self._keys != self._current_keys():
                self.invalidate()  # built or captured for other settings
            if self._cuda:
                self._run_cuda()
            else:
                self._run_cpu()
        finally:
            self._lock.release()

    def _current_keys(self) -> tuple:
        keys = [s.key() for s in self.stages if s.key is not None]
        if self.key is not None:
            keys.append(self.key())
        return tuple(keys)

    def _eager(self, stages: Sequence[Stage], error: BaseException | None) -> BaseException | None:
        ctx = self.ctx
        for s in stages:
            try:
                s.run(ctx)
            except Exception as e:  # the step completes, then the first error is raised
                error = error or e
        return error

    def _ready_to_capture(self) -> bool:
        if not self.capture_enabled:
            return False
        self._calls += 1
        return self._calls > self.warmup

    def _run_cpu(self) -> None:
        if self._segments is None and self._ready_to_capture():
            self._capture_cpu()
        error = None
        if self._segments is None:
            error = self._eager(self.stages, error)
        else:
            for seg in self._segments:
                if seg.graph is not None:
                    wp.capture_launch(seg.graph)
                else:
                    error = self._eager(seg.stages, error)
        if error is not None:
            raise error

    def _capture_cpu(self) -> None:
        segments: list[_Segment] = []
        run: list[Stage] = []
        for s in self.stages:
            if _warp_only(s):
                run.append(s)
                continue
            if run:
                segments.append(_Segment(tuple(run)))
                run = []
            segments.append(_Segment((s,)))
        if run:
            segments.append(_Segment(tuple(run)))
        for seg in segments:
            if _warp_only(seg.stages[0]):
                with wp.ScopedCapture(device="cpu") as cap:
                    for s in seg.stages:
                        s.run(self.ctx)
                seg.graph = cap.graph
        self._keys = self._current_keys()
        self._segments = segments

    def _run_cuda(self) -> None:
        current = torch.cuda.current_stream(self.ctx.device)
        stream = self.ctx.torch_stream
        stream.wait_stream(current)
        error = None
        try:
            with torch.cuda.stream(stream):
                if self._cuda_graph is None and self._ready_to_capture():
                    graph = torch.cuda.CUDAGraph()
                    # thread_local (Warp's own default): CUDA calls from other threads (another
                    # env, a data loader, NCCL's watchdog) do not invalidate this capture
                    with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                        with wp.ScopedCapture(
                            device=self.ctx.wp_device, stream=self.ctx.stream, external=True
                        ) as cap:
                            for s in self.stages:
                                s.run(self.ctx)
                    self._keys = self._current_keys()
                    # the Warp capture object keeps the modules the graph calls loaded
                    self._cuda_graph, self._wp_capture = graph, cap
                if self._cuda_graph is not None:
                    self._cuda_graph.replay()
                else:
                    error = self._eager(self.stages, None)
        finally:
            current.wait_stream(stream)  # also when a capture raised
        if error is not None:
            raise error
