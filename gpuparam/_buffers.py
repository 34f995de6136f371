"""Memory accounting: the device memory an env object holds, for ``device_bytes()``."""

from __future__ import annotations

import torch
import warp as wp
from tensordict import TensorDictBase
from torch import nn

_MAX_DEPTH = 8


def _ranges(obj, path: str, seen: set[int], out: list, depth: int = 0) -> None:
    """Append ``(device, start, end, top_level_attr)`` for every buffer reachable from obj
    through gpuparam objects, torch modules and containers."""
    if id(obj) in seen or depth > _MAX_DEPTH:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):  # (empty ranges are dropped by device_bytes)
        st = obj.untyped_storage()
        out.append((str(obj.device), st.data_ptr(), st.data_ptr() + st.nbytes(), path))
        return
    if isinstance(obj, wp.array):
        if obj.ptr:
            out.append((str(obj.device), int(obj.ptr), int(obj.ptr) + int(obj.capacity), path))
        return
    if isinstance(obj, TensorDictBase):
        children = [(path, v) for v in obj.values(include_nested=True, leaves_only=True)]
    elif isinstance(obj, (dict, list, tuple, set, frozenset)):
        children = [(path, v) for v in (obj.values() if isinstance(obj, dict) else obj)]
    elif isinstance(obj, nn.Module) or type(obj).__module__.startswith("gpuparam"):
        # an attribute of the object it starts from names what is under it
        children = [(path or k, v) for k, v in vars(obj).items()]  # (no __slots__ here)
    else:
        return
    for child_path, child in children:
        _ranges(child, child_path, seen, out, depth + 1)


def device_bytes(obj) -> dict:
    """``device_bytes()`` of ``obj`` (a ``VecEnv``, a ``TransformedEnv``; their docstrings
    say what it returns): views and Warp aliases of torch memory counted once."""
    found: list = []
    _ranges(obj, "", set(), found)
    found.sort(key=lambda r: (r[0], r[1]))
    total: dict[str, int] = {}
    by_attr: dict[str, int] = {}
    end_by_dev: dict[str, int] = {}
    for dev, start, end, attr in found:
        start = max(start, end_by_dev.get(dev, 0))  # overlap with an earlier range
        if end <= start:
            continue
        end_by_dev[dev] = end
        total[dev] = total.get(dev, 0) + end - start
        by_attr[attr or "<env>"] = by_attr.get(attr or "<env>", 0) + end - start
    return {"bytes_by_device": total, "bytes_by_attribute": by_attr}
