"""Device resolution and the torch <-> Warp bridge (host code, called at construction only)."""

from __future__ import annotations

import functools
import os
import sys
import tempfile

import torch
import warp as wp

# Warp prints a banner at init; a library should not. Users can set it back before use.
wp.config.log_level = max(wp.config.log_level, 30)  # warnings and errors only

# What Warp's native library prints to stderr (C ``fprintf``: no Warp setting reaches it) on
# a machine without an NVIDIA driver, i.e. "CPU only" (``device="cuda"`` still raises there).
NO_DRIVER_LINE = (
    b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver. "
    b"GPU execution will not be available."
)


@functools.cache
def init_warp() -> None:
    """Initialize Warp once, without ``NO_DRIVER_LINE``: ``wp.init()`` runs with file
    descriptor 2 sent to a temporary file, written back to stderr without that one line
    (every other line unchanged, in order); plainly where fd 2 cannot be duplicated."""
    try:
        saved = os.dup(2)
    except OSError:
        wp.init()
        return
    with tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        os.dup2(tmp.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().splitlines(keepends=True)
                    if ln.rstrip(b"\r\n") != NO_DRIVER_LINE]
            if kept:
                os.write(2, b"".join(kept))


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` means CUDA when torch and Warp both see a GPU, else CPU. ``"cpu:0"`` means
    ``"cpu"``: torch's CPU tensors carry no index, so an indexed CPU device would reject
    every one of them."""
    init_warp()
    cuda = torch.cuda.is_available() and wp.get_cuda_device_count() > 0
    if device is None:
        return torch.device("cuda:0" if cuda else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}")
    if dev.type == "cpu":
        return torch.device("cpu")
    if not cuda:
        raise ValueError(f"device {device!r} requested, but no CUDA device is available")
    return dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())


def wp_device(device: torch.device) -> str:
    """Warp's name for a torch device."""
    return "cpu" if device.type == "cpu" else f"cuda:{device.index}"


def to_wp(t: torch.Tensor, dtype=None) -> wp.array:
    """Zero-copy Warp view of a torch tensor (the tensor must outlive the view)."""
    return wp.from_torch(t, dtype=dtype)


def capturing(device: torch.device, wp_dev: wp.context.Device | None = None) -> bool:
    """True while a graph is being captured on ``device``: a Warp capture (CPU or CUDA) or
    a torch CUDA graph capture on torch's current stream. ``wp_dev``: Warp's device of
    ``device``, when the caller holds it (saves a lookup on hot host paths)."""
    return (wp_dev or wp.get_device(wp_device(device))).is_capturing or torch_capturing(device)


def torch_capturing(device: torch.device) -> bool:
    """True while torch captures a CUDA graph on its current stream of ``device`` (a
    ``"torch"`` segment): Warp work launched now joins that torch graph."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def stream_for(device: torch.device):
    """The Warp stream that wraps torch's current stream on ``device`` (None on CPU):
    Warp work launched on it is ordered with the torch ops around it."""
    return wp_stream(torch.cuda.current_stream(device)) if device.type == "cuda" else None


@functools.cache  # torch streams hash and compare by CUDA handle and device
def wp_stream(torch_stream):
    """The one ``wp.Stream`` wrapping ``torch_stream`` (a ``torch.cuda.Stream``), created
    at the first call and kept (with the torch stream) for the process's life: a dropped
    ``wp.Stream`` of an external handle unregisters the CUDA stream from Warp (and any
    capture state attached to it), and creating one costs a CUDA event."""
    return wp.stream_from_torch(torch_stream)


def host_array(values, dtype, device: torch.device) -> wp.array:
    """A device array of host ``values`` made at setup time (never on the step path). Warp
    copies them on its own stream: on CUDA this waits for the copy, so launches on any
    stream (torch's) read the values. Synchronizes."""
    a = wp.array(values, dtype=dtype, device=wp_device(device))
    if device.type == "cuda":
        wp.synchronize_stream(wp.get_stream(a.device))
    return a


def settle(device: torch.device) -> None:
    """Wait for torch's current stream on ``device`` (CUDA; nothing on CPU): setup-time
    launches that read temporary arrays finish before those are freed (Warp frees on its
    own stream). Setup only."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def launch(kernel, dim, inputs: list, device: torch.device, outputs: list = ()) -> None:
    """One eager ``wp.launch`` on torch's current stream, for host calls outside the step
    (``params.set``, ``set_level``); the step's launches are bound once
    (``gpuparam._launch.BoundLaunch``)."""
    wp.launch(kernel, dim=dim, inputs=inputs, outputs=list(outputs), device=wp_device(device),
              stream=stream_for(device))
