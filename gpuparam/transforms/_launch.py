"""Recorded Warp launches with a cheap replay on CPU."""

from __future__ import annotations

import ctypes

import torch

from gpuparam._device import launch, stream_for


class Recorded:
    """A Warp launch recorded once with fixed arguments, replayed by calling it.

    On CPU the kernel's packed argument struct is built once, as ``wp.launch`` builds it on
    every call, and the compiled entry point is called directly (about 0.6 us instead of
    4-6 us for ``Launch.launch`` with a dozen arguments). If this Warp build does not expose
    what that needs, it falls back to ``Launch.launch``; a test checks both give the same.
    """

    def __init__(self, kernel, dim: int, inputs: list, device: torch.device):
        self._cmd = launch(kernel, dim, inputs, device, record=True)
        self._device = device
        self._direct = _direct_cpu_call(self._cmd) if device.type == "cpu" else None

    def __call__(self) -> None:
        if self._direct is not None:
            self._direct[0](*self._direct[1:3])
        else:
            self._cmd.launch(stream_for(self._device))


def _direct_cpu_call(cmd) -> tuple | None:
    """(entry point, bounds, args, struct), as ``warp._src.context.invoke`` passes them."""
    try:
        if cmd.adjoint or cmd.block_dim > 1:
            return None
        labels = [a.label for a in cmd.kernel.adj.args]
        values = list(cmd.params[1:])
        if len(labels) != len(values):
            return None
        fields = [(name, type(v)) for name, v in zip(labels, values, strict=True)]
        args = type("Args", (ctypes.Structure,), {"_fields_": fields})(*values)
        return cmd.hooks.forward, ctypes.byref(cmd.params[0]), ctypes.byref(args), args
    except (AttributeError, TypeError, ValueError):
        return None
