"""The per-step path of ObsNorm / RewardNorm: every layout against a float64 reference, the
replayed Warp launches, no per-step allocation, and engines that follow their module's
buffers through moves, copies and reassignment."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gpuparam.kernels import stats as K
from torch.profiler import ProfilerActivity, profile

from gpuparam._device import record
from gpuparam.transforms import ObsNorm, RewardNorm, _engine

LAYOUTS = {  # name -> group_ids for N envs
    "tiled": lambda n: None,
    "grouped": lambda n: torch.arange(n) % 3,
    "identity": lambda n: torch.arange(n),
}


def ref_moments(data: np.ndarray, gids: np.ndarray, g: int):
    """count, mean, population var of group g over data [T, N, *S] (float64)."""
    x = data[:, gids == g].reshape(-1, *data.shape[2:])
    return x.shape[0], x.mean(0), x.var(0)


@pytest.mark.parametrize("layout", [*LAYOUTS, "tiled k=1"])
@pytest.mark.parametrize("loc,scale", [(1e4, 1.0), (0.0, 1e-3), (-3.0, 50.0)])
def test_obs_layouts_match_float64_reference(layout, loc, scale, monkeypatch):
    n, steps = 256, 12
    if layout == "tiled k=1":  # the layout CUDA uses
        monkeypatch.setattr(_engine, "ROW", 1)
        layout = "tiled"
    gid = LAYOUTS[layout](n)
    norm = ObsNorm((2, 3), group_ids=gid, num_envs=n)
    e = norm._eng()
    assert e.layout == layout and (e.k > 1) == (layout == "tiled" and _engine.ROW > 1)
    rng = np.random.default_rng(0)
    data = rng.normal(loc, scale, (steps, n, 2, 3)).astype(np.float32)
    drift = np.linspace(0, 20 * scale, steps, dtype=np.float32)[:, None, None, None]
    data = data + drift  # batch means move by more than a batch std between steps
    for x in data:
        out = norm(torch.from_numpy(x))
    d64, gids = data.astype(np.float64), (np.zeros(n, int) if gid is None else gid.numpy())
    for g in range(norm.num_groups):
        cnt, mean, var = ref_moments(d64, gids, g)
        assert norm.count[g].item() == cnt
        np.testing.assert_allclose(norm.mean[g].numpy(), mean, rtol=1e-6, atol=1e-7 * scale)
        np.testing.assert_allclose(norm.var[g].numpy(), var, rtol=2e-6, atol=1e-12)
    mean, var = norm.mean.numpy()[gids], norm.var.numpy()[gids]
    expect = (d64[-1] - mean) / np.sqrt(var + 1e-8)
    atol = 4e-3 if abs(loc) / scale > 1e3 else 1e-5  # float32 x: ulp(1e4) ~ 1e-3
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-5, atol=atol)


@pytest.mark.parametrize(
    "layout,group_ids",
    [("single", None), ("grouped", torch.arange(64) % 4), ("identity", torch.arange(64))],
)
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_reward_layouts_match_reference(layout, group_ids, offset):
    n, gamma = 64, 0.95
    norm = RewardNorm(gamma, group_ids=group_ids, num_envs=n)
    assert norm._eng().layout == layout
    rng = np.random.default_rng(1)
    gids = np.zeros(n, int) if group_ids is None else group_ids.numpy()
    ret, seen = np.zeros(n), [[] for _ in range(norm.num_groups)]
    for _ in range(40):
        r = (rng.normal(1.0, 2.0, n) + offset).astype(np.float32)
        done = rng.random(n) < 0.1
        out = norm(torch.from_numpy(r), torch.from_numpy(done))
        ret = ret * gamma + r.astype(np.float64)
        for g in range(norm.num_groups):
            seen[g].extend(ret[gids == g])
        var = np.array([np.var(s) for s in seen])[gids]
        np.testing.assert_allclose(out.numpy(), r / np.sqrt(var + 1e-8), rtol=1e-5)
        ret = np.where(done, 0.0, ret)
    np.testing.assert_allclose(norm.returns.numpy(), ret, rtol=1e-14)
    for g, s in enumerate(seen):
        np.testing.assert_allclose(norm.mean[g].item(), np.mean(s), rtol=1e-12)
        np.testing.assert_allclose(norm.var[g].item(), np.var(s), rtol=1e-9)


def test_reward_clears_non_finite_returns_exactly():
    norm = RewardNorm(0.9, num_envs=4).freeze()
    r = torch.tensor([float("inf"), float("nan"), 2.0, -1.0])
    norm(r, torch.tensor([True, True, True, False]))
    assert norm.returns.tolist() == [0.0, 0.0, 0.0, -1.0]
    assert not torch.signbit(norm.returns[:3]).any()


def test_replayed_launch_equals_warp_launch():
    import warp as wp

    def run(recorded: bool):
        n, mean, m2 = (
            torch.tensor([3.0, 0.0]).double(),
            torch.ones(6).double(),
            torch.ones(6).double(),
        )
        batch = [
            torch.tensor([2.0, 0.0]).double(),
            torch.arange(6.0).double(),
            torch.ones(6).double(),
        ]
        tabs = torch.zeros(3, 6)
        args = [*(wp.from_torch(t) for t in batch), 3, 1, wp.float64(1e-8)]
        args += [wp.from_torch(t) for t in (n, mean, m2, tabs[0], tabs[1], tabs[2])]
        if recorded:
            record(K.merge, 2, args, torch.device("cpu"))()
        else:
            wp.launch(K.merge, 2, args, device="cpu")
        return n, mean, m2, tabs

    for a, b in zip(run(True), run(False), strict=True):
        assert torch.equal(a, b)


def _allocated_bytes(fn) -> int:
    fn()  # warm: engine and views exist
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return sum(max(e.cpu_memory_usage, 0) for e in prof.events())


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_steady_state_steps_allocate_nothing(layout):
    n = 512
    gid = LAYOUTS[layout](n)
    obs, rew = ObsNorm(4, group_ids=gid, clip=5.0), RewardNorm(group_ids=gid, clip=5.0)
    x, out = torch.randn(n, 4), torch.empty(n, 4)
    r, done, r_out = torch.randn(n), torch.rand(n) < 0.2, torch.empty(n)

    def step():
        obs(x, out=out)
        obs.normalize(x, out=out)
        rew(r, done, out=r_out)

    assert _allocated_bytes(step) == 0


def test_stats_stay_float64_and_exact_through_dtype_moves():
    norm = ObsNorm(2)
    norm(torch.tensor([[1e4 + 1 / 3, 1.0], [1e4, 2.0]]))
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    norm.half().float().to(torch.bfloat16)
    for k, v in norm.state_dict().items():
        assert v.dtype == before[k].dtype and torch.equal(v, before[k]), k
    fresh = ObsNorm(2)
    fresh.load_state_dict(before)
    x = torch.randn(2, 2)
    assert torch.equal(norm(x), fresh(x))


def test_engine_follows_replaced_buffers_and_copies():
    norm = RewardNorm(0.5, num_envs=3)
    r, done = torch.ones(3), torch.zeros(3, dtype=torch.bool)
    norm(r, done)
    old_count = norm.count
    norm.count = norm.count.clone()  # a new tensor: the next update must land in it
    norm(r, done)
    assert norm.count.item() == 6 and old_count.item() == 3
    twin = copy.deepcopy(norm)
    twin(r, done)
    assert twin.count.item() == 9 and norm.count.item() == 6
    assert torch.equal(norm.returns, torch.full((3,), 1.5).double())
    norm.load_state_dict(twin.state_dict())
    norm(r, done)
    assert norm.count.item() == 12 and twin.count.item() == 9


def test_cached_views_do_not_keep_inputs_alive():
    import gc
    import weakref

    norm = ObsNorm(4, num_envs=32)
    x = torch.randn(32, 4)
    out = norm(x)
    refs = [weakref.ref(x), weakref.ref(out)]
    del x, out
    gc.collect()
    assert all(r() is None for r in refs)
    assert not norm._eng()._views  # their cached views went with them
