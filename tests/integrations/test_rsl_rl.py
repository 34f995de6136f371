"""RslRlVecEnv: rsl_rl's OnPolicyRunner end to end, buffer safety, parameters, statistics."""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import sys
import threading
import warnings
import weakref

import pytest
import torch

import gpuparam as gp

pytest.importorskip("rsl_rl")

from rsl_rl.runners import OnPolicyRunner  # noqa: E402

from gpuparam.integrations.rsl_rl import RslRlVecEnv  # noqa: E402

N, STEPS = 8, 8


def train_cfg(critic=("policy",)) -> dict:
    return {
        "num_steps_per_env": STEPS,
        "save_interval": 1000,
        "obs_groups": {"actor": ["policy"], "critic": list(critic)},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
        "actor": {"class_name": "MLPModel", "hidden_dims": [16],
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [16]},
    }


def runner(env: RslRlVecEnv, **kw) -> OnPolicyRunner:
    with contextlib.redirect_stdout(io.StringIO()):
        return OnPolicyRunner(env, train_cfg(**kw), log_dir=None, device="cpu")


def learn(r: OnPolicyRunner, iterations: int, **kw) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        r.learn(iterations, **kw)


def adapter_warnings(record) -> list[str]:
    return [f"{w.filename}: {w.message}" for w in record if "gpuparam" in w.filename]


class Spy(RslRlVecEnv):
    """Keeps a clone of every observation the runner was handed."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen: list[torch.Tensor] = []

    def get_observations(self):
        obs = super().get_observations()
        self.seen = [obs["policy"].clone()]
        return obs

    def step(self, actions):
        out = super().step(actions)
        self.seen.append(out[0]["policy"].clone())
        return out


@pytest.mark.parametrize("name", ["Pendulum-v1", "CartPole-v1"])
def test_runner_trains_and_stores_the_observations_it_acted_on(name):
    # issue 13, defect 1: without copies, storage[t] held the observation of step t + 1
    norm = gp.ObsNorm(gp.make(name, num_envs=1).observation_spec.shape)
    base = gp.TransformedEnv(gp.make(name, num_envs=N, device="cpu", seed=0), norm)
    env = Spy(base, privileged=("m",) if name == "Pendulum-v1" else ("length", "masspole"),
              log_interval=STEPS)
    r = runner(env, critic=("policy", "privileged"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        learn(r, 2, init_at_random_ep_len=True)
    assert adapter_warnings(record) == []
    stored = r.alg.storage.observations["policy"]  # [STEPS, N, obs] of the last iteration
    assert stored.shape[0] == STEPS
    for t in range(STEPS):
        torch.testing.assert_close(stored[t], env.seen[-STEPS - 1 + t], rtol=0, atol=0)
    assert not torch.equal(stored[1], stored[2])
    for p in r.alg.actor.parameters():
        assert torch.isfinite(p).all()


def test_outputs_of_step_t_survive_step_t_plus_1():
    env = RslRlVecEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0),
                      privileged=("g", "l"))
    a = torch.ones(N, 1)
    obs, rew, dones, extras = env.step(a)
    kept = (obs["policy"].clone(), obs["privileged"].clone(), rew.clone(), dones.clone(),
            extras["time_outs"].clone())
    env.params.set("g", 5.0)
    obs2, rew2, _, _ = env.step(-a)
    for x, y in zip((obs["policy"], obs["privileged"], rew, dones, extras["time_outs"]), kept,
                    strict=True):
        assert torch.equal(x, y)
    assert not torch.equal(obs2["policy"], kept[0]) and not torch.equal(rew2, kept[2])
    assert env.get_observations() is obs2


@pytest.mark.parametrize("capture", [True, False])
def test_matches_the_bare_env_step_for_step(capture):
    """Captured, and eager (the adapter's stages replay their bound launches each step)."""
    env = RslRlVecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3,
                              capture=capture))
    ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3)
    assert env.num_actions == 1 and env.max_episode_length == 500  # Discrete(2): one float
    torch.testing.assert_close(env.get_observations()["policy"], ref.reset()["observation"])
    g = torch.Generator().manual_seed(0)
    for _ in range(40):
        logits = torch.randn(N, 1, generator=g)
        obs, rew, dones, extras = env.step(logits)
        td = ref.step((logits[:, 0] > 0).long())  # the documented discrete mapping
        torch.testing.assert_close(obs["policy"], td["observation"], rtol=0, atol=0)
        torch.testing.assert_close(rew, td["reward"], rtol=0, atol=0)
        assert torch.equal(dones, td["done"].long()) and dones.dtype == torch.int64
        assert torch.equal(extras["time_outs"], td["truncated"] & ~td["terminated"])


