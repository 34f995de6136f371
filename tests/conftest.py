from __future__ import annotations

import pytest
import torch

import gpuparam as gp


def pytest_collection_modifyitems(config, items):
    """GPU tests run only where CUDA is present."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cartpole():
    return gp.make("CartPole-v1", num_envs=64, device="cpu", seed=0)
