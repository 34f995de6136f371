"""Bad input: clear errors naming the term and the parameter, and nothing changed."""

from __future__ import annotations

import pytest
import torch
from randomization_helpers import N, WindyCartPole, cartpole, eff

import gpuparam as gp


def assert_unchanged(env, before: torch.Tensor, terms=()) -> None:
    assert torch.equal(eff(env), before)
    assert env.randomization.terms == tuple(terms)


# ---------------------------------------------------------------------------- construction
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: gp.Uniform("length", 1.0, 0.3), ["Uniform('length'", "low 1.0 > high 0.3"]),
        (lambda: gp.Uniform("wind", (0, 0), (1, -1)), ["'wind'", "low 0.0 > high -1.0"]),
        (lambda: gp.LogUniform("masspole", 0.0, 1.0), ["LogUniform('masspole'", "positive"]),
        (lambda: gp.LogUniform("masspole", -1.0, 1.0), ["'masspole'", "positive"]),
        (lambda: gp.Gaussian("gravity", 9.8, -1.0), ["Gaussian('gravity'", "std -1.0 < 0"]),
        (lambda: gp.Choice("length", [0.1, 0.2], probs=[0.5, 0.6]), ["'length'", "sum to 1"]),
        (lambda: gp.Choice("length", [0.1, 0.2], probs=[1.5, -0.5]), ["'length'", ">= 0"]),
        (lambda: gp.Choice("length", [0.1, 0.2], probs=[1.0]), ["2 values but 1"]),
        (lambda: gp.Choice("length", []), ["non-empty"]),
        (lambda: gp.Uniform("length", 0.3, 1.0, op="mul"), ["op must be one of"]),
        (lambda: gp.Uniform("length", 0.3, 1.0, on="episode"), ["on must be"]),
        (lambda: gp.Uniform("length", 0.3, float("nan")), ["finite"]),
        (lambda: gp.Uniform("length"), ["give the range"]),
        (
            lambda: gp.Uniform("length", 0.1, 0.2, schedule=gp.Linear((0, 1), (0, 2), 5)),
            ["not both"],
        ),
        (lambda: gp.Uniform("length", 0.1, 0.2, mask=torch.ones(2, 3).bool()), ["mask"]),
        (lambda: gp.Uniform("length", 0.1, 0.2, mask=torch.ones(N)), ["bool tensor"]),
        (
            lambda: gp.Uniform("length", 0.1, 0.2, mask=torch.ones(N).bool(), env_ids=[1]),
            ["mask or env_ids"],
        ),
        (lambda: gp.Every(0), ["Every(k)"]),
        (lambda: gp.Interval(0.5, 0.1), ["low_s <= high_s"]),
        (lambda: gp.Interval(0.0, 0.1), ["0 < low_s"]),
        (lambda: gp.OnReset(-1), ["min_steps"]),
        (lambda: gp.Linear((0, 1), (0, 2), 0), ["steps"]),
        (lambda: gp.Step([(0, 1)], at=[]), ["len(ranges) == len(at) + 1"]),
        (lambda: gp.Step([(0, 1), (0, 2), (0, 3)], at=[5, 5]), ["strictly increasing"]),
        (
            lambda: gp.Uniform("length", schedule=gp.Linear((0.3, 0.2), (0.3, 1.0), 10)),
            ["low 0.3 > high 0.2"],
        ),
        (
            lambda: gp.Choice("length", [0.1], schedule=gp.Linear((0, 1), (0, 2), 5)),
            ["not supported for Choice"],
        ),
    ],
)
def test_bad_terms_raise_on_construction(make, words):
    with pytest.raises(ValueError) as e:
        make()
    for w in words:
        assert w in str(e.value)


def test_the_base_term_raises_on_construction():
    with pytest.raises(NotImplementedError, match="gp.Uniform"):
        gp.Term("length", (0.3, 1.0))


# ---------------------------------------------------------------------------- binding
def test_unknown_parameter_raises_keyerror_and_changes_nothing():
    env = cartpole()
    before = eff(env)
    good = gp.Uniform("length", 0.3, 1.0)
    with pytest.raises(KeyError) as e:
        env.randomize(good, gp.Uniform("lenght", 0.3, 1.0))
    msg = str(e.value)
    assert "Uniform('lenght'" in msg and "unknown parameter 'lenght'" in msg and "length" in msg
    assert_unchanged(env, before)


