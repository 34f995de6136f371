"""Global env ids in one process: env i draws the same values whatever the split into
(env_offset, num_envs) pieces; gp.shard_range / make(shard=); checkpoints record the
offset; env.sync_every's schedule; Curriculum(sync=True) in a world of one."""

from __future__ import annotations

import pytest
import torch
from randomization_helpers import WindyCartPole

import gpuparam as gp

N = 64
SPLITS = [((0, 64),), ((0, 16), (16, 21), (37, 27))]


def global_mask(seed: int) -> torch.Tensor:
    return torch.rand(N, generator=torch.Generator().manual_seed(seed)) < 0.5


def run_piece(offset: int, n: int, steps: int = 40) -> dict[str, torch.Tensor]:
    """Every kind of term and trigger, per-env ranges, term masks and explicit masked
    resets, on global envs ``offset .. offset + n - 1``."""
    sl = slice(offset, offset + n)
    env = WindyCartPole(n, device="cpu", seed=11, env_offset=offset)
    ranged = gp.Uniform("length", 0.3, 0.6, on="reset")
    terms = [
        ranged,
        gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step"),
        gp.LogUniform("masspole", 0.5, 2.0, op="scale", on=gp.Every(3)),
        gp.Uniform("gravity", 9.0, 10.6, on=gp.Interval(0.04, 0.1)),
        gp.Choice("masscart", [0.8, 1.0, 1.3], on="reset"),
        gp.Gaussian("wind", [0.0, 1.0, -1.0], [0.5, 0.2, 0.1], on=gp.OnReset(min_steps=5)),
        gp.Uniform("tau", 0.015, 0.025, on="step"),
    ]
    env.randomize(*terms)
    env.randomization.set_mask(terms[6], global_mask(1)[sl])
    env.randomization.set_mask(terms[4], global_mask(2)[sl])
    cur = gp.Curriculum(3, ranges={ranged: [(0.3, 0.6), (0.5, 0.9), (0.8, 1.2)]})
    env.add_curriculum(cur)
    cur.set_level((torch.arange(offset, offset + n) % 3).to(torch.int32))
    env.reset()
    g = torch.Generator().manual_seed(3)
    acts = torch.randint(0, 2, (steps, N), generator=g)
    for t in range(steps):
        env.step(acts[t, sl].clone())
        if t % 9 == 4:
            env.reset(global_mask(100 + t)[sl])
    rz = env.randomization
    return {
        "effective": env.params.effective_table.clone(),
        "nominal": env.params.nominal_table.clone(),
        "state": env.state.clone(),
        "counters": torch.stack([rz.counters(t).clone() for t in terms]),
        "episode_count": env.context.episode_count.clone(),
    }


def test_env_i_draws_the_same_values_whatever_the_split():
    runs = []
    for split in SPLITS:
        parts = [run_piece(off, n) for off, n in split]
        dims = {"effective": 1, "nominal": 1, "state": 0, "counters": 1, "episode_count": 0}
        runs.append({k: torch.cat([p[k] for p in parts], d) for k, d in dims.items()})
    for k in runs[0]:
        assert torch.equal(runs[0][k], runs[1][k]), k
    # every term drew, resets happened
    assert (runs[0]["counters"].sum(1) > 0).all()
    assert (runs[0]["episode_count"] > 1).any()


def test_an_offset_env_differs_from_env_zero():
    a = gp.make("CartPole-v1", 8, device="cpu", seed=1)
    b = gp.make("CartPole-v1", 8, device="cpu", seed=1, env_offset=8)
    for e in (a, b):
        e.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
        e.reset()
    assert not torch.equal(a.params["length"], b.params["length"])
    assert not torch.equal(a.state, b.state)


@pytest.mark.parametrize("n, world, want", [
    (64, 2, [(0, 32), (32, 32)]),
    (10, 4, [(0, 3), (3, 3), (6, 2), (8, 2)]),
    (7, 1, [(0, 7)]),
    (3, 3, [(0, 1), (1, 1), (2, 1)]),
])
def test_shard_range_splits_contiguously_first_ranks_one_more(n, world, want):
    got = [gp.shard_range(n, r, world) for r in range(world)]
    assert got == want
    assert sum(c for _, c in got) == n


