"""TorchRLEnv and ObsNormTransform: specs, auto-reset semantics, collectors, masks, bad input."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

import gpuparam as gp

pytest.importorskip("torchrl")

from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs import TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from gpuparam.integrations.torchrl import ObsNormTransform, TorchRLEnv  # noqa: E402
from gpuparam.transforms import ObsNorm  # noqa: E402

N = 16


def _cartpole(**kw):
    return gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0, **kw)


def _cartpole_step(obs: torch.Tensor, action: torch.Tensor, p: dict) -> torch.Tensor:
    """Gymnasium's CartPole-v1 Euler step in float64; p: parameter tensors [B]."""
    x, x_dot, th, th_dot = obs.double().unbind(-1)
    force = torch.where(action == 1, p["force_mag"], -p["force_mag"])
    total = p["masspole"] + p["masscart"]
    pml = p["masspole"] * p["length"]
    cos, sin = th.cos(), th.sin()
    temp = (force + pml * th_dot**2 * sin) / total
    th_acc = (p["gravity"] * sin - cos * temp) / (
        p["length"] * (4.0 / 3.0 - p["masspole"] * cos**2 / total)
    )
    x_acc = temp - pml * th_acc * cos / total
    tau = p["tau"]
    return torch.stack(
        [x + tau * x_dot, x_dot + tau * x_acc, th + tau * th_dot, th_dot + tau * th_acc], -1
    )


class _Spy:
    """Counts the gpuparam env's steps and records the masks of its resets."""

    def __init__(self, env):
        self.env, self.steps, self.reset_masks = env, 0, []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action):
        self.steps += 1
        return self.env.step(action)

    def reset(self, mask=None, **kw):
        self.reset_masks.append(None if mask is None else mask.clone())
        return self.env.reset(mask, **kw)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1"])
def test_check_env_specs(name):
    env = TorchRLEnv(gp.make(name, num_envs=N, device="cpu", seed=0))
    check_env_specs(env, break_when_any_done="both")


@pytest.mark.gpu
def test_cuda_check_env_specs_and_collector():
    env = TorchRLEnv(gp.make("CartPole-v1", num_envs=N, device="cuda", seed=0))
    check_env_specs(env)
    batch = next(iter(Collector(env, None, frames_per_batch=N * 8, total_frames=N * 8)))
    assert batch["next", "observation"].device.type == "cuda"


def test_set_seed_repeats_resets():
    env = TorchRLEnv(_cartpole())
    env.set_seed(5)
    a = env.reset()["observation"]
    env.rollout(3)
    env.set_seed(5)
    assert torch.equal(env.reset()["observation"], a)


def test_specs_shapes_and_dtypes():
    env = TorchRLEnv(_cartpole())
    assert env.batch_size == torch.Size([N]) and env.device == torch.device("cpu")
    assert env.observation_spec["observation"].shape == (N, 4)
    assert env.action_spec.shape == (N,) and env.action_spec.space.n == 2
    assert env.action_spec.dtype == torch.int64
    assert env.reward_spec.shape == (N, 1) and env.reward_spec.dtype == torch.float32
    for k in ("done", "terminated", "truncated"):
        assert env.full_done_spec[k].shape == (N, 1)
        assert env.full_done_spec[k].dtype == torch.bool
    pend = TorchRLEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu"))
    assert pend.action_spec.shape == (N, 1) and pend.action_spec.dtype == torch.float32
    assert float(pend.action_spec.space.high.max()) == 2.0


def test_autoreset_next_is_final_and_reset_does_not_step_again():
    spy = _Spy(_cartpole())
    env = TorchRLEnv(spy)
    T = 120
    r = env.rollout(T, break_when_any_done=False)  # [N, T]
    assert spy.steps == T
    done = r["next", "done"].squeeze(-1)
    assert done.any()
    # every transition, including those that ended an episode, follows the reference physics
    p = {k: env.params[k][:, None].double().expand(N, T) for k in env.params.names}
    want = _cartpole_step(r["observation"], r["action"], p)
    torch.testing.assert_close(r["next", "observation"].double(), want, atol=1e-4, rtol=1e-4)
    # the observation after a done step is a fresh reset observation
    after = r["observation"][:, 1:][done[:, :-1]]
    assert after.abs().max() <= 0.05
    # resets asked by TorchRL only hit done envs, which the step already reset: no new reset
    assert all(m is not None and not m.any() for m in spy.reset_masks[1:])