@pytest.mark.parametrize(
    "term, words",
    [
        (gp.Uniform("length", 0.5, 2.0, op="scale"), ["op='scale'", "'length'"]),
        (gp.Uniform("masspole", -1.0, 0.0, op="add"), ["op='add'", "'masspole'", "[0.0001, 100"]),
        (gp.Uniform("gravity", 50.0, 200.0), ["'gravity'", "[50, 200]", "[0.0, 100.0]"]),
        (gp.Gaussian("theta_threshold_radians", 4.0, 0.1), ["'theta_threshold_radians'"]),
        (gp.Choice("tau", [0.01, 2.0]), ["'tau'", "[0.01, 2]"]),
        (gp.LogUniform("tau", 0.5, 100.0, op="scale", on="step"), ["'tau'", "[0.01, 2]"]),
        (
            gp.Uniform("gravity", schedule=gp.Linear((9.0, 10.0), (0.0, 150.0), 10)),
            ["'gravity'", "[0, 150]"],
        ),
    ],
)
def test_ranges_leaving_the_valid_range_raise(term, words):
    env = cartpole()
    env.params.set("length", 60.0)  # scale by 2 -> 120 > 100
    before = eff(env)
    with pytest.raises(ValueError) as e:
        env.randomize(term)
    for w in [str(term).split("(")[0] + "(", *words]:
        assert w in str(e.value), (w, str(e.value))
    assert_unchanged(env, before)


def test_range_check_uses_the_masked_envs_nominal_values():
    env = cartpole()
    big = torch.arange(N) < 4
    env.params.set("length", 60.0, mask=big)
    env.randomize(gp.Uniform("length", 0.5, 1.5, op="scale", mask=~big))  # fine on the others
    with pytest.raises(ValueError, match="'length'"):
        env.randomize(gp.Uniform("length", 0.5, 1.8, op="scale", mask=big))


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(mask=torch.ones(N + 1, dtype=torch.bool)), ["'length'", f"shape ({N},)"]),
        (dict(env_ids=[0, N]), ["'length'", "env_ids"]),
        (dict(env_ids=torch.tensor([[1, 2]])), ["'length'", "env_ids"]),
    ],
)
def test_bad_masks_raise_naming_term_and_parameter(kw, words):
    env = cartpole()
    before = eff(env)
    term = gp.Uniform("length", 0.3, 1.0, **kw)
    with pytest.raises(ValueError) as e:
        env.randomize(term)
    for w in ["Uniform('length'", *words]:
        assert w in str(e.value)
    assert_unchanged(env, before)


def test_component_count_mismatch_raises():
    env = cartpole(cls=WindyCartPole)
    before = eff(env)
    with pytest.raises(ValueError, match="'wind' has 3 components, low has 2"):
        env.randomize(gp.Uniform("wind", (0.0, 0.0), (1.0, 1.0)))
    with pytest.raises(ValueError, match="'wind' has 3 components, value has 2"):
        env.randomize(gp.Choice("wind", [(0.0, 1.0), (1.0, 2.0)]))
    assert_unchanged(env, before)


def test_adding_a_term_twice_raises():
    env = cartpole()
    t = gp.Uniform("length", 0.3, 1.0)
    env.randomize(t)
    before = eff(env)
    with pytest.raises(ValueError, match="already added"):
        env.randomize(t)
    with pytest.raises(ValueError, match="at least one term"):
        env.randomize()
    with pytest.raises(ValueError, match="expected gp.Uniform"):
        env.randomize("length")
    assert_unchanged(env, before, [t])


def test_removing_an_unknown_term_raises_keyerror():
    env = cartpole()
    with pytest.raises(KeyError, match="not added"):
        env.randomization.remove(gp.Uniform("length", 0.3, 1.0))
    rz = env.randomization  # not a term (unhashable too): the same KeyError, pin skips it
    for call in (lambda: rz.remove(["length"]), lambda: rz.ranges({}), lambda: rz.mask([])):
        with pytest.raises(KeyError, match="not added"):
            call()
    rz.pin(["length"], None)


def test_set_mask_checks_the_new_envs():
    env = cartpole()
    big = torch.arange(N) < 4
    env.params.set("length", 60.0, mask=big)
    term = gp.Uniform("length", 0.5, 1.8, op="scale", mask=~big)
    env.randomize(term)
    with pytest.raises(ValueError, match="'length'"):
        env.randomization.set_mask(term)  # all envs: 60 * 1.8 > 100
    with pytest.raises(ValueError, match="mask or env_ids"):
        env.randomization.set_mask(term, mask=big, env_ids=[1])
    assert torch.equal(env.randomization.mask(term), ~big)
    env.randomization.set_mask(term, env_ids=[10, 11])
    assert int(env.randomization.mask(term).sum()) == 2


def test_removing_a_term_passed_twice_raises_and_changes_nothing():
    env = cartpole()
    term = gp.Uniform("length", 0.4, 0.6, on="step")
    env.randomize(term)
    env.step(torch.zeros(N, dtype=torch.int64))
    before = eff(env)
    with pytest.raises(ValueError, match="passed twice"):
        env.randomization.remove(term, term)
    assert env.randomization.terms == (term,) and torch.equal(eff(env), before)