class _ThreeActions:
    """CartPole seen as a Discrete(3) env (action 2 pushes right too); records actions."""

    def __init__(self):
        self.env, self.actions = gp.make("CartPole-v1", num_envs=N, device="cpu"), []
        self.action_spec = gp.DiscreteSpec(3)

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action):
        self.actions.append(action.clone())
        return self.env.step((action > 0).long())


def test_discrete_with_more_than_two_actions_takes_the_argmax():
    env = RslRlVecEnv(_ThreeActions())
    assert env.num_actions == 3
    logits = torch.randn(N, 3, generator=torch.Generator().manual_seed(1))
    env.step(logits)
    assert torch.equal(env.env.actions[-1], logits.argmax(-1))


def test_episode_length_buf_is_the_env_counter_and_truncates():
    # issue 13, defect 2: rsl_rl assigns episode_length_buf (init_at_random_ep_len)
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(gp.TransformedEnv(base, gp.ObsNorm(3)))
    assert env.episode_length_buf is base.episode_length
    env.episode_length_buf = torch.full((N,), 199, dtype=torch.int32)
    _, _, dones, extras = env.step(torch.zeros(N, 1))
    assert dones.all() and extras["time_outs"].all()
    env.episode_length_buf = torch.randint_like(env.episode_length_buf, high=200)
    assert torch.equal(base.episode_length, env.episode_length_buf)
    with pytest.raises(ValueError, match="episode_length: expected shape"):
        env.episode_length_buf = torch.zeros(N + 1, dtype=torch.int32)


def test_privileged_group_is_the_params_scaled_by_their_spec_ranges():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    base.randomize(gp.Uniform("m", 0.5, 2.0, on="step"))
    env = RslRlVecEnv(base, privileged=("m", "max_torque"))
    obs, *_ = env.step(torch.zeros(N, 1))
    cols = []
    for name in ("m", "max_torque"):
        s = base.params.spec[name]
        cols.append((base.params[name] - s.low) / (s.high - s.low) * 2 - 1)
    torch.testing.assert_close(obs["privileged"], torch.stack(cols, 1))
    assert obs["privileged"].abs().max() <= 1.0


def test_privileged_ranges_given_per_name_or_per_component():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    base.randomize(gp.Uniform("m", 0.5, 2.0, on="step"), gp.Uniform("l", 0.8, 1.2, on="step"))
    env = RslRlVecEnv(base, privileged={"m": (0.5, 2.0), "l": ([0.8], [1.2]),
                                        "max_torque": None})
    obs, *_ = env.step(torch.zeros(N, 1))
    s = base.params.spec["max_torque"]
    want = torch.stack([(base.params["m"] - 0.5) / 1.5 * 2 - 1,
                        (base.params["l"] - 0.8) / 0.4 * 2 - 1,
                        (base.params["max_torque"] - s.low) / (s.high - s.low) * 2 - 1], 1)
    torch.testing.assert_close(obs["privileged"], want)
    assert obs["privileged"][:, :2].std(0).min() > 0.2  # spread over [-1, 1], not squeezed
    assert env.cfg.privileged == ("m", "l", "max_torque")
    for bad, msg in (((1.0, 1.0), "expected finite low < high"),
                     ((0.0,), r"expected a \(low, high\) pair or None"),
                     (([0.0, 1.0], 2.0), "low/high expected a scalar or 1 values"),
                     (("a", 2.0), "low and high must be numbers")):
        with pytest.raises(ValueError, match=r"privileged\['m'\]: " + msg):
            RslRlVecEnv(base, privileged={"m": bad})