def test_partial_reset_of_running_envs():
    env = TorchRLEnv(_cartpole())
    td = env.reset()
    for _ in range(5):
        td = env.step_mdp(env.rand_step(td))
    before = td["observation"].clone()
    mask = torch.zeros(N, 1, dtype=torch.bool)
    mask[3] = True
    from tensordict import TensorDict

    out = env.reset(TensorDict({"_reset": mask}, batch_size=[N]))
    assert not torch.equal(out["observation"][3], before[3])
    assert out["observation"][3].abs().max() <= 0.05
    assert not out["done"].any()
    env.reset(TensorDict({"_reset": mask.squeeze(-1)}, batch_size=[N]))  # [N] is accepted too


@pytest.mark.parametrize(
    "mask, match",
    [
        (torch.zeros(N, 2, dtype=torch.bool), r"'_reset' expected a bool tensor \(16, 1\) or "
                                                   r"\(16,\) on cpu, got shape \(16, 2\)"),
        (torch.zeros(N, 1, 1, dtype=torch.bool), r"got shape \(16, 1, 1\)"),
        (torch.zeros(N, 1, dtype=torch.int64), r"'_reset' expected a bool tensor .* got "
                                                 r"dtype torch.int64"),
    ],
)
def test_bad_reset_mask(mask, match):
    from tensordict import TensorDict

    env = TorchRLEnv(_cartpole())
    env.reset()
    with pytest.raises(ValueError, match=match):
        env.reset(TensorDict({"_reset": mask}, batch_size=[N]))


@pytest.mark.parametrize(
    "action",
    [
        torch.zeros(N, 2, dtype=torch.int64),  # wrong shape
        torch.zeros(N, dtype=torch.float32),  # wrong dtype
        torch.zeros(N, dtype=torch.bool),
    ],
)
def test_bad_action_same_error_as_core(action):
    core = _cartpole()
    with pytest.raises(ValueError) as core_err:
        core.step(action)
    env = TorchRLEnv(_cartpole())
    td = env.reset()
    td.set("action", action)
    with pytest.raises(ValueError) as err:
        env.step(td)
    assert str(err.value) == str(core_err.value)


def test_attribute_delegation():
    core = _cartpole()
    env = TorchRLEnv(core)
    assert env.params is core.params and env.gp_env is core
    assert env.num_envs == N
    if hasattr(core, "randomize"):
        assert env.randomize == core.randomize
    with pytest.raises(AttributeError):
        env.no_such_attribute  # noqa: B018
    norm = ObsNorm(4)
    wrapped = TorchRLEnv(gp.transforms.TransformedEnv(_cartpole(), norm))
    assert wrapped.transforms == (norm,)
    check_env_specs(wrapped)
    # TorchRL's TransformedEnv reaches them too
    assert TransformedEnv(env, ObsNormTransform(ObsNorm(4))).params is core.params


def test_collector_sees_parameter_switch_in_next_batch():
    env = TorchRLEnv(_cartpole())
    T = 30
    collector = Collector(env, None, frames_per_batch=N * T, total_frames=3 * N * T)
    half = torch.arange(N) % 2 == 0
    seen = []
    for i, batch in enumerate(collector):
        seen.append((batch.clone(), {k: env.params[k].clone() for k in env.params.names}))
        if i == 0:
            env.params.set("force_mag", 0.0, mask=half)
    collector.shutdown()
    for batch, params in seen:
        p = {k: v[:, None].double().expand(N, T) for k, v in params.items()}
        want = _cartpole_step(batch["observation"], batch["action"], p)
        torch.testing.assert_close(batch["next", "observation"].double(), want,
                                   atol=1e-4, rtol=1e-4)
    assert (seen[1][1]["force_mag"] == torch.where(half, 0.0, 10.0)).all()
    # with force_mag 0 the action has no effect: both actions predict the same next state
    batch, params = seen[1]
    p = {k: v[:, None].double().expand(N, T) for k, v in params.items()}
    flipped = _cartpole_step(batch["observation"], 1 - batch["action"], p)
    moved = (flipped - batch["next", "observation"].double()).abs().amax(-1)
    assert (moved[half] < 1e-5).all() and (moved[~half] > 1e-3).all()


