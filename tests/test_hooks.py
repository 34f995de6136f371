"""Step hooks (before_step / after_step) and env logic on parameter change."""

from __future__ import annotations

import torch
from randomization_helpers import N, actions, cartpole, eff, pendulum

import gpuparam as gp


def test_before_step_hook_can_change_the_action():
    a, b = cartpole(), cartpole()
    remove = a.before_step(lambda env, td: td["action"].fill_(1))
    for act in actions(a, 10):
        ta = a.step(act)
        tb = b.step(torch.ones(N, dtype=torch.int64))
        assert torch.equal(ta["observation"], tb["observation"])
    remove()
    act = torch.zeros(N, dtype=torch.int64)
    assert torch.equal(a.step(act)["observation"], b.step(act)["observation"])
    assert "before_step" not in a.pipeline.names


def test_after_step_sees_the_step_before_auto_reset_and_can_shape_rewards():
    env = cartpole()
    seen = []

    def hook(e, td):
        seen.append((td["observation"].clone(), td["done"].clone()))
        td["reward"].mul_(2.0)

    env.after_step(hook)
    for act in actions(env, 40):
        td = env.step(act)
        obs, done = seen[-1]
        assert torch.equal(obs, td["final_observation"])  # pre-reset observation
        assert torch.equal(done, td["done"])
        assert (td["reward"] == 2.0).all()
    assert len(seen) == 40


def test_hooks_run_around_step_randomization_and_before_reset_randomization():
    env = cartpole()
    env.randomize(gp.Uniform("gravity", 5.0, 15.0, on="step"),
                  gp.Uniform("length", 0.3, 1.0, on="reset"))
    env.reset()
    log = {}
    env.before_step(lambda e, td: log.__setitem__("before", eff(e)))
    env.after_step(lambda e, td: log.__setitem__("after", eff(e)))
    prev = eff(env)
    for act in actions(env, 30):
        td = env.step(act)
        now = eff(env)
        g, length = 0, 3
        assert torch.equal(log["before"], prev)  # step-time draws come after before_step
        assert torch.equal(log["after"][g], now[g])  # ... and before after_step
        assert torch.equal(log["after"][length], prev[length])  # reset draws come after it
        assert torch.equal(now[length] != prev[length], td["done"])
        prev = now


def test_hooks_work_on_device_tensors_only():
    env = pendulum()
    total = torch.zeros(N)
    env.after_step(lambda e, td: total.add_(td["reward"]))
    returns = torch.zeros(N)
    for act in actions(env, 20):
        returns += env.step(act)["reward"]
    assert torch.allclose(total, returns)


# ---------------------------------------------------------------------------- env logic
class TotalMassCartPole(gp.CartPoleEnv):
    """Keeps a derived buffer (total mass) up to date for the envs whose masses change."""

    name = "TotalMassCartPole-test"
    recompute_on = ("masscart", "masspole")

    def on_params_changed(self, names, mask):
        if not hasattr(self, "total_mass"):
            self.total_mass = torch.zeros(self.num_envs, device=self.device)
            self.calls = []
        self.calls.append((names, None if mask is None else mask.clone()))
        new = self.params["masscart"] + self.params["masspole"]
        if mask is None:
            self.total_mass.copy_(new)
        else:
            self.total_mass.copy_(torch.where(mask, new, self.total_mass))


def true_total(env) -> torch.Tensor:
    return env.params["masscart"] + env.params["masspole"]


def test_env_logic_runs_after_set_for_the_written_envs():
    env = cartpole(cls=TotalMassCartPole)
    assert torch.equal(env.total_mass, true_total(env))
    mask = torch.arange(N) < 5
    env.params.set("masspole", 0.3, mask=mask)
    assert torch.equal(env.calls[-1][1], mask)
    assert torch.equal(env.total_mass, true_total(env))
    n_calls = len(env.calls)
    env.params.set("gravity", 5.0)  # not a dependency
    assert len(env.calls) == n_calls


def test_env_logic_runs_after_randomization_and_curricula():
    env = cartpole(cls=TotalMassCartPole)
    env.randomize(gp.Uniform("masscart", 0.5, 2.0, on="reset"),
                  gp.LogUniform("masspole", 0.05, 0.2, on=gp.Every(3)))
    env.add_curriculum(gp.Curriculum(4, params={"masspole": (0.1, 0.4)}, metric=torch.ones(N),
                                     promote=0.5))
    env.reset()
    for act in actions(env, 40):
        env.step(act)
        assert torch.equal(env.total_mass, true_total(env))
    state = env.state_dict()
    env.params.set("masscart", 3.0)
    env.load_state_dict(state)
    assert torch.equal(env.total_mass, true_total(env))


def test_returned_and_hook_tensordicts_take_writes_in_place_only():
    # they hold the env's own buffers: assigning a key would detach it from them for good
    import pytest

    env = cartpole()
    a = torch.zeros(N, dtype=torch.int64)
    td = env.step(a)
    with pytest.raises(RuntimeError, match="locked"):
        td["reward"] = td["reward"] * 0.1
    td["reward"].mul_(0.5)  # in place: fine

    def shaping(e, hook_td):
        hook_td["reward"].add_(10.0)

    env.after_step(shaping)
    assert torch.all(env.step(a)["reward"] == 11.0)

    def assigning(e, hook_td):
        hook_td["reward"] = hook_td["reward"] + 10.0

    remove = env.after_step(assigning)
    with pytest.raises(RuntimeError, match="locked"):
        env.step(a)
    remove()
    assert torch.all(env.step(a)["reward"] == 11.0)
