"""The parameter table: masked writes, bad input, checkpoints, change callbacks."""

from __future__ import annotations

import math

import pytest
import torch

import gpuparam as gp

N = 64


@pytest.fixture
def env():
    return gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)


def test_spec_names_and_defaults(env):
    assert env.params.names == (
        "gravity", "masscart", "masspole", "length", "force_mag", "tau",
        "x_threshold", "theta_threshold_radians",
    )
    spec = env.params.spec["length"]
    assert (spec.default, spec.low <= spec.default <= spec.high, spec.unit) == (0.5, True, "m")
    assert env.params["length"].shape == (N,)
    assert torch.all(env.params["gravity"] == 9.8)
    assert torch.all(env.params.nominal["gravity"] == 9.8)
    for name in ("names", "spec"):  # read-only: the tables are laid out by them
        with pytest.raises(AttributeError):
            setattr(env.params, name, ())


def test_masked_write_touches_only_masked_envs(env):
    before = env.params.effective_table.clone()
    mask = torch.arange(N) % 3 == 0
    env.params.set("length", 0.9, mask=mask)
    after = env.params.effective_table
    col, _ = env.params.columns("length")
    assert torch.all(after[col][mask] == torch.tensor(0.9))
    assert torch.equal(after[col][~mask], before[col][~mask])
    others = [c for c in range(after.shape[0]) if c != col]
    assert torch.equal(after[others], before[others])
    assert torch.equal(env.params.nominal_table, env.params.effective_table)


def test_tensor_values_env_ids_and_dicts(env):
    vals = torch.linspace(0.2, 2.0, N)
    env.params.set("length", vals)
    assert torch.equal(env.params["length"], vals)
    env.params.set("masspole", torch.tensor([0.3, 0.4]), env_ids=torch.tensor([5, 7]))
    assert env.params["masspole"][[5, 7]].tolist() == pytest.approx([0.3, 0.4])
    assert env.params["masspole"][6] == pytest.approx(0.1)
    env.params.set({"gravity": 3.0, "tau": torch.full((N,), 0.01)}, mask=vals > 1.0)
    assert torch.all(env.params["gravity"][vals > 1.0] == 3.0)
    assert torch.allclose(env.params["gravity"][vals <= 1.0], torch.tensor(9.8))


def test_reset_to_default(env):
    env.params.set({"length": 1.0, "gravity": 1.0})
    mask = torch.arange(N) < 10
    env.params.reset_to_default(mask)
    assert torch.all(env.params["length"][:10] == 0.5)
    assert torch.all(env.params["length"][10:] == 1.0)


def test_unmasked_envs_step_bit_identical():
    """A masked write changes exactly the masked envs' trajectories."""
    a = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=4)
    b = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=4)
    mask = torch.arange(N) % 2 == 1
    b.params.set("length", 1.5, mask=mask)
    g = torch.Generator().manual_seed(0)
    diff = torch.zeros(N, dtype=torch.bool)
    for _ in range(30):
        act = torch.randint(0, 2, (N,), generator=g)
        oa, ob = a.step(act)["observation"], b.step(act)["observation"]
        assert torch.equal(oa[~mask], ob[~mask])
        diff |= (oa != ob).any(1)
    assert torch.equal(diff, mask)


# ---------------------------------------------------------------- bad input
def _unchanged(env, before):
    assert torch.equal(env.params.nominal_table, before[0])
    assert torch.equal(env.params.effective_table, before[1])


def _snapshot(env):
    return env.params.nominal_table.clone(), env.params.effective_table.clone()


def test_unknown_name_lists_valid_names(env):
    before = _snapshot(env)
    with pytest.raises(KeyError, match="valid names: gravity, masscart"):
        env.params.set("lenght", 0.7)
    with pytest.raises(KeyError, match="lenght"):
        env.params["lenght"]
    with pytest.raises(KeyError):
        env.params.set({"length": 0.7, "nope": 1.0})
    _unchanged(env, before)