def test_obsnorm_transform_normalizes_and_resets_masked_groups():
    norm = ObsNorm(4, group_ids=torch.arange(N), num_groups=N, reset_on=("length",))
    t = ObsNormTransform(norm, out_keys=["observation_norm"])
    env = TransformedEnv(TorchRLEnv(_cartpole()), t)
    check_env_specs(env)
    td = env.reset()
    for _ in range(4):
        td = env.rand_step(td)
        nxt = td["next"]
        torch.testing.assert_close(nxt["observation_norm"], norm.normalize(nxt["observation"]))
        td = env.step_mdp(td)
    assert (norm.count > 0).all()
    counts, means = norm.count.clone(), norm.mean.clone()
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[1, 5]] = True
    t.reset_stats(mask)
    assert (norm.count[mask] == 0).all()
    assert torch.equal(norm.count[~mask], counts[~mask])
    assert torch.equal(norm.mean[~mask], means[~mask])
    # a write of a reset_on parameter resets exactly the written envs' groups
    env.rand_step(td)
    counts = norm.count.clone()
    mask2 = torch.zeros(N, dtype=torch.bool)
    mask2[[0, 7]] = True
    env.params.set("length", 0.8, mask=mask2)
    assert (norm.count[mask2] == 0).all()
    assert torch.equal(norm.count[~mask2], counts[~mask2])


class _WritesInStep(_Spy):
    """Writes ``length`` for ``mask`` inside ``step``, as reset-time randomization would."""

    mask: torch.Tensor | None = None

    def step(self, action):
        td = self.env.step(action)
        if self.mask is not None:
            self.env.params.set("length", 0.6, mask=self.mask)
        return td


def test_obsnorm_transform_defers_resets_written_during_step():
    norm = ObsNorm(4, group_ids=torch.arange(N), num_groups=N, reset_on=("length",))
    spy = _WritesInStep(_cartpole())
    env = TransformedEnv(TorchRLEnv(spy), ObsNormTransform(norm))
    td = env.step_mdp(env.rand_step(env.reset()))
    spy.mask = torch.arange(N) < 4
    env.rand_step(td)
    # reset after this step's update: pre-change observations never enter the new statistics
    assert (norm.count[:4] == 0).all() and (norm.count[4:] == 2).all()


def test_obsnorm_transform_listener_changes_no_host_state_within_a_step():
    # on CUDA the randomization stage that calls the listener is a captured torch graph:
    # its Python runs at the capture only and replays repeat its device work, so a host
    # flag set there (the deferred reset's) was set once and later resets were lost
    norm = ObsNorm(4, group_ids=torch.arange(N), num_groups=N, reset_on=("length",))
    t = ObsNormTransform(norm)
    base = _cartpole(max_episode_steps=1)  # every env ends an episode at every step
    base.randomize(gp.Uniform("length", 0.4, 0.6, on="reset"))
    env = TransformedEnv(TorchRLEnv(base), t)

    def host_state():
        return {k: v for k, v in vars(t).items()
                if not isinstance(v, (torch.Tensor, torch.nn.Module)) and not k.startswith("__")}

    before, after = [], []
    base.params.on_change(lambda names, mask: before.append(host_state()))
    td = env.step_mdp(env.rand_step(env.reset()))  # attaches the transform's listener
    base.params.on_change(lambda names, mask: after.append(host_state()))  # runs after it
    before.clear()
    td = env.step_mdp(env.rand_step(td))
    assert before and after == before
    # and the deferred resets still happen after the step's update
    assert (norm.count == 0).all()


