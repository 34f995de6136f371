"""The step as an explicit list of stages, captured once and replayed by one plan on CPU and CUDA
(the guide: ``docs/pipeline.md``).

Each :class:`Stage` declares its ``kind``; :func:`plan` (device-independent) splits the
list into segments of consecutive stages of one kind: ``"warp"`` (Warp launches on
``ctx.stream`` only): one Warp graph on both devices; ``"torch"`` (torch ops and Warp): one
torch CUDA graph on CUDA, eager on CPU; ``"python"`` (host Python that must run at every
step): eager on both. Anything that changes what a replay would do drops the capture: stage
list changes (``invalidate``) and host-side settings a stage declares through its ``key``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
import warp as wp

from gpuparam._device import wp_device, wp_stream

KINDS = ("warp", "torch", "python")


def _tensors(x) -> list[torch.Tensor]:
    """The tensors in ``x`` (a tensor, or lists, tuples and dicts of them), flattened."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


# torch calls that read tensor values on the host: a replay would reuse what they read at
# capture (and on CUDA they synchronize)
_READS = frozenset({"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__",
                    "__index__", "__complex__", "__array__", "__repr__", "__str__",
                    "__format__"})
_IN_PLACE_DUNDERS = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__",
                               "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
                               "__iand__", "__ior__", "__ixor__", "__ilshift__",
                               "__irshift__", "__imatmul__"})


class WarpSegmentGuard(torch.overrides.TorchFunctionMode):
    """The capture contract of a ``"warp"`` segment, enforced while it is captured (on both
    devices, so a CPU test proves the rule): a Warp graph holds Warp launches only. A torch
    call there either runs once at capture and never again (on the CPU: a hook's
    ``td["reward"].mul_(3)`` would scale the first reward only) or, on CUDA, is recorded
    into the Warp graph on memory no graph pool owns. So any torch call that does device
    work or reads values is refused with ``RuntimeError`` before it runs, naming the stage
    (and its hooks) and the fix, ``kind="torch"``: in-place ops and ``out=`` (writes),
    calls returning a tensor on new storage (temporaries) and host reads (``item``,
    ``tolist``, ``bool(t)``, ...). Views (``reshape``, basic indexing) and metadata
    (``shape``, ``data_ptr``: what ``wp.from_torch`` reads) pass.

    ``where``: what runs now (the pipeline sets it per stage), named in the error."""

    def __init__(self, segment: tuple[str, ...]):
        super().__init__()
        self.segment, self.where = segment, ", ".join(segment)

    def _refuse(self, func, what: str) -> None:
        raise RuntimeError(
            f"warp segment {list(self.segment)}: {self.where}: torch's "
            f"{getattr(func, '__name__', func)} {what} while the segment was captured as a "
            "Warp graph, which replays Warp launches only (the torch op would run once, at "
            "capture). Declare the stage or hook kind='torch' (or 'python'), or launch a "
            "Warp kernel instead"
        )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if kwargs.get("out") is not None or name in _IN_PLACE_DUNDERS or (
                name.endswith("_") and not name.startswith("__")):
            self._refuse(func, "writes a tensor")
        if name in _READS:
            self._refuse(func, "reads tensor values on the host")
        out = func(*args, **kwargs)
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))
                  if t.layout == torch.strided and not t.is_meta}
        for t in _tensors(out):
            if (t.layout == torch.strided and not t.is_meta
                    and t.untyped_storage().nbytes() > 0
                    and t.untyped_storage().data_ptr() not in inputs):
                self._refuse(func, f"made a tensor {tuple(t.shape)} {t.dtype} (memory "
                                   "outside any graph pool, reused after the capture)")
        return out


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
        outputs: the step's output buffers ``[N, ...]``, by key (keys, dtypes and shapes
            as in the TensorDict ``VecEnv.step`` returns).
        done: bool ``[N]``, the envs whose episode ended at this step (``outputs["done"]``).
        reset_mask: bool ``[N]``, the envs of an explicit ``reset(mask)``.
        step_count: int32 ``[N]``, steps of each env's current episode.
        episode_count: int32 ``[N]``, episodes begun per env (keys the initial-state draw).
        running_return: float32 ``[N]``, reward summed over the current episode.
        max_episode_steps: int32 ``[1]``, the truncation limit (read by the episode kernel,
            so a new limit takes effect at the next step without a recapture).
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
    reset_mask: torch.Tensor
    step_count: torch.Tensor
    episode_count: torch.Tensor
    running_return: torch.Tensor
    max_episode_steps: torch.Tensor
    clock: torch.Tensor
    stream: object = None
    torch_stream: object = None

    def __post_init__(self) -> None:
        if self.device.type == "cuda" and self.stream is None:  # device-ok: streams
            self.torch_stream = torch.cuda.Stream(device=self.device)
            self.stream = wp_stream(self.torch_stream)

    @property
    def wp_device(self) -> str:
        """Warp's name of ``device``."""
        return wp_device(self.device)