@pytest.mark.parametrize(
    "value, match",
    [
        (-1.0, r"'length'.*outside its range \[0.001, 100.0\]"),
        (math.nan, "outside its range"),
        (math.inf, "outside its range"),
        (torch.full((N,), 200.0), "outside its range"),
        (torch.tensor([0.5, math.nan]).repeat(N // 2), "not finite"),
        (torch.ones(N + 1), r"broadcastable to \(64,\), got shape \(65,\)"),
        (torch.ones(N, 2), "broadcastable"),
        (torch.ones(N, dtype=torch.bool), "expected a float tensor, got torch.bool"),
        ("0.5", "expected a number or a float tensor, got str"),
    ],
)
def test_bad_values_raise_and_write_nothing(env, value, match):
    before = _snapshot(env)
    with pytest.raises(ValueError, match=match):
        env.params.set("length", value)
    _unchanged(env, before)


def test_dict_write_is_all_or_nothing(env):
    before = _snapshot(env)
    with pytest.raises(ValueError, match="'tau'"):
        env.params.set({"length": 0.7, "tau": 5.0})
    _unchanged(env, before)


def test_out_of_range_only_in_unmasked_envs_is_fine(env):
    vals = torch.full((N,), 500.0)
    vals[:4] = 0.7
    mask = torch.arange(N) < 4
    env.params.set("length", vals, mask=mask)
    assert torch.allclose(env.params["length"][:4], torch.tensor(0.7))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mask=torch.ones(N - 1, dtype=torch.bool)), r"expected shape \(64,\), got \(63,\)"),
        (dict(mask=torch.ones(N)), "expected dtype torch.bool, got torch.float32"),
        (dict(mask=[True] * N), "expected a bool tensor"),
        (dict(env_ids=[0, N]), r"indices in \[0, 64\), got \[0, 64\]"),
        (dict(env_ids=torch.tensor([1.0])), "integer tensor"),
        (dict(mask=torch.ones(N, dtype=torch.bool), env_ids=[1]), "mask or env_ids, not both"),
    ],
)
def test_bad_masks_and_ids(env, kwargs, match):
    before = _snapshot(env)
    with pytest.raises(ValueError, match=match):
        env.params.set("length", 0.7, **kwargs)
    _unchanged(env, before)


def test_wrong_device_is_rejected(env):
    value = torch.ones(N, dtype=torch.float32, device="meta")
    with pytest.raises(ValueError, match="expected a tensor on cpu, got meta"):
        env.params.set("length", value)


