"""RewardNorm: parity with a NumPy discounted-return reference, resets, modes, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpuparam.transforms import RewardNorm

GIDS = np.array([0, 0, 1, 1, 1, 2])


def snapshot(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items()}


def assert_same(m: torch.nn.Module, snap: dict[str, torch.Tensor]) -> None:
    now = m.state_dict()
    assert now.keys() == snap.keys()
    for k, v in snap.items():
        assert torch.equal(now[k], v), k


def stream(t: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rewards = (rng.normal(1.0, 2.0, (t, n)) * (1 + np.arange(n))).astype(np.float32)
    dones = rng.random((t, n)) < 0.1
    return rewards, dones


def reference(rewards, dones, gids, gamma, eps=1e-8, clip=None):
    """SB3-style: ret = ret * gamma + r; stats over all returns of a group; clear on done."""
    ret = np.zeros(rewards.shape[1])
    seen = [[] for _ in range(gids.max() + 1)]
    outs = []
    for r, d in zip(rewards.astype(np.float64), dones, strict=True):
        ret = ret * gamma + r
        for g in range(len(seen)):
            seen[g].extend(ret[gids == g])
        var = np.array([np.var(s) for s in seen])[gids]
        out = r / np.sqrt(var + eps)
        outs.append(out if clip is None else np.clip(out, -clip, clip))
        ret = np.where(d, 0.0, ret)
    return np.stack(outs), ret, seen


@pytest.mark.parametrize("gamma,clip", [(0.99, None), (0.9, 3.0), (0.0, None)])
def test_matches_reference(gamma, clip):
    rewards, dones = stream(60, len(GIDS))
    norm = RewardNorm(gamma, group_ids=torch.from_numpy(GIDS), clip=clip)
    outs = [
        norm(torch.from_numpy(r), torch.from_numpy(d)).numpy()
        for r, d in zip(rewards, dones, strict=True)
    ]
    expect, ret, seen = reference(rewards, dones, GIDS, gamma, clip=clip)
    np.testing.assert_allclose(np.stack(outs), expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm.returns.numpy(), ret, rtol=1e-12)
    for g, s in enumerate(seen):
        assert norm.count[g].item() == len(s)
        np.testing.assert_allclose(norm.mean[g].item(), np.mean(s), rtol=1e-10)
        np.testing.assert_allclose(norm.std[g].item(), np.std(s), rtol=1e-10)


def test_shared_group_learns_num_envs():
    rewards, dones = stream(20, 5, seed=1)
    norm = RewardNorm(0.95)
    for r, d in zip(rewards, dones, strict=True):
        out = norm(torch.from_numpy(r), torch.from_numpy(d))
    expect, _, _ = reference(rewards, dones, np.zeros(5, dtype=int), 0.95)
    np.testing.assert_allclose(out.numpy(), expect[-1], rtol=1e-5)
    assert norm.num_envs == 5 and norm.count.item() == 100


def filled(**kw) -> RewardNorm:
    norm = RewardNorm(0.9, group_ids=torch.from_numpy(GIDS), **kw)
    rewards, _ = stream(10, len(GIDS))
    never = torch.zeros(len(GIDS), dtype=torch.bool)
    for r in rewards:
        norm(torch.from_numpy(r), never)
    return norm


def test_reset_stats_clears_stats_of_groups_and_returns_of_masked_envs():
    norm = filled()
    before = snapshot(norm)
    mask = torch.tensor([False, False, True, False, False, False])  # env 2, group 1
    norm.reset_stats(mask)
    assert norm.count.tolist() == [20, 0, 10]
    for k in ("count", "mean", "m2"):
        assert torch.equal(getattr(norm, k)[[0, 2]], before[k][[0, 2]])
    assert norm.returns[2] == 0
    assert torch.equal(norm.returns[~mask], before["returns"][~mask])  # envs 3, 4 keep theirs
    norm.reset_stats(groups=torch.tensor([0]))
    assert norm.count.tolist() == [0, 0, 10]
    assert torch.all(norm.returns[:3] == 0) and torch.equal(norm.returns[3:], before["returns"][3:])
    norm.reset_stats()
    assert torch.all(norm.returns == 0) and torch.all(norm.count == 0)
    out = norm(torch.ones(6), torch.zeros(6, dtype=torch.bool))
    assert torch.isfinite(out).all()


def test_reset_returns_only():
    norm = filled()
    before = snapshot(norm)
    norm.reset_returns(torch.tensor([True] + [False] * 5))
    assert norm.returns[0] == 0 and torch.equal(norm.returns[1:], before["returns"][1:])
    assert torch.equal(norm.count, before["count"])


def test_reset_returns_with_a_mask_binds_n_of_an_unbound_module():
    norm = RewardNorm(0.9)  # N not known yet: the mask fixes it, as reset_stats' does
    norm.reset_returns(torch.tensor([True, False, True]))
    assert norm.num_envs == 3 and torch.equal(norm.returns, torch.zeros(3, dtype=torch.float64))
    norm(torch.ones(3), torch.zeros(3, dtype=torch.bool))
    assert torch.equal(norm.returns, torch.ones(3, dtype=torch.float64))

def test_frozen_stats_do_not_move_but_returns_do():
    norm = filled().freeze()
    before = snapshot(norm)
    r, d = torch.ones(6), torch.tensor([True] + [False] * 5)
    out = norm(r, d)
    torch.testing.assert_close(out, r * torch.rsqrt(norm.var.float()[GIDS] + 1e-8))
    assert norm.returns[0] == 0
    for k in ("count", "mean", "m2"):
        assert torch.equal(getattr(norm, k), before[k])
    copy = norm.unfreeze().eval().frozen_copy()
    norm.train()(r, d)
    assert torch.equal(copy.count, before["count"]) and not torch.equal(norm.count, copy.count)


def test_state_dict_round_trip():
    norm = filled()
    state = norm.state_dict()
    assert {"count", "mean", "m2", "returns", "group_ids"} <= state.keys()
    other = RewardNorm(0.9, group_ids=torch.zeros(6, dtype=torch.long), num_groups=3)
    other.load_state_dict(state)
    assert_same(other, state)
    r, d = torch.randn(6), torch.zeros(6, dtype=torch.bool)
    assert torch.equal(other(r, d), norm(r, d))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda m: m(torch.ones(6).double(), torch.zeros(6, dtype=torch.bool)), "reward expected"),
        (lambda m: m(torch.ones(6), torch.zeros(6)), "done expected dtype torch.bool"),
        (lambda m: m(torch.ones(5), torch.zeros(5, dtype=torch.bool)), r"shape \(6,\), got \(5,\)"),
        (lambda m: m(torch.ones(6, 1), torch.zeros(6, dtype=torch.bool)), r"got \(6, 1\)"),
        (lambda m: m(torch.ones(6, device="meta"), torch.zeros(6, dtype=torch.bool)), "got meta"),
        (lambda m: m.reset_stats(torch.ones(6, dtype=torch.int64)), "torch.int64"),
        (lambda m: m.reset_returns(torch.ones(3, dtype=torch.bool)), r"expected shape \(6,\)"),
    ],
)
def test_bad_input_raises_and_leaves_stats(call, match):
    norm = filled()
    before = snapshot(norm)
    with pytest.raises(ValueError, match=match):
        call(norm)
    assert_same(norm, before)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(gamma=1.5), r"gamma must be in \[0, 1\]"),
        (dict(clip=0), "clip must be > 0"),
        (dict(group_ids=torch.tensor([0, 3]), num_groups=2), r"values in \[0, 2\)"),
    ],
)
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RewardNorm(**kwargs)


def test_hot_path_never_syncs(monkeypatch):
    norm = filled(clip=10.0)
    r, d, mask = torch.randn(6), torch.rand(6) < 0.5, torch.rand(6) < 0.5

    def boom(*a, **k):
        raise AssertionError("host sync in the hot path")

    for name in ("item", "tolist", "nonzero", "cpu", "numpy", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, boom)
    norm(r, d, out=r)
    norm.reset_stats(mask)
    norm.reset_returns(mask)