def test_unmasking_a_masked_term_keeps_each_envs_own_counter():
    # masked envs advanced alone: once unmasked, every env draws at its own counter
    env = gp.make("CartPole-v1", 4, device="cpu", seed=0)
    mask = torch.tensor([False, True, True, False])
    term = gp.Uniform("length", 0.4, 0.6, on="step", mask=mask)
    env.randomize(term)
    a = torch.zeros(4, dtype=torch.int64)
    env.step(a)
    first = env.params["length"].clone()
    env.step(a)
    env.step(a)
    env.randomization.set_mask(term, None)
    env.step(a)
    assert env.randomization.counters(term).tolist() == [1, 4, 4, 1]
    assert not torch.equal(env.params["length"][1:3], first[1:3])  # counter 3, not 0


def test_structural_changes_during_a_step_raise_and_change_nothing():
    # a hook removing, adding or (un)masking terms inside a step used to be accepted, and
    # the step then ran its old launch on tables the change replaced: the remaining term
    # lost that step's counter increment and repeated a draw
    env, twin = cartpole(seed=3), cartpole(seed=3)
    few = torch.arange(N) < 5

    def terms():
        return (gp.Uniform("length", 0.4, 0.6, on="step"),
                gp.Uniform("gravity", 9.0, 10.0, on="step", mask=few),
                gp.Uniform("tau", 0.01, 0.02, on="reset"))

    keep, masked, drop = terms()
    env.randomize(keep, masked, drop)
    twin.randomize(*terms())
    errors = []

    def hook(e, td):
        for change in (lambda: e.randomization.remove(drop),
                       lambda: e.randomize(gp.Uniform("masspole", 0.1, 0.2)),
                       lambda: e.randomization.set_mask(keep, few),
                       lambda: e.randomization.set_mask(masked, None),
                       lambda: e.randomization.clear(),
                       lambda: e.add_curriculum(gp.Curriculum(2, ranges={drop: ((0.01, 0.02),
                                                                                (0.02, 0.03))}))):
            with pytest.raises(RuntimeError, match="during a step") as err:
                change()
            errors.append(err.value)
        e.randomization.set_mask(masked, ~few)  # a new mask for a masked term: a copy
        e.randomization.set_mask(masked, few)

    remove_hook = env.before_step(hook)
    a = torch.zeros(N, dtype=torch.int64)
    for _ in range(3):
        env.step(a)
        twin.step(a)
    assert len(errors) == 18 and env.randomization.terms == (keep, masked, drop)
    assert torch.equal(env.randomization.counters(keep), torch.full((N,), 3, dtype=torch.int32))
    assert torch.equal(eff(env), eff(twin))
    remove_hook()
    env.randomization.remove(drop)  # between steps: fine
    twin.randomization.remove(twin.randomization.terms[2])
    env.step(a)
    twin.step(a)
    assert torch.equal(eff(env), eff(twin))
    assert torch.equal(env.randomization.counters(keep), torch.full((N,), 4, dtype=torch.int32))


# ---------------------------------------------------------------------------- pin (curricula)
def test_pin_checks_per_env_ranges_before_writing_anything():
    env = cartpole()
    t = gp.Uniform("length", 0.3, 1.0, on="reset")
    s = gp.Uniform("gravity", None, on="reset",
                   schedule=gp.Linear((9.0, 10.0), (9.5, 11.0), steps=5))
    c = gp.Choice("masspole", [0.1, 0.2], on="reset")
    env.randomize(t, s, c)
    rz, owner = env.randomization, object()
    for term, per_env, words in [
        (t, torch.zeros(2, 3), ["float32 (2, 64)", "got torch.float32 (2, 3)"]),
        (t, torch.zeros(2, N, dtype=torch.float64), ["float32 (2, 64)", "float64"]),
        (t, torch.zeros(N, 2).T, ["contiguous rows"]),
        (s, torch.zeros(2, N), ["without schedule, not Choice"]),
        (c, torch.zeros(1, N), ["without schedule, not Choice"]),
    ]:
        with pytest.raises(ValueError) as e:
            rz.pin(term, owner, per_env)
        assert all(w in str(e.value) for w in words), str(e.value)
        assert rz.per_env_ranges(term) is None
    rz.pin(t, owner, torch.zeros(2, N))
    with pytest.raises(ValueError, match="already has per-env ranges"):
        rz.pin(t, owner, torch.zeros(2, N))
    rz.pin(t, None)
    rz.remove(s, c)  # not pinned by the refused calls

    def hook(env, td):
        with pytest.raises(RuntimeError, match="during a step"):
            rz.pin(t, "hook", torch.zeros(2, N))

    remove = env.before_step(hook)
    env.reset()
    env.step(torch.zeros(N, dtype=torch.int64))
    remove()
    rz.remove(t)  # the refused pin left it free
    assert env.randomization.terms == ()
