"""Randomization terms: distributions, operations, masks, vector parameters, keys."""

from __future__ import annotations

import math

import pytest
import torch
import warp as wp
from gpuparam.kernels.rng import STREAM_TERM0, rng_key, uniform
from randomization_helpers import N, WindyCartPole, actions, cartpole, eff

import gpuparam as gp

stats = pytest.importorskip("scipy.stats")  # the distribution tests (a dev extra)

KS_N = 2048


def reset_draws(term: gp.Term, n: int = KS_N, seed: int = 3, cls=gp.CartPoleEnv) -> torch.Tensor:
    """One draw per env of a reset term: the effective values ``[n, *shape]`` after reset."""
    env = cartpole(n, seed=seed, cls=cls)
    env.randomize(term)
    env.reset()
    return env.params[term.param].clone()


# ---------------------------------------------------------------------------- distributions
def test_uniform_ks():
    x = reset_draws(gp.Uniform("length", 0.3, 1.0))
    assert x.min() >= 0.3 and x.max() <= 1.0
    assert stats.kstest(x.numpy(), stats.uniform(0.3, 0.7).cdf).pvalue > 1e-3


def test_loguniform_ks():
    x = reset_draws(gp.LogUniform("masspole", 0.01, 1.0))
    assert x.min() >= 0.01 and x.max() <= 1.0
    logs = torch.log(x.double()).numpy()
    lo, hi = math.log(0.01), math.log(1.0)
    assert stats.kstest(logs, stats.uniform(lo, hi - lo).cdf).pvalue > 1e-3


def test_gaussian_ks_and_moments():
    x = reset_draws(gp.Gaussian("gravity", 9.8, 0.5)).double()
    assert abs(x.mean().item() - 9.8) < 4 * 0.5 / math.sqrt(KS_N)
    assert abs(x.std().item() - 0.5) < 0.05
    assert stats.kstest(x.numpy(), stats.norm(9.8, 0.5).cdf).pvalue > 1e-3


def test_choice_frequencies():
    x = reset_draws(gp.Choice("length", [0.25, 0.5, 1.0], probs=[0.2, 0.3, 0.5]))
    freq = torch.stack([(x == v).float().mean() for v in (0.25, 0.5, 1.0)])
    assert torch.allclose(freq, torch.tensor([0.2, 0.3, 0.5]), atol=0.04)
    assert float(freq.sum()) == 1.0


def test_first_draw_uses_rng_key():
    """A term's first draw of env i is uniform(rng_key(seed, i, STREAM_TERM0 + uid, 0))."""

    @wp.kernel
    def first_uniform(seed: int, stream: int, out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = uniform(rng_key(seed, i, stream, 0))

    env = cartpole(seed=11)
    env.randomize(gp.Uniform("gravity", 0.0, 1.0, on="startup"))
    ref = torch.zeros(N)
    wp.launch(first_uniform, N, [11, STREAM_TERM0 + 0, wp.from_torch(ref)], device="cpu")
    assert torch.equal(env.params["gravity"], ref)


# ---------------------------------------------------------------------------- operations
def test_set_add_scale_share_draws_and_act_on_nominal():
    """Same seed and uid: the same draws u; add/scale give nominal + u / nominal * u at every
    step (no compounding), set gives u."""
    envs = {op: cartpole(seed=2) for op in ("set", "add", "scale")}
    for op, env in envs.items():
        env.params.set("length", 0.8)
        env.randomize(gp.Uniform("length", 0.5, 1.5, op=op, on="step"))
    for a in actions(envs["set"], 20):
        envs["set"].step(a)
        u = envs["set"].params["length"].clone()
        envs["add"].step(a)
        envs["scale"].step(a)
        assert torch.equal(envs["add"].params["length"], 0.8 + u)
        assert torch.equal(envs["scale"].params["length"], torch.tensor(0.8) * u)
        assert torch.equal(envs["scale"].params.nominal["length"], torch.full((N,), 0.8))


def test_step_terms_draw_every_step_for_every_env():
    env = cartpole()
    term = gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step")
    env.randomize(term)
    prev = eff(env)
    for t, a in enumerate(actions(env, 10), start=1):
        env.step(a)
        assert torch.equal(env.randomization.counters(term), torch.full((N,), t, dtype=torch.int32))
        now = eff(env)
        assert (now[4] != prev[4]).all()
        prev = now


def test_reset_terms_change_only_resetting_envs():
    env = cartpole(128)
    term = gp.Uniform("length", 0.3, 1.0, on="reset")
    env.randomize(term)
    env.reset()
    resets = 0
    for a in actions(env, 60):
        before = eff(env)
        td = env.step(a)
        changed = (eff(env) != before).any(0)
        assert torch.equal(changed, td["done"])
        resets += int(td["done"].sum())
    assert resets > 0
    assert int(env.randomization.counters(term).sum()) == resets + 128
    mask = torch.arange(128) % 3 == 0
    before = eff(env)
    env.reset(mask)
    assert torch.equal((eff(env) != before).any(0), mask)


def test_startup_terms_apply_once_to_their_envs():
    env = cartpole()
    mask = torch.arange(N) < 10
    env.randomize(gp.Uniform("gravity", 1.0, 2.0, on="startup", mask=mask))
    g = env.params["gravity"].clone()
    assert ((g >= 1) & (g <= 2))[mask].all() and (g[~mask] == 9.8).all()
    env.reset()
    for a in actions(env, 30):
        env.step(a)
    assert torch.equal(env.params["gravity"], g)


# ---------------------------------------------------------------------------- masks
def test_mask_and_env_ids_confine_terms_bit_for_bit():
    env = cartpole()
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[1, 5, 17, 40]] = True
    t1 = gp.Uniform("gravity", 1.0, 2.0, on="step", mask=mask)
    t2 = gp.Uniform("length", 1.0, 2.0, on="step", env_ids=[1, 5, 17, 40])
    env.randomize(t1, t2)
    base = eff(env)
    for a in actions(env, 5):
        env.step(a)
    now = eff(env)
    for row in (0, 3):
        assert torch.equal(now[row, ~mask], base[row, ~mask])
        assert ((now[row, mask] >= 1) & (now[row, mask] <= 2)).all()
    assert torch.equal(env.randomization.counters(t1), 5 * mask.int())
    new_mask = torch.arange(N) >= 60
    env.randomization.set_mask(t1, new_mask)
    env.step(actions(env, 1)[0])
    assert torch.equal(env.randomization.counters(t1), 5 * mask.int() + new_mask.int())


