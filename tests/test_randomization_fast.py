"""Draws pinned to their formula: each env draws at its own event counter (equal counters,
counters loaded unequal, counters left unequal by a mask); the plain-arithmetic ``ln``,
``exp`` and log-uniform that make draws identical on CPU and GPU."""

from __future__ import annotations

import numpy as np
import torch
import warp as wp
from gpuparam.kernels.rng import (
    STREAM_TERM0,
    draw_bits,
    exp_pos,
    log_pos,
    log_uniform,
    term_key,
    uniform_in,
)
from randomization_helpers import N, actions, cartpole

import gpuparam as gp

LOW, HIGH = 0.5, 1.5


@wp.kernel
def _expected_scale(seed: int, stream: int, nominal: float, ctrs: wp.array(dtype=wp.int32),
                    out: wp.array(dtype=float)):
    """``nominal * U(LOW, HIGH)`` of env i's draw at its counter ``ctrs[i]``."""
    i = wp.tid()
    h = draw_bits(int(term_key(seed, i, stream)), ctrs[i])
    out[i] = nominal * uniform_in(h, LOW, HIGH)


def _expected(env, term, counters: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(env.num_envs)
    saved = env.randomization.state_dict()["terms"]
    uid = next(t["uid"] for t in saved if t["name"] == repr(term))
    nominal = float(env.params.nominal["length"][0])
    wp.launch(_expected_scale, env.num_envs, [
        int(env.seed), STREAM_TERM0 + uid, nominal, wp.from_torch(counters.contiguous()),
        wp.from_torch(out),
    ], device="cpu")
    return out


def _scale_term() -> gp.Term:
    return gp.Uniform("length", LOW, HIGH, op="scale", on="step")


def test_equal_counters_draw_each_env_at_its_counter():
    env = cartpole(seed=5)
    term = _scale_term()
    env.randomize(term)
    for a in actions(env, 4):
        before = env.randomization.counters(term).clone()
        env.step(a)
        assert torch.equal(env.params["length"], _expected(env, term, before))


def test_loaded_unequal_counters_draw_each_env_at_its_own_counter():
    env = cartpole(seed=5)
    term = _scale_term()
    env.randomize(term)
    for a in actions(env, 3):
        env.step(a)
    state = env.state_dict()
    saved = next(t for t in state["randomization"]["terms"] if t["name"] == repr(term))
    saved["counter"] += torch.arange(N, dtype=torch.int32) % 5  # envs at different counters
    other = cartpole(seed=5)
    other.randomize(_scale_term())
    other.load_state_dict(state)
    (t2,) = other.randomization.terms
    before = other.randomization.counters(t2).clone()
    assert not torch.equal(before, before[:1].expand(N))
    other.step(actions(other, 1)[0])
    assert torch.equal(other.params["length"], _expected(other, t2, before))
    assert torch.equal(other.randomization.counters(t2), before + 1)
    # a reseed restarts every counter at 0: equal again
    other.reset(seed=9)
    other.step(actions(other, 1)[0])
    assert torch.equal(other.randomization.counters(t2), torch.ones(N, dtype=torch.int32))
    zeros = torch.zeros(N, dtype=torch.int32)
    assert torch.equal(other.params["length"], _expected(other, t2, zeros))


def test_a_mask_once_set_keeps_each_env_at_its_own_counter():
    env = cartpole(seed=6)
    term = _scale_term()
    env.randomize(term)
    steps = iter(actions(env, 6))
    env.step(next(steps))
    env.randomization.set_mask(term, torch.arange(N) < N // 3)
    env.step(next(steps))
    env.randomization.set_mask(term, None)  # all envs again, counters now differ
    for a in steps:
        before = env.randomization.counters(term).clone()
        env.step(a)
        assert torch.equal(env.params["length"], _expected(env, term, before))
    assert env.randomization.counters(term)[0] != env.randomization.counters(term)[-1]


@wp.kernel
def _log_ints(out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = log_pos(float(i + 1))


def test_log_pos_is_ln_for_every_24_bit_integer():
    """The Gaussian tail's ``ln t`` (exponent and mantissa read from the bits of
    ``float(t)``) within float32 rounding of ``ln t`` for every ``1 <= t < 2^24``."""
    n = (1 << 24) - 1
    out = wp.zeros(n, dtype=float, device="cpu")
    wp.launch(_log_ints, n, [out], device="cpu")
    ref = np.log(np.arange(1, n + 1, dtype=np.float64))
    err = np.abs(out.numpy().astype(np.float64) - ref)
    assert err.max() < 4e-6  # ulp(16.6) = 1.9e-6
    assert (err[:1 << 10] < 1e-6).all()  # small t: ln t < 7


@wp.kernel
def _exp_log(y: wp.array(dtype=float), x: wp.array(dtype=float), exp_out: wp.array(dtype=float),
             log_out: wp.array(dtype=float)):
    i = wp.tid()
    exp_out[i] = exp_pos(y[i])
    log_out[i] = log_pos(x[i])


def test_exp_and_log_of_plain_arithmetic_match_float64():
    """LogUniform's ``exp`` and ``ln`` (no library call: the same bits on CPU and GPU) are
    within float32 rounding: ``e^y`` for ``|y| <= 80``, ``ln x`` for normal ``x``."""
    rng = np.random.default_rng(0)
    y = np.concatenate([np.linspace(-80, 80, 100001), rng.uniform(-5, 5, 100000),
                        [0.0, -0.0, 0.34657359, -0.34657359, 1e-8]]).astype(np.float32)
    x = np.concatenate([np.exp(rng.uniform(-80, 80, 200000)), [1.0, 2.0, 0.5, 1.4142135,
                        1.4142137, 3e-38, 3e38]]).astype(np.float32)
    x = np.resize(x, len(y))
    e, lg = (wp.zeros(len(y), dtype=float, device="cpu") for _ in range(2))
    wp.launch(_exp_log, len(y), [wp.array(y, device="cpu"), wp.array(x, device="cpu"), e, lg],
              device="cpu")
    ref_e = np.exp(y.astype(np.float64))
    assert (np.abs(e.numpy() / ref_e - 1) < 4e-7).all()
    assert (e.numpy()[y == 0] == 1.0).all()  # e^0 is exactly 1
    ref_l = np.log(x.astype(np.float64))
    assert (np.abs(lg.numpy() - ref_l) < 2e-7 + 1.2e-7 * np.abs(ref_l)).all()


@wp.kernel
def _log_uniforms(a: float, b: float, u: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = log_uniform(a, b, u[i])


def test_log_uniform_stays_in_its_range_and_follows_a_b_over_a_to_the_u():
    u = np.concatenate([np.arange(1 << 16) / (1 << 16), [1 - 2.0**-24]]).astype(np.float32)
    for a, b in ((0.01, 1.0), (0.5, 2.0), (2.0, 0.5), (1.0, 1.0), (1e-3, 1e3)):
        out = wp.zeros(len(u), dtype=float, device="cpu")
        wp.launch(_log_uniforms, len(u), [a, b, wp.array(u, device="cpu"), out], device="cpu")
        x = out.numpy()
        lo, hi = np.float32(min(a, b)), np.float32(max(a, b))
        assert x[0] == np.float32(a) and ((x >= lo) & (x <= hi)).all()
        ref = a * (b / a) ** u.astype(np.float64)
        assert (np.abs(x / ref - 1) < 1e-6).all(), (a, b)