@pytest.mark.parametrize("args, match", [
    ((4, 2, 2), "rank must be in"),
    ((4, -1, 2), "rank must be in"),
    ((4, 0, 0), "world_size must be >= 1"),
    ((3, 0, 4), "num_envs .global. must be >= world_size"),
    ((4.0, 0, 2), "num_envs must be an int"),
    ((4, True, 2), "rank must be an int"),
])
def test_shard_range_errors(args, match):
    with pytest.raises(ValueError, match=match):
        gp.shard_range(*args)


def test_make_shard_builds_the_slice():
    env = gp.make("CartPole-v1", 10, device="cpu", shard=(2, 4))
    assert (env.num_envs, env.env_offset) == (2, 6)
    with pytest.raises(ValueError, match="not both"):
        gp.make("CartPole-v1", 10, device="cpu", shard=(0, 2), env_offset=3)
    with pytest.raises(ValueError, match="expected a .rank, world_size. tuple"):
        gp.make("CartPole-v1", 10, device="cpu", shard=2)
    with pytest.raises(ValueError, match="rank must be in"):
        gp.make("CartPole-v1", 10, device="cpu", shard=(5, 4))


def test_checkpoint_records_the_offset_and_refuses_other_envs():
    env = gp.make("CartPole-v1", 16, device="cpu", seed=2, shard=(1, 2))
    env.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
    for _ in range(5):
        env.step(torch.ones(8, dtype=torch.int64))
    state = env.state_dict()
    assert state["env_offset"] == 8 and state["num_envs"] == 8
    other = gp.make("CartPole-v1", 16, device="cpu", seed=2, shard=(0, 2))
    other.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
    before = other.state_dict()
    with pytest.raises(ValueError, match=r"global envs 8\.\.15 .*this env holds 0\.\.7"):
        other.load_state_dict(state)
    after = other.state_dict()  # refused: nothing changed
    assert torch.equal(after["params"]["effective"], before["params"]["effective"])
    for k, v in before["tensors"].items():
        assert torch.equal(after["tensors"][k], v), k
    with pytest.raises(ValueError, match="num_envs: expected 32"):
        gp.make("CartPole-v1", 64, device="cpu", shard=(0, 2)).load_state_dict(state)
    same = gp.make("CartPole-v1", 16, device="cpu", seed=2, shard=(1, 2))
    same.randomize(gp.Uniform("length", 0.3, 1.0, on="reset"))
    same.load_state_dict(state)
    a = torch.zeros(8, dtype=torch.int64)
    assert torch.equal(same.step(a)["observation"], env.step(a)["observation"])
    legacy = {k: v for k, v in gp.make("CartPole-v1", 4, device="cpu").state_dict().items()
              if k != "env_offset"}  # no defaults for older checkpoints (issue 46): refused
    with pytest.raises(ValueError, match=r"got missing \['env_offset'\]"):
        gp.make("CartPole-v1", 4, device="cpu").load_state_dict(legacy)
    with pytest.raises(ValueError, match=r"global envs 0\.\.3 .*this env holds 4\.\.7"):
        gp.make("CartPole-v1", 4, device="cpu", env_offset=4).load_state_dict(
            gp.make("CartPole-v1", 4, device="cpu").state_dict())


class Recorder:
    def __init__(self):
        self.calls = []

    def sync(self, group=None):
        self.calls.append(group)


def test_sync_every_syncs_after_every_kth_step_and_can_be_removed():
    env = gp.make("CartPole-v1", 4, device="cpu")
    rec, rec3 = Recorder(), Recorder()
    remove = env.sync_every(2, rec)
    env.sync_every(3, rec3, group="g")
    a = torch.zeros(4, dtype=torch.int64)
    for _ in range(7):
        env.step(a)
    assert len(rec.calls) == 3 and rec3.calls == ["g", "g"]
    assert env.pipeline.captured  # syncs run outside the replayed step: no recapture
    assert "sync" not in " ".join(env.pipeline.names)
    remove()
    env.step(a)
    assert len(rec.calls) == 3 and len(rec3.calls) == 2
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        env.sync_every(0, rec)
    with pytest.raises(ValueError, match="at least one target"):
        env.sync_every(1)
    with pytest.raises(ValueError, match="sync.group. method, got int"):
        env.sync_every(1, 3)