def test_param_write_and_reset_stats_between_iterations_take_effect():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    norm = gp.ObsNorm(3)
    env = RslRlVecEnv(gp.TransformedEnv(base, norm), privileged=("m",))
    r = runner(env, critic=("policy", "privileged"))
    learn(r, 1)
    mask = torch.arange(N) < N // 2
    env.params.set("m", 2.0, mask=mask)
    norm.reset_stats(mask)
    assert norm.count[0] == 0
    learn(r, 1)
    assert norm.count[0] == STEPS * N
    m = base.params["m"]
    assert torch.all(m[mask] == 2.0) and torch.all(m[~mask] == 1.0)
    s = base.params.spec["m"]
    priv = r.alg.storage.observations["privileged"][-1, :, 0]
    torch.testing.assert_close(priv[mask], torch.full((N // 2,), (2.0 - s.low) / (s.high - s.low)
                                                      * 2 - 1))


def test_episode_log_sums_match_the_finished_episodes():
    env = RslRlVecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0), log_interval=30,
                      episode_stats="sums")
    ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    ref.reset()  # as the adapter does
    rets, lens, logs = [], [], []
    for t in range(60):
        a = torch.full((N, 1), 1.0 if (t // 3) % 2 else -1.0)
        _, _, _, extras = env.step(a)
        td = ref.step((a[:, 0] > 0).long())
        if t % 30 == 0:
            rets.append([])
            lens.append([])
        rets[-1] += td["episode_return"][td["done"]].tolist()
        lens[-1] += td["episode_length"][td["done"]].tolist()
        assert ("log" in extras) == ((t + 1) % 30 == 0)
        if "log" in extras:
            assert extras["log"] is env.last_log
            logs.append({k: v.clone() for k, v in extras["log"].items()})
    for log, r, n in zip(logs, rets, lens, strict=True):
        assert r and log["Episode/count"] == len(r)
        torch.testing.assert_close(log["Episode/return"], torch.tensor(sum(r) / len(r)))
        torch.testing.assert_close(log["Episode/length"], torch.tensor(sum(n) / len(n)))


def test_episode_log_latest_is_each_envs_last_finished_episode():
    env = RslRlVecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0), log_interval=5)
    ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    ref.reset()  # as the adapter does
    last_ret = torch.full((N,), float("nan"))
    last_len = torch.full((N,), float("nan"))
    for t in range(40):
        a = torch.full((N, 1), -1.0)  # the second half always pushes left: ends sooner
        a[: N // 2] = 1.0 if (t // 3) % 2 else -1.0
        _, _, _, extras = env.step(a)
        td = ref.step((a[:, 0] > 0).long())
        last_ret = torch.where(td["done"], td["episode_return"], last_ret)
        last_len = torch.where(td["done"], td["episode_length"].float(), last_len)
        if "log" in extras:
            log, has = extras["log"], ~last_ret.isnan()
            assert log["Episode/count"] == has.sum()
            if has.any():
                torch.testing.assert_close(log["Episode/return"], last_ret[has].mean())
                torch.testing.assert_close(log["Episode/length"], last_len[has].mean())
            else:
                assert log["Episode/return"].isnan()
    assert has.all() and last_ret.std() > 0


def test_bad_input():
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu")
    with pytest.raises(ValueError, match=r"privileged names \['mass'\] unknown; valid names"):
        RslRlVecEnv(base, privileged=("mass",))
    with pytest.raises(ValueError, match="log_interval expected a positive int, got 0"):
        RslRlVecEnv(base, log_interval=0)
    with pytest.raises(ValueError, match="episode_stats expected 'latest', 'sums' or None"):
        RslRlVecEnv(base, episode_stats=True)
    env = RslRlVecEnv(base)
    with pytest.raises(ValueError, match=r"actions expected a floating-point tensor \(8, 1\) "
                                         r"on cpu, got shape \(8,\)"):
        env.step(torch.zeros(N))


def test_clip_actions_clamps_to_the_spec():
    env = RslRlVecEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0),
                      clip_actions=True)
    ref = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    ref.reset()  # as the adapter does
    obs, *_ = env.step(torch.full((N, 1), 50.0))
    torch.testing.assert_close(obs["policy"], ref.step(torch.full((N, 1), 2.0))["observation"])
    assert env.cfg.to_dict()["clip_actions"] is True


