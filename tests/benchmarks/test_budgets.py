"""What a GPU will pay per step must not grow: launches, Warp graph segments and the bytes
of the arrays each launch takes, counted device-independently (``benchmarks/budgets.py``)
at N=64. The limits are the counts of the one-code-path design (issue 22); a change that
needs more must raise them here, visibly."""

from __future__ import annotations

import pytest
import torch

from benchmarks import budgets

# The robots' bytes include the masked recompute of the derived constants (issue 41), one
# launch per "model_writes" stage (two per step) whose arrays (the per-world temporaries
# and model fields it may read, about 3.5 KB per env for Go1, more with the legged
# robots' per-world centres of mass and qpos0) count at full size although a world not
# written reads only its mask entry (an upper bound, as every byte count here). Our
# launches per step went down in the same round (CartPole full 14 -> 13, Ant 16 -> 13,
# Go1 13 -> 10): the limits are today's counts.
# Go1's bytes grew by 165.5 per env with the command block (issue 42 item 6: the task
# kernel's 15 command rows and 2 heading values per env in each of its launches, the
# parameter table's 12 more rows), its launches did not. The legged tasks added since
# (Spot, T1, H1, Go1 Getup/Handstand) gave the task kernel's structs a few fields a
# joystick task leaves empty (history and ctrl state, flags): 1.5 more bytes per env at
# N=64, a fixed cost per launch (about 100 bytes), not one per env.
# The recorder missed the launches a stage runs through ``BoundLaunch.launch_in`` (the
# episode and clock kernels) until issue 46's round: counted now, Go1's bytes are 22.7 per
# env more than the earlier figures (13,397 and 13,507) without any change to the step.
LIMITS = {  # launches, Warp graph segments, eager segments, argument bytes per env
    "CartPole bare": (5, 1, 0, 162),
    "CartPole rand3(step)+ObsNorm+RewardNorm": (13, 1, 0, 368),
    "Ant-v5 rand3(step, physical)": (13, 1, 0, 9262),
    "Go1 bare": (10, 1, 0, 13420),
    "Go1 body_mass(reset)": (12, 1, 0, 13530),
    "Go1 body_mass(step)": (12, 1, 0, 13530),
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


def _total(counts: dict) -> int:
    return counts["launches"] + counts["physics_launches"]


def test_go1_mass_terms_cost_at_most_15_percent():
    """Issue 41's limits (Go1 flat, eager, N=64, ours and MuJoCo Warp's launches): with a
    reset-time ``body_mass`` term a step at which envs reset launches at most 1.15x the
    bare env's reset steps, and with a step-time one a step at most 1.15x the bare step
    (the derived constants: one masked launch per "model_writes" stage, not
    ``mjw.set_const``'s 343 over all worlds)."""
    pytest.importorskip("mujoco_warp")
    bare, reset_mass, step_mass = budgets.go1_bare(), budgets.go1_reset_mass(), \
        budgets.go1_step_mass()
    assert reset_mass["launches_at_reset_step"] <= 1.15 * bare["launches_at_reset_step"]
    assert _total(step_mass) <= 1.15 * _total(bare)
    assert _total(reset_mass) <= 1.15 * _total(bare)


def test_go1_graph_gating_skips_the_forward_at_steps_without_a_reset():
    """With ``gating="graph"`` the reset's ``forward`` (about 100 launches) runs only at
    steps where an env resets; with ``"mask"`` (the default) at every step."""
    pytest.importorskip("mujoco_warp")
    graph, mask = budgets.go1_bare("graph"), budgets.go1_bare("mask")
    assert graph["launches_at_reset_step"] > _total(graph) + 50
    assert abs(mask["launches_at_reset_step"] - _total(mask)) <= 2
    assert _total(mask) <= 1.2 * _total(graph)


WRITE_LIMITS = {  # device kernels (Warp launches + torch ops that are not views), host reads
    "set": (1, 0),
    "set_tensor": (1, 0),  # validate=False: no host sync
    "set_tensor_validated": (2, 1),  # the range check and the write; one flag read
    "reset_stats": (1, 0),
    "set_reset_stats": (2, 0),
    "set_reset_stats_tensor": (2, 0),
    "set_reset_stats_tensor_validated": (3, 1),
}


def test_masked_writes_device_work_does_not_grow():
    """Issue 41 item 3: a masked write is at most 2 kernels of device work (ours and
    torch's, views not counted) and reads nothing back unless a tensor value is validated
    (a scalar is checked on the host; ``validate=False`` never reads); ``reset_stats(mask)``
    is one launch. Counted at a steady-state call, N=64, masks rotating."""
    got = budgets.masked_writes()
    assert set(got) == set(WRITE_LIMITS)
    for name, (kernels, reads) in WRITE_LIMITS.items():
        assert got[name]["kernels"] <= kernels, (name, got[name])
        assert got[name]["host_reads"] <= reads, (name, got[name])


def test_device_work_counter_counts_torch_kernels_and_reads():
    """The counter behind the limits above sees torch kernels and host reads (views are
    free), so a write that grew a torch op or a sync would fail them."""
    x, m = torch.ones(4), torch.ones(4, dtype=torch.bool)
    got = budgets.count_device_work(lambda: (x.detach().reshape(2, 2), bool(x[m].any()),
                                             m.clone()))
    assert got["torch_ops"] == ["aten.index.Tensor", "aten.any.default", "aten.clone.default"]
    assert got["host_reads"] == 1 and got["warp_launches"] == 0
