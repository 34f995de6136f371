"""GPU readiness without a GPU: the statistics kernels compile for CUDA (sm_90) through
Warp's public ahead-of-time compile (NVRTC ships with warp-lang; no driver needed)."""

from __future__ import annotations

import pytest
import warp as wp
from gpuparam.kernels import stats, stats_sync

from gpuparam._device import init_warp


@pytest.mark.parametrize("module", [stats, stats_sync], ids=lambda m: m.__name__)
def test_statistics_kernels_compile_for_sm_90(module, tmp_path):
    init_warp()
    paths = wp.compile_aot_module(module, arch=90, module_dir=tmp_path)
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)
