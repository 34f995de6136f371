"""Checkpoint validation of the running-statistics modules: all of it before any write.

``torch.nn.Module.load_state_dict`` copies each buffer as it goes and reports mismatches at
the end, so a bad ``m2`` would leave ``count`` loaded. ``GroupedRunningStats`` calls
:func:`check_stats_state` from ``_load_from_state_dict`` first: a rejected load raises
``ValueError`` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gpuparam.transforms._groups import check_group_ids

# buffer -> (must be finite, must be >= 0, must hold whole numbers)
_VALUE_RULES = {
    "count": (True, True, True),
    "synced_count": (True, True, True),
    "mean": (True, False, False),
    "synced_mean": (True, False, False),
    "m2": (True, True, False),
    "synced_m2": (True, True, False),
    "nonfinite": (True, True, True),
}


def _fail(name: str, key: str, expected: str, got: object) -> None:
    raise ValueError(f"{name}.load_state_dict: {key!r} expected {expected}, got {got}")


def check_stats_state(m, state: Mapping, prefix: str, strict: bool) -> None:
    """Check the entries of ``state`` under ``prefix`` against module ``m``: keys (with
    ``strict``: none missing, none unexpected), shapes, dtypes, group ids, and values
    (counts whole and >= 0, statistics finite, M2 >= 0). Synchronizes (checkpoints only).
    """
    name, dev = type(m).__name__, m.device
    own = {k: v for k, v in m.state_dict(keep_vars=True).items() if "." not in k}
    expected = set(own) | {"group_ids", *m.per_env_buffers}
    keys = {k[len(prefix):] for k in state if k.startswith(prefix) and "." not in k[len(prefix):]}
    if strict:
        missing = sorted(k for k in own if k not in keys)
        unexpected = sorted(keys - expected)
        if missing or unexpected:
            _fail(name, "keys", f"{sorted(expected)}",
                  f"missing {missing}, unexpected {unexpected}")
    gid = state.get(prefix + "group_ids")
    n = m.num_envs
    if gid is not None:
        if not isinstance(gid, torch.Tensor):
            _fail(name, "group_ids", "a long tensor [N]", type(gid).__name__)
        check_group_ids(name, gid.to(dev), m.num_groups, n, dev)
        n = gid.shape[0]
    G, S = m.num_groups, m.shape
    shapes = {"count": (G,), "mean": (G, *S), "m2": (G, *S), "reset_pending": (G,),
              "nonfinite": (G,)}
    for key in keys & expected:
        if key == "group_ids":
            continue
        t = state[prefix + key]
        base = key.removeprefix("synced_")
        want_shape = (n,) if key in m.per_env_buffers else shapes.get(base)
        ref = own.get(key)
        want_dtype = ref.dtype if ref is not None else torch.float64
        if not isinstance(t, torch.Tensor):
            _fail(name, key, f"a {want_dtype} tensor {want_shape}", type(t).__name__)
        if t.dtype != want_dtype or (want_shape is not None and tuple(t.shape) != want_shape):
            _fail(name, key, f"a {want_dtype} tensor {want_shape}",
                  f"a {t.dtype} tensor {tuple(t.shape)}")
        rules = _VALUE_RULES.get(key)
        if rules is None or t.numel() == 0:
            continue
        finite, nonneg, whole = rules
        if finite and not bool(torch.isfinite(t).all()):  # host-ok: checkpoint loading
            _fail(name, key, "finite values", "NaN or inf")
        if nonneg and bool((t < 0).any()):  # host-ok: checkpoint loading
            _fail(name, key, "values >= 0", f"minimum {t.min().item()}")  # host-ok
        if whole and not bool((t == t.round()).all()):  # host-ok: checkpoint loading
            _fail(name, key, "whole numbers", "a fraction")
