"""CUDA checks (``pytest -m gpu``): CPU/GPU agreement, graph replay, no host syncs, memory.

Skipped without a CUDA device (see conftest.py).
"""

from __future__ import annotations

import pytest
import torch

import gpuparam as gp

pytestmark = pytest.mark.gpu

N = 4096


def _actions(steps: int, n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (steps, n), generator=g)


def _terms():
    return (
        gp.Uniform("length", 0.3, 1.0, on="reset"),
        gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="step"),
        gp.LogUniform("masspole", 0.5, 2.0, op="scale", on=gp.Every(10)),
    )


def _every_distribution_and_trigger():
    """One term per distribution, trigger and schedule, each on its own parameter."""
    return (
        gp.Uniform("length", 0.3, 1.0, on="step"),
        gp.Gaussian("force_mag", 0.0, 0.5, op="add", on="reset"),
        gp.LogUniform("masspole", 0.5, 2.0, op="scale", on=gp.Every(3)),
        gp.Choice("masscart", [0.5, 1.0, 2.0], on=gp.Interval(0.1, 0.3)),
        gp.Uniform("gravity", 9.0, 10.0, on=gp.OnReset(min_steps=5)),
        gp.Uniform("tau", on="step", schedule=gp.Linear((0.01, 0.02), (0.02, 0.03), steps=20)),
    )


def test_reset_and_randomization_draws_identical_on_cpu_and_gpu():
    cpu = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=3)
    gpu = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=3)
    assert torch.equal(cpu.state, gpu.state.cpu())
    cpu.randomize(*_every_distribution_and_trigger())
    gpu.randomize(*_every_distribution_and_trigger())
    same = torch.ones(N, dtype=torch.bool)  # envs whose episodes ended at the same steps
    for t, a in enumerate(_actions(40, N)):
        cpu.step(a)
        gpu.step(a.cuda())
        # parameters are drawn bit for bit alike. Reset-time draws follow the episodes, so
        # an env whose dynamics crossed a termination threshold one step apart on the two
        # devices (float32 physics, not guaranteed bit-identical) leaves the comparison
        same &= cpu.context.episode_count == gpu.context.episode_count.cpu()
        assert torch.equal(cpu.params.effective_table[:, same],
                           gpu.params.effective_table.cpu()[:, same]), t
    assert same.float().mean() > 0.99, int((~same).sum())


def test_dynamics_agree_within_tolerance():
    cpu = gp.make("CartPole-v1", num_envs=N, device="cpu", seed=1)
    gpu = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=1)
    alive = torch.ones(N, dtype=torch.bool)
    for a in _actions(40, N):
        oc, og = cpu.step(a), gpu.step(a.cuda())
        fc, fg = oc["final_observation"], og["final_observation"].cpu()
        torch.testing.assert_close(fc[alive], fg[alive], rtol=1e-4, atol=1e-4)
        alive &= ~(oc["done"] | og["done"].cpu())  # envs past a reset may differ by a step


def test_graph_replay_equals_eager_with_writes_between_steps():
    eager = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=5, capture=False)
    graph = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=5)
    for env in (eager, graph):
        env.randomize(*_terms())
    half = torch.arange(N, device="cuda") % 2 == 0
    for t, a in enumerate(_actions(1000, N).cuda()):
        if t % 100 == 50:
            for env in (eager, graph):
                env.params.set("length", 0.4 + t / 2000, mask=half, validate=False)
        te, tg = eager.step(a), graph.step(a)
        assert torch.equal(te["observation"], tg["observation"]), t
        assert torch.equal(te["reward"], tg["reward"]), t
    assert graph.pipeline.plan == (("warp", graph.pipeline.names),)  # one Warp graph
    assert torch.equal(eager.params.effective_table, graph.params.effective_table)


def test_captured_step_write_and_reset_stats_never_sync():
    env = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=0)
    env.randomize(*_terms())
    norm = gp.ObsNorm((4,), num_envs=N)
    tenv = gp.TransformedEnv(env, norm, gp.RewardNorm())
    actions = _actions(50, N).cuda()
    mask = torch.arange(N, device="cuda") < N // 2
    # the first step binds the transforms' stage (a new plan), the second warms that plan
    # up (loads modules, allocates scratch), the third captures it (as on the CPU:
    # tests/transforms/test_transformed_env.py)
    for _ in range(3):
        tenv.step(actions[0])
    assert env.pipeline.captured
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for a in actions[1:]:
            tenv.step(a)
            env.params.set("length", 0.7, mask=mask, validate=False)
            norm.reset_stats(mask)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_no_memory_growth_over_10k_graph_steps():
    env = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=0)
    env.randomize(*_terms())
    a = torch.zeros(N, dtype=torch.int64, device="cuda")
    for _ in range(10):
        env.step(a)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(10_000):
        env.step(a)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


