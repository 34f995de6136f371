"""The per-step path of ObsNorm / RewardNorm: every group layout against a float64 reference,
the replayed Warp launches, no per-step allocation, the launches per call, and engines that
follow their module's buffers through moves, copies and reassignment."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import warp as wp
from gpuparam.kernels import stats as K
from torch.profiler import ProfilerActivity, profile

from gpuparam._launch import BoundLaunch
from gpuparam.transforms import ObsNorm, RewardNorm

LAYOUTS = {  # name -> group_ids for N envs: one design for all
    "one group": lambda n: None,
    "grouped": lambda n: torch.arange(n) % 3,
    "uneven": lambda n: (torch.arange(n) * 7 % 5).clamp(max=3),  # interleaved, uneven groups
    "per env": lambda n: torch.arange(n),
}


def ref_moments(data: np.ndarray, gids: np.ndarray, g: int):
    """count, mean, population var of group g over data [T, N, *S] (float64)."""
    x = data[:, gids == g].reshape(-1, *data.shape[2:])
    return x.shape[0], x.mean(0), x.var(0)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("loc,scale", [(1e4, 1.0), (0.0, 1e-3), (-3.0, 50.0)])
def test_obs_layouts_match_float64_reference(layout, loc, scale):
    n, steps = 256, 12
    gid = LAYOUTS[layout](n)
    norm = ObsNorm((2, 3), group_ids=gid, num_envs=n)
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
        np.testing.assert_allclose(norm.mean[g].numpy(), mean, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_allclose(norm.var[g].numpy(), var, rtol=1e-9, atol=1e-15)
    mean, var = norm.mean.numpy()[gids], norm.var.numpy()[gids]
    expect = (d64[-1] - mean) / np.sqrt(var + 1e-8)
    atol = 4e-3 if abs(loc) / scale > 1e3 else 1e-5  # float32 x: ulp(1e4) ~ 1e-3
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_reward_layouts_match_reference(layout, offset):
    n, gamma = 64, 0.95
    group_ids = LAYOUTS[layout](n)
    norm = RewardNorm(gamma, group_ids=group_ids, num_envs=n)
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
    def run(recorded: bool):
        count = torch.tensor([3.0, 0.0]).double()
        mean, m2 = torch.arange(6.0).double(), torch.ones(6).double()
        tab = torch.zeros(3, 6)
        live = K.Stats()
        live.count, live.mean, live.m2 = (wp.from_torch(t) for t in (count, mean, m2))
        args = [3, wp.float64(1e-8), live, wp.from_torch(tab)]
        if recorded:
            BoundLaunch(K.refresh, (2, 3), inputs=args, device=torch.device("cpu"))()
        else:
            wp.launch(K.refresh, (2, 3), args, device="cpu")
        return tab

    a, b = run(True), run(False)
    assert torch.equal(a, b) and torch.equal(a[1, 3:], torch.full((3,), (1 + 1e-8) ** -0.5))


def test_chan_merge_keeps_counts_beyond_2_24_and_matches_concatenation():
    @wp.kernel
    def merge2(a: wp.array(dtype=wp.float64), b: wp.array(dtype=wp.float64),
               out: wp.array(dtype=wp.vec3d)):
        out[0] = K.chan(a[0], a[1], a[2], b[0], b[1], b[2])
        out[1] = K.unmerge(out[0][0], out[0][1], out[0][2], a[0], a[1], a[2])

    def run(a, b):
        out = wp.zeros(2, dtype=wp.vec3d, device="cpu")
        f = [wp.array(np.array(v, dtype=np.float64), device="cpu") for v in (a, b)]
        wp.launch(merge2, 1, [*f, out], device="cpu")
        return out.numpy()

    big = float(2**24)
    (n, mean, m2), _ = run([big, 5.0, big], [1.0, 5.0 + big, 0.0])
    assert n == big + 1  # float32 would stay at 2**24
    assert mean == pytest.approx(5.0 + big / (big + 1), rel=1e-12)
    assert m2 == pytest.approx(big + big**2 * big / (big + 1), rel=1e-12)
    rng = np.random.default_rng(3)
    xa, xb = rng.normal(1e4, 2.0, 7), rng.normal(1e4 + 1, 1.0, 11)

    def moments(x):
        return [float(len(x)), x.mean(), ((x - x.mean()) ** 2).sum()]

    (n, mean, m2), back = run(moments(xa), moments(xb))
    ab = np.concatenate([xa, xb])
    np.testing.assert_allclose(mean, ab.mean(), rtol=1e-14)
    np.testing.assert_allclose(m2 / n, ab.var(), rtol=1e-10)
    assert back[0] == 11  # unmerge gives B back
    np.testing.assert_allclose(back[1], xb.mean(), rtol=1e-13)
    np.testing.assert_allclose(back[2] / 11, xb.var(), rtol=1e-8)


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
    assert all(r() is None for r in refs)  # recorded launches hold addresses, not tensors


def _count_launches(monkeypatch, fn) -> int:
    """Warp launches made by ``fn()``: direct ``wp.launch`` calls and replays of recorded
    ones (``wp.Launch.launch``)."""
    n = [0]
    direct, replay = wp.launch, wp.Launch.launch

    def counted(f):
        def call(*a, **k):
            n[0] += 1
            return f(*a, **k)
        return call

    with monkeypatch.context() as m:
        m.setattr(wp, "launch", counted(direct))
        m.setattr(wp.Launch, "launch", counted(replay))
        fn()
    return n[0]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_launches_per_step_and_per_reset(monkeypatch, layout):
    """ObsNorm + RewardNorm in a TransformedEnv add eight launches to an env step (each:
    stamp or returns, partial, merge, normalize or scale), whatever the group layout, in
    eval mode and frozen too (the kernels read the flags); reset_stats(mask) is one."""
    import gpuparam as gp

    n = 64
    act = torch.zeros(n, dtype=torch.int64)

    def make(transforms: bool):
        env = gp.make("CartPole-v1", num_envs=n, device="cpu", seed=0, capture=False)
        if not transforms:
            return env, None
        gid = LAYOUTS[layout](n)
        return env, gp.TransformedEnv(env, ObsNorm(4, group_ids=gid),
                                      RewardNorm(0.9, group_ids=gid))

    bare, _ = make(False)
    env, t = make(True)
    for e in (bare, env):
        e.step(act)  # warm: engines and recorded launches exist
    base = _count_launches(monkeypatch, lambda: bare.step(act))
    assert _count_launches(monkeypatch, lambda: env.step(act)) == base + 8
    t.transforms[0].eval()
    t.transforms[1].freeze()
    assert _count_launches(monkeypatch, lambda: env.step(act)) == base + 8
    mask = torch.arange(n) % 5 == 0
    for m in t.transforms:
        m.reset_stats(mask), m.reset_stats()  # the first calls record the launches
        assert _count_launches(monkeypatch, lambda m=m: m.reset_stats(mask)) == 1
        assert _count_launches(monkeypatch, lambda m=m: m.reset_stats()) == 1


@pytest.mark.parametrize("n,gid", [(5000, None), (40_000, None), (9000, "mod3"),
                                   (2100, "uneven")])
def test_deep_trees_match_float64(n, gid):
    """Groups of more than 32 * 32 envs fold through ``combine`` levels (one per factor of
    32); the env path, the learner path and per-group counts all match a float64 reference."""
    from gpuparam.transforms.running_stats import Layout

    g = {None: None, "mod3": torch.arange(n) % 3,
         "uneven": (torch.arange(n) >= 70).long() + (torch.arange(n) >= 2000).long()}[gid]
    norm = ObsNorm(3, group_ids=g, num_envs=n)
    levels = len(norm._eng().layout.levels)
    assert levels == len(Layout(g, norm.num_groups, n, torch.device("cpu")).levels) >= 2
    rng = np.random.default_rng(7)
    data = rng.normal(1e5, 3.0, (3, n, 3)).astype(np.float32)
    data[1, 17, 2] = np.nan  # left out and counted, at every level
    for x in data[:2]:
        norm(torch.from_numpy(x))
    norm(torch.from_numpy(data[2:]), train=True)  # the learner path: [1, N, 3]
    gids = np.zeros(n, int) if g is None else g.numpy()
    ok = np.ones((3, n), bool)
    ok[1, 17] = False
    for k in range(norm.num_groups):
        sel = ok & (gids == k)[None]
        x = data[sel].astype(np.float64)
        assert norm.count[k].item() == len(x)
        np.testing.assert_allclose(norm.mean[k].numpy(), x.mean(0), rtol=1e-13)
        np.testing.assert_allclose(norm.var[k].numpy(), x.var(0), rtol=1e-10)
    assert norm.nonfinite.sum().item() == 1


def test_reset_over_several_scan_chunks_clears_exactly_the_hit_groups():
    """Groups larger than one ``reset`` block's scan (RESET_CHUNK envs): a masked env deep
    in a group clears it; other groups, returns of unmasked envs, stay bit-identical."""
    from gpuparam.transforms.running_stats import RESET_CHUNK

    n = 2 * RESET_CHUNK + 900
    gid = (torch.arange(n) >= 2 * RESET_CHUNK + 400).long()  # 2448 envs, then 499
    gid[-1] = 2  # group 2: one env; group 3: none
    rew = RewardNorm(0.9, group_ids=gid, num_groups=4)
    obs = ObsNorm(2, group_ids=gid, num_groups=4)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        rew(torch.randn(n, generator=g), torch.zeros(n, dtype=torch.bool))
        obs(torch.randn(n, 2, generator=g))
    for m in (obs, rew):
        before = {k: v.clone() for k, v in m.state_dict().items()}
        mask = torch.zeros(n, dtype=torch.bool)
        mask[2 * RESET_CHUNK + 7] = True  # group 0, third scan chunk
        m.reset_stats(mask)
        hit = torch.tensor([True, False, False, False])
        assert m.count[hit].tolist() == [0.0] and torch.equal(m.reset_pending, hit)
        for k in ("count", "mean", "m2"):
            assert torch.equal(getattr(m, k)[~hit], before[k][~hit]), k
        if m is rew:
            assert m.returns[mask].tolist() == [0.0]
            assert torch.equal(m.returns[~mask], before["returns"][~mask])
        m.reset_stats(groups=torch.tensor([False, True, False, True]))  # 3: no env
        assert m.count.tolist() == [0.0, 0.0, 3.0, 0.0]
