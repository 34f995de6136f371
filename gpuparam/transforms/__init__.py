"""Normalization transforms on the device: per-group statistics with a masked reset."""

from __future__ import annotations

from gpuparam.transforms.obs_norm import ObsNorm
from gpuparam.transforms.reward_norm import RewardNorm
from gpuparam.transforms.transformed_env import TransformedEnv

__all__ = ["ObsNorm", "RewardNorm", "TransformedEnv"]
