"""Sharded runs: 2 gloo ranks x 32 envs are, env for env, one process with 64 envs.

Both runs hold the same envs (reset, step and Every randomization; a curriculum with
levels and a synced ADR; ObsNorm and RewardNorm) and the same schedule: everything synced
every 10 steps in one collective (one process syncs as a world of one), overlapped with the
next 10 steps (the default) or blocking. Per-env state (observations, rewards, parameters,
levels, discounted returns) must be bit-identical; ADR ranges are integer sums, so
bit-identical too; normalization statistics merged across ranks equal the single process's
to float64 rounding, both the shared baseline the schedule left after step 100 and the
statistics after a final ``env.sync_now()``.
"""

from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gpuparam as gp

N, WORLD, STEPS, EVERY, SEED = 64, 2, 100, 10, 5


def build(shard: tuple[int, int], overlap: bool):
    env = gp.make("CartPole-v1", N, device="cpu", seed=SEED, shard=shard, max_episode_steps=40)
    length = gp.Uniform("length", 0.4, 0.6, on="reset")
    env.randomize(
        length,
        gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step"),
        gp.LogUniform("masspole", 0.5, 2.0, op="scale", on=gp.Every(7)),
    )
    adr = gp.ADR(length, 0.05, (0.2, 1.0), threshold_high=12.0, threshold_low=9.0,
                 samples=6, edge=0.25)
    cur = gp.Curriculum(3, params={"masscart": (0.8, 1.2)}, promote=30.0, demote=15.0,
                        adr=[adr], sync=True)
    env.add_curriculum(cur)
    obs_norm, rew_norm = gp.ObsNorm(4), gp.RewardNorm(0.99)
    tenv = gp.TransformedEnv(env, obs_norm, rew_norm)
    env.sync_every(EVERY, obs_norm, rew_norm, cur, overlap=overlap)
    return tenv, env, cur, length, obs_norm, rew_norm


def run(shard: tuple[int, int], overlap: bool) -> dict[str, torch.Tensor]:
    tenv, env, cur, length, obs_norm, rew_norm = build(shard, overlap)
    n, off = env.num_envs, env.env_offset
    scale = 0.02 * (torch.arange(off, off + n) % 8)  # from steady to random, per global env
    tenv.reset()
    obs, rew = [], []
    for t in range(STEPS):
        noise = torch.randn(N, generator=torch.Generator().manual_seed(t))[off : off + n]
        env.step((env.outputs["observation"][:, 2] + scale * noise > 0).long())
        obs.append(env.outputs["observation"].clone())
        rew.append(env.outputs["reward"].clone())
    norms = {"obs": obs_norm, "rew": rew_norm}
    baseline = {f"{p}_synced_{k}": getattr(m, "synced_" + k).clone()
                for p, m in norms.items() for k in ("count", "mean", "m2")}
    baseline["adr_range_scheduled"] = env.randomization.ranges(length).clone()
    baseline["level_counts_scheduled"] = cur.global_level_counts.clone()
    (sched,) = env.sync_schedules
    assert sched.syncs == STEPS // EVERY
    env.sync_now()  # settle the exchange in flight, sync the rest: all ranks agree
    return {
        **baseline,
        "obs": torch.stack(obs), "reward": torch.stack(rew),
        "nominal": env.params.nominal_table.clone(),
        "effective": env.params.effective_table.clone(),
        "levels": cur.levels.clone(), "level_counts": cur.global_level_counts.clone(),
        "adr_range": env.randomization.ranges(length).clone(),
        "returns": rew_norm.returns.clone(),
        **{f"obs_{k}": getattr(obs_norm, k).clone() for k in ("count", "mean", "m2")},
        **{f"rew_{k}": getattr(rew_norm, k).clone() for k in ("count", "mean", "m2")},
    }