class Stage:
    """One part of a step.

    Args:
        name: for errors and ``Pipeline.names``.
        run: ``run(ctx)`` launches the stage's device work. For a ``"warp"`` or ``"torch"``
            stage: no host sync, no allocation, no Python branch on tensor values (a replay
            repeats the device work, not the Python).
        kind: ``"warp"``, ``"torch"`` or ``"python"`` (the default), see the module
            docstring. A ``"warp"`` stage may call no torch op but views and metadata
            (:class:`WarpSegmentGuard` refuses the others at capture).
        key: optional ``key()`` returning host-side settings ``run`` reads (module
            identities, sizes); a change drops the capture.
        what: optional ``what()`` describing what ``run`` calls (e.g. a hook's function),
            for errors; default the name.

    A stage that raises (any ``BaseException``: ``KeyboardInterrupt`` and ``SystemExit``
    too) does not stop the step: the later stages still run (bookkeeping, curricula, clock,
    auto-reset), so no done env is left un-reset and no counter falls behind, and the first
    error is raised when the step is complete (an interrupt, which is not an ``Exception``,
    before the ordinary errors of the same step); also when the stage raises while its
    segment is being captured (the step then runs eagerly and the capture is retried after
    ``warmup`` calls).
    """

    def __init__(
        self,
        name: str,
        run: Callable[[StepContext], None],
        kind: str = "python",
        key: Callable[[], Hashable] | None = None,
        what: Callable[[], str] | None = None,
    ):
        if not isinstance(name, str) or not name:
            raise TypeError(f"Stage: name expected a non-empty str, got {name!r}")
        if not callable(run):
            raise TypeError(f"Stage {name!r}: run expected a callable run(ctx), got {run!r}")
        if key is not None and not callable(key):
            raise TypeError(f"Stage {name!r}: key expected a callable or None, got {key!r}")
        if kind not in KINDS:
            raise ValueError(f"Stage {name!r}: kind expected one of {KINDS}, got {kind!r}")
        self.name, self.run, self.key, self.kind, self._what = name, run, key, kind, what

    def describe(self) -> str:
        """The stage's name and, when given, what it calls."""
        return f"stage {self.name!r}" + (f" ({self._what()})" if self._what else "")

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, kind={self.kind!r})"


Segment = tuple[str, tuple[Stage, ...]]  # (kind, stages): captured and replayed as one


def plan(stages: Sequence[Stage]) -> tuple[Segment, ...]:
    """Split ``stages`` into segments ``(kind, stages)`` of consecutive stages of one kind,
    the same on every device (how each kind runs: the module docstring)."""
    return tuple((k, tuple(g)) for k, g in itertools.groupby(stages, lambda s: s.kind))