def test_masked_terms_on_same_parameter_split_the_envs():
    env = cartpole()
    left = torch.arange(N) < N // 2
    env.randomize(
        gp.Uniform("length", 0.1, 0.2, on="reset", mask=left),
        gp.Uniform("length", 2.0, 3.0, on="reset", mask=~left),
    )
    env.reset()
    x = env.params["length"]
    assert (x[left] <= 0.2).all() and (x[~left] >= 2.0).all()


# ---------------------------------------------------------------------------- vector params
def test_vector_parameter_per_component_ranges():
    x = reset_draws(gp.Uniform("wind", (-1.0, -2.0, -3.0), (1.0, 2.0, 3.0)), cls=WindyCartPole)
    assert x.shape == (KS_N, 3)
    half = torch.tensor([1.0, 2.0, 3.0])
    assert (x.abs() <= half).all()
    assert (x.amax(0) - x.amin(0) > 1.9 * half * 0.95).all()
    g = reset_draws(gp.Gaussian("wind", 0.0, (0.1, 1.0, 3.0)), cls=WindyCartPole)
    assert torch.allclose(g.std(0), torch.tensor([0.1, 1.0, 3.0]), rtol=0.08)
    c = reset_draws(
        gp.Choice("wind", [(1.0, 2.0, 3.0), (4.0, 5.0, 6.0)], probs=[0.25, 0.75]),
        cls=WindyCartPole,
    )
    second = (c == torch.tensor([4.0, 5.0, 6.0])).all(1)
    assert (second | (c == torch.tensor([1.0, 2.0, 3.0])).all(1)).all()
    assert abs(second.float().mean().item() - 0.75) < 0.04


def test_kernel_params_let_the_kernel_ignore_extra_parameters():
    a, b = cartpole(), cartpole(cls=WindyCartPole)
    b.randomize(gp.Uniform("wind", -5.0, 5.0, on="step"))
    for act in actions(a, 20):
        ta, tb = a.step(act), b.step(act)
        assert torch.equal(ta["observation"], tb["observation"])


# ---------------------------------------------------------------------------- independence
def _trajectory(n: int, steps: int = 40):
    env = cartpole(n, seed=9)
    env.randomize(
        gp.Uniform("length", 0.3, 1.0, on="reset"),
        gp.Gaussian("force_mag", 0.0, 1.0, op="add", on="step"),
        gp.LogUniform("masspole", 0.5, 2.0, op="scale", on=gp.Every(3)),
        gp.Choice("gravity", [9.0, 9.8, 10.5], on=gp.Interval(0.04, 0.2)),
    )
    env.reset()
    out = []
    for a in actions(env, steps):
        td = env.step(a)
        out.append((eff(env)[:, :64], td["observation"][:64].clone()))
    return out


def test_draws_do_not_depend_on_num_envs():
    for (p64, o64), (p128, o128) in zip(_trajectory(64), _trajectory(128), strict=True):
        assert torch.equal(p64, p128)
        assert torch.equal(o64, o128)


def test_reseed_restarts_draws_whatever_the_history():
    def run(env):
        env.reset()
        out = []
        for act in actions(env, 15):
            env.step(act)
            out.append(eff(env))
        return out

    def terms():
        return gp.Uniform("length", 0.3, 1.0), gp.Uniform("tau", 0.01, 0.02, on="step")

    a = cartpole(seed=0)
    a.randomize(*terms())
    for act in actions(a, 7):
        a.step(act)
    a.reset(seed=5)
    b = cartpole(seed=1)
    b.randomize(*terms())
    b.reset(seed=5)
    for x, y in zip(run(a), run(b), strict=True):
        assert torch.equal(x, y)