def test_import_error_names_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rsl_rl", None)
    monkeypatch.delitem(sys.modules, "gpuparam.integrations.rsl_rl", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gpuparam\[rsl_rl\]"'):
        importlib.import_module("gpuparam.integrations.rsl_rl")


def test_outputs_live_until_step_t_plus_2_reuses_their_buffers():
    # the documented lifetime: a step's outputs are double-buffered, intact through the next
    # step and written again by the one after it (what rsl_rl's storage relies on)
    env = RslRlVecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0))
    a = torch.ones(N, 1)
    out1 = env.step(a)
    out2 = env.step(a)
    out3 = env.step(a)
    for x1, x2, x3 in zip(out1[:3] + (out1[3]["time_outs"],), out2[:3] + (out2[3]["time_outs"],),
                          out3[:3] + (out3[3]["time_outs"],), strict=True):
        assert x1 is x3 and x1 is not x2
        if isinstance(x1, torch.Tensor):
            assert x1.untyped_storage().data_ptr() != x2.untyped_storage().data_ptr()


class _FreshOutputs:
    """An env wrapper whose every step returns new tensors in a new TensorDict."""

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action):
        return self.env.step(action).clone()


@pytest.mark.parametrize("fresh", [True, False])
def test_wrapped_env_returning_new_tensors_each_step_matches_it(fresh):
    # the adapter looks the env's output tensors up once per output TensorDict object: a
    # wrapper handing out new ones each step (gp.TransformedEnv builds a new TensorDict each
    # step, over the same buffers) must be read afresh. fresh=False: the adapter joins the
    # TransformedEnv's pipeline and copies its (normalized) outputs in a stage
    def make():
        base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=1, max_episode_steps=7)
        return gp.TransformedEnv(base, gp.ObsNorm(3), gp.RewardNorm())

    inner = make()
    env = RslRlVecEnv(_FreshOutputs(inner) if fresh else inner, episode_stats="sums",
                      log_interval=7)
    assert ("rsl_rl_outputs" in inner.env.pipeline.names) != fresh
    ref = make()
    ref.reset()  # as the adapter does
    g = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(15):
        a = torch.randn(N, 1, generator=g)
        obs, rew, dones, extras = env.step(a)
        td = ref.step(a)
        seen.add(id(td))
        torch.testing.assert_close(obs["policy"], td["observation"], rtol=0, atol=0)
        torch.testing.assert_close(rew, td["reward"], rtol=0, atol=0)
        assert torch.equal(dones, td["done"].long())
        assert torch.equal(extras["time_outs"], td["truncated"] & ~td["terminated"])
        if "log" in extras:  # every episode lasts 7 steps: one per env per entry
            assert extras["log"]["Episode/count"] == N
            assert extras["log"]["Episode/length"] == 7
    assert len(seen) > 1


@pytest.mark.parametrize("value, action", [(0.5, 1), (1e-30, 1), (0.0, 0), (-0.0, 0),
                                           (-2.0, 0), (float("nan"), 0), (float("inf"), 1)])
def test_two_action_mapping_is_strictly_positive(value, action):
    # the mapping runs as the first stage of the env's captured step: read the action the
    # env stepped with from its action buffer, on eager steps and on replays
    base = gp.make("CartPole-v1", num_envs=N, device="cpu")
    env = RslRlVecEnv(base)
    for _ in range(base.pipeline.warmup + 2):
        base.context.action.fill_(7)
        env.step(torch.full((N, 1), value))
        assert base.context.action.tolist() == [action] * N
    assert base.pipeline.captured


def test_plain_env_steps_leave_the_adapters_buffers_alone():
    # the adapter's stages join the env's step but run only when the adapter steps: stepping
    # the env itself (eagerly and replayed) neither maps actions nor writes the adapter's sets
    base = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base)
    ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    ref.reset()
    names = base.pipeline.names
    assert names[0] == "rsl_rl_actions" and names[-1] == "rsl_rl_outputs"
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        logits = torch.randn(N, 1, generator=g)
        obs, rew, dones, extras = env.step(logits)
        ref.step((logits[:, 0] > 0).long())
        kept = [x.clone() for x in (obs["policy"], rew, dones, extras["time_outs"])]
        others = [x.clone() for s in env._sets for x in (*s[0].values(), *s[1:])]
        for _ in range(base.pipeline.warmup + 2):  # eager, then captured
            plain = torch.randint(0, 2, (N,), generator=g)
            td = base.step(plain)
            assert torch.equal(base.context.action, plain)  # not remapped from the logits
            torch.testing.assert_close(td["observation"], ref.step(plain)["observation"],
                                       rtol=0, atol=0)
        assert base.pipeline.captured
        for x, y in zip((obs["policy"], rew, dones, extras["time_outs"]), kept, strict=True):
            assert torch.equal(x, y)
        assert all(torch.equal(x, y) for x, y in zip(
            [x for s in env._sets for x in (*s[0].values(), *s[1:])], others, strict=True))