def test_no_warp_memory_growth_over_captured_robot_steps():
    """Warp's own memory pool (invisible to torch's counters) does not grow over captured
    robot steps with reset-time model writes and forced resets."""
    pytest.importorskip("mujoco_warp")
    import warp as wp

    env = gp.make("Go1JoystickFlatTerrain-v1", 256, device="cuda", seed=0)
    env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))
    a = torch.zeros(256, 12, device="cuda")
    for _ in range(5):
        env.step(a)
    torch.cuda.synchronize()
    dev = wp.get_device("cuda:0")
    before = wp.get_mempool_used_mem_current(dev) if wp.is_mempool_enabled(dev) else None
    before_torch = torch.cuda.memory_allocated()
    for t in range(300):
        if t % 50 == 0:
            env.episode_length = env.max_episode_steps - 1  # everyone resets next step
        env.step(a)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before_torch
    if before is not None:
        assert wp.get_mempool_used_mem_current(dev) == before
    assert env.pipeline.captures == 1


def test_masked_write_is_one_kernel_without_sync():
    env = gp.make("CartPole-v1", num_envs=1 << 20, device="cuda")
    mask = torch.rand(1 << 20, device="cuda") < 0.5
    env.params.set("length", 0.9, mask=mask, validate=False)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        env.params.set("length", 0.8, mask=mask, validate=False)
        torch.cuda.synchronize()
    cuda = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = [e.name for e in cuda if "memcpy" not in e.name.lower()
               and "memset" not in e.name.lower()]
    assert len(kernels) == 1, kernels  # Warp's masked fill; the mask copy is a memcpy


def test_graph_includes_transforms():
    def build(capture):
        env = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=9, capture=capture)
        env.randomize(*_terms())
        return gp.TransformedEnv(env, gp.ObsNorm((4,), num_envs=N), gp.RewardNorm())

    eager, graph = build(False), build(True)
    for a in _actions(300, N).cuda():
        te, tg = eager.step(a), graph.step(a)
        assert torch.equal(te["observation"], tg["observation"])
        assert torch.equal(te["reward"], tg["reward"])
    assert graph.env.pipeline.plan == (("warp", graph.env.pipeline.names),)
    assert graph.env.pipeline.names[-1] == "transforms"


def test_rsl_rl_adapter_stages_match_cpu():
    # the adapter's action and output stages run inside the captured CUDA graph, armed per
    # step by a flag written on torch's stream: the same outputs as on CPU, step for step
    pytest.importorskip("rsl_rl")
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    envs = {d: RslRlVecEnv(gp.make("CartPole-v1", num_envs=N, device=d, seed=2))
            for d in ("cpu", "cuda")}
    g = torch.Generator().manual_seed(0)
    for _ in range(12):
        logits = torch.randn(N, 1, generator=g)
        outs = {d: e.step(logits.to(e.device)) for d, e in envs.items()}
        (obs_c, rew_c, done_c, ex_c), (obs_g, rew_g, done_g, ex_g) = outs["cpu"], outs["cuda"]
        torch.testing.assert_close(obs_g["policy"].cpu(), obs_c["policy"], rtol=1e-5, atol=1e-5)
        assert torch.equal(rew_g.cpu(), rew_c) and torch.equal(done_g.cpu(), done_c)
        assert torch.equal(ex_g["time_outs"].cpu(), ex_c["time_outs"])
    assert envs["cuda"].env.pipeline.captured


