"""What a GPU will pay per step must not grow: launches, Warp graph segments and the bytes
of the arrays each launch takes, counted device-independently (``benchmarks/budgets.py``)
at N=64. The limits are the counts of the one-code-path design (issue 22); a change that
needs more must raise them here, visibly."""

from __future__ import annotations

import pytest

from benchmarks import budgets

LIMITS = {  # launches, Warp graph segments, eager segments, argument bytes per env
    "CartPole bare": (5, 1, 0, 162),
    "CartPole rand3(step)+ObsNorm+RewardNorm": (14, 1, 0, 458),
    "Ant-v5 rand3(step, physical)": (16, 1, 0, 4228),
}


@pytest.mark.parametrize("name", list(LIMITS))
def test_budget_does_not_grow(name):
    if name.startswith("Ant"):
        pytest.importorskip("mujoco_warp")
    got = budgets.SUBJECTS[name]()
    launches, graphs, eager, nbytes = LIMITS[name]
    assert got["launches"] <= launches, got
    assert got["graph_segments"] <= graphs and got["eager_segments"] <= eager, got["plan"]
    assert got["argument_bytes_per_env"] <= nbytes, got