# ---------------------------------------------------------------------------- clamping, removal
def test_draws_are_clamped_on_device_and_counted():
    env = cartpole()
    env.randomize(gp.Gaussian("masspole", 0.1, 100.0, on="step"))
    at_bound = 0
    for a in actions(env, 10):
        env.step(a)
        x = env.params["masspole"]
        assert (x >= 1e-4).all() and (x <= 100.0).all()
        at_bound += int(((x == 1e-4) | (x == 100.0)).sum())
    assert at_bound > 0
    assert int(env.randomization.clamped) == at_bound


def test_remove_restores_nominal_and_stops_drawing():
    env = cartpole()
    env.params.set("length", 0.7)
    remove = env.randomize(gp.Uniform("length", 0.3, 1.0, op="set", on="step"))
    env.step(actions(env, 1)[0])
    assert not torch.equal(env.params["length"], torch.full((N,), 0.7))
    remove()
    assert env.randomization.terms == () and not env.randomization.step_active
    assert torch.equal(env.params["length"], torch.full((N,), 0.7))
    env.step(actions(env, 1)[0])
    assert torch.equal(env.params["length"], torch.full((N,), 0.7))


def test_listeners_are_notified_with_the_written_envs():
    env = cartpole()
    calls = []
    env.params.on_change(
        lambda names, mask: calls.append((names, None if mask is None else mask.clone()))
    )
    env.randomize(gp.Uniform("length", 0.3, 1.0), gp.Uniform("gravity", 9.0, 10.0, on="step"))
    every = gp.Uniform("tau", 0.01, 0.02, on=gp.Every(4))
    env.randomize(every)
    env.reset()
    assert calls[-1][0] == ("length",) and calls[-1][1].all()
    for a in actions(env, 12):
        calls.clear()
        before = env.randomization.counters(every).clone()
        td = env.step(a)
        by_names = {c[0]: c[1] for c in calls}
        assert torch.equal(by_names[("gravity", "tau")], torch.ones(N, dtype=torch.bool)) or (
            by_names[("gravity", "tau")] is None
        )
        assert torch.equal(by_names[("length",)], td["done"])
    fired = env.randomization.counters(every) != before
    assert fired.any()


def test_no_terms_no_launches():
    env = cartpole()
    assert not env.randomization.step_active and not env.randomization.reset_active
    for a in actions(env, 3):
        env.step(a)
    assert int(env.randomization.global_step) == 3


def test_normal_quantiles_match_the_reference():
    """Gaussian draws are the standard normal quantile of p = (m + 1/2) / 2^24 for the top
    24 bits m of the event's bits: within 2e-6 of scipy's ``ndtri`` over the whole grid
    (every 61st point and both ends) and exactly symmetric."""
    from gpuparam.kernels.rng import normal
    from scipy.special import ndtri

    from gpuparam._device import init_warp

    init_warp()  # wp.from_torch needs it (run alone, no earlier test has done it)

    @wp.kernel
    def quantiles(m: wp.array(dtype=wp.int32), x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = normal(wp.uint32(m[i]) << wp.uint32(8))

    grid = torch.cat([torch.arange(0, 1 << 24, 61), torch.tensor([1, 2, (1 << 24) - 1])])
    m = grid.to(torch.int32)
    x = torch.zeros(len(m))
    wp.launch(quantiles, len(m), [wp.from_torch(m), wp.from_torch(x)], device="cpu")
    ref = torch.from_numpy(ndtri((grid.double().numpy() + 0.5) / (1 << 24)))
    assert (x.double() - ref).abs().max() < 2e-6
    mirror = ((1 << 24) - 1 - grid).to(torch.int32)
    y = torch.zeros(len(m))
    wp.launch(quantiles, len(m), [wp.from_torch(mirror), wp.from_torch(y)], device="cpu")
    assert torch.equal(y, -x)


def test_normal_bits_pinned_over_every_24_bit_value():
    """``normal`` (and the ``log_pos`` of its tail) gives the same float32 bits as the
    reviewed kernel (669e63f, whose tail called ``log_int``) for every one of the 2^24
    values of ``m``: a SHA-256 of all of them."""
    import hashlib

    from gpuparam.kernels.rng import normal

    @wp.kernel
    def every_m(x: wp.array(dtype=float)):
        m = wp.tid()
        x[m] = normal(wp.uint32(m) << wp.uint32(8))

    x = wp.zeros(1 << 24, dtype=float, device="cpu")
    wp.launch(every_m, 1 << 24, [x], device="cpu")
    digest = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    assert digest == "1cac8d9c3e2b2a34b71f87a0639bcad87068501ffbd916a5c3ab6e431ea9d927"
