"""``VecEnv``'s checkpoints and memory accounting (a mixin of ``gpuparam.vecenv.VecEnv``)."""

from __future__ import annotations

import torch

from gpuparam._buffers import device_bytes
from gpuparam._checkpoint import check_env_state
from gpuparam.files import load_state, save_state


class EnvState:
    """``state_dict`` / ``load_state_dict`` / ``device_bytes`` of ``VecEnv``; an env is not
    picklable (``__reduce_ex__`` names the supported way)."""

    def state_dict(self) -> dict[str, object]:
        """Everything needed to continue bit for bit: seed, parameters (nominal and
        effective), the env's state and counters and output buffers, randomization
        (counters, clocks, ranges, global step) and curricula (levels, statistics).
        Tensors are clones; synchronizes.

        In a sharded run each rank saves its own envs with their global ``env_offset``;
        global state (normalization statistics) is saved by the modules holding it."""
        tensors = self._checkpoint_tensors()
        return {
            "env": self.name,
            "num_envs": self.num_envs,
            "env_offset": self.env_offset,
            "seed": self._seed_value,
            "params": self.params.state_dict(),
            "tensors": {k: v.clone() for k, v in tensors.items()},
            "randomization": self.randomization.state_dict(),
            "curricula": [c.state_dict() for c in self._curricula],
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()`` of an env of the same kind and size holding the same
        randomization terms and curricula (add them first).

        A sharded checkpoint loads only into an env holding the same global envs (same
        ``env_offset`` and ``num_envs``, e.g. the same rank of the same world size):
        anything else raises ``ValueError`` (resharding is not supported).

        Everything is validated first (``gpuparam._checkpoint``: structure, shapes, dtypes,
        finite in-range parameter tables, counters, curriculum levels); a rejected load
        raises ``ValueError`` and changes nothing. Synchronizes."""
        if isinstance(state, dict) and "env_offset" not in state:
            state = {**state, "env_offset": 0}  # checkpoints before sharding: offset 0
        check_env_state(
            state, self.state_dict(), self.params, [c.num_levels for c in self._curricula]
        )
        saved_offset = state.get("env_offset", 0) if isinstance(state, dict) else 0
        if saved_offset != self.env_offset:
            n = self.num_envs
            raise ValueError(
                f"load_state_dict: the checkpoint holds global envs {saved_offset}.."
                f"{saved_offset + n - 1} (env_offset {saved_offset}), this env holds "
                f"{self.env_offset}..{self.env_offset + n - 1} (env_offset {self.env_offset}): "
                "load each rank's checkpoint on the same rank of the same world size "
                "(resharding a checkpoint is not supported)"
            )
        self.randomization.check_state(state["randomization"])  # (their own checks too)
        for cur, s in zip(self._curricula, state["curricula"], strict=True):
            cur.check_state(s)
        tensors = state["tensors"]
        mine = self._checkpoint_tensors()
        self._seed_value = int(state["seed"])
        self.context.seed.fill_(self._seed_value)
        self.params.load_state_dict(state["params"])
        for k, t in mine.items():
            t.copy_(tensors[k])
        self.randomization.load_state_dict(state["randomization"])
        for cur, s in zip(self._curricula, state["curricula"], strict=True):
            cur.load_state_dict(s)

    def save(self, path) -> None:
        """Write ``state_dict()`` to the file ``path`` atomically, with a digest
        (``gpuparam.files.save_state``): an interrupted save leaves the old file. Synchronizes."""
        save_state(self.state_dict(), path)

    def load(self, path) -> None:
        """Restore a file written by :meth:`save`: a file that is not one, truncated or
        altered is refused (``gpuparam.files.load_state``), then ``load_state_dict``
        validates the state whole. A refused load raises ``ValueError`` and changes
        nothing. Synchronizes."""
        self.load_state_dict(load_state(path))

    def _checkpoint_tensors(self) -> dict[str, torch.Tensor]:
        ctx = self.context
        return {
            **{k if k == "state" else f"state.{k}": v for k, v in self.backend.state.items()},
            "step_count": ctx.step_count, "episode_count": ctx.episode_count,
            "running_return": ctx.running_return, "action": ctx.action, **ctx.outputs,
        }

    def device_bytes(self) -> dict:
        """Device memory held: ``{"bytes_by_device": {device: bytes}, "bytes_by_attribute":
        {attribute: bytes}}``, every torch tensor and Warp array reachable from this object
        counted once (views and Warp aliases of torch memory too). Host-side accounting, not
        for the step path."""
        return device_bytes(self)

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"{type(self).__name__} cannot be pickled (it holds Warp kernels and device "
            "buffers); save it with env.save(path) (env.state_dict() in memory) and restore "
            "it with env.load(path) (env.load_state_dict(state)) into an env built by "
            "gp.make with the same arguments, terms and curricula"
        )
