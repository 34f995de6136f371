"""An env wrapper that applies ObsNorm / RewardNorm to every reset and step, on the device."""

from __future__ import annotations

import torch
import warp as wp
from tensordict import TensorDict

from gpuparam._buffers import device_bytes
from gpuparam._checkpoint import state_kind
from gpuparam._checks import check_mask
from gpuparam._device import init_warp, stream_for
from gpuparam._launch import BoundLaunch
from gpuparam.files import load_state, save_state
from gpuparam.kernels import stats as kstats
from gpuparam.params import ParamTable
from gpuparam.pipeline import Stage
from gpuparam.transforms.obs_norm import ObsNorm
from gpuparam.transforms.reward_norm import RewardNorm

_OBS_KEYS = ("observation", "final_observation")


class TransformedEnv:
    """Wrap a batched env and normalize what it returns.

    Args:
        env: an env following gpuparam's contract: ``num_envs``, ``device``, ``params``
            (``names``, ``on_change``), ``reset(mask=None)`` and ``step(action)`` returning a
            TensorDict with batch ``[N]`` (``"observation"`` float32 ``[N, *obs_shape]``;
            after a step also ``"final_observation"``, ``"reward"`` float32 ``[N]`` and
            ``"done"`` bool ``[N]``).
        *transforms: ``ObsNorm`` and ``RewardNorm`` modules, applied in the given order
            (several of one kind are chained). They are moved to ``env.device``, bound to
            ``env.num_envs`` and attached to ``env.params`` for their ``reset_on`` names.

    Output: a TensorDict batch ``[N]`` on ``env.device`` with the env's keys, where
    ``"observation"``, ``"final_observation"`` (float32 ``[N, *obs_shape]``) and ``"reward"``
    (float32 ``[N]``) are normalized; the raw ones are ``"observation_raw"``,
    ``"final_observation_raw"`` and ``"reward_raw"`` (keys a transform changed). Both live in
    preallocated buffers overwritten by the next ``reset`` or ``step``. ``outputs``: the
    TensorDict ``step`` returns (None before the first step); ``transforms``: in order.

    ``step`` updates the observation statistics once, from ``"final_observation"`` (before
    auto-reset), and normalizes ``"observation"`` with the same statistics. ``reset``
    normalizes without updating and clears the discounted returns of the reset envs.
    ``reset_on`` resets triggered during ``env.step`` run after that step's update. Each
    transform's ``reset_on`` is read when the wrapper is built.

    Over a gpuparam env the transforms are the last stage of the env's own (captured) step,
    so a plain ``env.step`` normalizes too, until :meth:`close` takes them out. Every other
    attribute (``params``, ``randomize``, ``observation_spec`` (raw), ``capture``, ...) is
    the wrapped env's.
    """

    def __init__(self, env, *transforms: ObsNorm | RewardNorm):
        shape = getattr(getattr(env, "observation_spec", None), "shape", None)
        for t in transforms:  # everything checked before anything changes
            if not isinstance(t, (ObsNorm, RewardNorm)):
                raise TypeError("TransformedEnv: expected ObsNorm or RewardNorm transforms, "
                                f"got {type(t).__name__}")
            if isinstance(t, ObsNorm) and shape is not None and tuple(shape) != t.shape:
                raise ValueError(f"TransformedEnv: ObsNorm shape {t.shape} does not match the "
                                 f"env's observation shape {tuple(shape)} (observation_spec.shape)")
            t.check_env(env, device=False)  # (they move to env.device below)
        self.env = env
        for t in transforms:
            t.to(env.device)
            t.attach(env, listen=False)  # this wrapper listens, to defer resets within step
        self._transforms: tuple[ObsNorm | RewardNorm, ...] = tuple(transforms)
        self._obs = tuple(t for t in transforms if isinstance(t, ObsNorm))
        self._rew = tuple(t for t in transforms if isinstance(t, RewardNorm))
        self._bufs: dict[str, torch.Tensor] = {}
        self._stepping, self._closed, self._out = False, False, None
        # (transform, its reset_on names, envs to reset after the step, a launch clearing them)
        init_warp()
        self._deferred: list[tuple] = []
        for t in (t for t in transforms if t.reset_on):
            d = torch.zeros(env.num_envs, dtype=torch.bool, device=t.device)
            self._deferred.append((t, t.reset_on, d, BoundLaunch(
                kstats.clear_mask, d.shape[0], outputs=[wp.from_torch(d)], device=d.device)))
        # not told of checkpoint loads (a restore): statistics and env load in either order
        loads = {"loads": False} if isinstance(env.params, ParamTable) else {}
        self._stop_listening = (env.params.on_change(self._on_param_change, **loads)
                                if self._deferred else None)
        self._remove_stage = None
        if callable(getattr(env, "add_stage", None)):  # a gpuparam env: join its pipeline
            self._remove_stage = env.add_stage(
                Stage("transforms", self._stage, "warp", key=self._stage_key))

    # read-only: the stage and the checkpoint hold these transforms; step returns _out
    transforms = property(lambda self: self._transforms)
    outputs = property(lambda self: self._out)

    def __getattr__(self, name: str):
        if name == "env" or name.startswith("__"):  # not set yet (copy, unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)

    def state_dict(self) -> dict[str, object]:
        """The wrapped env's ``state_dict()`` and each transform's, so a checkpoint of a
        normalized run holds its statistics: ``{"env": ..., "transforms": [...]}``."""
        return {"env": self.env.state_dict(),
                "transforms": [t.state_dict() for t in self.transforms]}

    def save(self, path) -> None:
        """Write ``state_dict()`` to the file ``path`` atomically (``gpuparam.files``)."""
        save_state(self.state_dict(), path)

    def load(self, path) -> None:
        """Restore a file written by :meth:`save`, validated whole (``ValueError``)."""
        self.load_state_dict(load_state(path))

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` into a ``TransformedEnv`` of the same env and
        transforms. The env's part and every transform's are validated first; a rejected
        load raises ``ValueError`` and changes nothing. Synchronizes."""
        ts = self.transforms
        if (not isinstance(state, dict) or set(state) != {"env", "transforms"}
                or not isinstance(state["transforms"], (list, tuple))
                or len(state["transforms"]) != len(ts)):
            got = state_kind(state) or (f"a dict with keys {sorted(map(str, state))[:12]}"
                                        if isinstance(state, dict) else type(state).__name__)
            raise ValueError(f"TransformedEnv.load_state_dict: expected {{'env': ..., "
                             f"'transforms': [{len(ts)} state dicts]}} from "
                             f"TransformedEnv.state_dict(), got {got}")
        self.env.check_state_dict(state["env"])
        for t, s in zip(ts, state["transforms"], strict=True):
            t.check_state_dict(s)
        self.env.load_state_dict(state["env"])  # (a load resets no statistics)
        for t, s in zip(ts, state["transforms"], strict=True):
            t.load_state_dict(s)

    def device_bytes(self) -> dict:
        """Device memory held: ``{"bytes_by_device": {device: bytes}, "bytes_by_attribute":
        {attribute: bytes}}``, every torch tensor and Warp array reachable from this object
        counted once (views and Warp aliases of torch memory too). Host-side accounting, not
        for the step path."""
        return device_bytes(self)

    def __repr__(self) -> str:
        return f"TransformedEnv({self.env!r}, transforms={list(self.transforms)!r})"

    def close(self) -> None:
        """Take the transforms out of the wrapped env: its step no longer normalizes (a
        plain ``env.step`` leaves the statistics alone) and its parameter writes no longer
        reset them. The modules keep their statistics; this wrapper cannot step or reset
        after this. Closing twice does nothing."""
        for undo in (self._remove_stage, self._stop_listening):
            if undo is not None:
                undo()
        self._remove_stage = self._stop_listening = None
        self._closed = True

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"TransformedEnv.{what}: called after close()")

    def reset(self, mask: torch.Tensor | None = None, **kwargs) -> TensorDict:
        """Reset the envs of ``mask`` (bool tensor ``[num_envs]`` on ``env.device``, or
        ``None``: all; ``kwargs`` go to ``env.reset``) and return normalized observations:
        a TensorDict batch ``[N]`` as described in the class docstring."""
        self._check_open("reset")
        td = self.env.reset(mask, **kwargs)
        for t in self._rew:
            t.reset_returns(mask)
        return self._transform(td, update=False)

    def step(self, action: torch.Tensor) -> TensorDict:
        """Step the env with ``action`` (as its ``step`` takes it), update the statistics
        and return normalized values: a TensorDict batch ``[N]`` (class docstring)."""
        self._check_open("step")
        if self._remove_stage is not None:
            self.env.step(action)  # the transforms run as the last stage of the env's step
            return self.outputs
        self._stepping = True
        try:
            td = self.env.step(action)
        finally:
            self._stepping = False
        self._finish_step(td, stream_for(self.env.device))
        return self.outputs

    # ------------------------------------------------------------------ pipeline stage
    def _stage(self, ctx) -> None:
        """The transforms as the last stage of the env's step, then the deferred ``reset_on``
        resets: Warp launches on ``ctx.stream`` only (replayed in the step's graph)."""
        self._finish_step(self.env.outputs, ctx.stream)

    def _stage_key(self) -> tuple:
        return tuple(t.replay_key() for t in self.transforms)

    def _finish_step(self, td: TensorDict, stream) -> None:
        self._out = self._transform(td, update=True, stream=stream)
        for t, _, m, clear in self._deferred:  # masks all False most steps
            t.reset_stats(m, stream=stream)
            clear.launch(stream)

    def _on_param_change(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``env.params.on_change`` callback: reset now, or, during a step (writes by
        randomization or curricula), after the step's update: device work only."""
        in_step = self._stepping or bool(getattr(self.env, "stepping", False))
        for t, on, m, _ in self._deferred:
            if not any(n in on for n in names):
                continue
            if not in_step:
                t.reset_stats(mask)
            elif mask is None:
                m.fill_(True)
            else:
                check_mask(mask, self.env.num_envs, t.device, "TransformedEnv: on_change mask")
                m.logical_or_(mask)

    def _buf(self, key: str, like: torch.Tensor) -> torch.Tensor:
        buf = self._bufs.get(key)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype:
            buf = self._bufs[key] = torch.empty(like.shape, dtype=like.dtype, device=like.device)
        return buf

    def _transform(self, td: TensorDict, update: bool, stream=None) -> TensorDict:
        entries = dict(td.items())
        keys = [k for k in reversed(_OBS_KEYS) if k in entries]
        if self._obs and keys:
            # statistics from the true next states (the first key), the same statistics
            # for both keys: per transform one update and one normalization of both
            for k in keys:
                entries[k + "_raw"], entries[k] = entries[k], self._buf(k, entries[k])
            x, x2 = ([entries[k + "_raw"] for k in keys] + [None])[:2]
            out, out2 = ([entries[k] for k in keys] + [None])[:2]
            for t in self._obs:
                t.forward_pair(x, out, x2, out2, train=None if update else False,
                               stream=stream)
                x, x2 = out, out2
        if self._rew and update:
            x = entries["reward_raw"] = entries["reward"]
            out = entries["reward"] = self._buf("reward", x)
            for t in self._rew:
                t(x, entries["done"], out, stream=stream)
                x = out
        return TensorDict(entries, batch_size=td.batch_size, device=td.device)
