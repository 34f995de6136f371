"""Issue 14 (2, 10): NaN / inf samples are left out of the statistics and counted, for every
group layout; float32 data never overflows the reduction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gpuparam as gp
from gpuparam.transforms import ObsNorm, RewardNorm

LAYOUTS = {  # name -> group_ids for N envs
    "one group": lambda n: None,
    "grouped": lambda n: torch.arange(n) % 3,
    "identity": lambda n: torch.arange(n),
}
BAD = (float("nan"), float("inf"), -float("inf"))


def gids_of(layout: str, n: int) -> np.ndarray:
    g = LAYOUTS[layout](n)
    return np.zeros(n, dtype=np.int64) if g is None else g.numpy()


def poisoned_batches(n: int, shape, steps: int, seed: int = 0):
    """float32 batches [steps, n, *shape] with a NaN, inf or -inf in some envs' samples,
    and the bool [steps, n] of which envs are bad."""
    rng = np.random.default_rng(seed)
    data = rng.normal(3.0, 2.0, (steps, n, *shape)).astype(np.float32)
    bad = rng.random((steps, n)) < 0.15
    bad[0, 0] = True  # the first env of the first batch: the shift of an empty group
    flat = data.reshape(steps, n, -1)
    for t, e in zip(*np.nonzero(bad), strict=True):
        flat[t, e, rng.integers(flat.shape[2])] = BAD[(t + e) % 3]
    return data, bad


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("n,shape", [(64, (3,)), (48, (4,)), (10, (2, 2))])
def test_obsnorm_statistics_are_those_of_the_finite_samples(layout, n, shape):
    steps = 5
    norm = ObsNorm(shape, group_ids=LAYOUTS[layout](n), num_envs=n)
    data, bad = poisoned_batches(n, shape, steps)
    for t in range(steps):
        out = norm(torch.from_numpy(data[t]))
        good_out = out[torch.from_numpy(~bad[t])]
        assert torch.isfinite(good_out).all()
        bad_rows = out[torch.from_numpy(bad[t])].reshape(int(bad[t].sum()), -1)
        assert (~torch.isfinite(bad_rows)).any(1).all()  # the caller sees the bad value
    gids = gids_of(layout, n)
    for g in range(norm.num_groups):
        sel = (gids == g)[None, :] & ~bad
        x = data[sel].astype(np.float64)
        assert norm.count[g].item() == x.shape[0]
        assert norm.nonfinite[g].item() == int(((gids == g)[None, :] & bad).sum())
        if x.shape[0]:
            np.testing.assert_allclose(norm.mean[g].numpy(), x.mean(0), rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(norm.var[g].numpy(), x.var(0), rtol=1e-8)
    assert torch.isfinite(norm.mean).all() and torch.isfinite(norm.m2).all()


@pytest.mark.parametrize("n", [32, 9])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_rewardnorm_leaves_out_clears_and_counts_nonfinite_returns(layout, n):
    steps, gamma = 6, 0.9
    rn = RewardNorm(gamma, group_ids=LAYOUTS[layout](n), num_envs=n)
    rng = np.random.default_rng(1)
    rewards = rng.normal(1.0, 1.0, (steps, n)).astype(np.float32)
    rewards[1, 3], rewards[2, 0], rewards[4, 7] = np.nan, np.inf, -np.inf
    done = rng.random((steps, n)) < 0.2
    gids = gids_of(layout, n)
    ret = np.zeros(n)
    samples: list[list[float]] = [[] for _ in range(rn.num_groups)]
    excluded = np.zeros(rn.num_groups, dtype=np.int64)
    for t in range(steps):
        out = rn(torch.from_numpy(rewards[t]), torch.from_numpy(done[t]))
        ret = ret * gamma + rewards[t].astype(np.float64)
        for e in range(n):
            if np.isfinite(ret[e]):
                samples[gids[e]].append(ret[e])
            else:
                excluded[gids[e]] += 1
                ret[e] = 0.0  # policy: a non-finite return starts over
        ret[done[t]] = 0.0
        assert torch.isfinite(out[torch.from_numpy(np.isfinite(rewards[t]))]).all()
        assert not torch.isfinite(out[torch.from_numpy(~np.isfinite(rewards[t]))]).any()
        np.testing.assert_allclose(rn.returns.numpy(), ret, rtol=1e-12, atol=1e-12)
    assert rn.nonfinite.tolist() == excluded.tolist()
    for g in range(rn.num_groups):
        x = np.array(samples[g])
        assert rn.count[g].item() == len(x)
        np.testing.assert_allclose(rn.var[g].item(), x.var(), rtol=1e-9)


@pytest.mark.parametrize("cls", [ObsNorm, RewardNorm])
def test_an_all_nonfinite_batch_changes_no_statistic(cls):
    n = 32
    m = ObsNorm((4,), num_envs=n) if cls is ObsNorm else RewardNorm(num_envs=n)
    call = (lambda x: m(x)) if cls is ObsNorm else (
        lambda x: m(x, torch.zeros(n, dtype=torch.bool)))
    shape = (n, 4) if cls is ObsNorm else (n,)
    call(torch.full(shape, float("nan")))  # count 0: no shift to take from a finite env
    assert m.count.item() == 0 and m.nonfinite.item() == n
    g = torch.Generator().manual_seed(0)
    call(torch.randn(shape, generator=g))
    before = {k: v.clone() for k, v in m.state_dict().items()}
    out = call(torch.full(shape, float("inf")))
    assert m.nonfinite.item() == 2 * n
    for k in ("count", "mean", "m2"):
        assert torch.equal(before[k], getattr(m, k)), k
    assert not torch.isfinite(out).any()
    assert torch.isfinite(call(torch.randn(shape, generator=g))).all()


def test_one_nan_state_does_not_poison_the_other_envs_issue_repro():
    env = gp.make("Pendulum-v1", num_envs=64, device="cpu", seed=0)
    norm = ObsNorm((3,))
    tenv = gp.TransformedEnv(env, norm)
    tenv.reset()
    env.state[0] = float("nan")
    zero = torch.zeros(64, 1)
    for t in range(250):
        td = tenv.step(zero)
        if t < 150:
            assert torch.isfinite(td["observation"][1:]).all()
            assert not torch.isfinite(td["observation"][0]).all()  # the env's NaN shows
    assert torch.isfinite(env.state).all()  # truncation at 200 reset env 0
    assert torch.isfinite(td["observation"]).all()
    assert torch.isfinite(norm.mean).all() and norm.nonfinite.item() >= 150


@pytest.mark.parametrize("n", [6, 16, 1000])  # one chunk, several
def test_obsnorm_reduction_of_huge_float32_values_does_not_overflow(n):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g) * 1e20
    out = gp.ObsNorm((4,), num_envs=n)(x)
    ref = x.double()
    np.testing.assert_allclose(out.double().numpy(),
                               ((ref - ref.mean(0)) / ref.std(0, unbiased=False)).numpy(),
                               rtol=1e-5, atol=1e-5)
    big = torch.tensor([[3e38] * 4, [-3e38] * 4] * (n // 2))  # x - mean overflows float32
    norm = gp.ObsNorm((4,), num_envs=n)
    out = norm(big)
    assert torch.isfinite(norm.std).all() and norm.nonfinite.item() == 0
    np.testing.assert_allclose(norm.std[0].numpy(), 3e38, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_cuda_follows_the_same_policy(layout):
    n, shape, steps = 64, (3,), 4
    gid = LAYOUTS[layout](n)
    cpu = ObsNorm(shape, group_ids=gid, num_envs=n)
    gpu = ObsNorm(shape, group_ids=None if gid is None else gid.cuda(), num_envs=n,
                  device="cuda")
    data, _ = poisoned_batches(n, shape, steps)
    for x in data:
        cpu(torch.from_numpy(x))
        gpu(torch.from_numpy(x).cuda())
    assert torch.equal(cpu.count, gpu.count.cpu())
    assert torch.equal(cpu.nonfinite, gpu.nonfinite.cpu())
    # the same kernels and launches on both devices (no FMA contraction: kernels.stats)
    torch.testing.assert_close(cpu.mean, gpu.mean.cpu(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cpu.var, gpu.var.cpu(), rtol=1e-12, atol=1e-12)
