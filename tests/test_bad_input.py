"""Issue 14: hostile arguments get a clear error (or a defined meaning) and change nothing."""

from __future__ import annotations

import gc
import pickle
import weakref

import pytest
import torch

import gpuparam as gp

N = 8


def cartpole(n: int = N, **kw) -> gp.VecEnv:
    return gp.make("CartPole-v1", num_envs=n, device="cpu", seed=0, **kw)


def full_state(env: gp.VecEnv) -> dict:
    return env.state_dict()


def assert_same_state(a: dict, b: dict, path: str = "") -> None:
    assert type(a) is type(b), path
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same_state(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


# ---------------------------------------------------------------- 4: max_episode_steps
@pytest.mark.parametrize("steps", [2**31, 2**32 + 5, True, 0, 2.0])
def test_max_episode_steps_the_counters_cannot_hold_is_rejected(steps):
    match = r"max_episode_steps: expected an int in \[1, 2147483647\]"
    with pytest.raises(ValueError, match=match):
        cartpole(max_episode_steps=steps)


def test_max_episode_steps_at_int32_max_still_truncates_nothing_early():
    env = cartpole(max_episode_steps=2**31 - 1)
    env.state.zero_()  # upright: nothing terminates in a few steps
    for _ in range(3):
        td = env.step(torch.zeros(N, dtype=torch.int64))
    assert not td["truncated"].any()


# ---------------------------------------------------------------- 5: validate=False ids
def test_unvalidated_negative_id_writes_nothing_and_notifies_no_env():
    env = cartpole()
    seen = []
    env.params.on_change(lambda names, mask: seen.append(mask.clone()))
    before = env.params.state_dict()
    env.params.set("length", 0.7, env_ids=torch.tensor([-1]), validate=False)
    assert_same_state(before, env.params.state_dict())
    assert len(seen) == 1 and not seen[0].any()


def test_unvalidated_out_of_range_id_is_dropped_and_the_rest_written_and_notified():
    env = cartpole()
    seen = []
    env.params.on_change(lambda names, mask: seen.append(mask.clone()))
    env.params.set("length", 0.7, env_ids=[0, N], validate=False)
    length = env.params["length"]
    assert length[0] == torch.tensor(0.7) and torch.all(length[1:] == 0.5)
    want = torch.zeros(N, dtype=torch.bool)
    want[0] = True
    assert len(seen) == 1 and torch.equal(seen[0], want)


def test_obsnorm_listening_on_length_resets_exactly_the_written_envs():
    env = cartpole()
    norm = gp.ObsNorm((4,), group_ids=torch.arange(N), reset_on=("length",))
    tenv = gp.TransformedEnv(env, norm)
    tenv.reset()
    for _ in range(3):
        tenv.step(torch.zeros(N, dtype=torch.int64))
    counts = norm.count.clone()
    env.params.set("length", 0.7, env_ids=torch.tensor([-1]), validate=False)
    assert torch.equal(norm.count, counts)  # env 7's statistics survive an id that wrote nothing
    env.params.set("length", 0.7, env_ids=torch.tensor([3, -2, 99]), validate=False)
    want = counts.clone()
    want[3] = 0
    assert torch.equal(norm.count, want)


def test_validated_ids_must_be_distinct():
    env = cartpole()
    before = env.params.state_dict()
    with pytest.raises(ValueError, match="distinct indices, got duplicates"):
        env.params.set("length", torch.tensor([0.6, 0.7]), env_ids=[2, 2])
    assert_same_state(before, env.params.state_dict())


# ---------------------------------------------------------------- 7: autograd
def test_actions_that_require_grad_do_not_join_the_env_graph():
    env = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    w = torch.ones(1, requires_grad=True)
    td = env.step(torch.zeros(N, 1) * w)
    assert not any(v.requires_grad for v in td.values())
    assert not env.state_dict()["tensors"]["action"].requires_grad


def _saved_input(w: torch.Tensor, shape) -> tuple[torch.Tensor, weakref.ref]:
    """``x * w`` with a fresh ``x`` that autograd saves (for ``w``'s gradient): while any
    buffer holds the product's graph, ``x`` stays alive."""
    x = torch.rand(shape) + 0.5
    return x * w, weakref.ref(x)


def test_param_values_that_require_grad_keep_no_graph_alive():
    env = cartpole()
    w = torch.ones(1, requires_grad=True)
    v, gone = _saved_input(w, (N,))
    env.params.set("length", v * 0.5)
    del v
    gc.collect()
    assert gone() is None
    v, gone = _saved_input(w, (2,))
    env.params.set("masspole", v * 0.1, env_ids=[1, 2])
    del v
    gc.collect()
    assert gone() is None
    assert not env.params.effective_table.requires_grad


def test_stepping_with_a_policy_output_keeps_no_graph_alive():
    env = gp.make("Pendulum-v1", num_envs=64, device="cpu", seed=0)
    tenv = gp.TransformedEnv(env, gp.ObsNorm((3,)), gp.RewardNorm())
    w = torch.ones(1, requires_grad=True)
    tenv.reset()
    refs = []
    for _ in range(20):
        a, gone = _saved_input(w, (64, 1))
        td = tenv.step(a - 1.0)
        assert not td["observation"].requires_grad and not td["reward"].requires_grad
        refs.append(gone)
        del a
    gc.collect()
    assert all(r() is None for r in refs)


def test_obsnorm_and_rewardnorm_accept_grad_inputs_without_keeping_them():
    norm = gp.ObsNorm((4,), num_envs=6)
    x = torch.randn(6, 4, requires_grad=True)
    y = norm(x * 2)
    assert not y.requires_grad and not norm.mean.requires_grad
    rn = gp.RewardNorm(num_envs=6)
    r = rn(torch.randn(6, requires_grad=True) * 1, torch.zeros(6, dtype=torch.bool))
    assert not r.requires_grad and not rn.returns.requires_grad


# ---------------------------------------------------------------- 8: env_ids lists
@pytest.mark.parametrize(
    "ids, match",
    [
        ([True, False] * 4, r"expected ints, got True \(bool\).*pass mask="),
        ([0.5, 1.7], r"expected ints, got 0\.5 \(float\)"),
        ([0, "1"], r"expected ints, got '1' \(str\)"),
        (torch.ones(N, dtype=torch.bool), r"dtype torch\.bool.*pass mask="),
        ("01", r"expected a sequence of ints"),
        ([2**70], r"beyond int64"),
    ],
)
def test_env_ids_that_are_not_ints_are_rejected(ids, match):
    env = cartpole()
    before = env.params.state_dict()
    with pytest.raises(ValueError, match=match):
        env.params.set("length", 0.7, env_ids=ids)
    assert_same_state(before, env.params.state_dict())


def test_env_ids_accept_ranges_and_numpy_ints():
    np = pytest.importorskip("numpy")
    env = cartpole()
    env.params.set("length", 0.7, env_ids=range(2, 4))
    env.params.set("length", 0.8, env_ids=[np.int64(5)])
    want = torch.full((N,), 0.5)
    want[2:4], want[5] = 0.7, 0.8
    assert torch.equal(env.params["length"], want)


# ---------------------------------------------------------------- 12: empty shapes
@pytest.mark.parametrize("shape", [0, (4, 0), -3, (2, -1), 2.5, True, "4"])
def test_obsnorm_rejects_empty_and_negative_shapes(shape):
    with pytest.raises(ValueError, match="shape expected an int or a tuple of ints >= 1"):
        gp.ObsNorm(shape, num_envs=4)


# ---------------------------------------------------------------- 13: unclear errors
def test_pickling_an_env_names_state_dict():
    env = cartpole()
    with pytest.raises(TypeError, match=r"cannot be pickled.*state_dict"):
        pickle.dumps(env)
    with pytest.raises(TypeError, match=r"cannot be pickled.*state_dict"):
        pickle.dumps(gp.TransformedEnv(env, gp.ObsNorm((4,))))


def test_huge_python_numbers_are_value_errors():
    env = cartpole()
    before = env.params.state_dict()
    with pytest.raises(ValueError, match=r"parameter 'length'.*beyond float range"):
        env.params.set("length", 10**400)
    with pytest.raises(ValueError, match=r"parameter 'length'.*beyond float range"):
        env.params.set("length", 10**400, validate=False)
    with pytest.raises(ValueError, match=r"parameter 'length': expected a list of numbers"):
        env.params.set("length", [10**400] * N)
    assert_same_state(before, env.params.state_dict())


def test_cpu_0_is_the_cpu():
    env = gp.make("CartPole-v1", num_envs=N, device="cpu:0", seed=0)
    assert env.device == torch.device("cpu")
    env.step(torch.zeros(N, dtype=torch.int64))
    env.params.set("length", 0.7, mask=torch.ones(N, dtype=torch.bool))
    env.reset(torch.ones(N, dtype=torch.bool))


@pytest.mark.parametrize("eps", [float("inf"), float("nan"), 0.0, True])
def test_obsnorm_eps_must_be_finite_and_positive(eps):
    with pytest.raises(ValueError, match="eps must be > 0 and finite"):
        gp.ObsNorm(4, eps=eps)
    with pytest.raises(ValueError, match="eps must be > 0 and finite"):
        gp.RewardNorm(eps=eps)


def test_set_level_rejects_bool_and_float_levels():
    env = cartpole()
    cur = gp.Curriculum(3, params={"length": (0.5, 1.0)})
    env.add_curriculum(cur)
    before = env.state_dict()
    for bad in (True, 1.0, torch.ones(N, dtype=torch.bool)):
        with pytest.raises(ValueError, match="set_level: expected an int"):
            cur.set_level(bad)
    assert_same_state(before, env.state_dict())


def test_seed_must_be_an_int32():
    for bad in (True, 2**31, 1.5):
        with pytest.raises(ValueError, match="seed: expected an int32 value"):
            gp.make("CartPole-v1", N, device="cpu", seed=bad)


def test_config_list_valued_groups_are_rejected_not_dropped():
    cfg = {"actor_params": {"cartpole": [{"length": {"range": [0.9, 1.1],
           "operation": "scaling", "distribution": "uniform"}}]}}
    with pytest.raises(ValueError, match=r"actor_params\.cartpole: expected a mapping.*list"):
        gp.randomization_from_config(cfg)


@pytest.mark.parametrize("flag", ["false", "true", 1, None])
def test_config_setup_only_must_be_a_bool(flag):
    cfg = {"sim_params": {"length": {"range": [0.9, 1.1], "operation": "scaling",
           "distribution": "uniform", "setup_only": flag}}}
    with pytest.raises(ValueError, match="setup_only expected true or false"):
        gp.randomization_from_config(cfg)


def test_config_setup_only_false_is_a_reset_term():
    cfg = {"sim_params": {"length": {"range": [0.9, 1.1], "operation": "scaling",
           "distribution": "uniform", "setup_only": False}}}
    (term,) = gp.randomization_from_config(cfg)
    assert term.on == "reset"


def test_config_frequency_true_is_rejected():
    cfg = {"frequency": True, "sim_params": {"length": {"range": [0.9, 1.1],
           "operation": "scaling", "distribution": "uniform"}}}
    with pytest.raises(ValueError, match="frequency must be an int >= 0, got True"):
        gp.randomization_from_config(cfg)


def test_torchrl_rollout_with_a_grad_policy_keeps_no_graph_alive():
    pytest.importorskip("torchrl")
    from tensordict.nn import TensorDictModule

    from gpuparam.integrations.torchrl import TorchRLEnv

    env = gp.make("Pendulum-v1", num_envs=16, device="cpu", seed=0)
    refs = []

    class Policy(torch.nn.Module):
        def forward(self, obs):
            a, gone = _saved_input(w, (16, 1))
            refs.append(gone)
            return (a - 1.0) + obs[:, :1] * 0.0

    w = torch.ones(1, requires_grad=True)
    policy = TensorDictModule(Policy(), in_keys=["observation"], out_keys=["action"])
    out = TorchRLEnv(env).rollout(10, policy)
    assert not out["next", "observation"].requires_grad
    assert not env.state_dict()["tensors"]["action"].requires_grad
    del out
    gc.collect()
    assert all(r() is None for r in refs)


def test_set_components_with_a_number_beyond_float_range_is_a_value_error():
    env = gp.make("Ant-v5", 4, device="cpu")
    before = env.params.state_dict()
    with pytest.raises(ValueError, match="beyond float range"):
        env.set_components("body_mass", {"torso": 10**400})
    after = env.params.state_dict()
    assert torch.equal(before["nominal"], after["nominal"])
    assert torch.equal(before["effective"], after["effective"])


def test_sync_every_refuses_an_unsynced_adr_curriculum_at_once():
    env = cartpole()
    term = gp.Uniform("length", 1.0, 1.0, op="scale", on="reset")
    env.randomize(term)
    cur = gp.Curriculum(1, adr=[gp.ADR(term, 0.1, (0.5, 1.5), 1.0)])
    env.add_curriculum(cur)
    with pytest.raises(ValueError, match="sync=True"):
        env.sync_every(1, cur)
    assert env.sync_schedules == ()
