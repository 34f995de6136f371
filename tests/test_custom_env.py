"""The README's way to add an env (examples/custom_env.py: a Backend plus a Task with a
vector action and a vector parameter) works through the whole pipeline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import gpuparam as gp

_spec = importlib.util.spec_from_file_location(
    "custom_env", Path(__file__).resolve().parents[1] / "examples" / "custom_env.py"
)
custom_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(custom_env)


def _make(n=16, **kw):
    return gp.make("PointMass-v0", num_envs=n, device="cpu", seed=4, **kw)


def _actions(steps, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(steps, n, 2, generator=g) * 6 - 3  # beyond max_force: clipped


def test_one_step_matches_a_numpy_reference():
    env = _make()
    env.params.set("mass", torch.linspace(0.5, 2.0, 16))
    env.params.set("target", torch.rand(16, 2) - 0.5)
    pos, vel = env.state["pos"].double().numpy(), env.state["vel"].double().numpy()
    a = _actions(1, 16)[0]
    td = env.step(a)
    p = {k: env.params[k].double().numpy() for k in ("mass", "dt", "damping", "max_force")}
    f = np.clip(a.double().numpy(), -p["max_force"][:, None], p["max_force"][:, None])
    v = vel + p["dt"][:, None] * (f / p["mass"][:, None] - p["damping"][:, None] * vel)
    x = pos + p["dt"][:, None] * v
    target = env.params["target"].double().numpy()
    np.testing.assert_allclose(td["final_observation"][:, :2].numpy(), x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(td["final_observation"][:, 4:].numpy(), target - x, atol=1e-5)
    np.testing.assert_allclose(td["reward"].numpy(), -np.linalg.norm(target - x, axis=1),
                               rtol=1e-5, atol=1e-6)


def test_captured_equals_eager_with_randomization_and_truncation():
    outs = []
    for capture in (True, False):
        env = _make(capture=capture, max_episode_steps=7)
        env.randomize(gp.Uniform("target", -1.0, 1.0, on="reset"),
                      gp.Gaussian("damping", 0.0, 0.1, op="add", on="step"))
        outs.append([{k: v.clone() for k, v in env.step(a).items()} for a in _actions(30, 16)])
        assert env.pipeline.captured == capture
    for a, b in zip(*outs, strict=True):
        for k in a:
            assert torch.equal(a[k], b[k]), k
    assert any(o["truncated"].any() for o in outs[0])
    assert all(int(o["episode_length"].max()) <= 7 for o in outs[0])


def test_masked_vector_parameter_write_changes_only_masked_envs():
    a, b = _make(), _make()
    mask = torch.arange(16) % 3 == 0
    a.params.set("target", torch.tensor([1.5, -1.5]), mask=mask)
    acts = _actions(5, 16)
    for act in acts:
        ta, tb = a.step(act), b.step(act)
    assert torch.equal(ta["observation"][~mask], tb["observation"][~mask])
    assert not torch.equal(ta["observation"][mask], tb["observation"][mask])


def test_env_i_is_the_same_env_whatever_n():
    small, big = _make(4), _make(8)
    assert torch.equal(small.state["pos"], big.state["pos"][:4])
    for act in _actions(20, 8):
        ts, tb = small.step(act[:4]), big.step(act)
    assert torch.equal(ts["observation"], tb["observation"][:4])


def test_bad_action_shape_is_rejected():
    env = _make()
    with pytest.raises(ValueError, match=r"action: expected shape \(16, 2\), got \(16,\)"):
        env.step(torch.zeros(16))
