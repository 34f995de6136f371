"""sync(): two gloo processes on CPU hold the statistics of the concatenated data."""

from __future__ import annotations

import datetime
import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gpuparam.transforms import ObsNorm, RewardNorm

GIDS = [0, 1, 1, 2, 2, 0]  # G = 4: group 3 has no env
T = 5


def obs_data(rank: int, phase: int) -> torch.Tensor:
    """float32 [T, N, 2]: a different distribution per rank."""
    g = torch.Generator().manual_seed(100 * rank + phase)
    return torch.randn(T, len(GIDS), 2, generator=g) * (1 + rank) + 1e4 + rank


def rewards(rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(7 + rank)
    return torch.randn(T, len(GIDS), generator=g) + rank


def stats_of(m) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items()}


def _worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        norm = ObsNorm(2, group_ids=torch.tensor(GIDS), num_groups=4)
        rew = RewardNorm(0.9, group_ids=torch.tensor(GIDS), num_groups=4)
        never = torch.zeros(len(GIDS), dtype=torch.bool)
        for x, r in zip(obs_data(rank, 0), rewards(rank), strict=True):
            norm(x)
            rew(r, never)
        norm.sync()
        rew.sync()
        out = {"phase1": stats_of(norm), "reward": stats_of(rew)}
        for t, x in enumerate(obs_data(rank, 1)):
            if rank == 0 and t == 2:
                norm.reset_stats(groups=torch.tensor([1]))  # group 1 restarts on every rank
            norm(x)
        norm.sync()
        out["phase2"] = stats_of(norm)
        norm.sync()  # nothing new: nothing changes, nothing is counted twice
        out["phase3"] = stats_of(norm)
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def check(stats: dict[str, torch.Tensor], group_data: dict[int, np.ndarray]) -> None:
    for g in range(4):
        data = group_data.get(g, np.zeros((0, 2)))
        assert stats["count"][g].item() == len(data)
        if len(data):
            np.testing.assert_allclose(stats["mean"][g].numpy(), data.mean(0), rtol=1e-12)
            var = (stats["m2"][g] / len(data)).numpy()
            np.testing.assert_allclose(var, data.var(0), rtol=1e-9)
    for k in ("count", "mean", "m2"):
        assert torch.equal(stats[k], stats["synced_" + k])
    assert not stats["reset_pending"].any()


def test_two_process_gloo_sync_equals_concatenated_data(tmp_path):
    if not dist.is_available():
        pytest.skip("torch.distributed not available")
    mp.spawn(_worker, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True)
    res = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for key in ("phase1", "phase2", "phase3", "reward"):
        for k, v in res[0][key].items():
            if k != "returns":  # per-env state stays local
                assert torch.equal(v, res[1][key][k]), (key, k)  # ranks agree bit for bit
    gids = np.array(GIDS)

    def by_group(chunks: list[torch.Tensor]) -> dict[int, np.ndarray]:
        out = {}
        for g in range(3):
            out[g] = np.concatenate(
                [c.double().numpy()[:, gids == g].reshape(-1, 2) for c in chunks]
            )
        return out

    d = {(r, p): obs_data(r, p) for r in range(2) for p in range(2)}
    check(res[0]["phase1"], by_group([d[0, 0], d[1, 0]]))
    phase2 = by_group([d[0, 0], d[1, 0], d[0, 1], d[1, 1]])
    phase2[1] = by_group([d[0, 1][2:], d[1, 1]])[1]  # reset on rank 0 at t=2 drops the rest
    check(res[0]["phase2"], phase2)
    for k, v in res[0]["phase2"].items():
        assert torch.equal(v, res[0]["phase3"][k]), k
    returns = []
    for r in range(2):
        ret = np.zeros(len(GIDS))
        for rw in rewards(r).double().numpy():
            ret = ret * 0.9 + rw
            returns.append(ret.copy())
    returns = np.stack(returns)
    stats = res[0]["reward"]
    for g in range(3):
        data = returns[:, gids == g].ravel()
        assert stats["count"][g].item() == len(data)
        np.testing.assert_allclose(stats["mean"][g].item(), data.mean(), rtol=1e-12)
        np.testing.assert_allclose(stats["m2"][g].item() / len(data), data.var(), rtol=1e-9)


def test_sync_without_process_group_is_a_world_of_one():
    assert not (dist.is_available() and dist.is_initialized())
    norm = ObsNorm(2, group_ids=torch.tensor(GIDS), num_groups=4)
    for x in obs_data(0, 0):
        norm(x)
    before = stats_of(norm)
    norm.sync()
    for k in ("count", "mean", "m2"):
        torch.testing.assert_close(getattr(norm, k), before[k], rtol=1e-13, atol=0)
        assert torch.equal(getattr(norm, k), getattr(norm, "synced_" + k))
    after = stats_of(norm)
    norm.sync()
    for k, v in after.items():
        assert torch.equal(getattr(norm, k), v), k
