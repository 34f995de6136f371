"""Issue 14 (1, 6): a rejected checkpoint load raises a clear error and changes nothing."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from test_bad_input import assert_same_state

import gpuparam as gp

N = 8


def build(seed: int) -> tuple[gp.VecEnv, gp.Curriculum]:
    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=seed)
    env.randomize(
        gp.Uniform("length", 0.4, 0.9, on="reset"),
        gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step", env_ids=[1, 2, 5]),
    )
    cur = gp.Curriculum(3, params={"masspole": (0.1, 0.3)})
    env.add_curriculum(cur)
    return env, cur


def stepped(seed: int, steps: int = 12) -> gp.VecEnv:
    env, _ = build(seed)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        env.step(torch.randint(0, 2, (N,), generator=g))
    return env


def corrupt(state: dict, edit) -> dict:
    bad = copy.deepcopy(state)
    edit(bad)
    return bad


def _set(path, value):
    def edit(d):
        *head, last = path
        for k in head:
            d = d[k]
        d[last] = value(d[last]) if callable(value) else value
    return edit


BAD_ENV_STATES = {
    "bogus parameter name": (
        _set(("params", "names"), lambda n: (*n[:-1], "bogus")), r"params\.names"),
    "truncated randomization clock": (
        _set(("randomization", "terms", 0, "clock"), lambda t: t[:-1]), r"clock"),
    "NaN parameter table": (
        _set(("params", "nominal"), lambda t: t.index_fill(1, torch.tensor([3]), float("nan"))),
        r"params\.nominal: expected finite values"),
    "parameter outside its range": (
        _set(("params", "effective"), lambda t: t * 0 - 5.0), r"params\.effective of 'gravity'"),
    "float16 state": (
        _set(("tensors", "state"), lambda t: t.half()), r"tensors\.state: expected a torch\.f"),
    "float step counts": (
        _set(("tensors", "step_count"), lambda t: t.float() + 0.7),
        r"tensors\.step_count: expected a torch\.int32"),
    "negative step counts": (
        _set(("tensors", "step_count"), lambda t: t - 100), r"step_count: expected values >= 0"),
    "global step of 3.7": (
        _set(("randomization", "global_step"), 3.7), r"global_step: expected an int"),
    "curriculum level beyond the last": (
        _set(("curricula", 0, "levels"), lambda t: t + 3), r"levels in \[0, 3\)"),
    "seed beyond int32": (_set(("seed",), 2**40), r"seed: expected an int32"),
    "seed as a string": (_set(("seed",), "5"), r"seed: expected an int"),
    "missing tensor": (lambda d: d["tensors"].pop("done"), r"tensors: expected keys"),
    "unexpected key": (_set(("extra",), 1), r"unexpected \['extra'\]"),
    "NaN randomization range": (
        _set(("randomization", "terms", 1, "vals"), lambda t: t * float("nan")), r"vals"),
    "negative counter": (
        _set(("randomization", "terms", 1, "counter"), lambda t: t - 1), r"counter"),
    "other env": (_set(("env",), "Pendulum-v1"), r"env: expected 'CartPole-v1'"),
    "max_episode_steps of 0": (_set(("max_episode_steps",), 0),
                               r"load_state_dict: max_episode_steps: expected an int in \[1, "),
    "max_episode_steps as a float": (_set(("max_episode_steps",), 7.0), r"max_episode_steps"),
    "not a dict": (None, r"expected a dict"),
    # issue 33 (3): tensors a copy cannot read were found only while writing (the seed and
    # four fields already written)
    "state on the meta device": (_set(("tensors", "state"), lambda t: t.to("meta")),
                                 r"tensors\.state: expected a tensor holding data"),
    "sparse observation": (_set(("tensors", "observation"), lambda t: t.to_sparse()),
                           r"tensors\.observation: expected a dense \(strided\) tensor"),
    "sparse parameter table": (_set(("params", "effective"), lambda t: t.to_sparse()),
                               r"params\.effective: expected a dense"),
    "randomization counter on the meta device": (
        _set(("randomization", "terms", 1, "counter"), lambda t: t.to("meta")),
        r"counter: expected a tensor holding data"),
    "sparse curriculum levels": (_set(("curricula", 0, "levels"), lambda t: t.to_sparse()),
                                 r"levels: expected a dense"),
}


@pytest.mark.parametrize("case", list(BAD_ENV_STATES))
def test_rejected_env_load_changes_nothing(case):
    edit, match = BAD_ENV_STATES[case]
    source = stepped(seed=5)
    state = source.state_dict()
    bad = [1, 2] if edit is None else corrupt(state, edit)
    target, twin = stepped(seed=0), stepped(seed=0)
    before = target.state_dict()
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(bad)
    assert_same_state(before, target.state_dict())
    assert target.seed == 0
    # and it keeps stepping exactly as its untouched twin
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        a = torch.randint(0, 2, (N,), generator=g)
        ta, tb = target.step(a), twin.step(a)
        assert_same_state(ta.to_dict(), tb.to_dict())
    target.reset()
    twin.reset()
    assert_same_state(twin.state_dict(), target.state_dict())


def test_a_valid_load_still_resumes_bit_for_bit():
    source = stepped(seed=5)
    state = source.state_dict()
    target = stepped(seed=0)
    target.load_state_dict(state)
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        a = torch.randint(0, 2, (N,), generator=g)
        assert_same_state(source.step(a).to_dict(), target.step(a).to_dict())
    assert_same_state(source.state_dict(), target.state_dict())


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("nominal", lambda t: t.index_fill(1, torch.tensor([0]), float("inf")), "finite"),
        ("effective", lambda t: t.double(), "torch.float32"),
        ("nominal", lambda t: t + 1e6, "values in"),
    ],
)
def test_param_table_load_checks_values(key, value, match):
    env, _ = build(0)
    state = env.params.state_dict()
    state[key] = value(state[key])
    before = env.params.state_dict()
    with pytest.raises(ValueError, match=match):
        env.params.load_state_dict(state)
    assert_same_state(before, env.params.state_dict())


def test_curriculum_load_checks_levels():
    env, cur = build(0)
    state = cur.state_dict()
    state["levels"] = state["levels"] - 1
    before = cur.state_dict()
    with pytest.raises(ValueError, match=r"levels in \[0, 3\)"):
        cur.load_state_dict(state)
    assert_same_state(before, cur.state_dict())


def test_randomization_load_checks_every_shape_first():
    env, _ = build(0)
    state = env.randomization.state_dict()
    state["terms"][0]["clock"] = state["terms"][0]["clock"][:-1]
    before = env.state_dict()
    with pytest.raises(ValueError, match=r"terms\[0\]\.clock: expected"):
        env.randomization.load_state_dict(state)
    assert_same_state(before, env.state_dict())


# ---------------------------------------------------------------- ObsNorm / RewardNorm
def trained(cls, n: int = 16, seed: int = 0):
    m = gp.ObsNorm((3,), group_ids=torch.arange(n) % 2) if cls is gp.ObsNorm else gp.RewardNorm(
        group_ids=torch.arange(n) % 2)
    g = torch.Generator().manual_seed(seed)
    for _ in range(4):
        if cls is gp.ObsNorm:
            m(torch.randn(n, 3, generator=g))
        else:
            m(torch.randn(n, generator=g), torch.rand(n, generator=g) < 0.2)
    return m


BAD_STATS = {
    "m2 of another shape": ("m2", lambda t: t[:1], "'m2' expected"),
    "negative m2": ("m2", lambda t: t - 100.0, "'m2' expected values >= 0"),
    "NaN mean": ("mean", lambda t: t * float("nan"), "'mean' expected finite"),
    "fractional count": ("count", lambda t: t + 0.5, "'count' expected whole numbers"),
    "float32 count": ("count", lambda t: t.float(), "'count' expected a torch.float64"),
    "missing m2": ("m2", None, "missing \\['m2'\\]"),
    "group ids out of range": ("group_ids", lambda t: t + 5, "group_ids expected values"),
    # issue 33 (3): torch's loader met these while copying, after other buffers were written
    "group ids on the meta device": ("group_ids", lambda t: t.to("meta"),
                                     "'group_ids' expected a dense tensor holding data"),
    "sparse m2": ("m2", lambda t: t.to_sparse(), "'m2' expected a dense tensor holding data"),
}


@pytest.mark.parametrize("cls", [gp.ObsNorm, gp.RewardNorm])
@pytest.mark.parametrize("case", list(BAD_STATS))
def test_rejected_stats_load_changes_nothing(cls, case):
    key, edit, match = BAD_STATS[case]
    state = trained(cls, seed=1).state_dict()
    if edit is None:
        del state[key]
    else:
        state[key] = edit(state[key])
    target = trained(cls, seed=0)
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(state)
    assert_same_state(dict(before), dict(target.state_dict()))


@pytest.mark.parametrize("cls", [gp.ObsNorm, gp.RewardNorm])
def test_stats_load_rejects_unexpected_keys_before_writing(cls):
    state = trained(cls, seed=1).state_dict()
    state["bogus"] = torch.zeros(1)
    target = trained(cls, seed=0)
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(ValueError, match=r"unexpected \['bogus'\]"):
        target.load_state_dict(state)
    assert_same_state(dict(before), dict(target.state_dict()))
    target.load_state_dict(state, strict=False)  # non-strict: the rest loads
    del state["bogus"]
    assert_same_state(dict(state), dict(target.state_dict()))


def test_rewardnorm_returns_of_another_length_are_rejected():
    state = trained(gp.RewardNorm).state_dict()
    state["returns"] = state["returns"][:4]
    target = trained(gp.RewardNorm, seed=3)
    before = copy.deepcopy(target.state_dict())
    with pytest.raises(ValueError, match=r"'returns' expected a torch.float64 tensor \(16,\)"):
        target.load_state_dict(state)
    assert_same_state(dict(before), dict(target.state_dict()))


def test_values_clamped_to_a_bound_load_back():
    """A bound like 1e-4 is 9.9999997e-05 in the float32 tables: the range check compares
    with the bounds as the tables hold them (found by tests/test_stateful.py)."""
    env, _ = build(0)
    env.params.set("masspole", -1.0, validate=False)  # clamped to the low bound
    env.params.set("gravity", 1e9, validate=False)  # and to the high one
    state = env.state_dict()
    env.load_state_dict(state)
    env.params.load_state_dict(state["params"])
    assert_same_state(state, env.state_dict())


def test_a_limit_set_at_run_time_is_saved_and_restored():
    # env.max_episode_steps (SB3's set_attr) changes truncation at run time: a checkpoint
    # without it resumed under the target's limit, episodes ending at other steps
    source = stepped(seed=5)
    source.max_episode_steps = 7
    state = source.state_dict()
    target = stepped(seed=0)
    assert target.max_episode_steps == 500
    target.load_state_dict(state)
    assert target.max_episode_steps == 7
    g = torch.Generator().manual_seed(3)
    for _ in range(10):
        a = torch.randint(0, 2, (N,), generator=g)
        assert_same_state(source.step(a).to_dict(), target.step(a).to_dict())
    older = {k: v for k, v in state.items() if k != "max_episode_steps"}
    other = stepped(seed=0)
    with pytest.raises(ValueError, match=r"missing \['max_episode_steps'\]"):
        other.load_state_dict(older)  # a checkpoint without it: refused, nothing loaded
    assert other.max_episode_steps == 500


# ---------------------------------------------------------------- issue 33 (3): direct loads
@pytest.mark.parametrize("part", ["params", "randomization", "curriculum"])
@pytest.mark.parametrize("how", ["meta", "sparse"])
def test_every_load_refuses_tensors_it_cannot_copy_before_writing(part, how):
    env, cur = build(0)
    source, _ = build(5)
    for _ in range(3):
        source.step(torch.ones(N, dtype=torch.int64))
    owner = {"params": env.params, "randomization": env.randomization, "curriculum": cur}[part]
    state = {"params": source.params, "randomization": source.randomization,
             "curriculum": source.curricula[0]}[part].state_dict()
    edit = (lambda t: t.to("meta")) if how == "meta" else (lambda t: t.to_sparse())
    if part == "randomization":  # the last tensor of the last term: the others come first
        state["terms"][-1]["clamped"] = edit(state["terms"][-1]["clamped"])
    elif part == "params":
        state["effective"] = edit(state["effective"])
    else:
        state["levels"] = edit(state["levels"])
    before = env.state_dict()
    with pytest.raises(ValueError, match="expected a (dense|tensor holding data)"):
        owner.load_state_dict(state)
    assert_same_state(before, env.state_dict())


# ---------------------------------------------------------------- issue 33 (4): autograd
def test_loaded_tensors_that_require_grad_leave_every_buffer_out_of_the_graph():
    source = stepped(seed=5)
    state = source.state_dict()
    w = torch.ones((), requires_grad=True)
    state["tensors"]["reward"] = state["tensors"]["reward"] * w
    state["tensors"]["state"] = state["tensors"]["state"] * w
    state["params"]["nominal"] = state["params"]["nominal"] * w
    state["randomization"]["terms"][0]["vals"] = state["randomization"]["terms"][0]["vals"] * w
    target = stepped(seed=0)
    target.load_state_dict(state)
    td = target.step(torch.ones(N, dtype=torch.int64))
    assert not any(v.requires_grad for v in td.values())
    loaded = target.state_dict()
    for t in (target.params.nominal_table, target.params.effective_table, target.state,
              target.context.outputs["reward"], loaded["randomization"]["terms"][0]["vals"]):
        assert not t.requires_grad and t.grad_fn is None
    # and the load itself is what an untracked one gives
    plain = source.state_dict()
    other = stepped(seed=0)
    other.load_state_dict(plain)
    assert_same_state(other.step(torch.ones(N, dtype=torch.int64)).to_dict(), td.to_dict())


# ---------------------------------------------------------------- issue 33 (12): other files
def test_a_state_of_another_kind_is_named_not_dumped():
    env = stepped(seed=0)
    tenv = gp.TransformedEnv(stepped(seed=1), gp.ObsNorm((4,)))
    before = env.state_dict()
    with pytest.raises(ValueError) as err:
        env.load_state_dict(tenv.state_dict())  # the message held the whole state: 50 KB
    msg = str(err.value)
    assert len(msg) < 500 and "\n" not in msg, msg
    assert "got a TransformedEnv's state" in msg and "TransformedEnv(env, *transforms).load" in msg
    with pytest.raises(ValueError, match=r"got the statistics of a normalization module"):
        env.load_state_dict(dict(tenv.transforms[0].state_dict()))
    assert_same_state(before, env.state_dict())
    with pytest.raises(ValueError, match=r"got the state of a 'CartPole-v1' env \(env\."):
        tenv.load_state_dict(env.state_dict())  # the converse
    with pytest.raises(ValueError, match=r"got the state of a 'CartPole-v1' env") as err:
        tenv.transforms[0].load_state_dict(env.state_dict())
    assert len(str(err.value)) < 500
    wide = {k: list(range(10_000)) for k in ("a", "b")}  # any other big value is cut
    with pytest.raises(ValueError) as err:
        env.load_state_dict({**before, "env": wide})
    assert len(str(err.value)) < 500


# ---------------------------------------------------------------- issue 33 (15): model settings
def test_reward_statistics_of_another_gamma_are_refused():
    saved = gp.RewardNorm(0.9, num_envs=4)
    saved(torch.ones(4), torch.zeros(4, dtype=torch.bool))
    state = saved.state_dict()
    assert float(state["gamma"]) == 0.9
    target = gp.RewardNorm(0.99, num_envs=4)
    before = copy.deepcopy(dict(target.state_dict()))
    with pytest.raises(ValueError, match=r"'gamma' expected 0\.99 .*got 0\.9 .*gamma=0\.9"):
        target.load_state_dict(state)
    assert_same_state(before, dict(target.state_dict()))
    same = gp.RewardNorm(0.9, num_envs=4)
    same.load_state_dict(state)
    assert_same_state(dict(state), dict(same.state_dict()))
    older = {k: v for k, v in state.items() if k != "gamma"}  # a state without the setting
    with pytest.raises(ValueError, match=r"missing \['gamma'\]"):
        target.load_state_dict(older)


GO1 = "Go1JoystickFlatTerrain-v1"


@pytest.mark.parametrize("name, kw, other, setting", [
    (GO1, {}, {"penalized_contacts": ("FR_thigh",)}, "penalized_contacts"),
    (GO1, {}, {"terminating_contacts": ("trunk",)}, "terminating_contacts"),
    ("Go1Terrain-v0", {"terrain_rows": 2, "terrain_cols": 2}, {"terrain_seed": 5},
     "terrain_seed"),
])
def test_a_checkpoint_of_another_model_is_refused_naming_the_setting(name, kw, other, setting):
    source = gp.make(name, 2, device="cpu", **kw)
    state = source.state_dict()
    target = gp.make(name, 2, device="cpu", **kw, **other)
    before = target.state_dict()
    want = getattr(target, setting)
    with pytest.raises(ValueError, match=(
            rf"config\.{setting}: expected {re.escape(repr(want))} .*got "
            rf"{re.escape(repr(state['config'][setting]))} .*build the env with {setting}=")):
        target.load_state_dict(state)
    assert_same_state(before, target.state_dict())
    older = {k: v for k, v in state.items() if k != "config"}  # a state without its settings
    with pytest.raises(ValueError, match=r"missing \['config'\]"):
        gp.make(name, 2, device="cpu", **kw).load_state_dict(older)


def test_envs_without_model_settings_save_no_config():
    # their checkpoints stay as they were (committed and generated old-format states)
    assert "config" not in stepped(seed=0).state_dict()
