"""Every transform test runs on both CPU engines: the fused one-launch kernels and the torch
reductions (the path CUDA takes)."""

import pytest

from gpuparam.transforms import _engine


@pytest.fixture(autouse=True, params=["fused", "torch"])
def engine_path(request, monkeypatch):
    monkeypatch.setattr(_engine, "FUSED", request.param == "fused")
    return request.param