def test_close_removes_the_adapters_stages():
    base = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base)
    env.step(torch.ones(N, 1))
    env.close()
    assert not any(n.startswith("rsl_rl") for n in base.pipeline.names)
    base.step(torch.ones(N, dtype=torch.int64))  # the env steps on without them
    # no stage maps the adapter's actions or writes its outputs any more: it refuses
    with pytest.raises(RuntimeError, match=r"RslRlVecEnv.step: called after close\(\)"):
        env.step(-torch.ones(N, 1))
    with pytest.raises(RuntimeError, match=r"RslRlVecEnv.reset: called after close\(\)"):
        env.reset()
    env.close()  # twice: nothing more to do


def test_a_refused_step_leaves_the_stages_disarmed_and_the_buffers_kept():
    # env.step refusing the actions (validate_actions) before any stage ran: the adapter's
    # flag is cleared, so the next plain env.step does not write the adapter's buffers, and
    # the outputs of the last good step stay those of the last good step
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0, validate_actions=True)
    env = RslRlVecEnv(base)
    for _ in range(base.pipeline.warmup + 1):
        obs, rew, _, _ = env.step(torch.zeros(N, 1))
    kept = [x.clone() for s in env._sets for x in (*s[0].values(), *s[1:])]
    with pytest.raises(ValueError, match="NaN"):
        env.step(torch.full((N, 1), float("nan")))
    base.step(torch.ones(N, 1))
    assert all(torch.equal(x, y) for x, y in zip(
        [x for s in env._sets for x in (*s[0].values(), *s[1:])], kept, strict=True))
    obs2, _, _, _ = env.step(torch.zeros(N, 1))
    assert obs2 is not obs  # the set after the last good step's


# ---------------------------------------------------------------- issue 24: edges
class Held:
    """A ``before_step`` hook holding one step of thread A until released."""

    def __init__(self, env):
        self.armed, self.entered, self.go = False, threading.Event(), threading.Event()
        self.actions: list[torch.Tensor] = []
        env.before_step(self)

    def __call__(self, env, td):
        if self.armed:
            self.armed = False
            self.actions.append(td["action"].clone())
            self.entered.set()
            assert self.go.wait(10)

    def run(self, fn):
        """Start ``fn`` in thread A and return once it is inside the hook."""
        self.armed = True
        out: list = []
        t = threading.Thread(target=lambda: out.append(fn()))
        t.start()
        assert self.entered.wait(10)
        return t, out


def _sets(env):
    return [x.clone() for s in env._sets for x in (*s[0].values(), *s[1:])]


@pytest.mark.parametrize("name", ["Pendulum-v1", "CartPole-v1"])
@pytest.mark.parametrize("second", ["adapter_step", "adapter_reset"])
def test_a_call_refused_while_an_adapter_step_runs_changes_nothing(name, second):
    # issue 24 (1): thread B's step wrote its actions (and armed the stages) before the
    # env refused it, so thread A's step ran with B's actions
    base = gp.make(name, num_envs=N, device="cpu", seed=0)
    ref = gp.make(name, num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base)
    ref.reset()
    held = Held(base)
    a_act, b_act = torch.full((N, 1), 1.5), torch.full((N, 1), -1.5)
    to_env = (lambda a: a) if name == "Pendulum-v1" else (lambda a: (a[:, 0] > 0).long())
    for _ in range(base.pipeline.warmup + 1):  # A's step replays the capture
        prev = env.step(torch.zeros(N, 1))
        ref.step(to_env(torch.zeros(N, 1)))
    prev_obs = prev[0]["policy"].clone()
    thread, out = held.run(lambda: env.step(a_act))
    with pytest.raises(RuntimeError, match="another call on this env is running"):
        env.step(b_act) if second == "adapter_step" else env.reset()
    held.go.set()
    thread.join()
    expected = ref.step(to_env(a_act))
    assert torch.equal(held.actions[0], to_env(a_act).view_as(held.actions[0]))
    obs, rew, dones, extras = out[0]
    assert torch.equal(obs["policy"], expected["observation"])
    assert torch.equal(rew, expected["reward"])
    assert torch.equal(prev[0]["policy"], prev_obs)  # the set of the step before: intact


