"""The README's way to add an env (examples/custom_env.py: a Backend plus a Task with a
vector action and a vector parameter) works through the whole pipeline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
import warp as wp

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


# ------------------------------------------------------------------ a parameter view struct
@wp.struct
class _ShiftParams:
    shift: wp.array(dtype=float)
    scale: wp.array2d(dtype=float)


@wp.kernel
def _shift_step(
    params: _ShiftParams,
    action: wp.array2d(dtype=float),
    state: wp.array(dtype=wp.vec2),
    obs_out: wp.array(dtype=wp.vec2),
    final_obs_out: wp.array(dtype=wp.vec2),
    reward_out: wp.array(dtype=float),
    terminated_out: wp.array(dtype=wp.bool),
):
    i = wp.tid()
    s = wp.vec2(params.shift[i] * params.scale[0, i], params.shift[i] * params.scale[1, i])
    state[i] = s
    obs_out[i] = s
    final_obs_out[i] = s
    reward_out[i] = action[i, 0]
    terminated_out[i] = False


@wp.kernel
def _shift_reset(
    mask: wp.array(dtype=wp.bool),
    seed: wp.array(dtype=wp.int32),
    env_offset: int,
    episode_count: wp.array(dtype=wp.int32),
    state: wp.array(dtype=wp.vec2),
    obs_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    if mask[i]:
        episode_count[i] = episode_count[i] + 1
        state[i] = wp.vec2(0.0)
        obs_out[i] = wp.vec2(0.0)


class _ShiftEnv(gp.VecEnv):
    name = "Shift-test"
    param_specs = (
        gp.ParamSpec("unused", 0.0, -1.0, 1.0),
        gp.ParamSpec("scale", (1.0, 2.0), -10.0, 10.0, shape=(2,)),
        gp.ParamSpec("shift", 1.0, -10.0, 10.0),
    )
    observation_spec = gp.BoxSpec(shape=(2,), low=-100.0, high=100.0)
    action_spec = gp.BoxSpec(shape=(1,), low=-1.0, high=1.0)
    max_episode_steps = 10
    step_kernel, reset_kernel = _shift_step, _shift_reset
    state_dtype = obs_dtype = wp.vec2
    kernel_params = ("shift", "scale")

    def make_backend(self) -> gp.KernelBackend:
        return gp.KernelBackend(self.step_kernel, self.reset_kernel, self.state_dtype,
                                self.obs_dtype, self.kernel_params, params_type=_ShiftParams)


def test_kernel_backend_passes_parameters_as_one_struct_that_sees_every_write():
    """``params_type``: fields filled by parameter name (not position), bound once at
    bind time as views of the table, so a masked write after binding reaches the kernel."""
    env = _ShiftEnv(4, device="cpu", seed=0)
    env.reset()
    mask = torch.tensor([True, False, True, False])
    env.params.set("shift", 3.0, mask=mask)
    env.params.set("scale", torch.tensor([[1.0, -1.0]] * 4))
    obs = env.step(torch.zeros(4, 1))["observation"]
    shift = torch.where(mask, 3.0, 1.0)
    assert torch.equal(obs, torch.stack([shift, -shift], 1))


def test_custom_env_gets_the_capture_proof():
    """docs/custom_envs.md: an author runs the library's own differential check on their
    env (captured against eager, random public operations, bit for bit)."""
    from gpuparam.testing import check_capture

    report = check_capture(
        lambda capture: custom_env.PointMassEnv(4, device="cpu", seed=1, capture=capture),
        steps=16, seed=2)
    assert report.replayed_steps >= 1 and report.compared > 0