def _worker(rank: int, init_file: str, out_dir: str, overlap: bool) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    try:
        torch.save(run((rank, WORLD), overlap), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module", params=[True, False], ids=["overlap", "blocking"])
def results(request, tmp_path_factory):
    if not dist.is_available():
        pytest.skip("torch.distributed not available")
    tmp = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(str(tmp / "store"), str(tmp), request.param), nprocs=WORLD,
             join=True)
    ranks = [torch.load(tmp / f"rank{r}.pt") for r in range(WORLD)]
    return run((0, 1), request.param), ranks, request.param


PER_ENV = {"obs": 1, "reward": 1, "nominal": 1, "effective": 1, "levels": 0, "returns": 0}


def test_per_env_state_is_bit_identical_to_one_process(results):
    single, ranks, overlap = results
    for key, dim in PER_ENV.items():
        joined = torch.cat([r[key] for r in ranks], dim)
        assert torch.equal(joined, single[key]), key
    # the run exercised what it claims to: levels moved, episodes ended
    assert (single["levels"] > 0).any() and (single["levels"] < 2).any()
    assert single["obs"].shape == (STEPS, N, 4)


def test_adr_ranges_and_level_histogram_agree_on_every_rank_and_with_one_process(results):
    single, ranks, overlap = results
    assert not torch.equal(single["adr_range"], torch.tensor([[[0.4, 0.6]]]))  # ADR decided
    for r in ranks:  # after the last scheduled sync and after env.sync_now()
        for key in ("adr_range", "adr_range_scheduled", "level_counts",
                    "level_counts_scheduled"):
            assert torch.equal(r[key], single[key]), key
    assert int(single["level_counts"].sum()) == N


def test_synced_normalization_equals_one_process_statistics(results):
    single, ranks, overlap = results
    for p in ("obs", "rew"):
        for k in ("count", "mean", "m2"):
            for key in (f"{p}_{k}", f"{p}_synced_{k}"):
                assert torch.equal(ranks[0][key], ranks[1][key]), key  # bit for bit
                torch.testing.assert_close(ranks[0][key], single[key], rtol=1e-12, atol=0)
    assert int(single["obs_count"][0]) == STEPS * N
    # the schedule's last sync (after step 100) applied every rank's data up to step 90
    # when overlapped, up to step 100 when blocking
    applied = STEPS - EVERY if overlap else STEPS
    assert int(single["obs_synced_count"][0]) == applied * N


# ---------------------------------------------------------------- mismatched targets
def _mismatch_worker(rank: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    try:
        obs = gp.ObsNorm(4, num_envs=8)
        obs(torch.randn(8, 4, generator=torch.Generator().manual_seed(rank)))
        targets = [obs, gp.RewardNorm(num_envs=8)] if rank == 0 else [obs]
        before = {k: getattr(obs, k).clone() for k in ("sent_count", "sent_mean", "count")}
        out = {}
        for name, call in (("schedule", lambda: gp.SyncSchedule(1, targets).step()),
                           ("exchange", lambda: gp.distributed.exchange(targets))):
            try:
                call()
                out[name] = None
            except ValueError as e:
                out[name] = str(e)
        out["unchanged"] = all(torch.equal(v, getattr(obs, k)) for k, v in before.items())
        obs.sync()  # the process group still works: a matching sync goes through
        out["count"] = obs.count.clone()
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_ranks_with_different_targets_all_get_the_same_value_error(tmp_path):
    if not dist.is_available():
        pytest.skip("torch.distributed not available")
    mp.spawn(_mismatch_worker, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD,
             join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD))
    for key in ("schedule", "exchange"):
        assert r0[key] is not None and r0[key] == r1[key], key  # the same error everywhere
        assert "rank 0: 2 target(s)" in r0[key] and "rank 1: 1 target(s)" in r0[key]
        assert "same targets" in r0[key]
    assert r0["unchanged"] and r1["unchanged"]  # nothing packed before the check
    assert r0["count"].item() == r1["count"].item() == 16