def test_robot_captured_step_equals_eager_with_writes_and_pushes():
    """MuJoCo Warp's launches take no stream argument: they run on the step's stream inside
    the CUDA graph (a capture fails on a wait for work outside it). Step-time parameter
    writes (``params_changed`` inside the graph), reset-time ones and a push included; the
    initial states and step-time draws are bit for bit those of the CPU. MuJoCo Warp's
    deterministic mode makes the two CUDA runs comparable bit for bit (its default contact
    order and atomics are not deterministic on CUDA)."""
    pytest.importorskip("mujoco_warp")
    envs = {}
    for name, dev, capture in (("graph", "cuda", True), ("eager", "cuda", False),
                               ("cpu", "cpu", True)):
        env = gp.make("Walker2d-v5", 64, device=dev, seed=2, capture=capture,
                      deterministic=True)
        env.randomize(gp.Uniform("geom_friction", 0.5, 1.5, op="scale", on="step"),
                      gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
        env.add_event(gp.Push([(-0.5, 0.5)], every=gp.Every(3)))
        envs[name] = env
    assert torch.equal(envs["cpu"].state["qpos"], envs["graph"].state["qpos"].cpu())
    g = torch.Generator().manual_seed(0)
    for t in range(30):
        a = torch.rand(64, *envs["cpu"].action_spec.shape, generator=g) * 2 - 1
        out = {k: e.step(a.to(e.device)) for k, e in envs.items()}
        for key in ("observation", "reward", "done"):
            assert torch.equal(out["graph"][key], out["eager"][key]), (t, key)
        # step-time draws do not depend on when episodes end (dynamics differ across devices)
        assert torch.equal(envs["graph"].params["geom_friction"].cpu(),
                           envs["cpu"].params["geom_friction"]), t
    assert envs["graph"].pipeline.captured
    for f in ("body_subtreemass", "body_invweight0", "dof_invweight0"):
        assert torch.equal(torch.as_tensor(getattr(envs["graph"].backend.m, f).numpy()),
                           torch.as_tensor(getattr(envs["eager"].backend.m, f).numpy())), f


def test_masked_recompute_on_cuda_equals_eager_and_the_cpu():
    """A reset-time mass write's derived constants are recomputed by the masked kernel
    inside the captured step (no conditional node, no allocation): at the forced resets
    they equal an eager CUDA run's bit for bit (one thread per world) and the CPU's within
    rtol 1e-5 (HalfCheetah never terminates: resets only where forced)."""
    pytest.importorskip("mujoco_warp")
    envs = {(d, c): gp.make("HalfCheetah-v5", 64, device=d, seed=2, capture=c)
            for d, c in (("cuda", True), ("cuda", False), ("cpu", True))}
    for env in envs.values():
        env.randomize(gp.Uniform("body_mass", 0.8, 1.2, op="scale", on="reset"))
    for t in range(12):
        for (d, _), env in envs.items():
            if t in (4, 9):
                env.episode_length = torch.where(torch.arange(64, device=d) % 3 == 0,
                                                 999, 0).to(torch.int32)
            env.step(torch.zeros(64, 6, device=d))
    graph, eager, cpu = (envs[k].backend for k in (("cuda", True), ("cuda", False),
                                                    ("cpu", True)))
    assert envs["cuda", True].pipeline.captured and graph.arena is None
    assert torch.equal(envs["cuda", True].params["body_mass"].cpu(),
                       envs["cpu", True].params["body_mass"])
    for f in ("body_subtreemass", "body_invweight0", "dof_invweight0"):
        g, e, c = (torch.as_tensor(getattr(b.m, f).numpy()) for b in (graph, eager, cpu))
        assert torch.equal(g, e), f
        assert torch.allclose(g, c, rtol=1e-5), f


@pytest.mark.parametrize("gating", ["mask", "graph"])
def test_forward_at_reset_captured_equals_eager(gating):
    """Go1's reset-time ``forward``: with ``gating="graph"`` in a ``capture_if`` body on
    CUDA, its temporaries from the arena, MuJoCo Warp's own conditional nodes nested
    inside; with ``"mask"`` at every step, no conditional node of ours. The capture
    succeeds and equals eager stepping at forced resets."""
    pytest.importorskip("mujoco_warp")
    n = 64
    envs = {c: gp.make("Go1JoystickFlatTerrain-v1", n, device="cuda", seed=2, capture=c,
                       gating=gating) for c in (True, False)}
    for env in envs.values():
        env.randomize(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"))
    a = torch.zeros(n, 12, device="cuda")
    for t in range(10):
        if t in (4, 8):
            for env in envs.values():
                env.episode_length = torch.where(torch.arange(n, device="cuda") % 3 == 0,
                                                 999, 0).to(torch.int32)
        out = {c: env.step(a) for c, env in envs.items()}
        assert torch.allclose(out[True]["observation"], out[False]["observation"],
                              atol=1e-5), t
    graph = envs[True].backend
    assert envs[True].pipeline.captured and envs[True].pipeline.captures == 1
    if gating == "graph":
        assert graph.arena is not None and graph.arena.used > 0
    else:
        assert graph.arena is None


def test_hook_kinds_mean_the_same_on_cuda():
    """A Python hook runs at every captured CUDA step; a torch hook's work (allocating
    temporaries) replays from a torch graph in the pipeline's private pool, equal to eager
    stepping."""
    calls = []

    def python_hook(env, td):
        calls.append(1)

    def torch_hook(env, td):
        tmp = td["reward"] * 4.0  # an allocation inside the captured segment
        td["reward"].copy_(tmp / 8.0)

    envs = []
    for capture in (True, False):
        env = gp.make("CartPole-v1", num_envs=N, device="cuda", seed=4, capture=capture)
        env.randomize(*_terms())
        env.before_step(python_hook)
        env.after_step(torch_hook, kind="torch")
        envs.append(env)
    graph, eager = envs
    for a in _actions(50, N).cuda():
        tg, te = graph.step(a), eager.step(a)
        assert torch.equal(tg["reward"], te["reward"])
        assert torch.equal(tg["observation"], te["observation"])
    assert len(calls) == 100  # both envs, every step
    assert [k for k, _ in graph.pipeline.plan] == ["python", "warp", "torch", "warp"]
    assert graph.pipeline.captured
