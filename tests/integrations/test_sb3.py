"""SB3VecEnv: PPO under VecNormalize, SB3's VecEnv contract, parameters through set_attr."""

from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import pytest
import torch

import gpuparam as gp

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

from gpuparam.integrations.sb3 import SB3VecEnv  # noqa: E402

N = 8


def _venv(name="CartPole-v1", **kw) -> SB3VecEnv:
    return SB3VecEnv(gp.make(name, num_envs=N, device="cpu", seed=0, **kw))


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_learns_a_few_iterations_under_vecnormalize(name):
    venv = _venv(name, max_episode_steps=20)
    env = VecNormalize(venv, gamma=0.99)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = PPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0,
                    policy_kwargs={"net_arch": [16]}, device="cpu")
        model.learn(total_timesteps=3 * 16 * N)
    assert [str(w.message) for w in record if "gpuparam" in w.filename] == []
    assert len(model.ep_info_buffer) > 0  # "episode" infos reached SB3's logger
    ep = model.ep_info_buffer[-1]
    assert ep["l"] <= 20 and np.isfinite(ep["r"])
    assert env.obs_rms.count > 3 * 16 * N


def test_step_contract_and_outputs_are_copies():
    venv = _venv("Pendulum-v1", max_episode_steps=3)
    obs = venv.reset()
    assert obs.shape == (N, 3) and obs.dtype == np.float32
    twin = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, max_episode_steps=3)
    twin.reset()
    a = np.ones((N, 1), dtype=np.float32)
    out = venv.step(a)
    kept = [x.copy() for x in out[:3]]
    ref = twin.step(torch.ones(N, 1))
    np.testing.assert_array_equal(out[0], ref["observation"].numpy())
    venv.step(-a)
    for x, y in zip(out[:3], kept, strict=True):
        np.testing.assert_array_equal(x, y)
    twin.step(-torch.ones(N, 1))
    obs, rew, done, infos = venv.step(a)
    ref = twin.step(torch.ones(N, 1))
    assert done.all() and rew.dtype == np.float32
    for i, info in enumerate(infos):
        np.testing.assert_array_equal(info["terminal_observation"],
                                      ref["final_observation"][i].numpy())
        assert info["TimeLimit.truncated"] is True and info["episode"]["l"] == 3
        assert info["episode"]["r"] == pytest.approx(float(ref["episode_return"][i]))
    np.testing.assert_array_equal(obs, ref["observation"].numpy())
    assert venv.step(a)[3] == [{}] * N


def test_terminal_info_on_termination_is_not_a_timeout():
    venv = _venv()
    venv.reset()
    for _ in range(100):
        _, _, done, infos = venv.step(np.ones(N, dtype=np.int64))
        if done.any():
            break
    i = int(np.flatnonzero(done)[0])
    assert infos[i]["TimeLimit.truncated"] is False
    assert abs(infos[i]["terminal_observation"][2]) > 0.2  # past the pole angle bound


def test_set_attr_and_env_method_write_parameters():
    venv = _venv()
    venv.set_attr("length", 0.9, indices=[1, 3])
    length = venv.gp_env.params["length"]
    assert torch.all(length[[1, 3]] == 0.9) and length[0] == 0.5
    assert venv.get_attr("length", indices=[0, 1]) == [pytest.approx(0.5), pytest.approx(0.9)]
    venv.env_method("set_masspole", 0.2, indices=2)
    assert venv.env_method("get_masspole", indices=[2, 4]) == [pytest.approx(0.2),
                                                              pytest.approx(0.1)]
    venv.set_attr("force_mag", 5.0)
    assert torch.all(venv.params["force_mag"] == 5.0)
    venv.set_attr("force_mag", np.array(6.0))  # NumPy values with or without indices
    assert torch.all(venv.params["force_mag"] == 6.0)
    assert venv.get_attr("num_envs") == [N] * N
    assert venv.env_is_wrapped(object) == [False] * N
    with pytest.raises(ValueError, match="per-env indices only apply to parameters"):
        venv.set_attr("foo", 1, indices=[0])
    with pytest.raises(ValueError, match="expected one value"):
        venv.env_method("set_length", 0.5, 0.6)
    with pytest.raises(ValueError, match="length"):
        venv.set_attr("length", -5.0, indices=[0])  # outside the spec range


