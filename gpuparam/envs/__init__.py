"""Built-in envs and the registry behind ``gp.make``."""

from __future__ import annotations

import torch

from gpuparam.distributed import shard_range
from gpuparam.envs.cartpole import CartPoleEnv
from gpuparam.envs.pendulum import PendulumEnv
from gpuparam.vecenv import VecEnv

# name -> class; None for a robot not imported yet. Robots need the optional extra
# gpuparam[mujoco]; they are imported at their first make() (importing MuJoCo Warp takes
# seconds, which every other user of gpuparam should not pay).
_REGISTRY: dict[str, type[VecEnv] | None] = {
    CartPoleEnv.name: CartPoleEnv, PendulumEnv.name: PendulumEnv,
    **dict.fromkeys(("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Humanoid-v5",
                     "Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1", "Go1Terrain-v0",
                     "G1JoystickFlatTerrain-v1", "G1JoystickRoughTerrain-v1", "G1Terrain-v0",
                     "SpotFlatTerrainJoystick-v1", "SpotJoystickGaitTracking-v1",
                     "Go1Getup-v1", "Go1Handstand-v1", "Go1Footstand-v1",
                     "T1JoystickFlatTerrain-v1", "T1JoystickRoughTerrain-v1",
                     "H1JoystickGaitTracking-v1", "H1InplaceGaitTracking-v1")),
}


def register(cls: type[VecEnv]) -> type[VecEnv]:
    """Make ``cls`` available to ``make(cls.name, ...)``; usable as a class decorator."""
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> tuple[str, ...]:
    """Names ``make`` accepts (the robots need the ``gpuparam[mujoco]`` extra)."""
    return tuple(_REGISTRY)


def make(
    name: str,
    num_envs: int,
    device: str | torch.device | None = None,
    seed: int = 0,
    capture: bool = True,
    env_offset: int = 0,
    shard: tuple[int, int] | None = None,
    **param_overrides: object,
) -> VecEnv:
    """Build ``num_envs`` envs of ``name`` (Gymnasium id, e.g. ``"CartPole-v1"``).

    Args:
        name: a registered env id; see ``registered()``.
        num_envs, device, seed, capture, env_offset: as ``gp.VecEnv``'s.
        shard: ``(rank, world_size)``: ``num_envs`` is then the global number of envs and
            this process builds its slice of them (``gp.shard_range``: contiguous slices
            in rank order, the first ``num_envs % world_size`` ranks one env more), with
            the matching ``env_offset`` (which must then be left at 0). E.g.
            ``shard=(dist.get_rank(), dist.get_world_size())`` under ``torchrun``.
        **param_overrides: initial parameter values (e.g. ``length=0.8``) and
            ``max_episode_steps``.
    """
    if shard is not None:
        if not isinstance(shard, (tuple, list)) or len(shard) != 2:
            raise ValueError(f"shard: expected a (rank, world_size) tuple, got {shard!r}")
        if env_offset != 0:
            raise ValueError(f"shard: pass shard or env_offset, not both (got env_offset="
                             f"{env_offset}, shard={shard})")
        env_offset, num_envs = shard_range(num_envs, *shard)
    if name not in _REGISTRY:
        raise KeyError(f"unknown env {name!r}; registered: {', '.join(registered())}")
    if _REGISTRY[name] is None:
        from gpuparam.envs.mujoco import ROBOTS  # raises the ImportError with the install line

        for cls in ROBOTS:
            _REGISTRY[cls.name] = _REGISTRY.get(cls.name) or cls  # a registered class stays
    return _REGISTRY[name](
        num_envs, device=device, seed=seed, capture=capture, env_offset=env_offset,
        **param_overrides,
    )

__all__ = ["CartPoleEnv", "PendulumEnv", "make", "register", "registered"]
