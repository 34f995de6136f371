"""Adapters to other RL libraries; each one needs its optional extra.

- ``gpuparam.integrations.torchrl``: ``TorchRLEnv``, ``ObsNormTransform``
  (``pip install "gpuparam[torchrl]"``).
- ``gpuparam.integrations.gymnasium``: ``GymnasiumVectorEnv``
  (``pip install "gpuparam[gymnasium]"``).
- ``gpuparam.integrations.rsl_rl``: ``RslRlVecEnv`` (``pip install "gpuparam[rsl_rl]"``).
- ``gpuparam.integrations.skrl``: ``wrap`` / ``SkrlWrapper``, ``ObsNormPreprocessor``
  (``pip install "gpuparam[skrl]"``).
- ``gpuparam.integrations.sb3``: ``SB3VecEnv`` (``pip install "gpuparam[sb3]"``).

What every adapter shares: it wraps a gpuparam env (``gp.make(...)``) or a
``gp.TransformedEnv`` of one, kept as ``adapter.gp_env`` (its ``ParamTable`` as
``adapter.params``), and steps all N envs at once. Each ``step`` / ``reset`` holds the env
(``env.hold()``) from its first write to its last read of the env's buffers, so a call made
meanwhile (another thread's, or a hook's) raises ``RuntimeError``, changing nothing. A seed
is any int >= 0, taken modulo 2**31; one seed covers every env (gpuparam keys each env's
draws by seed and env index).

Nothing is imported here, so ``import gpuparam`` never needs an extra.
"""

from __future__ import annotations