def test_param_write_and_reset_stats_between_learn_calls():
    norm = gp.ObsNorm(4)
    venv = SB3VecEnv(gp.TransformedEnv(gp.make("CartPole-v1", num_envs=N, device="cpu",
                                               seed=0), norm))
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0,
                policy_kwargs={"net_arch": [16]}, device="cpu")
    model.learn(total_timesteps=16 * N)
    mask = torch.arange(N) % 2 == 0
    venv.set_attr("force_mag", 20.0, indices=np.flatnonzero(mask.numpy()).tolist())
    norm.reset_stats(mask)
    assert norm.count[0] == 0
    model.learn(total_timesteps=16 * N, reset_num_timesteps=False)
    assert norm.count[0] == 16 * N
    assert torch.all(venv.params["force_mag"][mask] == 20.0)
    assert torch.all(venv.params["force_mag"][~mask] == 10.0)


def test_seed_reseeds_reset():
    venv = _venv()
    venv.seed(7)
    a = venv.reset()
    venv.seed(7)
    b = venv.reset()
    c = venv.reset()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_step_wait_without_actions():
    with pytest.raises(RuntimeError, match="call step_async"):
        _venv().step_wait()


def test_import_error_names_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)
    monkeypatch.delitem(sys.modules, "gpuparam.integrations.sb3", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gpuparam\[sb3\]"'):
        importlib.import_module("gpuparam.integrations.sb3")


@pytest.mark.parametrize(("name", "value", "match"), [
    ("max_episode_steps", 0, r"max_episode_steps: expected an int in \[1, 2147483647\]"),
    ("max_episode_steps", 2**31, r"max_episode_steps: expected an int in \[1, 2147483647\]"),
    ("max_episode_steps", 3.0, r"max_episode_steps: expected an int"),
    ("num_envs", 3, r"'num_envs' cannot be set; expected a parameter \(gravity, .*\) or one "
                    r"of max_episode_steps, episode_length, validate_actions"),
    ("device", "cuda", r"'device' cannot be set"),
    ("episode_length", 2.5, r"episode_length: expected a tensor or an int"),
    ("validate_actions", 1, r"validate_actions'\): expected a bool, got 1"),
])
def test_set_attr_goes_through_the_envs_validation(name, value, match):
    # issue 24 (8): max_episode_steps=0 and num_envs=3 were set (and reported by get_attr)
    venv = _venv()
    before = venv.get_attr(name)
    with pytest.raises(ValueError, match=match):
        venv.set_attr(name, value)
    assert venv.get_attr(name) == before


@pytest.mark.parametrize("transformed", [False, True])
def test_set_attr_max_episode_steps_takes_effect_at_the_next_step(transformed):
    # issue 24 (8): after capture the new limit was ignored until something else rebuilt
    env = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    venv = SB3VecEnv(gp.TransformedEnv(env, gp.ObsNorm((4,))) if transformed else env)
    venv.reset()
    env.state.zero_()  # upright: nothing terminates in these few steps
    steady = np.tile([0, 1], N // 2)
    for _ in range(env.pipeline.warmup + 2):
        venv.step(steady)
    assert env.pipeline.captured
    venv.set_attr("max_episode_steps", 3)
    lengths = env.episode_length.numpy().copy()
    _, _, done, infos = venv.step(steady)
    assert (lengths + 1 >= 3).all() and done.all()
    assert all(infos[i]["TimeLimit.truncated"] for i in range(N))
    assert venv.get_attr("max_episode_steps") == [3] * N
    venv.set_attr("episode_length", 1)
    venv.set_attr("validate_actions", True)
    with pytest.raises(ValueError, match="outside"):
        venv.step(np.full(N, 5))
    assert not venv.step(steady)[2].any()  # 1 -> 2 steps: below the limit
    assert venv.step(steady)[2].all()


def test_indices_without_sb3_private_helper(monkeypatch):
    """SB3's ``VecEnv._get_indices`` is private: the adapter resolves ``indices`` itself."""
    from stable_baselines3.common.vec_env import VecEnv

    venv = _venv()

    def private(*_):
        raise AssertionError("SB3VecEnv called SB3's private VecEnv._get_indices")

    monkeypatch.setattr(VecEnv, "_get_indices", private, raising=False)
    venv.set_attr("length", 0.9, indices=[1, 3])
    assert venv.get_attr("length", indices=3) == [pytest.approx(0.9)]
    assert venv.env_method("set_masspole", 0.2, indices=2) == [None]
    assert venv.env_is_wrapped(object, indices=[0, 1]) == [False, False]
    assert len(venv.get_attr("num_envs")) == N


def test_indices_follow_dummy_vec_env_for_every_attribute_call():
    # issue 33 (8, 11): get_attr wrapped indices=[-1] to the last env while set_attr raised;
    # [99] was a bare IndexError. One rule, DummyVecEnv's (a list): -k counts from the end
    import gymnasium
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = _venv()
    dummy = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * N)
    for idx in ([-1], -1, [0, -N], [np.int64(-2)]):
        assert len(dummy.get_attr("spec", idx)) == len(venv.get_attr("length", idx))
    venv.set_attr("length", 0.9, indices=[-1])
    venv.env_method("set_masspole", 0.2, indices=-2)
    assert venv.get_attr("length", indices=[-1, N - 1]) == [pytest.approx(0.9)] * 2
    assert venv.env_method("get_masspole", indices=[N - 2, -2]) == [pytest.approx(0.2)] * 2
    assert venv.get_attr("length", indices=[0])[0] == pytest.approx(0.5)
    assert venv.env_is_wrapped(object, indices=[-1]) == [False]
    with pytest.raises(IndexError):
        dummy.get_attr("spec", [N])
    nominal = venv.params.nominal_table.clone()
    for call in (lambda i: venv.get_attr("length", i), lambda i: venv.set_attr("length", 0.7, i),
                 lambda i: venv.env_method("set_length", 0.7, indices=i),
                 lambda i: venv.env_method("get_length", indices=i),
                 lambda i: venv.env_is_wrapped(object, i), lambda i: venv.get_attr("seed", i)):
        for bad, got in (([99], "got 99"), (-N - 1, f"got {-N - 1}"), ([True], "got True"),
                         ([0.5], "got 0.5"), (1.5, "got float")):
            with pytest.raises(ValueError, match=rf"indices expected .*ints in \[-{N}, {N}\)"
                                                 rf".*{got}"):
                call(bad)
    assert torch.equal(venv.params.nominal_table, nominal)  # refused calls changed nothing


def test_step_with_a_tensor_without_data_is_a_clear_error():
    # issue 33 (11): a meta tensor raised NotImplementedError from torch.as_tensor
    venv = _venv()
    venv.reset()
    for bad, what in ((torch.zeros(N, dtype=torch.long, device="meta"), "on meta"),
                      (torch.zeros(N, dtype=torch.long).to_sparse(), "sparse_coo")):
        with pytest.raises(ValueError, match=rf"step_async: actions expected a NumPy array or "
                                             rf"a dense torch tensor, got .*{what}"):
            venv.step(bad)
    assert venv.step(np.zeros(N, dtype=np.int64))[0].shape == (N, 4)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_episodes_ended_at_a_step_that_raised_reach_the_next_infos(error):
    # issue 33 (16): a hook raising at a truncation step lost those episodes for SB3
    def make():
        return SB3VecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0,
                                 max_episode_steps=5))

    venv, twin = make(), make()
    calls = {"n": 0}

    def hook(env, td):
        calls["n"] += 1
        if calls["n"] == 5:
            raise error("hook")

    venv.gp_env.after_step(hook)
    venv.reset(), twin.reset()
    act = np.array([0, 1] * (N // 2))
    for _ in range(4):
        venv.step(act), twin.step(act)
    with pytest.raises(error, match="hook"):
        venv.step(act)
    _, _, dones_ref, infos_ref = twin.step(act)
    assert dones_ref.all()  # every episode ended (truncated) at the step that raised
    obs, _, dones, infos = venv.step(act)
    obs_ref, _, _, infos_ref_next = twin.step(act)
    assert not dones.any() and np.array_equal(obs, obs_ref)
    for i in range(N):
        assert set(infos[i]) == {"episode"} and infos_ref_next[i] == {}
        got, want = infos[i]["episode"], infos_ref[i]["episode"]
        assert (got["r"], got["l"]) == (want["r"], want["l"]) == (5.0, 5)
    assert all(info == {} for info in venv.step(act)[3])  # delivered once
    with pytest.raises(ValueError, match="action"):  # refused before running: nothing kept
        venv.step(np.full(N, 0.5))
    assert all(info == {} for info in venv.step(act)[3])
