"""Adapters to other RL libraries; each one needs its optional extra.

- ``gpuparam.integrations.torchrl``: ``TorchRLEnv``, ``ObsNormTransform``
  (``pip install "gpuparam[torchrl]"``).
- ``gpuparam.integrations.gymnasium``: ``GymnasiumVectorEnv``
  (``pip install "gpuparam[gymnasium]"``).
- ``gpuparam.integrations.rsl_rl``: ``RslRlVecEnv`` (``pip install "gpuparam[rsl_rl]"``).
- ``gpuparam.integrations.skrl``: ``wrap`` / ``SkrlWrapper``, ``ObsNormPreprocessor``
  (``pip install "gpuparam[skrl]"``).
- ``gpuparam.integrations.sb3``: ``SB3VecEnv`` (``pip install "gpuparam[sb3]"``).

Nothing is imported here, so ``import gpuparam`` never needs an extra.
"""

from __future__ import annotations
