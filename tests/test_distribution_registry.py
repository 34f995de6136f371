"""The registry of distributions and triggers: a new distribution is one class
(docs/randomization.md, "Adding a distribution": the example is run from the page), its draws
pinned bit for bit, its name usable in configs, its kernel compiling for CUDA; the built-ins
keep their ids and kernel. A new trigger is one class too."""

from __future__ import annotations

import linecache
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import warp as wp
from gpuparam.kernels import randomize as kernels_randomize

import gpuparam as gp
from gpuparam.randomization import Trigger, registry

PAGE = Path(__file__).resolve().parents[1] / "docs" / "randomization.md"
N = 4096


def _docs_triangular() -> type:
    """The page's ``Triangular``, defined as tests/test_docs.py runs the block (same module
    name: defining it again replaces it under its id)."""
    blocks = re.findall(r"^```python[ \t]*\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    code = next(b for b in blocks if "class Triangular(gp.Term)" in b)
    filename = "<docs/randomization.md Triangular>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    ns = {"__name__": "snippets_docs_randomization_md"}
    exec(compile(code, filename, "exec"), ns)  # noqa: S102
    return ns["Triangular"]


@pytest.fixture(scope="module")
def triangular() -> type:
    return _docs_triangular()


def test_builtins_keep_their_ids_and_names():
    names = list(registry.distributions())[:4]
    assert names == ["uniform", "loguniform", "gaussian", "choice"]
    assert [registry.dist_id(n) for n in names] == [
        kernels_randomize.UNIFORM, kernels_randomize.LOGUNIFORM, kernels_randomize.GAUSSIAN,
        kernels_randomize.CHOICE]


def test_docs_distribution_registers_and_draws_the_bits_of_its_formula(triangular):
    assert registry.distributions()["triangular"] is triangular
    # the same seed and uid (first term; the parameter is not in the key): Uniform(0, 1)
    # draws u itself, bit for bit
    u_env = gp.make("CartPole-v1", num_envs=N, seed=7, device="cpu")
    u_env.randomize(gp.Uniform("gravity", 0.0, 1.0, on="reset"))
    u_env.reset()
    u = u_env.params["gravity"].clone()
    env = gp.make("CartPole-v1", num_envs=N, seed=7, device="cpu")
    env.randomize(triangular("length", 0.3, 1.0, on="reset"))
    env.reset()
    x = env.params["length"]
    # numpy float32: each operation IEEE-rounded, as the kernel's (no contraction)
    f32, un = np.float32, u.numpy()
    low, high, two = f32(0.3), f32(1.0), f32(2.0)
    half = (high - low) * f32(0.5)
    want = np.where(un < 0.5, low + half * np.sqrt(two * un),
                    high - half * np.sqrt(two - two * un))
    assert np.array_equal(x.numpy(), want)
    assert 0.3 <= float(x.min()) and float(x.max()) <= 1.0
    # triangular, not uniform: 5/9 of the mass within (high - low) / 6 of the mode
    near = ((x - 0.65).abs() < 0.7 / 6).float().mean()
    assert abs(float(near) - 5 / 9) < 0.03
    assert abs(float(x.mean()) - 0.65) < 0.01


def test_docs_distribution_checks_its_range_and_goes_in_configs(triangular):
    with pytest.raises(ValueError, match="low 1.0 > high 0.3"):
        triangular("length", 1.0, 0.3)
    terms = gp.randomization_from_config({"length": {
        "range": [0.9, 1.1], "operation": "scaling", "distribution": "triangular",
        "schedule": "linear", "schedule_steps": 10}})
    assert isinstance(terms[0], triangular) and terms[0].op == "scale"
    assert terms[0].schedule.start_range == (1.0, 1.0)
    with pytest.raises(ValueError, match="distribution must be one of"):
        gp.randomization_from_config({"length": {
            "range": [0, 1], "operation": "additive", "distribution": "choice"}})


def test_new_distribution_gets_its_own_kernel_and_the_builtins_keep_theirs(triangular):
    tid = registry.dist_id("triangular")
    assert tid >= 4
    builtin = registry.kernel([kernels_randomize.UNIFORM])
    assert registry.kernel([kernels_randomize.CHOICE]) is builtin
    assert registry.kernel([tid]) is not builtin
    assert registry.kernel([tid]) is registry.kernel([0, tid])
    # redefining the class (same module and name) keeps its id
    assert registry.dist_id(_docs_triangular().dist) == tid


def test_kernels_for_other_ids_are_other_modules():
    """The ids are in the kernel's hash: a kernel whose draw sits at another id never loads
    the other's cached binary (static values inside nested closure functions were not
    hashed: a draw at id 5 ran the binary built for id 4 and drew nothing)."""
    draw = kernels_randomize.uniform_draw
    names = {kernels_randomize.make_randomize(((i, draw),)).module.name for i in (4, 5)}
    assert len(names) == 2


def test_new_distribution_kernel_compiles_for_sm90(triangular):
    paths = wp.compile_aot_module(registry.kernel([registry.dist_id("triangular")]).module,
                                  arch=90)
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_bad_distribution_classes_are_refused(triangular):
    with pytest.raises(ValueError, match="'triangular' is taken by"):
        type("Other", (gp.Term,), {"dist": "triangular", "draw": triangular.draw})
    with pytest.raises(TypeError, match="draw must be a @wp.func"):
        type("NoDraw", (gp.Term,), {"dist": "no_draw", "draw": lambda h, a, b: a})
    with pytest.raises(ValueError, match="dist must be a name"):
        type("BadName", (gp.Term,), {"dist": "two words", "draw": triangular.draw})
    assert "no_draw" not in registry.distributions()


@wp.func
def one_argument_draw(h: wp.uint32) -> float:
    return 0.5


class WrongDraw(gp.Term):
    dist = "wrong_draw_test"
    draw = one_argument_draw


def test_a_draw_that_does_not_build_is_refused_before_anything_changes():
    env = gp.make("CartPole-v1", num_envs=8, seed=0, device="cpu")
    kept = gp.Uniform("masspole", 0.1, 0.2)
    env.randomize(kept)
    before = env.params.effective_table.clone()
    with pytest.raises(ValueError, match="WrongDraw.*does not build"):
        env.randomize(gp.Uniform("length", 0.3, 1.0), WrongDraw("length", (0.3, 1.0)))
    assert env.randomization.terms == (kept,)
    assert torch.equal(env.params.effective_table, before)
    env.step(torch.zeros(8, dtype=torch.long))  # the env still steps


def test_state_dict_round_trip_with_a_new_distribution(triangular):
    def run():
        env = gp.make("CartPole-v1", num_envs=64, seed=3, device="cpu")
        env.randomize(triangular("length", 0.3, 1.0, on=gp.Every(3)))
        return env

    a, b = run(), run()
    act = torch.zeros(64, dtype=torch.long)
    for _ in range(4):
        a.step(act)
    b.randomization.load_state_dict(a.randomization.state_dict())
    for _ in range(5):
        a.step(act)
        b.step(act)
    assert torch.equal(a.randomization.counters(a.randomization.terms[0]),
                       b.randomization.counters(b.randomization.terms[0]))


# ----------------------------------------------------------------------------- triggers
@wp.func
def odd_steps_due(
    row: kernels_randomize.TermRow, env: int, gstep: wp.int64,
    effective: wp.array2d(dtype=float), key: int,
) -> bool:
    return gstep % wp.int64(2) == wp.int64(1)


class OddSteps(Trigger):
    """Draw at the steps whose global step is odd (a test trigger)."""

    launch = "step"
    due = odd_steps_due


def test_builtin_triggers_keep_their_ids():
    assert [registry.trigger_id(t) for t in (gp.Every, gp.Interval, gp.OnReset)] == [
        kernels_randomize.EVERY, kernels_randomize.INTERVAL, kernels_randomize.MIN_STEPS]


def test_new_trigger_is_one_class():
    env = gp.make("CartPole-v1", num_envs=8, seed=0, device="cpu")
    term = gp.Uniform("length", 0.3, 1.0, on=OddSteps())
    env.randomize(term)
    assert term.trigger_class == "step" and registry.trigger_id(OddSteps) > 3
    act = torch.zeros(8, dtype=torch.long)
    seen = []
    for _ in range(6):
        env.step(act)
        seen.append(int(env.randomization.counters(term)[0]))
    assert seen == [0, 1, 1, 2, 2, 3]  # steps 1-6 draw at global steps 0-5
    assert torch.equal(env.randomization.counters(term), torch.full((8,), 3, dtype=torch.int32))
