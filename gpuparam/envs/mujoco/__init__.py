"""Robots on MuJoCo Warp: Gymnasium v5's locomotion tasks with per-world physical
parameters (needs the optional extra: ``pip install gpuparam[mujoco]``)."""

from __future__ import annotations

try:
    import mujoco  # noqa: F401
    import mujoco_warp  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "gpuparam's robots need MuJoCo Warp: pip install gpuparam[mujoco] "
        f"(mujoco-warp>=4.0.0 and mujoco>=4.0.0); import failed with: {e}"
    ) from e

from gpuparam.envs.mujoco.ant import AntEnv
from gpuparam.envs.mujoco.events import Push
from gpuparam.envs.mujoco.g1 import G1_ENVS, G1Env, G1RoughEnv, G1TerrainEnv
from gpuparam.envs.mujoco.go1 import GO1_ENVS, Go1Env, Go1RoughEnv, Go1TerrainEnv
from gpuparam.envs.mujoco.go1_tasks import GO1_TASK_ENVS
from gpuparam.envs.mujoco.h1 import H1_ENVS, H1InplaceGaitEnv, H1JoystickGaitEnv
from gpuparam.envs.mujoco.humanoid import HumanoidEnv
from gpuparam.envs.mujoco.planar import HalfCheetahEnv, HopperEnv, Walker2dEnv
from gpuparam.envs.mujoco.robot_env import RobotEnv
from gpuparam.envs.mujoco.spot import SPOT_ENVS, SpotEnv, SpotGaitEnv
from gpuparam.envs.mujoco.t1 import T1_ENVS, T1Env, T1RoughEnv

ROBOTS = (AntEnv, HalfCheetahEnv, HopperEnv, Walker2dEnv, HumanoidEnv, *GO1_ENVS,
          *G1_ENVS, *GO1_TASK_ENVS, *SPOT_ENVS, *T1_ENVS, *H1_ENVS)

__all__ = ["ROBOTS", "AntEnv", "G1Env", "G1RoughEnv", "G1TerrainEnv", "Go1Env", "Go1RoughEnv",
           "Go1TerrainEnv", "H1InplaceGaitEnv", "H1JoystickGaitEnv", "HalfCheetahEnv",
           "HopperEnv", "HumanoidEnv", "Push", "RobotEnv", "SpotEnv", "SpotGaitEnv", "T1Env",
           "T1RoughEnv", "Walker2dEnv"]
