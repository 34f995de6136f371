"""One CUDA graph per step: capture a step body once, replay it every step.

Warp and torch work share one non-default stream, every buffer the body touches is
allocated before capture, and all Warp modules are loaded by the warm-up steps, so a
replay needs nothing from the host but the launch. On CPU the body simply runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import warp as wp

from gpuparam._device import wp_device

log = logging.getLogger("gpuparam")


class StepGraph:
    """Runs ``body()`` eagerly for ``warmup`` calls, then captures it and replays the graph.

    ``body`` must do only device work on buffers allocated before capture (no host syncs,
    no Python branches on tensor values) and return the same outputs every call. Call
    ``invalidate()`` when the work changes (terms or transforms added or removed): the
    next call warms up and captures again. On a CPU device the body runs eagerly.

    Args:
        body: the step, with its inputs already in static buffers.
        device: torch device of every buffer ``body`` touches.
        warmup: eager calls before capture (loads every Warp module, primes allocators).
    """

    def __init__(self, body: Callable[[], object], device: torch.device, warmup: int = 2):
        self.body, self.device, self.warmup = body, device, warmup
        self.graph: torch.cuda.CUDAGraph | None = None
        self._calls = 0
        self._out = None
        if device.type == "cuda":
            self._stream = torch.cuda.Stream(device=device)
        else:
            log.warning("cuda_graph=True on %s: no CUDA graph there, stepping eagerly", device)

    @property
    def enabled(self) -> bool:
        """True when steps are (or will be) replayed from a CUDA graph."""
        return self.device.type == "cuda"

    def invalidate(self) -> None:
        """Drop the graph; the next calls warm up and capture anew."""
        self.graph, self._calls, self._out = None, 0, None

    def __call__(self):
        if not self.enabled:
            return self.body()
        current = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(current)
        with torch.cuda.stream(self._stream):
            if self.graph is None and self._calls >= self.warmup:
                self._capture()
            if self.graph is None:
                self._calls += 1
                out = self.body()
            else:
                self.graph.replay()
                out = self._out
        current.wait_stream(self._stream)
        return out

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        wp_stream = wp.stream_from_torch(self._stream)
        with torch.cuda.graph(graph, stream=self._stream):
            with wp.ScopedCapture(device=wp_device(self.device), stream=wp_stream, external=True):
                self._out = self.body()
        self.graph = graph
