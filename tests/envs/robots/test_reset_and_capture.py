"""Masked resets, determinism across N, and captured vs eager stepping."""

from __future__ import annotations

import torch
import warp as wp

import gpuparam as gp
from tests.envs.robots.reference import actions


def _state(env) -> dict[str, torch.Tensor]:
    d = env.backend.d
    return {"qpos": env.state["qpos"].clone(), "qvel": env.state["qvel"].clone(),
            "obs": env.outputs["observation"].clone(),
            "warm": wp.to_torch(d.qacc_warmstart).clone()}


def test_masked_reset_leaves_other_worlds_bit_identical():
    env = gp.make("Hopper-v5", 4, device="cpu", seed=0)
    twin = gp.make("Hopper-v5", 4, device="cpu", seed=0)
    acts = actions(env, 6)
    for a in acts[:3]:
        env.step(a)
        twin.step(a)
    mask = torch.tensor([True, False, False, True])
    before = _state(env)
    env.reset(mask)
    after = _state(env)
    for k in after:
        assert torch.equal(after[k][~mask], before[k][~mask]), k
    assert not torch.equal(after["qpos"][mask], before["qpos"][mask])
    assert (env.episode_length[mask] == 0).all()
    for a in acts[3:]:  # the untouched worlds go on exactly as in the twin
        td, tdt = env.step(a), twin.step(a)
        assert torch.equal(td["observation"][~mask], tdt["observation"][~mask])
        assert torch.equal(td["reward"][~mask], tdt["reward"][~mask])


def test_env_i_is_the_same_at_n4_and_n8():
    small = gp.make("Ant-v5", 4, device="cpu", seed=7)
    big = gp.make("Ant-v5", 8, device="cpu", seed=7)
    assert torch.equal(small.outputs["observation"], big.outputs["observation"][:4])
    acts = actions(big, 5)
    for a in acts:
        td_s, td_b = small.step(a[:4]), big.step(a)
        assert torch.equal(td_s["observation"], td_b["observation"][:4])
        assert torch.equal(td_s["reward"], td_b["reward"][:4])
    # a masked reset draws the same initial state for env i whatever N
    small.reset(torch.tensor([True, False, True, False]))
    big.reset(torch.tensor([True, False, True, False, True, True, False, False]))
    assert torch.equal(small.state["qpos"], big.state["qpos"][:4])


def test_captured_step_equals_eager_step():
    cap = gp.make("Walker2d-v5", 3, device="cpu", seed=2)
    eager = gp.make("Walker2d-v5", 3, device="cpu", seed=2, capture=False)
    for e in (cap, eager):
        e.randomize(gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="step"),
                    gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
    for a in actions(cap, 30):  # long enough for terminations and auto-resets
        td_c, td_e = cap.step(a), eager.step(a)
        for k in ("observation", "reward", "terminated", "truncated", "done"):
            assert torch.equal(td_c[k], td_e[k]), k
    assert cap.pipeline.captured and not eager.pipeline.captured
    assert torch.equal(cap.params["body_mass"], eager.params["body_mass"])


def test_truncation_at_max_episode_steps():
    env = gp.make("HalfCheetah-v5", 2, device="cpu", seed=0, max_episode_steps=3)
    a = torch.zeros(2, 6)
    dones = [env.step(a)["truncated"].clone() for _ in range(3)]
    assert not dones[0].any() and not dones[1].any() and dones[2].all()
    assert gp.make("HalfCheetah-v5", 1, device="cpu").max_episode_steps == 1000


def test_state_dict_continues_bit_for_bit():
    env = gp.make("Hopper-v5", 3, device="cpu", seed=4)
    env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))
    acts = actions(env, 8)
    for a in acts[:4]:
        env.step(a)
    saved = env.state_dict()
    first = [env.step(a).clone() for a in acts[4:]]
    env.load_state_dict(saved)
    again = [env.step(a).clone() for a in acts[4:]]
    for x, y in zip(first, again, strict=True):
        assert torch.equal(x["observation"], y["observation"])
        assert torch.equal(x["reward"], y["reward"])