class Pipeline:
    """Runs a list of stages over one context; captures them at the first call after
    ``warmup`` eager calls (which load every Warp module) and replays them by :func:`plan`.

    Args:
        ctx: the context handed to every stage.
        build: ``build()`` returns the stage list; called again after every
            ``invalidate()`` (so stages see the current hooks, terms, transforms).
        key: optional ``key()`` of host-side state all stages depend on (like a stage's
            ``key``: a change drops the capture).
        capture: capture after ``warmup`` eager calls (default True); False runs eagerly.
        warmup: eager calls before capturing.

    ``captures`` counts the captures made, ``runs`` the calls that ran every stage (also
    those that then raised a stage's error: a caller compares it before and after a call
    that raised to know whether the step happened).
    """

    def __init__(
        self,
        ctx: StepContext,
        build: Callable[[], Sequence[Stage]],
        capture: bool = True,
        warmup: int = 1,
        key: Callable[[], Hashable] | None = None,
    ):
        self.ctx, self.build, self.key, self.warmup = ctx, build, key, warmup
        self.capture_enabled = capture
        self._stages: tuple[Stage, ...] | None = None
        self._segments: tuple[Segment, ...] = ()
        # one graph per segment (None: runs eagerly), while captured
        self._graphs: list[object] | None = None
        self._keep: list[object] = []  # Warp capture objects: keep their modules loaded
        self._pool = None  # the torch graphs' shared memory pool of one capture (CUDA)
        self._keys: tuple = ()
        self._calls = 0
        self.captures = 0  # captures made so far (a replay that recaptures shows here)
        self.runs = 0
        self._cuda = ctx.device.type == "cuda"  # device-ok: torch has no CPU graphs

    # ------------------------------------------------------------------ structure
    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages, in run order (built by ``build()`` when first needed)."""
        if self._stages is None:
            stages = tuple(self.build())
            for s in stages:
                if not isinstance(s, Stage):
                    raise TypeError(f"Pipeline: expected Stage objects, got {type(s).__name__}")
            self._segments, self._stages = plan(stages), stages
            self._keys = self._current_keys()  # what the list was built for: see __call__
        return self._stages

    @property
    def names(self) -> tuple[str, ...]:
        """The stage names, in run order."""
        return tuple(s.name for s in self.stages)

    @property
    def plan(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """How a captured step runs, the same on every device: per segment its kind and
        its stage names (see :func:`plan`)."""
        self.stages  # noqa: B018 (builds the list and its plan)
        return tuple((kind, tuple(s.name for s in st)) for kind, st in self._segments)

    @property
    def captured(self) -> bool:
        """True while replays come from a capture."""
        return self._graphs is not None

    def invalidate(self) -> None:
        """Drop the capture and the stage list: the next call rebuilds the stages, and
        later calls warm up and capture again. The one call for anything that changes
        what a replay would do."""
        self._graphs, self._calls, self._stages, self._segments = None, 0, None, ()

    # ------------------------------------------------------------------ running
    def __call__(self) -> None:
        """Run one step's stages: replayed when captured, captured when due (after
        ``warmup`` eager calls), else eagerly. A stage's error is raised once every stage
        ran. One call at a time: the env calling it guards that."""
        if self._stages is not None and self._keys != self._current_keys():
            self.invalidate()  # built or captured for other settings (e.g. listener kinds)
        self.stages  # noqa: B018
        with self._on_stream():
            if self._graphs is not None:  # replay: each segment's graph, or its stages
                error = None
                for (kind, stages), graph in zip(self._segments, self._graphs, strict=True):
                    error = self._replay(kind, stages, graph, error)
            else:
                self._calls += 1
                due = self.capture_enabled and self._calls > self.warmup
                error = self._capture() if due else self._eager(self._stages, None)
        self.runs += 1
        if error is not None:
            raise error

    @contextlib.contextmanager
    def _on_stream(self):
        """On CUDA, run on the context's stream, ordered after and before torch's current
        one (also when a stage raised); nothing on CPU."""
        if not self._cuda:
            yield
            return
        current, stream = torch.cuda.current_stream(self.ctx.device), self.ctx.torch_stream
        stream.wait_stream(current)
        try:
            with torch.cuda.stream(stream):
                yield
        finally:
            current.wait_stream(stream)

    def _current_keys(self) -> tuple:
        keys = tuple(s.key() for s in self.stages if s.key is not None)
        return keys if self.key is None else (*keys, self.key())

    def _eager(self, stages: Sequence[Stage], error: BaseException | None) -> BaseException | None:
        return run_each([s.run for s in stages], (self.ctx,), error)

    def _replay(self, kind: str, stages: Sequence[Stage], graph: object | None,
                error: BaseException | None) -> BaseException | None:
        """Launch a segment's ``graph``, or run its ``stages`` eagerly when it is None."""
        if graph is None:
            return self._eager(stages, error)
        if kind == "warp":
            wp.capture_launch(graph, stream=self.ctx.stream)
        else:
            graph.replay()
        return error

    def _capture(self) -> BaseException | None:
        """Capture each capturable segment and replay it at once (a capture does not run
        the work); run the others eagerly. When a capture raises, the rest of the step runs
        eagerly and the capture is retried after ``warmup`` calls."""
        # a new pool per capture (torch refuses a pool with live users of another capture),
        # and the settings it is made for (a change during it drops it at the next call)
        self._keep, self._pool, keys = [], None, self._current_keys()
        graphs: list[object | None] = []
        error = None
        for i, (kind, stages) in enumerate(self._segments):
            graph = None
            if kind == "warp" or (kind == "torch" and self._cuda):
                try:
                    graph = self._capture_segment(kind, stages)
                except BaseException as e:  # (as in _eager)
                    self._calls = 0
                    error = first_error(error, e)
                    for _, rest in self._segments[i:]:
                        error = self._eager(rest, error)
                    return error
            graphs.append(graph)
            error = self._replay(kind, stages, graph, error)
        self._graphs, self._keys = graphs, keys
        self.captures += 1
        return error

    def _capture_segment(self, kind: str, stages: tuple[Stage, ...]):
        """A Warp graph of a ``"warp"`` segment (under :class:`WarpSegmentGuard`); for a
        ``"torch"`` one (CUDA) a torch graph holding Warp's launches, in the pipeline's one
        memory pool, with ``thread_local`` errors (CUDA calls of other threads, e.g. NCCL's
        watchdog, do not invalidate the capture)."""
        ctx, graph, outer = self.ctx, None, contextlib.nullcontext()
        if kind == "torch":
            self._pool = self._pool or torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            outer = torch.cuda.graph(graph, pool=self._pool, stream=ctx.torch_stream,
                                     capture_error_mode="thread_local")
        guard = WarpSegmentGuard(tuple(s.name for s in stages)) if kind == "warp" else None
        with outer, wp.ScopedCapture(device=ctx.wp_device, stream=ctx.stream,
                                     external=graph is not None) as c, (
                guard or contextlib.nullcontext()):
            for s in stages:
                if guard is not None:
                    guard.where = s.describe()
                s.run(ctx)
        self._keep.append(c)
        return c.graph if graph is None else graph


def run_each(fns: Sequence[Callable], args: tuple, error: BaseException | None = None
             ) -> BaseException | None:
    """Call each of ``fns`` with ``args``; one that raises does not stop the later ones:
    returns the error the step raises once complete (:func:`first_error`), or None."""
    for fn in fns:
        try:
            fn(*args)
        except BaseException as e:
            error = first_error(error, e)
    return error


def first_error(error: BaseException | None, e: BaseException) -> BaseException:
    """The error a step raises once complete: the first, except that an interrupt
    (``KeyboardInterrupt``, ``SystemExit``: not an ``Exception``) outranks ordinary errors
    raised before it, so that Ctrl-C still stops the caller."""
    if error is None or (isinstance(error, Exception) and not isinstance(e, Exception)):
        return e
    return error