@pytest.mark.parametrize("name", ["Pendulum-v1", "CartPole-v1"])
def test_an_adapter_step_refused_while_a_plain_step_runs_changes_nothing(name):
    # issue 24 (1): the refused adapter call armed the stages for the plain step of thread
    # A (which then wrote the adapter's buffers) and mapped its own actions into A's
    base = gp.make(name, num_envs=N, device="cpu", seed=0)
    ref = gp.make(name, num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base)
    ref.reset()
    held = Held(base)
    kind = torch.float32 if name == "Pendulum-v1" else torch.int64
    plain = torch.ones(N, *base.action_spec.shape, dtype=kind)
    env.step(torch.zeros(N, 1))
    ref.step(torch.zeros(N, *base.action_spec.shape, dtype=kind))
    kept = _sets(env)
    thread, out = held.run(lambda: base.step(plain).clone())
    with pytest.raises(RuntimeError, match="another call on this env is running"):
        env.step(torch.full((N, 1), -1.5))
    held.go.set()
    thread.join()
    assert torch.equal(out[0]["observation"], ref.step(plain)["observation"])
    assert all(torch.equal(x, y) for x, y in zip(_sets(env), kept, strict=True))
    # and the adapter steps on normally
    obs, *_ = env.step(torch.full((N, 1), 0.5))
    expected = ref.step(torch.full((N, 1), 0.5) if name == "Pendulum-v1"
                        else torch.ones(N, dtype=torch.int64))
    assert torch.equal(obs["policy"], expected["observation"])


def test_a_hook_calling_the_adapter_is_refused():
    base = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base)
    seen: list = []

    def hook(e, td):
        try:
            env.step(torch.ones(N, 1))
        except RuntimeError as err:
            seen.append(str(err))

    base.before_step(hook)
    env.step(torch.ones(N, 1))
    assert len(seen) == 1 and "another call on this env is running" in seen[0]


@pytest.mark.parametrize(("name", "clip"), [("Pendulum-v1", False), ("Pendulum-v1", True),
                                            ("CartPole-v1", False)])
def test_actions_that_require_grad_are_detached(name, clip):
    # issue 24 (3): the action (or Discrete(2) logits) buffer joined each step's graph to
    # the last; with clip_actions torch raised its own clamp(out=) error
    base = gp.make(name, num_envs=N, device="cpu", seed=0)
    ref = gp.make(name, num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base, clip_actions=clip)
    ref.reset()
    for t in range(3):
        w = torch.full((N, 1), 0.3 * (t + 1), requires_grad=True)
        alive = weakref.ref(w)
        obs, rew, dones, _ = env.step(w * 2.0)
        assert not base.context.action.requires_grad
        assert not any(x.requires_grad for x in (obs["policy"], rew, dones))
        a = torch.full((N, 1), 0.6 * (t + 1))
        expected = ref.step(a if name == "Pendulum-v1" else (a[:, 0] > 0).long())
        assert torch.equal(obs["policy"], expected["observation"])
        del w
        gc.collect()
        assert alive() is None  # no buffer of the adapter holds the graph


@pytest.mark.parametrize("name", ["Pendulum-v1", "CartPole-v1"])
@pytest.mark.parametrize("clip", [False, True])
def test_actions_of_another_dtype_or_device_are_refused(name, clip):
    # issue 24 (13): int, bool and complex actions were cast; meta actions raised
    # NotImplementedError
    base = gp.make(name, num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base, clip_actions=clip)
    env.step(torch.zeros(N, 1))
    kept, action = _sets(env), base.context.action.clone()
    for bad, got in [
        (torch.ones(N, 1, dtype=torch.int64), "dtype torch.int64"),
        (torch.ones(N, 1, dtype=torch.bool), "dtype torch.bool"),
        (torch.ones(N, 1, dtype=torch.complex64), "dtype torch.complex64"),
        (torch.ones(N, 1, device="meta"), "device meta"),
        (torch.ones(N, 2), r"shape \(8, 2\)"),
        ([[0.0]] * N, "list"),
    ]:
        with pytest.raises(ValueError, match=r"actions expected a floating-point tensor "
                                             rf"\(8, 1\) on cpu, got {got}"):
            env.step(bad)
    assert all(torch.equal(x, y) for x, y in zip(_sets(env), kept, strict=True))
    assert torch.equal(base.context.action, action)
    env.step(torch.zeros(N, 1, dtype=torch.float64))  # other float widths are taken