def test_import_error_names_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchrl", None)
    monkeypatch.delitem(sys.modules, "gpuparam.integrations.torchrl", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gpuparam\[torchrl\]"'):
        importlib.import_module("gpuparam.integrations.torchrl")


def test_next_carries_raw_episode_statistics_under_reward_norm():
    # issue 13, defect 3: with gp.RewardNorm inside, RewardSum summed normalized rewards and
    # the true return was out of reach
    from torchrl.envs import RewardSum

    base = gp.TransformedEnv(gp.make("Pendulum-v1", num_envs=4, device="cpu", seed=0,
                                     max_episode_steps=10), gp.RewardNorm())
    env = TransformedEnv(TorchRLEnv(base), RewardSum(in_keys=["reward_raw"],
                                                     out_keys=["raw_return"]))
    check_env_specs(env)
    td = env.rollout(25, break_when_any_done=False)
    nxt = td["next"]
    done = nxt["done"].squeeze(-1)
    assert done.sum() == 8  # steps 10 and 20 for 4 envs
    ret, length = nxt["episode_return"][done], nxt["episode_length"][done]
    torch.testing.assert_close(ret, nxt["raw_return"][done])
    assert torch.all(length == 10)
    first = nxt["reward_raw"][:, :10].sum(1)  # [4, 1]: raw rewards of the first episodes
    torch.testing.assert_close(nxt["episode_return"][:, 9], first)
    assert not torch.allclose(nxt["reward"][:, :10].sum(1), first)


def test_bare_env_has_no_reward_raw_and_zero_stats_after_reset():
    env = TorchRLEnv(_cartpole())
    td = env.reset()
    assert "reward_raw" not in env.observation_spec.keys()
    assert torch.equal(td["episode_return"], torch.zeros(N, 1))
    assert td["episode_length"].dtype == torch.int32


def test_one_hot_actions_like_gym_wrapper():
    env = TorchRLEnv(_cartpole(), action_encoding="one_hot")
    ref = _cartpole()
    check_env_specs(env)
    assert env.action_spec.shape == (N, 2) and env.action_spec.dtype == torch.int64
    env.set_seed(5)
    ref.reset(seed=5)
    td = env.reset()
    torch.testing.assert_close(td["observation"], ref.reset()["observation"])
    for _ in range(5):
        td = env.rand_action(td)
        out = env.step(td)
        want = ref.step(td["action"].argmax(-1))
        torch.testing.assert_close(out["next", "observation"], want["final_observation"])
        td = out["next"]
    with pytest.raises(ValueError, match=r"one-hot action expected a 0/1 integer, bool or "
                       r"float tensor \(16, 2\) on cpu, got shape \(16,\)"):
        env.step(env.reset().set("action", torch.zeros(N, dtype=torch.int64)))
    with pytest.raises(ValueError, match="action_encoding expected 'categorical' or 'one_hot'"):
        TorchRLEnv(_cartpole(), action_encoding="onehot")


def test_step_outputs_survive_the_next_step():
    env = TorchRLEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0))
    td = env.reset()
    td["action"] = torch.ones(N, 1)
    first = env.step(td)["next"]
    kept = first.clone()
    td2 = first.clone().set("action", -torch.ones(N, 1))
    env.step(td2)
    assert (first == kept).all()


def test_ppo_trains_through_a_collector_with_norms_and_raw_returns():
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torch import nn
    from torchrl.envs import RewardSum
    from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    norm = gp.ObsNorm(3)
    base = gp.TransformedEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0,
                                     max_episode_steps=16), norm, gp.RewardNorm())
    env = TransformedEnv(TorchRLEnv(base), RewardSum(in_keys=["reward_raw"],
                                                     out_keys=["raw_return"]))
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        spec=env.action_spec, in_keys=["loc", "scale"], distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)
    value = ValueOperator(nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1)),
                          in_keys=["observation"])
    loss = ClipPPOLoss(actor, value)
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=value)
    opt = torch.optim.Adam(loss.parameters(), lr=1e-3)
    collector = Collector(env, actor, frames_per_batch=N * 16, total_frames=3 * N * 16,
                          auto_register_policy_transforms=False)
    half = torch.arange(N) < N // 2
    for i, batch in enumerate(collector):
        with torch.no_grad():
            gae(batch)
        out = loss(batch.reshape(-1))
        (out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]).backward()
        opt.step()
        opt.zero_grad()
        done = batch["next", "done"].squeeze(-1)
        assert done.sum() == N  # one 16-step episode per env per batch
        torch.testing.assert_close(batch["next", "episode_return"][done],
                                   batch["next", "raw_return"][done])
        if i == 0:
            base.params.set("max_torque", 0.0, mask=half)
            norm.reset_stats(half)
            assert norm.count[0] == 0
        elif i == 1:
            assert norm.count[0] == N * 16  # the next batch's observations only
    collector.shutdown()
    assert torch.all(base.params["max_torque"][half] == 0.0)
    for p in loss.parameters():
        assert torch.isfinite(p).all()


