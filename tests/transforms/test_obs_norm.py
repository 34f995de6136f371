"""ObsNorm: parity with a float64 NumPy reference, masked reset, modes, checkpoints, errors."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from gpuparam.transforms import ObsNorm

GIDS = [0, 1, 1, 2, 2, 2, 3, 0]  # 4 groups of uneven size, N = 8


def snapshot(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items()}


def assert_same(m: torch.nn.Module, snap: dict[str, torch.Tensor]) -> None:
    now = m.state_dict()
    assert now.keys() == snap.keys()
    for k, v in snap.items():
        assert torch.equal(now[k], v), k


def ref_stats(batches: np.ndarray, gids: np.ndarray, g: int):
    """float64 mean / population std / count of group g over batches [T, N, *S]."""
    data = batches[:, gids == g].reshape(-1, *batches.shape[2:]).astype(np.float64)
    return data.mean(0), data.std(0), data.shape[0]


class FakeParams:
    """The on_change half of ``env.params``: callbacks get (names, mask)."""

    def __init__(self, names: tuple[str, ...]):
        self.names, self.callbacks = names, []

    def on_change(self, cb):
        self.callbacks.append(cb)
        return lambda: self.callbacks.remove(cb)

    def notify(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        for cb in self.callbacks:
            cb(names, mask)


def fake_env(n: int):
    return types.SimpleNamespace(
        num_envs=n, device=torch.device("cpu"), params=FakeParams(("length", "gravity"))
    )


def filled(group_ids=GIDS, shape=(3,), steps=5, seed=0, **kw) -> ObsNorm:
    norm = ObsNorm(shape, group_ids=torch.tensor(group_ids), **kw)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        norm(torch.randn(len(group_ids), *shape, generator=g) * 3 + 1)
    return norm


@pytest.mark.parametrize("loc,scale", [(1e4, 1.0), (0.0, 1e-3), (-50.0, 100.0), (3.0, 1e4)])
@pytest.mark.parametrize("shape", [(3,), (2, 2)])
def test_matches_float64_reference(loc, scale, shape):
    rng = np.random.default_rng(1)
    gids = np.array(GIDS)
    norm = ObsNorm(shape, group_ids=torch.tensor(GIDS), num_groups=5)  # group 4 stays empty
    batches, out = [], None
    for _ in range(40):
        x = torch.tensor(rng.normal(loc, scale, (len(GIDS), *shape)), dtype=torch.float32)
        batches.append(x.numpy())
        out = norm(x)
    b = np.stack(batches)
    for g in range(4):
        mean, std, n = ref_stats(b, gids, g)
        assert norm.count[g].item() == n
        np.testing.assert_allclose(norm.mean[g].numpy(), mean, rtol=1e-6, atol=0)
        np.testing.assert_allclose(norm.std[g].numpy(), std, rtol=1e-6)
    assert norm.count[4].item() == 0 and torch.all(norm.std[4] == 0)
    # output of the last call: normalized with the statistics after the update
    mean, var = norm.mean.numpy()[gids], norm.var.numpy()[gids]
    expect = (b[-1].astype(np.float64) - mean) / np.sqrt(var + 1e-8)
    atol = 2e-3 if abs(loc) / scale > 1e3 else 1e-5  # float32 x has ulp(1e4) ~ 1e-3
    np.testing.assert_allclose(out.numpy(), expect, rtol=1e-5, atol=atol)


def test_shared_and_per_env_groups():
    rng = np.random.default_rng(2)
    x = rng.normal(1e4, 1.0, (30, 6, 2)).astype(np.float32)
    shared, per_env = ObsNorm(2), ObsNorm(2, group_ids=torch.arange(6))
    for t in range(30):
        shared(torch.from_numpy(x[t]))
        per_env(torch.from_numpy(x[t]))
    xd = x.astype(np.float64)
    np.testing.assert_allclose(shared.mean[0].numpy(), xd.reshape(-1, 2).mean(0), rtol=1e-6)
    np.testing.assert_allclose(shared.std[0].numpy(), xd.reshape(-1, 2).std(0), rtol=1e-6)
    np.testing.assert_allclose(per_env.mean.numpy(), xd.mean(0), rtol=1e-6)
    np.testing.assert_allclose(per_env.std.numpy(), xd.std(0), rtol=1e-6)
    assert shared.num_envs == 6 and torch.equal(per_env.count, torch.full((6,), 30.0).double())


@pytest.mark.parametrize("batch", [3, 1])
def test_no_catastrophic_cancellation(batch):
    norm = ObsNorm(1)
    data = torch.tensor([[10000.0], [10001.0], [10002.0]])
    out = [norm(data[i : i + batch]) for i in range(0, 3, batch)]
    assert norm.count.item() == 3
    assert norm.mean.item() == pytest.approx(10001.0, rel=1e-12)
    assert norm.std.item() == pytest.approx((2 / 3) ** 0.5, rel=1e-9)
    if batch == 3:
        expect = torch.tensor([[-1.0], [0.0], [1.0]]) * 1.5**0.5
        torch.testing.assert_close(out[0], expect, rtol=1e-5, atol=1e-5)


def test_counts_beyond_2_24():
    # (the merge itself: tests/transforms/test_hot_path.py)
    norm = ObsNorm(1, num_envs=1)
    state = norm.state_dict()
    state["count"].fill_(2**40)
    norm.load_state_dict(state)
    norm(torch.ones(1, 1))
    assert norm.count.item() == 2**40 + 1


def test_masked_reset_leaves_other_groups_bit_identical():
    norm = filled()
    before = snapshot(norm)
    mask = torch.zeros(8, dtype=torch.bool)
    mask[2] = True  # group 1
    mask[6] = True  # group 3
    norm.reset_stats(mask)
    hit = torch.tensor([False, True, False, True])
    assert torch.all(norm.count[hit] == 0) and torch.all(norm.mean[hit] == 0)
    for k in ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2"):
        assert torch.equal(getattr(norm, k)[~hit], before[k][~hit]), k
    assert torch.equal(norm.reset_pending, hit)
    x = torch.randn(8, 3) * 5 + 100
    norm.freeze()
    out = norm(x)  # count 0: mean 0, var 1
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[mask], x[mask] / (1 + 1e-8) ** 0.5)
    norm.unfreeze()
    for _ in range(20):  # the reset groups re-converge to the new data alone
        norm(x)
    torch.testing.assert_close(norm.mean[1].float(), x[1:3].mean(0))
    assert norm.count[1].item() == 40


def test_reset_by_groups_and_all():
    norm = filled()
    before = snapshot(norm)
    norm.reset_stats(groups=torch.tensor([2]))
    norm.reset_stats(groups=torch.tensor([True, False, False, False]))
    assert norm.count.tolist() == [0, 10, 0, 5]
    assert torch.equal(norm.mean[[1, 3]], before["mean"][[1, 3]])
    norm.reset_stats()
    assert torch.all(norm.count == 0) and torch.all(norm.m2 == 0)
    assert torch.isfinite(norm(torch.randn(8, 3))).all()


@pytest.mark.parametrize("group_ids", [None, GIDS, list(range(8))])
def test_non_contiguous_input_and_in_place_output(group_ids):
    gids = None if group_ids is None else torch.tensor(group_ids)
    a, b = ObsNorm(3, group_ids=gids), ObsNorm(3, group_ids=gids)
    for _ in range(3):
        wide = torch.randn(8, 5) * 2 + 7
        x = wide[:, 1:4]  # a strided view
        expect = a(x.contiguous())
        assert torch.equal(b(x), expect)
        y = x.clone()
        assert torch.equal(b.normalize(y, out=y), b.normalize(x)) and torch.equal(y, expect)


def test_output_right_after_reset_is_finite_per_env():
    norm = ObsNorm(2, group_ids=torch.arange(4), clip=5.0)
    out = norm(torch.randn(4, 2) + 1e4)  # one sample per group: var 0
    assert torch.equal(out, torch.zeros(4, 2))
    out = norm(torch.randn(4, 2) + 1e4)
    assert torch.isfinite(out).all() and out.abs().max() <= 5.0


def test_freeze_eval_and_frozen_copy():
    norm = filled()
    before = snapshot(norm)
    x = torch.randn(8, 3)
    expect = norm.normalize(x)
    assert_same(norm, before)
    norm.freeze()
    assert torch.equal(norm(x), expect)
    assert_same(norm, before)
    norm.unfreeze().eval()
    assert torch.equal(norm(x), expect)
    assert_same(norm, before)
    norm.train()
    copy = norm.frozen_copy()
    assert copy.frozen and not norm.frozen and copy.training
    norm(x)
    assert_same(copy, before)
    assert not torch.equal(norm.count, before["count"])


def test_state_dict_round_trip():
    norm = filled()
    state = norm.state_dict()
    assert {"count", "mean", "m2", "group_ids"} <= state.keys()
    other = ObsNorm(3, group_ids=torch.zeros(8, dtype=torch.long), num_groups=4)
    other.load_state_dict(state)  # group layout comes from the checkpoint too
    assert_same(other, state)
    x = torch.randn(8, 3)
    assert torch.equal(other(x), norm(x))
    lazy = ObsNorm(3)  # N unknown yet: learnt from the checkpoint
    shared = filled(group_ids=[0] * 8)
    lazy.load_state_dict(shared.state_dict())
    assert lazy.num_envs == 8
    x = torch.randn(8, 3)
    assert torch.equal(lazy(x), shared(x))


def test_reset_on_fires_only_for_groups_of_changed_envs():
    norm = filled(reset_on=("length",))
    env = fake_env(8)
    norm.attach(env)
    before = snapshot(norm)
    mask = torch.zeros(8, dtype=torch.bool)
    mask[3] = True  # group 2
    env.params.notify(("gravity",), mask)
    assert_same(norm, before)
    env.params.notify(("gravity", "length"), mask)
    assert norm.count.tolist() == [10, 10, 0, 5]
    assert torch.equal(norm.mean[[0, 1, 3]], before["mean"][[0, 1, 3]])
    env.params.notify(("length",), None)
    assert torch.all(norm.count == 0)
    norm.attach(env)  # re-attaching replaces the callback
    assert len(env.params.callbacks) == 1


def test_reset_on_unknown_name_lists_valid_names():
    norm = filled(reset_on=("lenght",))
    before = snapshot(norm)
    with pytest.raises(KeyError, match="valid names.*length.*gravity"):
        norm.attach(fake_env(8))
    assert_same(norm, before)
    with pytest.raises(ValueError, match="num_envs=9"):
        filled().attach(fake_env(9))


META = torch.device("meta")  # stands in for a wrong device on CPU-only machines


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda m: m(torch.randn(8, 3).double()),
            "expected dtype torch.float32, got torch.float64",
        ),
        (lambda m: m(torch.randn(8, 4)), r"expected shape \(8, 3\) \(the env batch.*got \(8, 4\)"),
        (lambda m: m(torch.randn(9, 3)), r"expected shape \(8, 3\) \(the env batch.*got \(9, 3\)"),
        (lambda m: m(torch.randn(8, 4), train=True),
         r"expected shape \(\*batch, 8, 3\), got \(8, 4\)"),
        (lambda m: m(torch.randn(9, 3), train=False),
         r"expected shape \(\*batch, 8, 3\), got \(9, 3\)"),
        (lambda m: m(torch.randn(2, 9, 3), train=True),
         r"expected shape \(\*batch, 8, 3\), got \(2, 9, 3\)"),
        (lambda m: m(torch.randn(2, 8, 3), out=torch.empty(8, 3), train=True),
         r"out expected shape \(2, 8, 3\)"),
        (lambda m: m(torch.randn(8, 3), train="yes"), "train expected a bool or None, got 'yes'"),
        (lambda m: m(torch.randn(8)), r"got \(8,\)"),
        (lambda m: m(torch.randn(8, 3, device=META)), "expected device cpu, got meta"),
        (lambda m: m([[0.0] * 3] * 8), "got list"),
        (lambda m: m.normalize(torch.randn(8, 3).half()), "got torch.float16"),
        (lambda m: m(torch.randn(8, 3), out=torch.empty(8, 2)), r"out expected shape"),
        (lambda m: m(torch.randn(8, 3), out=torch.empty(3, 8).t()), "out expected a contiguous"),
        (lambda m: m.reset_stats(torch.ones(8)), "expected dtype torch.bool, got torch.float32"),
        (lambda m: m.reset_stats(torch.ones(7, dtype=torch.bool)), r"expected shape \(8,\)"),
        (lambda m: m.reset_stats(torch.ones(8, dtype=torch.bool, device=META)), "got meta"),
        (lambda m: m.reset_stats(groups=torch.tensor([4])), r"indices in \[0, 4\)"),
        (lambda m: m.reset_stats(groups=torch.ones(3, dtype=torch.bool)), "bool \\[4\\]"),
        (lambda m: m.reset_stats(groups=[1]), "groups expected a tensor"),
    ],
)
def test_bad_input_raises_and_leaves_stats(call, match):
    norm = filled()
    before = snapshot(norm)
    with pytest.raises(ValueError, match=match):
        call(norm)
    assert_same(norm, before)


@pytest.mark.parametrize(
    "mask", [torch.zeros(0, dtype=torch.bool), torch.ones(2, 4, dtype=torch.bool), [True]]
)
def test_unbound_mask_error_names_any_n(mask):
    """While N is unknown any bool (N,) mask with N >= 1 binds it: the error says so (not
    'expected shape (1,)') and binds nothing."""
    from gpuparam.transforms import RewardNorm

    for call in (ObsNorm(3).reset_stats, RewardNorm().reset_returns):
        with pytest.raises(ValueError, match=r"expected a bool tensor \(N,\), N >= 1, got "):
            call(mask)
        assert call.__self__.num_envs is None


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            dict(group_ids=torch.tensor([0, 1, 5]), num_groups=3),
            r"values in \[0, 3\), got \[0, 5\]",
        ),
        (dict(group_ids=torch.tensor([-1, 0])), r"got \[-1, 0\]"),
        (dict(group_ids=torch.tensor([0.0, 1.0])), "long tensor"),
        (dict(group_ids=torch.zeros(2, 2, dtype=torch.long)), "long tensor"),
        (dict(group_ids=torch.zeros(3, dtype=torch.long), num_envs=4), r"expected shape \(4,\)"),
        (dict(group_ids=torch.zeros(3, dtype=torch.long), device=META), "device meta, got cpu"),
        (dict(clip=0.0), "clip must be > 0"),
        (dict(clip=-1.0), "got -1.0"),
        (dict(eps=0.0), "eps must be > 0"),
        (dict(num_groups=3), "needs group_ids"),
    ],
)
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ObsNorm(3, **kwargs)


def test_hot_path_never_syncs(monkeypatch):
    norm = ObsNorm(3, group_ids=torch.tensor(GIDS), clip=4.0, reset_on=("length",))
    env = fake_env(8)
    norm.attach(env)
    x, out, mask = torch.randn(8, 3), torch.empty(8, 3), torch.rand(8) < 0.5
    norm(x)

    def boom(*a, **k):
        raise AssertionError("host sync in the hot path")

    for name in ("item", "tolist", "nonzero", "cpu", "numpy", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, boom)
    norm(x, out=out)
    norm.normalize(x, out=x)
    norm.reset_stats(mask)
    norm.reset_stats(groups=mask[:4])
    env.params.notify(("length",), mask)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu_without_host_syncs():
    from gpuparam.transforms import RewardNorm

    n, gids = 4096, torch.arange(4096) % 5
    cpu = [ObsNorm(4, group_ids=gids, clip=5.0), RewardNorm(0.9, group_ids=gids, clip=5.0)]
    gpu = [ObsNorm(4, group_ids=gids.cuda(), clip=5.0), RewardNorm(0.9, group_ids=gids.cuda())]
    gpu[1].clip = 5.0
    shared = ObsNorm(4, num_envs=n, device="cuda")  # one group (the same kernels as G > 1)
    shared_r = RewardNorm(0.9, num_envs=n, device="cuda", clip=5.0)
    cpu_shared = [ObsNorm(4, num_envs=n), RewardNorm(0.9, num_envs=n, clip=5.0)]
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 4, generator=g) * 3 + 1e4 for _ in range(5)]
    rs = [torch.randn(n, generator=g) for _ in range(5)]
    ds = [torch.rand(n, generator=g) < 0.05 for _ in range(5)]
    mask = (torch.arange(n) % 7 == 0).cuda()
    xs_c, rs_c, ds_c = [x.cuda() for x in xs], [r.cuda() for r in rs], [d.cuda() for d in ds]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for x, r, d in zip(xs_c, rs_c, ds_c, strict=True):
            out_o, out_r = gpu[0](x), gpu[1](r, d)
            out_so, out_sr = shared(x), shared_r(r, d)
        gpu[0].reset_stats(mask)
        gpu[1].reset_stats(mask)
        shared.reset_stats(mask)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    for x, r, d in zip(xs, rs, ds, strict=True):
        exp_o, exp_r = cpu[0](x), cpu[1](r, d)
        exp_so, exp_sr = cpu_shared[0](x), cpu_shared[1](r, d)
    torch.testing.assert_close(out_o.cpu(), exp_o, rtol=1e-4, atol=2e-3)
    torch.testing.assert_close(out_r.cpu(), exp_r, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out_so.cpu(), exp_so, rtol=1e-4, atol=2e-3)
    torch.testing.assert_close(out_sr.cpu(), exp_sr, rtol=1e-5, atol=1e-5)
    for a in (*cpu, cpu_shared[0]):
        a.reset_stats(mask.cpu())
    pairs = [(cpu[0], gpu[0], 1e-9), (cpu[1], gpu[1], 1e-9), (cpu_shared[1], shared_r, 1e-9),
             (cpu_shared[0], shared, 1e-9)]  # one set of kernels: float64 on both devices
    for a, b, rtol in pairs:
        for k in ("count", "mean", "m2", "synced_count", "synced_mean", "synced_m2"):
            torch.testing.assert_close(getattr(b, k).cpu(), getattr(a, k), rtol=rtol, atol=1e-9)


def test_env_batch_of_another_size_is_refused_not_merged():
    # issue 24: ObsNorm((4,), num_envs=4) merged a batch of 5 in silently
    norm = ObsNorm((4,), num_envs=4)
    before = snapshot(norm)
    with pytest.raises(ValueError, match=r"x expected shape \(4, 4\) \(the env batch; pass "
                                         r"train=True or train=False.*got \(5, 4\)"):
        norm(torch.randn(5, 4))
    assert_same(norm, before)
    norm(torch.randn(5, 4), train=True)  # a learner's minibatch, merged when asked
    assert norm.count.item() == 5
    assert norm.normalize(torch.randn(5, 4)).shape == (5, 4)


def test_grouped_sizes_are_read_at_construction_not_at_the_first_forward(monkeypatch):
    """A grouped normalizer reads its group sizes on the host when its ids are set (and at
    a load): its first forward reads nothing (on CUDA a read would be a host sync)."""
    from gpuparam.transforms import running_stats

    gids = torch.arange(64) % 3
    norm = ObsNorm(4, group_ids=gids)
    loaded = ObsNorm(4, group_ids=gids)
    loaded.load_state_dict(norm.state_dict())

    def refuse(*args):
        raise AssertionError("group sizes read on the host at a forward")

    monkeypatch.setattr(running_stats, "group_counts", refuse)
    x = torch.randn(64, 4)
    for m in (norm, loaded):
        out = m(x)
        assert out.shape == (64, 4)
        assert torch.equal(m.count, torch.tensor([22.0, 21.0, 21.0], dtype=m.count.dtype))


def test_masked_resets_rotating_over_many_masks_reset_exactly_their_groups():
    """reset_stats(mask) with masks rotating over more addresses than a bound launch keeps
    recorded launches for (``gpuparam._launch.MAX_VARIANTS``), some masks changed in place
    between calls: each call resets exactly the groups of the envs its mask holds then."""
    n = 16
    norm = ObsNorm((2,), group_ids=torch.arange(n))
    x = torch.randn(n, 2)
    g = torch.Generator().manual_seed(1)
    masks = [torch.rand(n, generator=g) < 0.3 for _ in range(12)]
    for r in range(3):
        for i, m in enumerate(masks):
            if r == 2 and i % 3 == 0:
                m.copy_(torch.rand(n, generator=g) < 0.3)  # same address, new contents
            norm(x)
            before = norm.count.clone()
            norm.reset_stats(m)
            assert torch.equal(norm.count, torch.where(m, torch.zeros_like(before), before))