def _adr_env(sync: bool):
    env = gp.make("CartPole-v1", 64, device="cpu", seed=1, max_episode_steps=30)
    term = gp.Uniform("length", 0.4, 0.6, on="reset")
    env.randomize(term)
    adr = gp.ADR(term, 0.05, (0.2, 1.0), threshold_high=10.0, samples=4, edge=0.25)
    cur = gp.Curriculum(3, params={"force_mag": (8.0, 12.0)}, promote=20.0, demote=10.0,
                        adr=[adr], sync=sync)
    env.add_curriculum(cur)
    return env, cur, env.randomization.ranges(term)  # live [1, 1, 2]


def test_synced_adr_decides_only_at_syncs_in_a_world_of_one():
    env, cur, b = _adr_env(sync=True)
    env.reset()
    first = b.clone()
    for _ in range(40):
        env.step((env.state[:, 2] > 0).long())
        assert torch.equal(b, first)  # collected, not decided
    assert int(cur.state_dict()["adr_local_counts"].sum()) > 0
    cur.sync()
    assert not torch.equal(b, first)
    assert int(cur.state_dict()["adr_local_counts"].sum()) == 0
    assert torch.equal(cur.global_level_counts,
                       torch.bincount(cur.levels.long(), minlength=3))


def test_synced_curriculum_checkpoint_round_trip_keeps_pending_statistics():
    env, cur, b = _adr_env(sync=True)
    env.sync_every(7, cur)
    for _ in range(30):
        env.step((env.state[:, 2] > 0).long())
    state = env.state_dict()
    env2, cur2, b2 = _adr_env(sync=True)
    env2.sync_every(7, cur2)
    env2.load_state_dict(state)
    for k in ("adr_local_sums", "adr_local_counts", "level_counts", "adr_sums"):
        assert torch.equal(cur2.state_dict()[k], state["curricula"][0][k]), k
    cur.sync()
    cur2.sync()
    assert torch.equal(b, b2)


def test_unsynced_adr_refuses_sync_and_bad_flag():
    env, cur, _ = _adr_env(sync=False)
    with pytest.raises(ValueError, match="sync=True"):
        cur.sync()
    with pytest.raises(ValueError, match="sync must be a bool"):
        gp.Curriculum(2, sync=1)
    plain = gp.Curriculum(2, params={"force_mag": (8.0, 12.0)})
    env.add_curriculum(plain)
    plain.sync()  # no ADR: only the level histogram
    assert torch.equal(plain.global_level_counts, torch.tensor([64, 0]))