def test_step_outputs_are_fresh_and_outlive_later_steps():
    # TorchRL keeps what step returns (rollouts stack every step at the end): each "next"
    # is new memory, unchanged by any later step
    env = TorchRLEnv(_cartpole())
    td = env.reset()
    kept, nexts = [], []
    for t in range(6):
        td["action"] = torch.full((N,), t % 2)
        nxt = env.step(td)["next"]
        nexts.append(nxt)
        kept.append(nxt.clone())
        td = env.step_mdp(td)
    ptrs = [v.untyped_storage().data_ptr() for nxt in nexts for v in nxt.values()]
    assert len(set(ptrs)) == len(ptrs)
    for nxt, k in zip(nexts, kept, strict=True):
        assert (nxt == k).all()


def _next_entries(td):
    return {k: v.clone() for k, v in td["next"].items()}


def test_short_step_path_matches_envbase_step():
    # TorchRLEnv.step skips EnvBase's post-processing when it has nothing to do; with type
    # checks on, or a "next" entry to merge, the full EnvBase.step runs: same data either way
    base = gp.TransformedEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=2,
                                     max_episode_steps=5), gp.RewardNorm())
    short = TorchRLEnv(base)
    full = TorchRLEnv(gp.TransformedEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu",
                                                seed=2, max_episode_steps=5), gp.RewardNorm()))
    full.run_type_checks = True
    g = torch.Generator().manual_seed(0)
    a, b = short.reset(), full.reset()
    for t in range(12):
        act = torch.rand(N, 1, generator=g) * 4 - 2
        a["action"], b["action"] = act, act.clone()
        if t % 3 == 2:  # a stale "next" left in the input also takes EnvBase.step's path
            a["next"] = a.exclude("action").clone()
        ea, eb = _next_entries(short.step(a)), _next_entries(full.step(b))
        assert set(ea) == set(eb) == {"observation", "reward", "reward_raw", "episode_return",
                                      "episode_length", "done", "terminated", "truncated"}
        for k in ea:
            assert ea[k].shape == eb[k].shape and ea[k].dtype == eb[k].dtype, k
            assert torch.equal(ea[k], eb[k]), k
        a, b = short.step_mdp(a), full.step_mdp(b)


def test_reset_after_step_gives_the_auto_reset_observations():
    spy = _Spy(_cartpole(max_episode_steps=3))
    env = TorchRLEnv(spy)
    from tensordict import TensorDict

    td = env.reset()
    for _ in range(3):
        td["action"] = torch.zeros(N, dtype=torch.int64)
        td = env.step(td)
        td = env.step_mdp(td)
    assert td["done"].all()  # every env truncated at step 3 and was reset by the step
    after_step = spy.env.outputs["observation"].clone()
    env.params.set("length", 0.7)  # a write between step and reset changes nothing here
    mask = torch.ones(N, 1, dtype=torch.bool)
    out = env.reset(TensorDict({"_reset": mask}, batch_size=[N]))
    assert torch.equal(out["observation"], after_step)
    assert not spy.reset_masks[-1].any()  # no env ran the reset kernel again
    out2 = env.reset(TensorDict({"_reset": mask}, batch_size=[N]))  # now a real reset
    assert spy.reset_masks[-1].all()
    assert not torch.equal(out2["observation"], after_step)


