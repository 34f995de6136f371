"""Issue 14: a stateful property-based test over the public API.

A hypothesis ``RuleBasedStateMachine`` drives one CartPole batch under a ``TransformedEnv``
with an ``ObsNorm`` (two groups, reset on ``length`` writes) and a shadow env with the same
terms and hooks. Rules: parameter writes with masks, env ids and dicts (validated and not,
in range and not), masked resets, steps with hooks, randomization terms added and removed,
``reset_stats(mask)``, checkpoints saved and loaded, and loads of corrupted checkpoints.

Invariants, after every rule: every effective and nominal parameter is finite and inside its
spec range; no NaN anywhere (no rule feeds one in, except unvalidated NaN writes, which
leave their entries unchanged) and ``ObsNorm.nonfinite`` stays 0. Within the rules: a
rejected call changes nothing (full state dicts compared); envs outside a write's or a
reset's mask are bit-identical to the shadow, which loaded the state just before; a
state-dict round trip reproduces the next steps bit for bit.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from test_bad_input import assert_same_state

import gpuparam as gp

pytest.importorskip("hypothesis")  # a dev extra
import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

N = 8
WRITABLE = ("gravity", "masscart", "masspole", "length", "force_mag")  # stable dynamics
TERMS = {
    "uniform length at reset": lambda: gp.Uniform("length", 0.3, 0.9, on="reset"),
    "gaussian force noise per step": lambda: gp.Gaussian("force_mag", 0.0, 2.0, op="add",
                                                         on="step"),
    "log-uniform masspole every 3": lambda: gp.LogUniform("masspole", 0.5, 2.0, op="scale",
                                                          on=gp.Every(3), env_ids=[0, 3, 5]),
}
HOOKS = {
    "halve reward": lambda env, td: td["reward"].mul_(0.5),
    "push the action": lambda env, td: td["action"].copy_(1 - td["action"]),
}
masks = st.lists(st.booleans(), min_size=N, max_size=N).map(torch.tensor)
ids = st.lists(st.integers(0, N - 1), min_size=0, max_size=N, unique=True)
actions = st.lists(st.integers(0, 1), min_size=N, max_size=N).map(
    lambda a: torch.tensor(a, dtype=torch.int64))


def state_of(env: gp.VecEnv, norm: gp.ObsNorm) -> dict:
    return {"env": env.state_dict(), "norm": dict(norm.state_dict())}


class EnvMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1)
        self.shadow = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1)
        gid = torch.arange(N) % 2
        self.norm = gp.ObsNorm((4,), group_ids=gid, reset_on=("length",))
        self.gid = gid
        self.tenv = gp.TransformedEnv(self.env, self.norm)
        self.tenv.reset()
        self.terms: dict[str, tuple] = {}  # name -> (remove on env, remove on shadow)
        self.hooks: dict[str, tuple] = {}
        self.saved: tuple[tuple[str, ...], dict] | None = None
        self.last = None
        self.notified: list[torch.Tensor] = []
        self.env.params.on_change(lambda names, mask: self.notified.append(
            torch.ones(N, dtype=torch.bool) if mask is None else mask.clone()))

    # ------------------------------------------------------------------ helpers
    def sync_shadow(self) -> None:
        self.shadow.load_state_dict(self.env.state_dict())

    def expect_rejected(self, call, exc=ValueError) -> None:
        before = state_of(self.env, self.norm)
        try:
            call()
        except exc:
            pass
        else:
            raise AssertionError("the call was expected to be rejected")
        assert_same_state(before, state_of(self.env, self.norm))

    def check_outside(self, written: torch.Tensor) -> None:
        """Envs outside ``written`` (bool [N]) equal the shadow bit for bit; every env
        tensor besides the parameter tables equals it entirely."""
        a, b = self.env.state_dict(), self.shadow.state_dict()
        for key in ("nominal", "effective"):
            assert torch.equal(a["params"][key][:, ~written], b["params"][key][:, ~written])
        b["params"] = a["params"]
        assert_same_state(a, b)

    # ------------------------------------------------------------------ writes
    @rule(data=st.data(), how=st.sampled_from(["all", "mask", "ids", "id tensor", "dict"]),
          validate=st.booleans(), inside=st.booleans())
    def write(self, data, how, validate, inside):
        names = data.draw(st.lists(st.sampled_from(WRITABLE), min_size=1, max_size=2,
                                   unique=True)) if how == "dict" else [
            data.draw(st.sampled_from(WRITABLE))]
        values = {}
        for name in names:
            spec = self.env.params.spec[name]
            hi = min(spec.high, 3 * spec.default)
            if inside:
                values[name] = data.draw(st.floats(spec.low, hi, allow_nan=False))
            else:
                values[name] = data.draw(st.sampled_from(
                    [spec.high * 2 + 1, spec.low - 1, float("nan"), float("inf")]))
        kw, written = {}, torch.ones(N, dtype=torch.bool)
        if how == "mask":
            kw["mask"] = written = data.draw(masks)
        elif how in ("ids", "id tensor"):
            chosen = data.draw(ids)
            written = torch.zeros(N, dtype=torch.bool)
            written[chosen] = True
            if not validate:
                chosen = chosen + data.draw(st.lists(st.sampled_from([-1, -N, N, N + 3]),
                                                     max_size=2))
            kw["env_ids"] = torch.tensor(chosen, dtype=torch.int64) if how == "id tensor" \
                else chosen
        if how == "dict":
            args = (values,)
        else:
            args = (names[0], values[names[0]])
        call = lambda: self.env.params.set(*args, validate=validate, **kw)  # noqa: E731
        if validate and not inside:  # a bad number is rejected even if no env is addressed
            self.expect_rejected(call)
            return
        self.sync_shadow()
        norm_before = copy.deepcopy(dict(self.norm.state_dict()))
        self.notified.clear()
        call()
        assert len(self.notified) == 1 and torch.equal(self.notified[0], written)
        self.check_outside(written)
        for name, v in values.items():
            spec = self.env.params.spec[name]
            got = self.env.params.nominal[name][written]
            if not math.isfinite(v):  # NaN or inf: the entries stay
                old = self.shadow.params.nominal[name][written]
                assert torch.equal(got, old)
            else:
                want = torch.tensor(min(max(v, spec.low), spec.high), dtype=torch.float32)
                assert torch.all(got == want)
        hit = torch.zeros(2, dtype=torch.bool)
        if "length" in values:
            hit[self.gid[written].unique()] = True
        for key in ("count", "mean", "m2"):
            assert torch.equal(norm_before[key][~hit], getattr(self.norm, key)[~hit]), key
            if hit.any():
                assert torch.all(getattr(self.norm, key)[hit] == 0)

    @rule(bad=st.sampled_from([
        ("unknown name", lambda p: p.set("bogus", 1.0)),
        ("bool ids", lambda p: p.set("length", 0.6, env_ids=[True, False])),
        ("float ids", lambda p: p.set("length", 0.6, env_ids=[0.5])),
        ("duplicate ids", lambda p: p.set("length", torch.tensor([0.6, 0.7]), env_ids=[1, 1])),
        ("id out of range", lambda p: p.set("length", 0.6, env_ids=[0, N])),
        ("mask of another size", lambda p: p.set("length", 0.6, mask=torch.ones(N + 1).bool())),
        ("huge int", lambda p: p.set("length", 10**400)),
        ("wrong shape", lambda p: p.set("length", torch.ones(N + 1))),
        ("one bad entry in a dict", lambda p: p.set({"length": 0.6, "gravity": -1.0})),
    ]))
    def rejected_write(self, bad):
        self.expect_rejected(lambda: bad[1](self.env.params), (ValueError, KeyError))

    # ------------------------------------------------------------------ resets, steps
    @rule(mask=masks)
    def reset(self, mask):
        self.sync_shadow()
        self.tenv.reset(mask)
        a, b = self.env.state_dict(), self.shadow.state_dict()
        keep = ~mask
        for key in ("state", "step_count", "observation"):
            assert torch.equal(a["tensors"][key][keep], b["tensors"][key][keep]), key

    @rule(action=actions, times=st.integers(1, 4))
    def step(self, action, times):
        for _ in range(times):
            self.last = self.tenv.step(action)

    @rule(name=st.sampled_from(list(HOOKS)))
    def toggle_hook(self, name):
        if name in self.hooks:
            for remove in self.hooks.pop(name):
                remove()
        else:
            fn = HOOKS[name]
            self.hooks[name] = (self.env.after_step(fn), self.shadow.after_step(fn))

    # ------------------------------------------------------------------ randomization
    @rule(name=st.sampled_from(list(TERMS)))
    def toggle_term(self, name):
        if name in self.terms:
            for remove in self.terms.pop(name):
                remove()
            return
        self.sync_shadow()
        before = state_of(self.env, self.norm)
        try:
            remove = self.env.randomize(TERMS[name]())
        except ValueError:  # e.g. a scale term whose draws would leave the spec range
            assert_same_state(before, state_of(self.env, self.norm))
            return
        self.terms[name] = (remove, self.shadow.randomize(TERMS[name]()))

    # ------------------------------------------------------------------ statistics
    @rule(mask=masks)
    def reset_stats(self, mask):
        before = copy.deepcopy(dict(self.norm.state_dict()))
        self.norm.reset_stats(mask)
        hit = torch.zeros(2, dtype=torch.bool)
        hit[self.gid[mask].unique()] = True
        for key in ("count", "mean", "m2"):
            assert torch.equal(before[key][~hit], getattr(self.norm, key)[~hit])
            assert torch.all(getattr(self.norm, key)[hit] == 0)

    # ------------------------------------------------------------------ checkpoints
    @rule()
    def save(self):
        self.saved = (tuple(self.terms), self.env.state_dict())

    @precondition(lambda self: self.saved is not None)
    @rule()
    def load(self):
        terms, state = self.saved
        if terms != tuple(self.terms):
            self.expect_rejected(lambda: self.env.load_state_dict(state))
            return
        self.env.load_state_dict(state)
        assert_same_state(state, self.env.state_dict())

    @rule(action=actions)
    def round_trip(self, action):
        self.sync_shadow()
        for _ in range(3):
            a = self.env.step(action).to_dict()
            b = self.shadow.step(action).to_dict()
            assert_same_state(a, b)
        assert_same_state(self.env.state_dict(), self.shadow.state_dict())

    @rule(corruption=st.sampled_from([
        ("params", "nominal", lambda t: t * float("nan")),
        ("params", "effective", lambda t: t - 1e6),
        ("tensors", "state", lambda t: t.half()),
        ("tensors", "step_count", lambda t: t[:-1]),
        ("tensors", "step_count", lambda t: t - 1000),
        ("randomization", "global_step", lambda v: 3.7),
        ("seed", None, lambda v: 2**40),
        ("params", "names", lambda n: (*n[:-1], "bogus")),
    ]))
    def load_corrupted_env(self, corruption):
        state = self.env.state_dict()
        outer, inner, edit = corruption
        if inner is None:
            state[outer] = edit(state[outer])
        else:
            state[outer][inner] = edit(state[outer][inner])
        self.expect_rejected(lambda: self.env.load_state_dict(state))

    @rule(key=st.sampled_from(["count", "mean", "m2", "nonfinite", "returns"]))
    def load_corrupted_norm(self, key):
        state = dict(self.norm.state_dict())
        if key == "returns":
            state[key] = torch.zeros(3)  # ObsNorm has no returns: unexpected key
        elif key == "mean":
            state[key] = state[key] + float("inf")
        else:
            state[key] = -1 - state[key]  # negative counts / M2
        self.expect_rejected(lambda: self.norm.load_state_dict(state))

    # ------------------------------------------------------------------ invariants
    @invariant()
    def parameters_inside_their_ranges(self):
        p = self.env.params
        for table in (p.nominal, p.effective):
            for name in p.names:
                v, spec = table[name], p.spec[name]
                assert torch.isfinite(v).all(), name
                assert bool((v >= spec.low).all() and (v <= spec.high).all()), name

    @invariant()
    def no_nan_without_a_nan_input(self):
        assert torch.isfinite(self.env.state).all()
        if self.last is not None:
            for key in ("observation", "final_observation", "reward"):
                assert torch.isfinite(self.last[key]).all(), key
        assert torch.isfinite(self.norm.mean).all() and torch.isfinite(self.norm.m2).all()
        assert int(self.norm.nonfinite.sum()) == 0


EnvMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestEnvMachine = EnvMachine.TestCase
