"""Bound launches: how gpuparam launches its kernels on the step path (issue 34).

A :class:`BoundLaunch` is a kernel, its launch dimensions and its keyword ``inputs`` /
``outputs``, recorded once (``wp.launch(record_cmd=True)``, which returns a public
``wp.Launch``) when a stage is bound, and replayed as it is, eagerly and inside captures.
Arguments are views of buffers allocated once, so the recording stays valid; where a launch
reads a caller's tensor whose memory may change between calls (a normalizer's input), it is
repointed explicitly with :meth:`BoundLaunch.repoint` (``wp.Launch.set_param_at_index``).
"""

from __future__ import annotations

import torch
import warp as wp

from gpuparam._device import stream_for, wp_device


def tensor_view(t: torch.Tensor) -> wp.array:
    """A flat array over ``t``'s memory, of its dtype, from its first element to its last
    (any strides), that does not hold ``t``: the argument a launch repointed at a caller's
    tensor takes (the kernel reads a 1-d array). Views are kept (:func:`raw_view`)."""
    if t.is_contiguous():
        extent = t.numel()
    else:
        extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride(), strict=True))
    return raw_view(t.data_ptr(), t.dtype, (extent,), (1,), t.device)


_VIEWS: dict[tuple, wp.array] = {}
VIEW_CACHE_SIZE = 256


def raw_view(ptr: int, dtype: torch.dtype, shape: tuple, strides: tuple,
             device: torch.device) -> wp.array:
    """A Warp array of ``dtype`` (a torch dtype) at address ``ptr`` with ``shape`` and
    ``strides`` (in elements), owning nothing. Views are kept, keyed by exactly these
    values, so a launch repointed at a caller's tensor seen before makes no new array: a
    view holds no tensor and reads whatever lives at its address, so a kept one is the
    same view a new one would be (at most ``VIEW_CACHE_SIZE``; then they are all dropped)."""
    key = (ptr, dtype, shape, strides, device)
    a = _VIEWS.get(key)
    if a is None:
        if len(_VIEWS) >= VIEW_CACHE_SIZE:
            _VIEWS.clear()
        wdt = wp.dtype_from_torch(dtype)
        size = wp.types.type_size_in_bytes(wdt)
        a = _VIEWS[key] = wp.array(ptr=ptr, dtype=wdt, shape=shape,
                                   strides=tuple(s * size for s in strides),
                                   device=wp_device(device))
    return a


MAX_VARIANTS = 8  # recorded launches per BoundLaunch for callers' tensors seen again
_SEEN_SIZE = 64


class BoundLaunch:
    """``kernel`` over ``dim`` with ``inputs`` then ``outputs`` (Warp arrays, structs and
    scalars in the kernel's argument order), recorded once on ``device`` (a torch device);
    ``block_dim`` > 0 makes it a tiled launch (``wp.launch_tiled``) of that many lanes.

    A torch tensor among the arguments is a caller's tensor: bound as :func:`tensor_view`,
    and pointed at the caller's tensor of each call by :meth:`repoint`. ``args``: the bound
    arguments (inputs, then outputs), as the launch reads them; ``cmd``: the recorded
    launch that :meth:`launch` runs.

    Repointing sets the recorded launch's arguments (about a microsecond each on the host).
    Callers that rotate over a few tensors (a handful of masks) get, from the second call
    with the same addresses on, a launch recorded for those addresses (at most
    ``MAX_VARIANTS``; others are repointed), so a rotation costs no argument setting:
    the views read whatever lives at their addresses, so a launch recorded for an address
    is right for any tensor there.
    """

    def __init__(self, kernel: wp.Kernel, dim, *, inputs: list = (), outputs: list = (),
                 device: torch.device, block_dim: int = 0):
        args = [*inputs, *outputs]
        self.repointable = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        self.args = [tensor_view(a) if isinstance(a, torch.Tensor) else a for a in args]
        self._device = device
        self._ptrs = tuple(args[i].data_ptr() for i in self.repointable)
        self._kernel, self._dim, self._n_in, self._block_dim = kernel, dim, len(inputs), block_dim
        self.cmd = self._record(self.args)
        self._shared = (self.cmd, self.args)  # the launch repointed for addresses seen once
        self._variants: dict[tuple, tuple] = {}  # addresses -> (cmd, args) recorded for them
        self._seen: set[tuple] = set()

    def _record(self, args: list):
        n_in = self._n_in
        kw = dict(dim=self._dim, inputs=args[:n_in], outputs=args[n_in:],
                  device=wp_device(self._device), stream=stream_for(self._device),
                  record_cmd=True)
        if self._block_dim:
            return wp.launch_tiled(self._kernel, block_dim=self._block_dim, **kw)
        return wp.launch(self._kernel, **kw)

    def repoint(self, *tensors: torch.Tensor) -> BoundLaunch:
        """Point the arguments bound as torch tensors (in their order) at ``tensors``: same
        dtypes and shapes, which the caller checks; a no-op while their data pointers are
        unchanged. Returns ``self``."""
        ptrs = tuple(t.data_ptr() for t in tensors)
        if ptrs == self._ptrs:
            return self
        self._ptrs = ptrs
        v = self._variants.get(ptrs)
        if v is None and ptrs in self._seen and len(self._variants) < MAX_VARIANTS:
            args = list(self._shared[1])  # (the shared launch's scalars: set() updates them)
            for i, t in zip(self.repointable, tensors, strict=True):
                args[i] = tensor_view(t)
            v = self._variants[ptrs] = (self._record(args), args)
        if v is not None:
            self.cmd, self.args = v
            return self
        if len(self._seen) >= _SEEN_SIZE:
            self._seen.clear()
        self._seen.add(ptrs)
        self.cmd, self.args = self._shared
        for i, t in zip(self.repointable, tensors, strict=True):
            self.args[i] = tensor_view(t)
            self.cmd.set_param_at_index(i, self.args[i])
        return self

    def set(self, index: int, value) -> BoundLaunch:
        """Set argument ``index`` (in the kernel's order) to ``value`` (a Warp array, struct
        or scalar of the kernel's type), unless it holds that one already (the same array
        object, an equal scalar). Call it after :meth:`repoint` (which may select another
        recorded launch). Returns ``self``."""
        old = self.args[index]
        if old is not value and (isinstance(value, wp.array) or type(old) is not type(value)
                                 or old != value):
            self.args[index] = value
            self.cmd.set_param_at_index(index, value)
        return self

    def launch(self, stream=None) -> None:
        """Run the bound launch (on ``stream``, a ``wp.Stream``, on CUDA; on CPU None)."""
        self.cmd.launch(stream)

    def launch_in(self, ctx) -> None:
        """Run it on ``ctx.stream`` (a ``StepContext``'s): the ``run`` of a stage."""
        self.launch(ctx.stream)

    def __call__(self) -> None:
        """Run it on torch's current stream (CUDA) of its device."""
        self.launch(stream_for(self._device))
