"""Device resolution and the torch <-> Warp bridge (host code, called at construction only)."""

from __future__ import annotations

import ctypes

import torch
import warp as wp

# Warp prints a banner at init; a library should not. Users can set it back before use.
wp.config.log_level = max(wp.config.log_level, 30)  # warnings and errors only
_initialized = False


def init_warp() -> None:
    """Initialize Warp once, quietly."""
    global _initialized
    if not _initialized:
        wp.init()
        _initialized = True


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` means CUDA when torch and Warp both see a GPU, else CPU."""
    init_warp()
    if device is None:
        cuda = torch.cuda.is_available() and wp.get_cuda_device_count() > 0
        return torch.device("cuda:0" if cuda else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available() or wp.get_cuda_device_count() == 0:
            raise ValueError(f"device {device!r} requested, but no CUDA device is available")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}")
    return dev


def wp_device(device: torch.device) -> str:
    """Warp's name for a torch device."""
    return "cpu" if device.type == "cpu" else f"cuda:{device.index}"


def to_wp(t: torch.Tensor, dtype=None) -> wp.array:
    """Zero-copy Warp view of a torch tensor (the tensor must outlive the view)."""
    return wp.from_torch(t, dtype=dtype)


def stream_for(device: torch.device):
    """The Warp stream that wraps torch's current stream on ``device`` (None on CPU).

    Launching Warp work on torch's stream orders it with the torch ops around it.
    """
    if device.type != "cuda":
        return None
    return wp.stream_from_torch(torch.cuda.current_stream(device))


def launch(kernel, dim, inputs: list, device: torch.device, record: bool = False):
    """``wp.launch`` on torch's current stream; ``record=True`` returns a reusable command."""
    return wp.launch(
        kernel,
        dim=dim,
        inputs=inputs,
        device=wp_device(device),
        stream=stream_for(device),
        record_cmd=record,
    )


class Replay:
    """A launch recorded once with fixed arguments, replayed by ``launch(stream)`` or ``()``.

    On CPU it calls the compiled kernel with its argument struct packed once: Warp's
    ``Launch.launch`` packs a new ctypes struct at every call (several us of Python per
    launch, and garbage that triggers collections). It falls back to ``Launch.launch`` on
    GPUs, during a Warp CPU capture, and when this Warp version lays out launches otherwise
    (the direct call relies on ``Launch.params``, ``hooks.forward`` and ``kernel.adj.args``).
    """

    def __init__(self, cmd, device: torch.device):
        self.cmd, self._device, self._call = cmd, device, None
        self._slots: tuple[int, ...] = ()
        self._ptrs: tuple[int, ...] = ()
        if device.type != "cpu" or cmd.adjoint or cmd.block_dim > 1:
            return
        try:
            values = cmd.params[1:]
            fields = [(a.label, type(v)) for a, v in zip(cmd.kernel.adj.args, values, strict=True)]
            args = type("Args", (ctypes.Structure,), {"_fields_": fields})(*values)
            self._call = (cmd.hooks.forward, ctypes.byref(cmd.params[0]), ctypes.byref(args), args)
        except (AttributeError, TypeError, ValueError):  # another Warp: the plain launch
            self._call = None

    def rebindable(self, *slots: int) -> Replay:
        """Declare the array arguments (indices into the kernel's arguments) that
        :meth:`set_data` repoints; returns ``self``."""
        for i in slots:  # own copies: one array's ctype is shared by every slot it fills
            own = type(self.cmd.params[i + 1]).from_buffer_copy(self.cmd.params[i + 1])
            self.cmd.set_param_at_index_from_ctype(i, own)
        self._slots = slots
        self._ptrs = tuple(self.cmd.params[i + 1].data for i in slots)
        return self

    def set_data(self, ptrs: tuple[int, ...]) -> None:
        """Point the :meth:`rebindable` array arguments at other memory (``data_ptr()`` of
        tensors with the recorded arrays' shape, dtype and strides: the caller checks)."""
        if ptrs == self._ptrs:
            return
        args = self._call[3] if self._call is not None else None
        labels = self.cmd.kernel.adj.args
        for i, ptr in zip(self._slots, ptrs, strict=True):
            self.cmd.params[i + 1].data = ptr
            if args is not None:
                getattr(args, labels[i].label).data = ptr
        self._ptrs = ptrs

    def launch(self, stream=None) -> None:
        """Run the recorded launch (on ``stream`` on CUDA)."""
        call = self._call
        if call is None or self.cmd.device.is_capturing:
            self.cmd.launch(stream)
        else:
            call[0](call[1], call[2])

    def __call__(self) -> None:
        self.launch(stream_for(self._device))


def record(kernel, dim, inputs: list, device: torch.device) -> Replay:
    """Record ``kernel`` over ``dim`` with ``inputs`` once, for cheap replays."""
    return Replay(launch(kernel, dim, inputs, device, record=True), device)
