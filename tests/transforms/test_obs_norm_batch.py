"""ObsNorm as a learner-side normalizer: any leading batch shape, ``train=`` (skrl's call)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpuparam import ObsNorm

GIDS = [0, 1, 1, 2, 2, 2, 3, 0]


def _filled(group_ids=None, n=8, steps=4) -> ObsNorm:
    g = torch.Generator().manual_seed(0)
    kw = dict(num_envs=n) if group_ids is None else dict(group_ids=torch.tensor(group_ids))
    norm = ObsNorm(3, **kw)
    for _ in range(steps):
        norm(torch.randn(n, 3, generator=g) * 3 + 2)
    return norm


def test_minibatch_normalizes_like_the_env_batch():
    # issue 13, defect 5: a learner's minibatch of 64 failed with "(256, *(4,))"
    norm = _filled()
    x = torch.randn(64, 3) * 3 + 2
    ref = (x.double() - norm.mean[0]) / (norm.var[0] + norm.eps).sqrt()
    np.testing.assert_allclose(norm.normalize(x).numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(norm.normalize(x[:8]).numpy(), norm.normalize(x[:8].clone())
                               .numpy(), rtol=0, atol=0)
    env_batch = norm.normalize(x[:8].contiguous())  # the engine's [N, 3] path
    np.testing.assert_allclose(norm.normalize(x.view(8, 8, 3))[0].numpy(), env_batch.numpy(),
                               atol=1e-6)
    out = torch.empty(4, 16, 3)
    assert norm.normalize(x.view(4, 16, 3), out=out) is out


def test_grouped_normalizes_time_major_batches_per_env():
    norm = _filled(GIDS)
    x = torch.randn(5, 8, 3)
    per_step = torch.stack([norm.normalize(x[t].contiguous()) for t in range(5)])
    np.testing.assert_allclose(norm.normalize(x).numpy(), per_step.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match=r"expected shape \(\*batch, 8, 3\), got \(64, 3\)"):
        norm.normalize(torch.randn(64, 3))


@pytest.mark.parametrize("group_ids", [None, GIDS])
def test_train_true_merges_a_minibatch_exactly(group_ids):
    norm = _filled(group_ids)
    before = (norm.count.clone(), norm.mean.clone(), norm.var.clone())
    x = torch.randn(6, 8, 3) * 2 - 1
    norm.eval()  # train=True updates whatever the mode (skrl does not call .train())
    norm(x, train=True)
    gids = np.zeros(8, int) if group_ids is None else np.array(group_ids)
    for g in range(norm.num_groups):
        rows = x[:, torch.from_numpy(gids == g)].reshape(-1, 3).double()
        n0, m0, v0 = before[0][g], before[1][g], before[2][g]
        n = n0 + rows.shape[0]
        mean = (m0 * n0 + rows.sum(0)) / n
        var = (v0 * n0 + ((rows - rows.mean(0)) ** 2).sum(0)
               + (rows.mean(0) - m0) ** 2 * n0 * rows.shape[0] / n) / n
        assert norm.count[g] == n
        np.testing.assert_allclose(norm.mean[g].numpy(), mean.numpy(), rtol=1e-12)
        np.testing.assert_allclose(norm.var[g].numpy(), var.numpy(), rtol=1e-10)


def test_train_false_and_frozen_never_update():
    norm = _filled()
    snap = {k: v.clone() for k, v in norm.state_dict().items()}
    x = torch.randn(64, 3)
    y = norm(x, train=False)
    norm.freeze()
    norm(x, train=True)
    norm(x[:8].contiguous(), train=True)
    for k, v in norm.state_dict().items():
        assert torch.equal(v, snap[k]), k
    np.testing.assert_allclose(y.numpy(), norm.normalize(x).numpy(), rtol=0, atol=0)


def test_env_batch_train_keyword_overrides_mode():
    norm = _filled()
    c = norm.count.clone()
    norm.eval()
    norm(torch.randn(8, 3))
    assert torch.equal(norm.count, c)
    norm(torch.randn(8, 3), train=True)
    assert norm.count[0] == c[0] + 8
    norm.train()
    norm(torch.randn(8, 3), train=False)
    assert norm.count[0] == c[0] + 8


def test_learner_norm_without_env_after_reset_is_finite():
    norm = ObsNorm(3)  # N never given: a minibatch fixes nothing the env path needs
    y = norm(torch.randn(64, 3) + 5, train=True)
    assert norm.count[0] == 64 and torch.isfinite(y).all()
    assert abs(float(y.mean())) < 1e-5
    norm.reset_stats()
    np.testing.assert_allclose(norm.normalize(torch.ones(2, 3)).numpy(), 1 / np.sqrt(1 + 1e-8))


def test_one_group_minibatch_layout_built_once_per_size(monkeypatch):
    """The one-group learner path copies its chunk layout to the device (a host sync on
    CUDA) only when the minibatch size changes, not per call."""
    from gpuparam.transforms import obs_norm

    norm, built = _filled(), []
    real = obs_norm.Layout
    monkeypatch.setattr(obs_norm, "Layout", lambda *a: built.append(a[2]) or real(*a))
    for m in (64, 64, 64, 32, 32):
        norm(torch.randn(m, 3), train=True)
    assert built == [64, 32]
    assert norm.count.tolist() == [8 * 4 + 256]
