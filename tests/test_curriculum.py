"""Curricula: per-env levels moved by a metric at episode end, per-level values and ranges,
set_level, ADR, bad input."""

from __future__ import annotations

import pytest
import torch
from randomization_helpers import N, actions, cartpole, eff, pendulum

import gpuparam as gp


def scripted_metric() -> torch.Tensor:
    """+1 (promote) for envs 0-19, -1 (demote) for 20-39, 0 (stay) for the others."""
    m = torch.zeros(N)
    m[:20], m[20:40] = 1.0, -1.0
    return m


def test_levels_move_only_at_episode_end_by_thresholds():
    env = pendulum(max_episode_steps=5)  # every env ends an episode every 5 steps
    cur = gp.Curriculum(3, params={"g": (5.0, 15.0)}, metric=scripted_metric(), promote=0.5,
                        demote=-0.5, initial_level=1)
    env.add_curriculum(cur)
    assert torch.equal(cur.levels, torch.ones(N, dtype=torch.int32))
    assert (env.params["g"] == 10.0).all() and (env.params.nominal["g"] == 10.0).all()
    expect = torch.ones(N, dtype=torch.int32)
    for t, a in enumerate(actions(env, 15), start=1):
        td = env.step(a)
        if t % 5 == 0:
            assert td["done"].all()
            expect[:20] = (expect[:20] + 1).clamp(max=2)
            expect[20:40] = (expect[20:40] - 1).clamp(min=0)
        assert torch.equal(cur.levels, expect)
    g = {0: 5.0, 1: 10.0, 2: 15.0}
    want = torch.tensor([g[int(lv)] for lv in expect])
    assert torch.equal(env.params["g"], want) and torch.equal(env.params.nominal["g"], want)


def test_only_done_envs_are_updated():
    env = cartpole(128)
    metric = torch.ones(128)
    cur = gp.Curriculum(50, params={"force_mag": [10.0 + i for i in range(50)]}, metric=metric,
                        promote=0.5)
    env.add_curriculum(cur)
    done_count = torch.zeros(128, dtype=torch.int32)
    for a in actions(env, 40):
        before = eff(env)
        td = env.step(a)
        done_count += td["done"].int()
        changed = (eff(env) != before).any(0)
        assert torch.equal(changed, td["done"])
    assert torch.equal(cur.levels, done_count)
    assert torch.equal(env.params["force_mag"], 10.0 + done_count.float())


