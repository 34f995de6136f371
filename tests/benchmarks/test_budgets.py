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
    "Go1 bare": (13, 1, 0, 6140),
    "Go1 body_mass(reset)": (15, 1, 0, 7783),
}


@pytest.mark.parametrize("name", list(LIMITS))
def test_budget_does_not_grow(name):
    if name.startswith(("Ant", "Go1")):
        pytest.importorskip("mujoco_warp")
    got = budgets.SUBJECTS[name]()
    launches, graphs, eager, nbytes = LIMITS[name]
    assert got["launches"] <= launches, got
    assert got["graph_segments"] <= graphs and got["eager_segments"] <= eager, got["plan"]
    assert got["argument_bytes_per_env"] <= nbytes, got


def test_go1_reset_time_mass_term_costs_nothing_at_steps_without_a_reset():
    """Issue 31: a reset-time ``body_mass`` term's model writes (copies, ``set_const``)
    and the reset's ``forward`` run only at steps where an env resets, so a step without
    one launches at most 1.15x the bare step (ours and MuJoCo Warp's, eager, N=64); a step
    with resets pays them."""
    pytest.importorskip("mujoco_warp")
    bare, mass = budgets.go1_bare(), budgets.go1_reset_mass()
    total = {k: c["launches"] + c["physics_launches"] for k, c in (("bare", bare),
                                                                   ("mass", mass))}
    assert total["mass"] <= 1.15 * total["bare"], total
    assert mass["launches_at_reset_step"] > total["mass"] + 100  # set_const and forward ran
    assert bare["launches_at_reset_step"] > total["bare"] + 50  # the forward ran
