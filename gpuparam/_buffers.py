"""An env's device buffers: allocated once (``step_buffers``: the step context and the
output TensorDicts over it) and accounted (``device_bytes``: the memory an env object
holds)."""

from __future__ import annotations

import torch
import warp as wp
from tensordict import TensorDict, TensorDictBase
from torch import nn

from gpuparam.pipeline import StepContext
from gpuparam.spec import OutputSpec

_MAX_DEPTH = 8


def step_buffers(env) -> tuple[StepContext, TensorDict, TensorDict]:
    """Every buffer of ``env``'s step, allocated once: ``(context, outputs, reset_outputs)``,
    the ``StepContext`` (``max_episode_steps`` still 0: the env sets it) and the locked
    TensorDicts (batch ``[num_envs]``) ``step`` and ``reset`` return: the standard outputs
    and ``env.output_specs()``."""
    n, dev, extra = env.num_envs, env.device, env.output_specs()

    def zeros(*shape: int, dtype: torch.dtype = torch.int32) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, device=dev)

    obs, f32, b = env.observation_spec.shape, torch.float32, torch.bool
    standard = [("observation", obs, f32), ("final_observation", obs, f32),
                ("reward", (), f32), ("terminated", (), b), ("truncated", (), b),
                ("done", (), b), ("episode_return", (), f32),
                ("episode_length", (), torch.int32)]
    outputs = {key: zeros(n, *shape, dtype=dtype) for key, shape, dtype in standard}
    for key, spec in extra.items():
        if key in outputs or not isinstance(spec, OutputSpec):
            raise ValueError(f"{type(env).__name__}.output_specs: {key!r}: expected a "
                             f"new key and a gp.OutputSpec, got {spec!r}")
        outputs[key] = zeros(n, *spec.shape, dtype=spec.dtype)
    act = env.action_spec
    ctx = StepContext(
        num_envs=n, device=dev, env_offset=env.env_offset, seed=zeros(1),
        action=zeros(n, *act.shape, dtype=act.dtype), outputs=outputs,
        done=outputs["done"], reset_mask=zeros(n, dtype=b), step_count=zeros(n),
        episode_count=zeros(n), running_return=zeros(n, dtype=f32),
        max_episode_steps=zeros(1), clock=zeros(1, dtype=torch.int64),  # (limit: set next)
    )
    # locked: ``td[key] = x`` would detach the key from the env's buffer for good
    def locked(tensors: dict) -> TensorDict:
        return TensorDict(tensors, batch_size=[n], device=dev).lock_()

    at_reset = ["observation", *(k for k, s in extra.items() if s.reset)]
    return ctx, locked(outputs), locked({k: outputs[k] for k in at_reset})


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