def test_validate_false_clamps_and_skips_non_finite(env):
    vals = torch.tensor([500.0, -3.0, math.nan, 0.7]).repeat(N // 4)
    env.params.set("length", vals, validate=False)
    got = env.params["length"][:4].tolist()
    assert got == pytest.approx([100.0, 0.001, 0.5, 0.7])


def test_make_overrides_are_validated():
    env = gp.make("CartPole-v1", num_envs=4, device="cpu", length=0.8)
    assert torch.allclose(env.params["length"], torch.tensor(0.8))
    with pytest.raises(ValueError, match="'length'"):
        gp.make("CartPole-v1", num_envs=4, device="cpu", length=-1.0)
    with pytest.raises(KeyError, match="valid names"):
        gp.make("CartPole-v1", num_envs=4, device="cpu", lenght=0.8)
    with pytest.raises(KeyError, match="registered: CartPole-v1, Pendulum-v1"):
        gp.make("CartPole-v0", num_envs=4, device="cpu")


# ---------------------------------------------------------------- checkpoints, callbacks
def test_state_dict_round_trip(env):
    env.params.set("length", torch.linspace(0.3, 1.0, N))
    state = env.params.state_dict()
    other = gp.make("CartPole-v1", num_envs=N, device="cpu")
    other.params.load_state_dict(state)
    assert torch.equal(other.params.effective_table, env.params.effective_table)
    small = gp.make("CartPole-v1", num_envs=N // 2, device="cpu")
    before = _snapshot(small)
    want = r"params\.nominal: expected a torch\.float32 tensor \(8, 32\), got .* \(8, 64\)"
    with pytest.raises(ValueError, match=want):
        small.params.load_state_dict(state)
    _unchanged(small, before)


def test_on_change_receives_names_and_mask(env):
    seen = []
    remove = env.params.on_change(lambda names, mask: seen.append((names, mask)))
    mask = torch.arange(N) < 3
    env.params.set("length", 0.9, mask=mask)
    env.params.set({"gravity": 1.0, "tau": 0.01}, env_ids=[4])
    env.params.set("masspole", 0.2)
    assert seen[0][0] == ("length",) and torch.equal(seen[0][1], mask)
    assert seen[1][0] == ("gravity", "tau") and seen[1][1].nonzero().flatten().tolist() == [4]
    assert seen[2] == (("masspole",), None)
    remove()
    env.params.set("length", 0.7)
    assert len(seen) == 3


def test_a_load_tells_listeners_only_what_it_changed():
    import gpuparam as gp

    env = gp.make("Pendulum-v1", 8, device="cpu", seed=0)
    heard = []
    env.params.on_change(lambda names, mask: heard.append((names, mask.clone())))
    state = env.params.state_dict()
    env.params.load_state_dict(state)  # the same values: nothing to hear
    assert heard == []
    state["nominal"][env.params.columns("g")[0], 3] = 10.5
    state["effective"][env.params.columns("g")[0], 3] = 10.5
    env.params.load_state_dict(state)
    assert heard[-1][0] == ("g",) and heard[-1][1].tolist() == [i == 3 for i in range(8)]


def test_unvalidated_non_finite_values_leave_both_tables_alone():
    import gpuparam as gp

    env = gp.make("CartPole-v1", 4, device="cpu", seed=0)
    env.randomize(gp.Uniform("length", 0.4, 0.6, on="startup"))
    eff, nom = env.params["length"].clone(), env.params.nominal["length"].clone()
    value = torch.tensor([float("nan"), 0.7, float("inf"), 0.8])
    for how in ({}, {"env_ids": torch.arange(4)}, {"mask": torch.ones(4, dtype=torch.bool)}):
        env.params.set("length", value, validate=False, **how)
        got = env.params["length"]
        assert got[0] == eff[0] and got[2] == eff[2], how  # the randomized draws stay
        assert env.params.nominal["length"][0] == nom[0] and got[1] == pytest.approx(0.7)
    env.params.set("length", float("nan"), validate=False)  # a scalar: nothing written
    assert env.params["length"][0] == eff[0]


def _expect(table, name, values, mask, before):
    """``before`` with the masked rows of ``name`` replaced by ``values`` (broadcast)."""
    m = mask.reshape(-1, *([1] * (before.dim() - 1)))
    return torch.where(m, values.to(torch.float32).expand_as(before), before)


def test_writes_read_the_callers_tensors_as_they_are_now(env):
    """A write's launch reads the caller's mask and values in place (views kept by address,
    issue 41): contents changed in place since the last call, non-contiguous masks and
    strided, broadcast or float64 values all write what they hold at the call, bit for
    bit, in the masked envs only; validated or not."""
    p = env.params
    mask = torch.arange(N) < 10
    vals = torch.linspace(0.2, 2.0, N)
    p.set("length", vals, mask=mask)
    for validate in (True, False):
        mask.copy_(torch.arange(N) % 5 == validate)  # same addresses, new contents
        vals.mul_(0.75)
        before = p["length"].clone()
        p.set("length", vals, mask=mask, validate=validate)
        assert torch.equal(p["length"], _expect(p, "length", vals, mask, before))
    wide = torch.arange(2 * N) % 6 == 0  # wide[::2]: a strided mask
    cols = torch.stack([vals, vals + 0.125], 1)  # cols[:, 1]: strided values
    for value in (cols[:, 1], torch.tensor(0.25, dtype=torch.float64), torch.tensor([0.3])):
        before = p["length"].clone()
        p.set("length", value, mask=wide[::2])
        assert torch.equal(p["length"], _expect(p, "length", value, wide[::2], before))
    assert torch.equal(p.nominal_table, p.effective_table)


def test_vector_parameter_writes_of_any_layout():
    specs = [gp.ParamSpec("a", 0.0, -1.0, 1.0), gp.ParamSpec("v", (0.0, 0.0, 0.0), -1.0, 1.0,
                                                             shape=(3,))]
    p = gp.ParamTable(specs, N, torch.device("cpu"))
    mask = torch.arange(N) % 4 == 1
    full = torch.rand(N, 3) - 0.5
    for value in (full, full.T.contiguous().T, torch.tensor([0.1, 0.2, 0.3]), full[:1]):
        before = p["v"].clone()
        p.set("v", value, mask=mask)
        assert torch.equal(p["v"], _expect(p, "v", value, mask, before))
        assert torch.all(p["a"] == 0.0)
    bad = full.clone()
    bad[6, 2] = 2.0  # env 6 is not masked: fine; then masked: refused, nothing written
    p.set("v", bad, mask=mask)
    before = p.state_dict()
    with pytest.raises(ValueError, match=r"parameter 'v': value 2.0 outside its range"):
        p.set("v", bad, mask=mask | (torch.arange(N) == 6))
    assert torch.equal(p.nominal_table, before["nominal"])
    assert torch.equal(p.effective_table, before["effective"])


def test_a_refused_tensor_write_leaves_the_next_one_unharmed(env):
    """The device range check's flag is cleared by the refused call; a flag left set (a
    call interrupted between its check and its read) costs the next call a slow check,
    never a false error."""
    p, mask = env.params, torch.arange(N) % 2 == 0
    for _ in range(2):
        with pytest.raises(ValueError, match="outside its range"):
            p.set("length", torch.full((N,), -1.0), mask=mask)
        assert torch.all(p["length"] == 0.5)
        p.set("length", torch.full((N,), 0.75), mask=mask)
        assert torch.equal(p["length"], torch.where(mask, 0.75, 0.5))
        p.set("length", 0.5)
    p._check_flag.fill_(1)  # as an interrupted call would leave it
    p.set("length", torch.full((N,), 0.75), mask=mask)
    assert torch.equal(p["length"], torch.where(mask, 0.75, 0.5))
    assert p._check_flag.item() == 0


def test_writes_rotating_over_many_masks_write_exactly_their_envs(env):
    """Masks rotating over more addresses than a bound launch keeps recorded launches for
    (``gpuparam._launch.MAX_VARIANTS``), values and validation changing call by call: every
    write lands in exactly its mask's envs, bit for bit."""
    p = env.params
    g = torch.Generator().manual_seed(0)
    masks = [torch.rand(N, generator=g) < 0.4 for _ in range(12)]
    for r in range(3):
        for i, m in enumerate(masks):
            value = 0.25 + 0.01 * (i + 12 * r)
            before = p["length"].clone()
            if i % 3 == 0:
                p.set("length", value, mask=m)
            else:
                p.set("length", torch.full((N,), value), mask=m, validate=i % 3 == 1)
            assert torch.equal(p["length"], torch.where(m, torch.tensor(value), before)), (r, i)
    assert torch.equal(p.nominal_table, p.effective_table)


def test_validated_tensor_writes_inside_a_warp_capture_are_checked_at_once(env):
    """Inside a Warp capture a check launch is recorded, not run, so a validated tensor
    value is checked with torch ops at the call (as before issue 41): a bad one raises, a
    good one's write is recorded and lands when the graph is launched."""
    import warp as wp

    p, mask = env.params, torch.arange(N) % 3 == 0
    with pytest.raises(ValueError, match="outside its range"):
        with wp.ScopedCapture(device="cpu"):
            p.set("length", torch.full((N,), -1.0), mask=mask)
    value = torch.full((N,), 0.75)  # (a graph reads its tensors when launched: kept)
    with wp.ScopedCapture(device="cpu") as cap:
        p.set("length", value, mask=mask)
    assert torch.all(p["length"] == 0.5)  # recorded, not run
    wp.capture_launch(cap.graph)
    assert torch.equal(p["length"], torch.where(mask, 0.75, 0.5))
