"""Adapters to other RL libraries; each one needs its optional extra.

- ``gpuparam.integrations.torchrl``: ``TorchRLEnv``, ``ObsNormTransform``
  (``pip install "gpuparam[torchrl]"``).
- ``gpuparam.integrations.gymnasium``: ``GymnasiumVectorEnv``
  (``pip install "gpuparam[gymnasium]"``).

Nothing is imported here, so ``import gpuparam`` never needs an extra.
"""

from __future__ import annotations
