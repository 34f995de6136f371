"""ObsNorm / RewardNorm against a float64 reference: precision far from 0, after resets and
loads, with drifting means; the recorded launches and their repointing at new tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpuparam.transforms import ObsNorm, RewardNorm


@pytest.mark.parametrize("n", [64, 5, 1000])  # one chunk, a short one, several
@pytest.mark.parametrize("shape", [(1,), (3,), (4,), (64,)])
@pytest.mark.parametrize("loc,scale", [(0.0, 1.0), (1e4, 1.0), (1e6, 1e-2)])
def test_obs_stats_and_outputs_match_float64(n, shape, loc, scale):
    steps = 6
    norm = ObsNorm(shape, num_envs=n, clip=None)
    rng = np.random.default_rng(2)
    data = rng.normal(loc, scale, (steps, n, *shape)).astype(np.float32)
    data += np.linspace(0, 5 * scale, steps, dtype=np.float32).reshape(-1, 1, *[1] * len(shape))
    for x in data:
        out = norm(torch.from_numpy(x))
    d64 = data.astype(np.float64).reshape(-1, *shape)
    assert norm.count.item() == steps * n
    tol = 1e-9  # float64 chunks, each around its first value
    np.testing.assert_allclose(norm.mean[0].numpy(), d64.mean(0), rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(norm.var[0].numpy(), d64.var(0), rtol=max(tol, 1e-7) * 10)
    expect = (data[-1] - norm.mean[0].numpy()) / np.sqrt(norm.var[0].numpy() + 1e-8)
    atol = 1e-5 * max(1.0, abs(loc) * 1e-7 / scale * 1e3)  # float32 x: ulp(loc) / scale
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-5, atol=atol)


def test_forward_pair_is_forward_then_normalize_bit_for_bit():
    n = 64
    a, b = ObsNorm(4, num_envs=n, clip=3.0), ObsNorm(4, num_envs=n, clip=3.0)
    g = torch.Generator().manual_seed(0)
    outs = [torch.empty(n, 4) for _ in range(4)]
    for _ in range(5):
        x, x2 = torch.randn(n, 4, generator=g) * 2, torch.randn(n, 4, generator=g) * 2
        a.forward_pair(x, outs[0], x2, outs[1])
        b(x, out=outs[2])
        b.normalize(x2, out=outs[3])
        assert torch.equal(outs[0], outs[2]) and torch.equal(outs[1], outs[3])
        assert outs[0].abs().max() <= 3.0
    assert torch.equal(a.m2, b.m2) and torch.equal(a.count, b.count)
    a.eval()
    a.forward_pair(x, outs[0], x2, outs[1])  # eval: normalizes only
    assert torch.equal(a.count, b.count) and torch.equal(outs[1], outs[3])


def test_in_place_output_and_a_changed_clip_take_effect():
    n = 32
    norm = ObsNorm(4, num_envs=n)
    x = torch.randn(n, 4) * 10
    ref = ObsNorm(4, num_envs=n)(x.clone())
    norm(x, out=x)  # out is x
    assert torch.equal(x, ref)
    norm.clip = 0.5
    y = norm.normalize(torch.randn(n, 4) * 10)
    assert y.abs().max() == 0.5


def test_reward_clears_non_finite_returns_exactly():
    norm = RewardNorm(0.9, num_envs=16).freeze()
    r = torch.full((16,), 2.0)
    r[:2] = torch.tensor([float("inf"), float("nan")])
    done = torch.zeros(16, dtype=torch.bool)
    done[:3] = True
    norm(r, done)
    assert norm.returns[:3].tolist() == [0.0, 0.0, 0.0]
    assert not torch.signbit(norm.returns[:3]).any()
    assert norm.returns[3:].tolist() == [2.0] * 13


def test_reward_first_batch_after_reset_has_finite_exact_stats():
    n, gamma = 32, 0.5
    norm = RewardNorm(gamma, num_envs=n)
    done = torch.zeros(n, dtype=torch.bool)
    rng = np.random.default_rng(3)
    seen, ret = [], np.zeros(n)
    for step in range(8):
        r = (rng.normal(0, 1e-3, n) + 1e6).astype(np.float32)
        out = norm(torch.from_numpy(r), done)
        ret = ret * gamma + r.astype(np.float64)
        seen.extend(ret)
        if step == 3:  # reset (returns too): the next batch is reduced around its first return
            norm.reset_stats()
            seen, ret = [], np.zeros(n)
    np.testing.assert_allclose(norm.var.item(), np.var(seen), rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), r / np.sqrt(np.var(seen) + 1e-8), rtol=1e-5)


def test_fresh_tensors_every_call_reuse_the_recorded_launches():
    n = 32
    norm, ref = ObsNorm(4, num_envs=n), ObsNorm(4, num_envs=n)
    g = torch.Generator().manual_seed(1)
    for i in range(6):  # new input and output tensors at every call, as a TorchRL transform
        x = torch.randn(n, 4, generator=g) + 3
        y = norm(x)
        with torch.no_grad():
            expect = ref(x.clone())
        assert torch.equal(y, expect)
        norm.normalize(x.clone())
        if i == 0:
            recorded = len(norm._eng()._launches)
    assert len(norm._eng()._launches) == recorded  # (update x3, normalize) and (normalize only)


def test_repointed_launch_writes_where_it_points():
    from gpuparam.kernels import stats as K

    from gpuparam._launch import BoundLaunch

    def run(repointed: bool):
        n = 16
        e = ObsNorm(4, num_envs=n).eval()._eng()
        dummy = torch.zeros(n, 4)
        x, out = torch.arange(n * 4.0).view(n, 4), torch.zeros(n, 4)
        first = [dummy] * 4 if repointed else [x, out, x, out]
        args = [*first, 0, e.P, e.n_mod, e.gid, e.flags, e.tab]
        launch = BoundLaunch(K.normalize, (n, 4), inputs=args, device=torch.device("cpu"))
        assert launch.repointable == (0, 1, 2, 3)
        launch.repoint(x, out, x, out)()
        assert dummy.abs().sum() == 0
        return out

    a, b = run(True), run(False)  # repointed launch == launch bound on the tensors
    assert torch.equal(a, b) and a.abs().sum() > 0


def test_reward_stats_stay_exact_after_loading_a_checkpoint():
    n, gamma = 32, 0.0  # gamma 0: the returns are the rewards
    a = RewardNorm(gamma, num_envs=n)
    rng = np.random.default_rng(4)
    done = torch.zeros(n, dtype=torch.bool)
    seen = []
    for _ in range(3):
        r = rng.normal(1e4, 1e-2, n).astype(np.float32)
        a(torch.from_numpy(r), done)
        seen.extend(r.astype(np.float64))
    b = RewardNorm(gamma, num_envs=n)
    b.load_state_dict(a.state_dict())  # a new engine, shifting by the loaded mean
    for _ in range(3):
        r = rng.normal(1e4, 1e-2, n).astype(np.float32)
        b(torch.from_numpy(r), done)
        seen.extend(r.astype(np.float64))
    np.testing.assert_allclose(b.var.item(), np.var(seen), rtol=1e-6)


def test_obs_stats_stay_exact_while_the_mean_drifts_far():
    # the shift follows the running mean: a stream moving by 1e6 of its std stays exact
    n, steps = 32, 20
    norm = ObsNorm(4, num_envs=n)
    rng = np.random.default_rng(5)
    seen = []
    for t in range(steps):
        x = rng.normal(t * 500.0, 1e-2, (n, 4)).astype(np.float32)
        norm(torch.from_numpy(x))
        seen.append(x.astype(np.float64))
    d = np.concatenate(seen)
    np.testing.assert_allclose(norm.mean[0].numpy(), d.mean(0), rtol=1e-9)
    np.testing.assert_allclose(norm.var[0].numpy(), d.var(0), rtol=1e-6)