def test_one_hot_actions_that_are_not_one_hot():
    # issue 24 (13): all-zero, multi-hot, float and 2-valued rows were taken (argmax)
    env = TorchRLEnv(_cartpole(), action_encoding="one_hot")
    td = env.reset()
    with pytest.raises(ValueError, match=r"one-hot action expected a 0/1 integer, bool or "
                                         r"float tensor \(16, 2\) on cpu, got dtype "
                                         r"torch.complex64"):
        env.step(td.set("action", torch.tensor([[0, 1]] * N, dtype=torch.complex64)))
    # bool rows are one-hot rows too
    out = env.step(td.set("action", torch.tensor([[False, True]] * N)))
    assert torch.equal(env.gp_env.context.action, torch.ones(N, dtype=torch.int64))
    # by default a row that is not one-hot is counted on the device as an invalid action
    bad = torch.tensor([[0, 0], [1, 1], [2, 0], [0, -1]] + [[1, 0]] * (N - 4))
    before = int(env.gp_env.invalid_actions)
    env.step(out["next"].set("action", bad))
    assert int(env.gp_env.invalid_actions) == before + 4
    assert torch.equal(env.gp_env.context.action[4:], torch.zeros(N - 4, dtype=torch.int64))
    # with validate_actions (the host-checking mode) it raises, naming the rows
    strict = TorchRLEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", validate_actions=True),
                        action_encoding="one_hot")
    td = strict.reset()
    with pytest.raises(ValueError, match=r"one-hot action expected exactly one 1 and 1 zeros "
                                         r"per env, got rows \[\[0, 0\], \[1, 1\], \[2, 0\], "
                                         r"\[0, -1\]\] for envs \[0, 1, 2, 3\]"):
        strict.step(td.set("action", bad))
    strict.step(td.set("action", torch.tensor([[1, 0]] * N)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_float_one_hot_actions_as_one_hot_categorical_samples_them(dtype):
    # issue 33 (9): OneHotCategorical samples float32 rows, which TorchRL's GymWrapper takes;
    # TorchRLEnv refused them, so a TorchRL PPO script on CartPole crashed
    env = TorchRLEnv(_cartpole(), action_encoding="one_hot")
    ref = TorchRLEnv(_cartpole(), action_encoding="one_hot")
    dist = torch.distributions.OneHotCategorical(logits=torch.zeros(N, 2))
    td, td_ref = env.reset(), ref.reset()
    for _ in range(6):
        a = dist.sample()
        assert a.dtype == torch.float32
        out = env.step(td.set("action", a.to(dtype)))
        want = ref.step(td_ref.set("action", a.to(torch.int64)))
        assert torch.equal(out["next", "observation"], want["next", "observation"])
        td, td_ref = out["next"], want["next"]
    assert int(env.gp_env.invalid_actions) == 0
    # rows of other values (not exactly 0 and 1, NaN) are actions outside the space: counted
    bad = torch.tensor([[0.3, 0.7], [0.5, 0.5], [float("nan"), 1.0], [1.0, 1.0]]
                       + [[1.0, 0.0]] * (N - 4), dtype=dtype)
    env.step(td.set("action", bad))
    assert int(env.gp_env.invalid_actions) == 4
    assert torch.equal(env.gp_env.context.action[4:], torch.zeros(N - 4, dtype=torch.int64))
    # or, with validate_actions, refused with nothing stepped
    strict = TorchRLEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", validate_actions=True),
                        action_encoding="one_hot")
    td = strict.reset()
    with pytest.raises(ValueError, match=r"one-hot action expected exactly one 1 and 1 zeros "
                                         r"per env, got rows \[\[0.3"):
        strict.step(td.set("action", bad))
    strict.step(td.set("action", torch.tensor([[0.0, 1.0]] * N, dtype=dtype)))
    assert torch.equal(strict.gp_env.context.action, torch.ones(N, dtype=torch.int64))


@pytest.mark.parametrize("order", ["transform first", "env first"])
def test_obsnorm_transform_and_env_load_in_either_order(order):
    # issue 33 (2): loading the transform's statistics and then the env (whose lengths
    # differ from the fresh env's) wiped them (counts [11, 11, 5, ...] -> 0)
    def build():
        base = _cartpole(max_episode_steps=8)  # every env draws a new length at step 8
        base.randomize(gp.Uniform("length", 0.4, 0.9, on="reset"))
        norm = ObsNorm(4, group_ids=torch.arange(N), num_groups=N, reset_on=("length",))
        t = ObsNormTransform(norm)
        env = TransformedEnv(TorchRLEnv(base), t)
        return base, norm, t, env

    base, norm, t, env = build()
    td = env.reset()
    for _ in range(12):
        td = env.step_mdp(env.rand_step(td))
    assert (norm.count > 0).all()
    env_state, norm_state = base.state_dict(), t.state_dict()
    base2, norm2, t2, env2 = build()
    env2.reset()  # attaches the transform's listener
    assert not torch.equal(base2.params["length"], base.params["length"])
    if order == "env first":
        base2.load_state_dict(env_state)
    t2.load_state_dict(norm_state)
    if order == "transform first":
        base2.load_state_dict(env_state)
    assert torch.equal(norm2.count, norm.count) and torch.equal(norm2.mean, norm.mean)
