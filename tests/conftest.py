from __future__ import annotations

import os

import pytest
import torch

import gpuparam as gp

_SRC = os.environ.get("GPU_CHECK_SRC")  # benchmarks/gpu/gpu_check.sh's tree of this checkout
if _SRC and not gp.__file__.startswith(_SRC):
    raise pytest.UsageError(f"gpuparam imported from {gp.__file__}, not the tree {_SRC} of "
                            "the checkout under test (benchmarks/gpu/gpu_check.sh)")


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


@pytest.fixture(scope="session", autouse=True)
def _mujoco_log_outside_the_checkout(tmp_path_factory):
    """Gymnasium's half_cheetah.xml (the parity tests' reference) makes MuJoCo log a
    deprecation each time it is loaded; its log file goes to pytest's temporary folder,
    not the working directory (MuJoCo's public ``MjLogConfig``)."""
    try:
        import mujoco
    except ImportError:
        yield
        return
    log = mujoco.MjLogConfig.get()
    previous = log.logfile
    log.logfile = str(tmp_path_factory.mktemp("mujoco") / "MUJOCO_LOG.TXT")
    log.set()
    yield
    log.logfile = previous
    log.set()