# ---------------------------------------------------------------- the overlapped schedule
def _moments(x: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
    x = x.double().reshape(-1, x.shape[-1])
    return x.shape[0], x.mean(0), ((x - x.mean(0)) ** 2).sum(0)


def _assert_stats(norm, data: torch.Tensor, prefix: str = "") -> None:
    n, mean, m2 = _moments(data)
    assert int(getattr(norm, prefix + "count")[0]) == n
    torch.testing.assert_close(getattr(norm, prefix + "mean")[0], mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(getattr(norm, prefix + "m2")[0], m2, rtol=1e-10, atol=1e-9)


def _batches(k: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    return [torch.randn(8, 3, generator=g) * (1 + i) + 100 for i in range(k)]


@pytest.mark.parametrize("overlap", [True, False])
def test_schedule_applies_each_exchange_one_interval_later_when_overlapped(overlap):
    """World of one, every=1: after point j the baseline holds the data up to point j - 1
    (overlapped) or j (blocking); the live statistics always hold all the data."""
    norm = gp.ObsNorm(3, num_envs=8)
    sched = gp.SyncSchedule(1, [norm], overlap=overlap)
    xs = _batches(4)
    for j, x in enumerate(xs):
        norm(x)
        sched.step()
        _assert_stats(norm, torch.stack(xs[: j + 1]))
        applied = j if overlap else j + 1
        if applied:
            _assert_stats(norm, torch.stack(xs[:applied]), "synced_")
        else:
            assert int(norm.synced_count[0]) == 0
    sched.sync()
    for k in ("count", "mean", "m2"):
        assert torch.equal(getattr(norm, k), getattr(norm, "synced_" + k)), k
    _assert_stats(norm, torch.stack(xs))
    assert sched.syncs == 4 and sched.host_seconds > 0


def test_reset_between_pack_and_apply_drops_the_old_data_once_applied():
    norm = gp.ObsNorm(3, num_envs=8)
    sched = gp.SyncSchedule(1, [norm])  # overlapped
    x0, x1, x2, x3 = _batches(4)
    norm(x0)
    sched.step()  # x0 in flight
    norm(x1)
    norm.reset_stats()
    norm(x2)
    sched.step()  # x0 applied to the baseline; live keeps only x2; x2 + reset in flight
    _assert_stats(norm, x0, "synced_")
    _assert_stats(norm, x2)
    norm(x3)
    sched.step()  # the reset drops x0 from the baseline on every rank
    _assert_stats(norm, x2, "synced_")
    _assert_stats(norm, torch.stack([x2, x3]))
    sched.sync()
    _assert_stats(norm, torch.stack([x2, x3]), "synced_")
    assert not norm.reset_pending.any()


def test_loading_while_an_exchange_is_in_flight_counts_nothing_twice():
    norm = gp.ObsNorm(3, num_envs=8)
    sched = gp.SyncSchedule(1, [norm])
    x0, x1 = _batches(2)
    norm(x0)
    sched.step()  # x0 in flight, not in the baseline
    state = {k: v.clone() for k, v in norm.state_dict().items()}
    assert int(state["synced_count"][0]) == 0 and int(state["count"][0]) == 8
    norm.load_state_dict(state)  # e.g. a restart: the exchange in flight is dropped ...
    norm(x1)
    sched.step()  # ... and x0 is sent again with x1
    sched.sync()
    _assert_stats(norm, torch.stack([x0, x1]), "synced_")
    _assert_stats(norm, torch.stack([x0, x1]))


def test_a_sync_by_hand_settles_the_scheduled_exchange_first():
    norm, rew = gp.ObsNorm(3, num_envs=8), gp.RewardNorm(0.9, num_envs=8)
    sched = gp.SyncSchedule(1, [norm, rew])
    xs = _batches(2)
    never = torch.zeros(8, dtype=torch.bool)
    for x in xs:
        norm(x)
        rew(x[:, 0], never)
        sched.step()
    norm.sync()  # applies the exchange in flight (both modules), then syncs norm
    _assert_stats(norm, torch.stack(xs), "synced_")
    assert int(rew.synced_count[0]) == 16  # rew's part of the exchange was applied too
    with pytest.raises(ValueError, match="overlap must be a bool"):
        gp.SyncSchedule(1, [norm], overlap=1)


def test_overlapped_adr_decides_one_interval_later_and_checkpoints_what_is_in_flight():
    env, cur, b = _adr_env(sync=True)
    env2, cur2, b2 = _adr_env(sync=True)
    env.sync_every(7, cur)  # overlapped
    env2.sync_every(7, cur2, overlap=False)
    env.reset()
    env2.reset()
    first = b.clone()
    changed = changed2 = None
    checked = 0
    for t in range(1, 60):
        for e in (env, env2):
            e.step((e.state[:, 2] > 0).long())
        if changed2 is None and not torch.equal(b2, first):
            changed2, decided = t, b2.clone()
        if t % 7 == 0 and changed2 is None:  # same trajectories until the first decision
            # applied + (collected since, in flight included) == all applied at once
            s, s2 = cur.state_dict(), cur2.state_dict()
            for k in ("sums", "counts"):
                assert torch.equal(s[f"adr_{k}"] + s[f"adr_local_{k}"], s2[f"adr_{k}"]), k
            assert int(s2["adr_local_counts"].sum()) == 0
            checked += int(s["adr_local_counts"].sum() > 0)
        if changed is None and not torch.equal(b, first):
            changed = t
            assert torch.equal(b, decided)  # the same decision ...
    assert checked > 0 and changed2 is not None and changed2 % 7 == 0
    assert changed == changed2 + 7  # ... one interval later
