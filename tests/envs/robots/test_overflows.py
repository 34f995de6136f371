"""MuJoCo Warp's buffers: constraint rows that do not fit are counted per world on the
device (``env.overflows``), the sizes can be raised, bad sizes are refused."""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

N = 4
MASK = torch.tensor([False, True, False, True])


def _run(**kw):
    env = gp.make("Ant-v5", N, device="cpu", seed=0, **kw)
    env.params.set("gravity", torch.tensor([0.0, 0.0, -1000.0]), mask=MASK)  # in its range
    for _ in range(10):
        env.step(torch.zeros(N, 8))
    return env


def test_dropped_constraint_rows_are_counted_for_exactly_the_worlds_that_dropped_them():
    env = _run()
    c = env.overflows["constraints"]
    assert c.shape == (N,) and c.dtype == torch.int32
    assert bool((c[MASK] > 0).all()) and bool((c[~MASK] == 0).all())
    assert int(env.overflows["contacts"]) == 0


def test_larger_buffers_drop_nothing():
    env = _run(njmax=256)
    assert int(env.overflows["constraints"].sum()) == 0


@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_bad_buffer_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="njmax: expected an int >= 1"):
        gp.make("Ant-v5", N, device="cpu", njmax=bad)
