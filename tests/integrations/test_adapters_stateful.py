"""Issue 24: a stateful property-based test over every adapter.

A hypothesis ``RuleBasedStateMachine`` drives one adapter (rsl_rl, skrl, SB3, Gymnasium
same-step, TorchRL) over a CartPole batch, beside a reference env stepped with the same
integer actions. Rules: adapter steps; steps during which a second thread tries to step the
adapter from inside a ``before_step`` hook (it must get the busy ``RuntimeError``); adapter
resets; parameter writes (and for SB3 ``max_episode_steps``) through the adapter's own API;
in-place edits of what the adapter returned; ``close`` (then the adapter's documented
behaviour, and a new adapter over the same env).

Invariants, after every rule: the adapter's last outputs are what the reference returned
for the same actions (a refused call, an edit of returned tensors or a close changed
nothing they show), and the env's own outputs and state equal the reference's.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import gpuparam as gp

pytest.importorskip("hypothesis")
pytest.importorskip("rsl_rl")
pytest.importorskip("skrl")
pytest.importorskip("stable_baselines3")
pytest.importorskip("torchrl")

import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from gpuparam.integrations.gymnasium import GymnasiumVectorEnv  # noqa: E402
from gpuparam.integrations.rsl_rl import RslRlVecEnv  # noqa: E402
from gpuparam.integrations.sb3 import SB3VecEnv  # noqa: E402
from gpuparam.integrations.skrl import wrap  # noqa: E402
from gpuparam.integrations.torchrl import TorchRLEnv  # noqa: E402

N = 4
actions = st.lists(st.integers(0, 1), min_size=N, max_size=N).map(
    lambda a: torch.tensor(a, dtype=torch.int64))
masks = st.lists(st.booleans(), min_size=N, max_size=N)


class Shim:
    """One adapter seen the same way: ``step(int64 [N]) -> (obs, reward, done)`` as the
    adapter returned them (observations after the auto-reset, except TorchRL's: before),
    ``reset() -> obs`` and what the reference does for it, ``write`` through the adapter's
    parameter API, ``close`` and what the adapter does after it."""

    final_obs = False  # step's observation is the pre-reset one (TorchRL)
    reset_resets = True  # reset() resets every env (skrl's only the first time)
    resets_when_built = False  # building the adapter resets the env (rsl_rl)
    closed_raises = False  # step after close raises (rsl_rl)

    def __init__(self, env):
        self.env = env
        self.adapter = self.build(env)

    def write(self, name: str, value: float, ids: list[int]) -> None:
        self.adapter.params.set(name, value, env_ids=ids)

    def close(self) -> None:
        self.adapter.close()


class RslRl(Shim):
    closed_raises = True
    resets_when_built = True

    def build(self, env):
        return RslRlVecEnv(env)

    def step(self, a):
        obs, rew, dones, _ = self.adapter.step(a.view(N, 1).float() - 0.5)  # > 0: action 1
        return obs["policy"], rew, dones.bool()

    def reset(self):
        return self.adapter.reset()[0]["policy"]


class Skrl(Shim):
    reset_resets = False

    def build(self, env):
        return wrap(env)

    def step(self, a):
        obs, rew, term, trunc, _ = self.adapter.step(a.view(N, 1))
        return obs, rew.view(N), (term | trunc).view(N)

    def reset(self):
        return self.adapter.reset()[0]


class SB3(Shim):
    def build(self, env):
        return SB3VecEnv(env)

    def step(self, a):
        obs, rew, done, _ = self.adapter.step(a.numpy())
        return torch.from_numpy(obs), torch.from_numpy(rew), torch.from_numpy(done)

    def reset(self):
        return torch.from_numpy(self.adapter.reset())

    def write(self, name, value, ids):
        self.adapter.set_attr(name, value, indices=ids)


class Gymnasium(Shim):
    def build(self, env):
        return GymnasiumVectorEnv(env)

    def step(self, a):
        obs, rew, term, trunc, _ = self.adapter.step(a)
        return obs, rew, term | trunc

    def reset(self):
        return self.adapter.reset()[0]


class TorchRL(Shim):
    final_obs = True

    def build(self, env):
        return TorchRLEnv(env)

    def step(self, a):
        nxt = self.adapter.step(TensorDict({"action": a.clone()}, batch_size=[N]))["next"]
        return nxt["observation"], nxt["reward"].view(N), nxt["done"].view(N)

    def reset(self):
        return self.adapter.reset()["observation"]


class AdapterMachine(RuleBasedStateMachine):
    shim_type: type[Shim]

    def __init__(self):
        super().__init__()
        self.base = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3,
                            max_episode_steps=6)
        self.ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3,
                           max_episode_steps=6, capture=False)
        self.intruder: list = []  # armed: the action a second thread tries
        self.refusals: list[str] = []
        self.base.before_step(self._hook)
        self.shim = self.shim_type(self.base)
        if self.shim.resets_when_built:
            self.ref.reset()
        self.first_reset = True  # skrl: its first reset() resets, later ones do not
        self.last: tuple | None = None  # (returned tensors, their expected values)

    # ------------------------------------------------------------------ helpers
    def _hook(self, env, td) -> None:
        if not self.intruder:
            return
        a = self.intruder.pop()
        errors: list[BaseException] = []

        def other() -> None:
            try:
                self.shim.step(a)
            except BaseException as e:  # noqa: BLE001 (kept for the assertion)
                errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join(10)
        assert len(errors) == 1 and isinstance(errors[0], RuntimeError), errors
        self.refusals.append(str(errors[0]))

    def _expected_step(self, a) -> tuple:
        td = self.ref.step(a)
        obs = td["final_observation" if self.shim.final_obs else "observation"]
        return obs.clone(), td["reward"].clone(), td["done"].clone()

    # ------------------------------------------------------------------ rules
    @rule(a=actions)
    def step(self, a):
        got = self.shim.step(a)
        self.last = (got, self._expected_step(a))

    @rule(a=actions, b=actions)
    def step_while_another_thread_tries(self, a, b):
        self.intruder.append(b)
        got = self.shim.step(a)
        assert not self.intruder and "another call on this env is running" in self.refusals[-1]
        self.last = (got, self._expected_step(a))

    @rule()
    def reset(self):
        if self.shim.reset_resets or self.first_reset:
            obs = self.shim.reset()
            expected = self.ref.reset()["observation"].clone()
            self.first_reset = False
        else:  # skrl's later reset(): the last observations, nothing reset
            obs = self.shim.reset()
            expected = self.ref.outputs["observation"].clone()
        assert torch.equal(obs, expected)
        self.last = None

    @rule(name=st.sampled_from(["length", "masspole", "force_mag"]),
          value=st.floats(0.2, 0.9), mask=masks)
    def write(self, name, value, mask):
        ids = [i for i, m in enumerate(mask) if m]
        self.shim.write(name, value, ids)
        self.ref.params.set(name, value, env_ids=ids)

    @rule(edit=st.sampled_from([float("nan"), 1e6, -3.0]))
    def edit_what_was_returned(self, edit):
        if self.last is not None:
            for t in self.last[0]:
                t.fill_(edit if t.is_floating_point() else True)
            self.last = None  # the caller owns those now

    @rule()
    def close(self):
        self.shim.close()
        if self.shim.closed_raises:
            with pytest.raises(RuntimeError, match="called after close"):
                self.shim.step(torch.zeros(N, dtype=torch.int64))
            with pytest.raises(RuntimeError, match="called after close"):
                self.shim.reset()
            self.shim = self.shim_type(self.base)  # a new adapter resets the env
            self.ref.reset()
        self.last = None

    # ------------------------------------------------------------------ invariants
    @invariant()
    def last_outputs_are_the_references(self):
        if self.last is not None:
            for g, e in zip(*self.last, strict=True):
                assert torch.equal(g, e.to(g.dtype))

    @invariant()
    def env_matches_reference(self):
        for k in ("observation", "reward", "done", "episode_length"):
            assert torch.equal(self.base.outputs[k], self.ref.outputs[k])
        assert torch.equal(self.base.state, self.ref.state)
        assert torch.equal(self.base.params.effective_table, self.ref.params.effective_table)


class SB3Machine(AdapterMachine):
    shim_type = SB3

    @rule(steps=st.integers(2, 8))
    def set_max_episode_steps(self, steps):
        self.shim.adapter.set_attr("max_episode_steps", steps)
        self.ref.max_episode_steps = steps


SETTINGS = settings(max_examples=20, stateful_step_count=16, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _case(shim: type[Shim], base: type[AdapterMachine] = AdapterMachine):
    machine = type(f"{shim.__name__}Machine", (base,), {"shim_type": shim})
    machine.TestCase.settings = SETTINGS
    return machine.TestCase


test_rsl_rl_machine = _case(RslRl)
test_skrl_machine = _case(Skrl)
test_sb3_machine = _case(SB3, SB3Machine)
test_gymnasium_machine = _case(Gymnasium)
test_torchrl_machine = _case(TorchRL)


def test_numpy_edit_is_free():  # a NumPy return is a host copy: editing it touches nothing
    env = SB3VecEnv(gp.make("CartPole-v1", num_envs=N, device="cpu", seed=0))
    obs = env.reset()
    obs[:] = np.nan
    assert not torch.isnan(env.gp_env.outputs["observation"]).any()


@pytest.mark.parametrize("shim_type", [RslRl, Skrl, SB3, Gymnasium, TorchRL])
def test_a_call_made_while_an_adapter_reads_the_step_outputs_is_refused(shim_type):
    # an adapter reads the env's output buffers after env.step returned: another thread's
    # step between the two overwrote them, and the first call returned the second's outputs
    base = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3, max_episode_steps=6)
    ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3, max_episode_steps=6)
    shim = shim_type(base)
    if shim.resets_when_built:
        ref.reset()
    a, b = torch.ones(N, dtype=torch.int64), torch.zeros(N, dtype=torch.int64)
    for _ in range(2):
        shim.step(b)
        ref.step(b)
    entered, go, step = threading.Event(), threading.Event(), base.step

    def paused(action):  # thread A: its env step is done, its adapter has not read it yet
        td = step(action)
        entered.set()
        assert go.wait(10)
        return td

    base.step = paused
    out: list = []
    thread = threading.Thread(target=lambda: out.append(shim.step(a)))
    thread.start()
    assert entered.wait(10)
    base.step = step
    try:
        with pytest.raises(RuntimeError, match="another call on this env is running"):
            shim.step(b)
    finally:
        go.set()
        thread.join()
    expected = ref.step(a)
    key = "final_observation" if shim.final_obs else "observation"
    assert torch.equal(out[0][0], expected[key])
    assert torch.equal(out[0][1].float(), expected["reward"])