def test_level_ranges_apply_to_the_next_episode():
    env = pendulum(max_episode_steps=5)
    term = gp.Uniform("m", 0.9, 1.1, on="reset")
    metric = torch.zeros(N)
    metric[: N // 2] = 1.0
    env.randomize(term)
    cur = gp.Curriculum(2, ranges={term: [(0.9, 1.1), (2.0, 3.0)]}, metric=metric, promote=0.5)
    env.add_curriculum(cur)
    env.reset()
    assert ((env.params["m"] >= 0.9) & (env.params["m"] <= 1.1)).all()
    for a in actions(env, 5):
        env.step(a)
    m = env.params["m"]
    assert ((m[: N // 2] >= 2.0) & (m[: N // 2] <= 3.0)).all()
    assert ((m[N // 2 :] >= 0.9) & (m[N // 2 :] <= 1.1)).all()


def test_interpolated_ranges_and_vector_values():
    env = pendulum(max_episode_steps=5)
    term = gp.Gaussian("g", 10.0, 0.0, on="reset")
    env.randomize(term)
    cur = gp.Curriculum(5, ranges={term: ((10.0, 0.0), (14.0, 0.0))}, metric="episode_return")
    env.add_curriculum(cur)
    cur.set_level(torch.arange(N, dtype=torch.int32) % 5)
    env.reset()
    assert torch.allclose(env.params["g"], 10.0 + (torch.arange(N) % 5).float())


def test_set_level_with_mask_and_env_ids():
    env = cartpole()
    cur = gp.Curriculum(4, params={"length": [0.5, 0.6, 0.7, 0.8]})
    env.add_curriculum(cur)
    mask = torch.arange(N) < 8
    before = eff(env)
    cur.set_level(3, mask=mask)
    assert torch.equal(cur.levels, torch.where(mask, 3, 0).int())
    assert (env.params["length"][mask] == 0.8).all()
    assert torch.equal(eff(env)[:, ~mask], before[:, ~mask])
    cur.set_level(2, env_ids=[9, 10])
    assert cur.levels[9] == 2 and cur.levels[10] == 2 and cur.levels[11] == 0
    with pytest.raises(ValueError, match=r"levels must be in \[0, 4\)"):
        cur.set_level(4)


def test_metric_callable_and_buffer_key():
    env = pendulum(max_episode_steps=3)
    calls = []

    def metric(e):
        calls.append(1)
        return torch.ones(e.num_envs)

    by_fn = gp.Curriculum(3, params={"max_torque": (1.0, 3.0)}, metric=metric, promote=0.5)
    by_len = gp.Curriculum(3, params={"max_speed": (8.0, 10.0)}, metric="episode_length",
                           promote=2.5)
    env.add_curriculum(by_fn)
    env.add_curriculum(by_len)
    for a in actions(env, 3):
        env.step(a)
    assert len(calls) == 3
    assert (by_fn.levels == 1).all() and (by_len.levels == 1).all()
    assert (env.params["max_torque"] == 2.0).all() and (env.params["max_speed"] == 9.0).all()


@pytest.mark.parametrize("bad", [
    lambda n: torch.ones(n, device="meta"), lambda n: torch.ones(n).to_sparse(),
    lambda n: torch.ones(n, dtype=torch.complex64)])
def test_a_metric_without_real_dense_data_is_a_clear_error(bad):
    # issue 33 (11): a metric returning a meta tensor raised NotImplementedError from copy_
    env, twin = pendulum(max_episode_steps=3), pendulum(max_episode_steps=3)
    env.add_curriculum(gp.Curriculum(3, params={"max_torque": (1.0, 3.0)},
                                     metric=lambda e: bad(e.num_envs), promote=0.5))
    twin.add_curriculum(gp.Curriculum(3, params={"max_torque": (1.0, 3.0)},
                                      metric=torch.zeros(N), promote=0.5))
    for a in actions(env, 4):
        with pytest.raises(ValueError, match=r"metric must give a dense real tensor on cpu, "
                                             r"got a torch\.\w+ torch\.\w+ tensor on \w+"):
            env.step(a)
        td = twin.step(a)  # the step completed all the same
        assert torch.equal(env.outputs["observation"], td["observation"])
        assert torch.equal(env.episode_length, twin.episode_length)


def test_adr_widens_while_performance_at_the_bounds_stays_high():
    env = pendulum(max_episode_steps=2)
    term = gp.Uniform("l", 1.0, 1.0, on="reset")
    metric = torch.ones(N)
    env.randomize(term)
    adr = gp.ADR(term, delta=0.1, limits=(0.7, 1.2), threshold_high=0.5, threshold_low=0.0,
                 samples=8)
    env.add_curriculum(gp.Curriculum(1, metric=metric, adr=[adr]))
    env.reset()
    rng = env.randomization.ranges(term)[0, 0]
    env.step(actions(env, 1)[0])
    assert torch.allclose(rng, torch.tensor([1.0, 1.0]))
    env.step(actions(env, 1)[0])  # every env ended an episode at l == 1.0: both bounds move
    assert torch.allclose(rng, torch.tensor([0.9, 1.1]))
    for a in actions(env, 200):
        env.step(a)
    assert torch.allclose(rng, torch.tensor([0.7, 1.2]))  # stopped at the limits
    x = env.params["l"]
    assert (x >= 0.7).all() and (x <= 1.2).all()
    metric.fill_(-1.0)  # poor performance: the range narrows again, never inverts
    for a in actions(env, 200):
        env.step(a)
    lo, hi = rng.tolist()
    assert lo <= hi and hi - lo < 0.5


def test_removing_a_curriculum_restores_global_ranges():
    env = pendulum(max_episode_steps=5)
    term = gp.Uniform("m", 0.9, 1.1, on="reset")
    env.randomize(term)
    remove = env.add_curriculum(gp.Curriculum(2, ranges={term: [(0.9, 1.1), (2.0, 3.0)]},
                                              metric=torch.ones(N), promote=0.5))
    for a in actions(env, 5):
        env.step(a)
    assert (env.params["m"] >= 2.0).all()
    with pytest.raises(ValueError, match="used by Curriculum"):
        env.randomization.remove(term)
    remove()
    env.reset()
    assert (env.params["m"] <= 1.1).all()
    env.randomization.remove(term)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: gp.Curriculum(0), ["num_levels"]),
        (lambda: gp.Curriculum(3, promote=1.0, demote=1.0), ["demote < promote"]),
        (lambda: gp.Curriculum(3, initial_level=3), ["initial_level"]),
        (lambda: gp.Curriculum(3, metric=3.0), ["metric"]),
        (lambda: gp.ADR(gp.Gaussian("l", 1.0, 0.1), 0.1, (0.5, 1.5), 1.0), ["gp.Uniform"]),
        (lambda: gp.ADR(gp.Uniform("l", 1.0, 1.0), 0.1, (0.5, 1.5), 1.0, samples=0), ["samples"]),
    ],
)
def test_bad_curricula_raise_on_construction(make, words):
    with pytest.raises(ValueError) as e:
        make()
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize(
    "kw, exc, words",
    [
        (dict(params={"gg": (1.0, 2.0)}), KeyError, ["unknown parameter 'gg'"]),
        (dict(params={"g": (1.0, 200.0)}), ValueError, ["'g'", "level 1", "[0.0, 100.0]"]),
        (dict(params={"g": [1.0, 2.0, 3.0, 4.0]}), ValueError, ["'g'", "got shape (4,)"]),
        (dict(metric="reward_sum"), KeyError, ["unknown metric 'reward_sum'"]),
        (dict(metric=torch.ones(N + 1)), ValueError, ["metric tensor"]),
    ],
)
def test_bad_bindings_raise_and_change_nothing(kw, exc, words):
    env = pendulum()
    before = eff(env)
    cur = gp.Curriculum(3, **kw)
    with pytest.raises(exc) as e:
        env.add_curriculum(cur)
    for w in words:
        assert w in str(e.value)
    assert torch.equal(eff(env), before) and env.curricula == ()


def test_bad_ranges_and_adr_raise():
    env = pendulum()
    term = gp.Uniform("m", 0.9, 1.1, on="reset")
    with pytest.raises(KeyError, match="not added"):
        env.add_curriculum(gp.Curriculum(2, ranges={term: [(0.9, 1.1), (2.0, 3.0)]}))
    env.randomize(term)
    with pytest.raises(ValueError, match="low 3.0 > high 2.0"):
        env.add_curriculum(gp.Curriculum(2, ranges={term: [(0.9, 1.1), (3.0, 2.0)]}))
    with pytest.raises(ValueError, match="outside its valid range"):
        env.add_curriculum(gp.Curriculum(2, ranges={term: [(0.9, 1.1), (2.0, 2000.0)]}))
    with pytest.raises(ValueError, match="expected 2 ranges"):
        env.add_curriculum(gp.Curriculum(2, ranges={term: (0.9, 1.1)}))
    adr = gp.ADR(term, delta=0.1, limits=(1.0, 1.5), threshold_high=1.0)
    with pytest.raises(ValueError, match="must contain the range"):
        env.add_curriculum(gp.Curriculum(1, adr=[adr]))
    assert env.curricula == () and env.randomization.per_env_ranges(term) is None


# ---------------------------------------------------------------------------- listeners
def test_listeners_hear_of_the_envs_whose_level_moved_not_every_done_env():
    # a curriculum that never promotes writes nothing: an ObsNorm resetting on its parameter
    # keeps every sample (it used to restart at every episode end)
    def count(with_curriculum: bool) -> float:
        env = pendulum(max_episode_steps=5)
        if with_curriculum:
            env.add_curriculum(gp.Curriculum(3, params={"g": (9.0, 11.0)}, initial_level=1,
                                             metric=torch.zeros(N), promote=1e9))
        norm = gp.ObsNorm((3,), reset_on=("g",))
        t = gp.TransformedEnv(env, norm)
        t.reset()
        for a in actions(env, 12):
            t.step(a)
        return float(norm.count[0])

    assert count(True) == count(False) == 12 * N
    # and one whose level moves is heard of: its envs' groups start over
    env = pendulum(max_episode_steps=5)
    env.add_curriculum(gp.Curriculum(3, params={"g": (9.0, 11.0)}, metric=torch.ones(N),
                                     promote=0.5))
    heard = []
    env.params.on_change(lambda names, mask: heard.append((names, mask.clone())))
    for a in actions(env, 5):
        env.step(a)
    assert heard[-1][0] == ("g",) and heard[-1][1].all()  # all promoted at the 5th step


def test_a_term_belongs_to_one_curriculum_and_rejected_adds_change_nothing():
    env = pendulum()
    t1, t2 = gp.Uniform("m", 0.9, 1.1, on="reset"), gp.Uniform("l", 0.9, 1.1, on="reset")
    env.randomize(t1, t2)
    env.add_curriculum(gp.Curriculum(2, ranges={t2: [(0.9, 1.1), (1.2, 1.3)]}))
    second = gp.Curriculum(2, ranges={t1: [(0.9, 1.1), (2.0, 3.0)], t2: [(0.9, 1.1), (1.2, 1.3)]})
    with pytest.raises(ValueError, match="already used by Curriculum"):
        env.add_curriculum(second)
    assert env.randomization.per_env_ranges(t1) is None and len(env.curricula) == 1
    adr = gp.ADR(t2, delta=0.1, limits=(0.5, 1.5), threshold_high=1.0)
    with pytest.raises(ValueError, match="already used by Curriculum"):
        env.add_curriculum(gp.Curriculum(1, adr=[adr]))
    # t1 is still free: a valid curriculum on it is accepted
    env.add_curriculum(gp.Curriculum(2, ranges={t1: [(0.9, 1.1), (2.0, 3.0)]}))


def test_adr_needs_a_term_without_mask_and_without_per_level_ranges():
    env = pendulum()
    masked = gp.Uniform("m", 1.0, 1.0, op="scale", on="reset", mask=torch.arange(N) < 4)
    term = gp.Uniform("l", 1.0, 1.0, op="scale", on="reset")
    env.randomize(masked, term)
    with pytest.raises(ValueError, match="without mask"):
        env.add_curriculum(gp.Curriculum(1, adr=[gp.ADR(masked, 0.1, (0.5, 1.5), 1.0)]))
    with pytest.raises(ValueError, match="per-level ranges and ADR"):
        env.add_curriculum(gp.Curriculum(2, ranges={term: [(1.0, 1.0), (0.9, 1.1)]},
                                         adr=[gp.ADR(term, 0.1, (0.5, 1.5), 1.0)]))
    assert env.curricula == () and env.randomization.per_env_ranges(term) is None


def test_a_synced_curriculum_cannot_be_removed_before_its_schedule():
    env = cartpole(max_episode_steps=5)
    term = gp.Uniform("length", 0.5, 0.5, on="reset")
    env.randomize(term)
    cur = gp.Curriculum(1, metric=torch.ones(N), sync=True,
                        adr=[gp.ADR(term, 0.05, (0.2, 1.0), threshold_high=0.5, samples=2)])
    remove_cur = env.add_curriculum(cur)
    norm = gp.ObsNorm(4)
    t = gp.TransformedEnv(env, norm)
    remove_sched = env.sync_every(3, cur, norm)
    t.reset()
    acts = actions(env, 9)
    for a in acts[:3]:
        t.step(a)  # an exchange packed after step 3, in flight
    with pytest.raises(ValueError, match="remove that schedule first"):
        remove_cur()
    remove_sched()  # settles the exchange in flight
    remove_cur()
    for a in acts[3:]:
        t.step(a)
    assert float(norm.synced_count[0]) == 3 * N  # the exchange packed at step 3 was applied


def test_a_target_belongs_to_one_sync_schedule():
    env = cartpole()
    norm, cur = gp.ObsNorm(4, num_envs=N), gp.Curriculum(2, metric=torch.ones(N), sync=True)
    env.add_curriculum(cur)
    env.sync_every(3, norm, cur)
    with pytest.raises(ValueError, match="already synced by SyncSchedule"):
        env.sync_every(5, cur)
    assert len(env.sync_schedules) == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e30, -1e30])
def test_adr_skips_nonfinite_metrics_and_clamps_huge_ones(bad):
    # a float outside int64 has no defined fixed-point conversion (CPU: -2**63, which
    # wrapped the int64 sums; CUDA saturates or gives 0): the decision differed by device
    env = pendulum(max_episode_steps=1)  # every env ends an episode at every step
    term = gp.Uniform("l", 0.9, 1.1, on="reset")
    env.randomize(term)
    metric = torch.ones(N)
    metric[0] = bad
    adr = gp.ADR(term, delta=0.1, limits=(0.5, 1.5), threshold_high=0.5, threshold_low=0.0,
                 samples=N, edge=0.5)  # every episode counts at one bound at least
    env.add_curriculum(gp.Curriculum(1, metric=metric, adr=[adr]))
    rng = env.randomization.ranges(term)[0, 0]
    for a in actions(env, 4):
        env.step(a)
    lo, hi = rng.tolist()
    if bad < 0:  # a clamped -1e30 sinks the mean of its bound: that bound narrows
        assert lo > 0.9 or hi < 1.1
    else:  # NaN and inf are not counted, 1e30 is clamped: high performance, both widen
        assert lo < 0.9 and hi > 1.1


def test_level_ranges_take_any_number_float_takes():
    """NumPy scalars and 0-d tensors (e.g. from a config array) give the same ranges as
    Python floats; non-finite ones still raise."""
    np = pytest.importorskip("numpy")
    got = []
    for easy, hard in [((0.9, 1.1), (2.0, 3.0)),
                       ((np.float32(0.9), np.float64(1.1)), (np.int64(2), torch.tensor(3.0)))]:
        env = pendulum()
        term = gp.Uniform("m", 0.9, 1.1, on="reset")
        env.randomize(term)
        env.add_curriculum(gp.Curriculum(3, ranges={term: (easy, hard)}))
        got.append(env.randomization.per_env_ranges(term).clone())
    assert torch.equal(got[0], got[1])
    env = pendulum()
    term = gp.Uniform("m", 0.9, 1.1, on="reset")
    env.randomize(term)
    with pytest.raises(ValueError, match="finite"):
        env.add_curriculum(gp.Curriculum(2, ranges={term: [(0.9, 1.1), (2.0, np.inf)]}))


def test_checkpoints_without_every_entry_are_refused():
    """A curriculum state lacking an entry (or holding None for it) is refused, naming it,
    and loads nothing."""
    env = pendulum()
    term = gp.Uniform("m", 0.9, 1.1, on="reset")
    env.randomize(term)
    adr = gp.ADR(term, delta=0.05, limits=(0.5, 2.0), threshold_high=15.0, samples=4)
    cur = gp.Curriculum(3, adr=[adr])
    env.add_curriculum(cur)
    state = cur.state_dict()
    state["levels"] = torch.full((N,), 2, dtype=torch.int32)
    cur.set_level(1)
    for key in ("level_counts", "adr_local_sums", "adr_local_counts"):
        for missing in ({key: None}, {}):
            old = {k: v for k, v in state.items() if k != key} | missing
            with pytest.raises(ValueError, match=key):
                cur.load_state_dict(old)
            assert int(cur.levels.min()) == int(cur.levels.max()) == 1


@pytest.mark.parametrize("kind", ["callable", "float64 tensor", "float32 tensor"])
def test_a_metric_that_requires_grad_leaves_the_metric_buffer_out_of_the_graph(kind):
    # issue 33 (4): the buffer the kernels read took the metric's grad_fn
    env = pendulum(max_episode_steps=3)
    w = torch.ones((), requires_grad=True)
    if kind == "callable":
        metric = lambda e: torch.ones(e.num_envs) * w  # noqa: E731
    else:
        metric = (torch.ones(N) * w).to(torch.float64 if "64" in kind else torch.float32)
    cur = gp.Curriculum(3, params={"max_torque": (1.0, 3.0)}, metric=metric, promote=0.5)
    env.add_curriculum(cur)
    for a in actions(env, 3):
        env.step(a)
    assert (cur.levels == 1).all()  # the metric was read
    buf = cur._metric_buf
    assert buf.grad_fn is None and not buf.requires_grad
    assert not env.params.effective_table.requires_grad