def test_over_another_wrapper_a_concurrent_adapter_call_is_refused_by_the_adapter():
    # a wrapper that is not a gpuparam env: the adapter maps actions into a buffer of its
    # own, guarded by its own lock (checked before anything is written)
    inner = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    ref = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(_FreshOutputs(inner))
    ref.reset()
    held = Held(inner)
    env.step(torch.zeros(N, 1))
    ref.step(torch.zeros(N, 1))
    thread, out = held.run(lambda: env.step(torch.full((N, 1), 1.5)))
    with pytest.raises(RuntimeError, match="another call on this adapter is running"):
        env.step(torch.full((N, 1), -1.5))
    with pytest.raises(RuntimeError, match="another call on this adapter is running"):
        env.reset()
    held.go.set()
    thread.join()
    assert torch.equal(out[0][0]["policy"], ref.step(torch.full((N, 1), 1.5))["observation"])


def test_close_is_refused_while_another_thread_holds_the_env_for_a_step():
    # close() removed the adapter's stages between the other thread's arming of them and
    # its env.step: that step then returned the output set of two steps before, silently
    base = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    ref = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0)
    env = RslRlVecEnv(base)
    ref.reset()
    for _ in range(base.pipeline.warmup + 1):
        env.step(torch.zeros(N, 1))
        ref.step(torch.zeros(N, 1))
    entered, go, step = threading.Event(), threading.Event(), base.step

    def paused(action):  # thread A between arming and stepping
        entered.set()
        assert go.wait(10)
        return step(action)

    base.step = paused
    out: list = []
    thread = threading.Thread(target=lambda: out.append(env.step(torch.full((N, 1), 1.5))))
    thread.start()
    assert entered.wait(10)
    try:
        with pytest.raises(RuntimeError, match="another call on this env is running"):
            env.close()
    finally:
        go.set()
        thread.join()
    assert torch.equal(out[0][0]["policy"], ref.step(torch.full((N, 1), 1.5))["observation"])
    del base.step
    with base.hold():  # the holding thread may use the adapter, and close it
        obs, *_ = env.step(torch.full((N, 1), 0.5))
        assert torch.equal(obs["policy"], ref.step(torch.full((N, 1), 0.5))["observation"])
        env.close()
    with pytest.raises(RuntimeError, match="after close"):
        env.step(torch.zeros(N, 1))


def test_discrete2_over_another_wrapper_matches_the_staged_path():
    # Discrete(2) through a wrapper that is not a gpuparam env: torch ops map the sign of
    # the policy's float into the action (no stage); same outputs as over the env itself
    staged = RslRlVecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=2))
    plain = RslRlVecEnv(_FreshOutputs(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=2)))
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        x = torch.randn(N, 1, generator=g)
        (oa, ra, da, ea), (ob, rb, db, eb) = staged.step(x), plain.step(x)
        assert torch.equal(oa["policy"], ob["policy"]) and torch.equal(ra, rb)
        assert torch.equal(da, db) and torch.equal(ea["time_outs"], eb["time_outs"])


def test_load_restores_the_env_and_the_observations_the_runner_reads(tmp_path):
    """``RslRlVecEnv.load``: the env's checkpoint and, as ``get_observations``, the restored
    observations (the adapter's own copies were of the run before), so a resumed runner
    acts on what the saved run would have acted on: the next steps equal."""
    def make():
        return RslRlVecEnv(gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=0),
                           privileged=("g", "l"))

    saved, fresh = make(), make()
    a = torch.linspace(-1.0, 1.0, N)[:, None]
    for _ in range(5):
        saved.step(a)
    saved.env.save(tmp_path / "env.pt")
    want = saved.get_observations().clone()
    got = fresh.load(tmp_path / "env.pt")
    assert got is fresh.get_observations()
    for k in ("policy", "privileged"):
        assert torch.equal(got[k], want[k]), k
    for _ in range(3):
        x, y = saved.step(a), fresh.step(a)
        assert torch.equal(x[0]["policy"], y[0]["policy"]) and torch.equal(x[1], y[1])
