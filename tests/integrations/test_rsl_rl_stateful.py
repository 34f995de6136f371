"""A stateful property-based test of ``RslRlVecEnv``'s stages in the env's captured step.

A hypothesis ``RuleBasedStateMachine`` interleaves adapter steps (float actions, mapped by
the adapter's first stage), plain steps of the same env (its stages disarmed), parameter
writes with masks, masked resets of the env and adapter resets, against a reference env
stepped with the same integer actions. After every rule: the adapter's outputs of its last
two steps are what the reference returned at those steps (double buffers: a plain step
writes neither), and the env's own outputs equal the reference's.
"""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

pytest.importorskip("hypothesis")
pytest.importorskip("rsl_rl")
import hypothesis.strategies as st  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule  # noqa: E402

from gpuparam.integrations.rsl_rl import RslRlVecEnv  # noqa: E402

N = 8
floats = st.lists(st.floats(-2.0, 2.0, allow_nan=False) | st.sampled_from([0.0, -0.0]),
                  min_size=N, max_size=N).map(lambda v: torch.tensor(v).reshape(N, 1))
ints = st.lists(st.integers(0, 1), min_size=N, max_size=N).map(
    lambda a: torch.tensor(a, dtype=torch.int64))
masks = st.lists(st.booleans(), min_size=N, max_size=N).map(torch.tensor)


def _outputs(td) -> tuple[torch.Tensor, ...]:
    return (td["observation"].clone(), td["reward"].clone(), td["done"].long(),
            td["truncated"] & ~td["terminated"])


class AdapterMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.base = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=4)
        self.ref = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=4)
        self.env = RslRlVecEnv(self.base)
        self.ref.reset()
        self.returned: list[tuple] = []  # (adapter's tensors, expected values), last two

    @rule(logits=floats)
    def adapter_step(self, logits):
        obs, rew, dones, extras = self.env.step(logits)
        expected = _outputs(self.ref.step((logits[:, 0] > 0).long()))
        got = (obs["policy"], rew, dones, extras["time_outs"])
        self.returned = (self.returned + [(got, expected)])[-2:]

    @rule(action=ints)
    def plain_step(self, action):
        self.base.step(action)
        self.ref.step(action)

    @rule(mask=masks, value=st.floats(0.3, 0.9))
    def write(self, mask, value):
        self.base.params.set("length", value, mask=mask)
        self.ref.params.set("length", value, mask=mask)

    @rule(mask=masks)
    def reset_envs(self, mask):
        self.base.reset(mask)
        self.ref.reset(mask)

    @rule()
    def adapter_reset(self):
        obs, _ = self.env.reset()
        expected = self.ref.reset()["observation"]
        assert torch.equal(obs["policy"], expected)
        self.returned = []

    @invariant()
    def last_two_steps_intact(self):
        for got, expected in self.returned:
            for g, e in zip(got, expected, strict=True):
                assert torch.equal(g, e)

    @invariant()
    def env_matches_reference(self):
        for k in ("observation", "reward", "done"):
            assert torch.equal(self.base.outputs[k], self.ref.outputs[k])


AdapterMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_adapter_machine = AdapterMachine.TestCase
