"""The things timed: gpuparam configurations and peer vector envs, behind one interface.

A ``Subject`` owns its env and pre-generated actions (built before any timing, cycled in the
timed loop), and ``run(steps)`` returns the seconds ``steps`` batched steps take, device work
included. Peer builders raise ``Skipped`` when the peer is not installed.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

import gpuparam as gp
from benchmarks.config import GpSetup, randomization_terms
from benchmarks.timing import optional_import, preserve_torch_threads, sync

NUM_ACTION_BATCHES = 8  # distinct pre-generated action batches, cycled


@dataclass
class Subject:
    """One timed configuration at one N."""

    num_envs: int
    step: Callable[[int], None]  # step(i): one batched step with action batch i % K
    device: str = "cpu"
    close: Callable[[], None] = lambda: None
    env: object = None
    notes: list[str] = field(default_factory=list)
    host: bool = False  # steps on the CPU whatever the run's device (the peers)

    def run(self, steps: int) -> float:
        """Seconds for ``steps`` batched steps (``steps * num_envs`` env-steps)."""
        step = self.step
        sync(self.device)
        t0 = time.perf_counter()
        for i in range(steps):
            step(i)
        sync(self.device)
        return time.perf_counter() - t0


# ----------------------------------------------------------------------------- gpuparam
def gp_actions(env, n: int, device: torch.device) -> list[torch.Tensor]:
    """K pre-generated action batches matching ``env.action_spec``."""
    spec = env.action_spec
    g = torch.Generator(device="cpu").manual_seed(0)
    if isinstance(spec, gp.DiscreteSpec):
        a = torch.randint(0, spec.n, (NUM_ACTION_BATCHES, n, *spec.shape), generator=g)
    else:
        low = torch.as_tensor(spec.low, dtype=torch.float32)
        high = torch.as_tensor(spec.high, dtype=torch.float32)
        u = torch.rand(NUM_ACTION_BATCHES, n, *spec.shape, generator=g)
        a = low + (high - low) * u
    return list(a.to(device).unbind(0))


def make_gp_env(setup: GpSetup, n: int, device: str):
    """Build the (possibly wrapped) gpuparam env of ``setup``, its step captured."""
    env = gp.make(setup.env_id, num_envs=n, device=device, seed=0)
    if setup.randomize:
        env.randomize(*randomization_terms(setup.randomize))
    if setup.hooks:
        counter = torch.zeros(n, dtype=torch.int32, device=env.device)

        def hook(_env, _td) -> None:
            counter.add_(1)

        env.before_step(hook)
        env.after_step(hook)
    if setup.transforms:
        norms = {"ObsNorm": lambda: gp.ObsNorm(env.observation_spec.shape),
                 "RewardNorm": lambda: gp.RewardNorm(gamma=0.99)}
        env = gp.TransformedEnv(env, *(norms[name]() for name in setup.transforms))
    return env


def gp_subject(setup: GpSetup, n: int, device: str, warmup: int = 5) -> Subject:
    notes: list[str] = []
    env = make_gp_env(setup, n, device)
    actions = gp_actions(env, n, env.device)
    env.reset()
    k = len(actions)

    def step(i: int) -> None:
        env.step(actions[i % k])

    subject = Subject(n, step, device=device, env=env, notes=notes)
    subject.run(warmup)
    return subject


def obs_norm_subject(n: int, features: int, device: str, warmup: int = 5) -> Subject:
    """What ``TransformedEnv`` does per step with an ``ObsNorm`` on a ``features``-dim
    observation: update with ``final_observation``, normalize it and ``observation``."""
    norm = gp.ObsNorm((features,), num_envs=n, device=device)
    g = torch.Generator(device="cpu").manual_seed(0)
    x, x2 = (torch.randn(n, features, generator=g).to(device) for _ in range(2))
    out, out2 = torch.empty_like(x), torch.empty_like(x2)

    def step(i: int) -> None:
        norm.forward_pair(x, out, x2, out2)

    subject = Subject(n, step, device=device, env=norm)
    subject.run(warmup)
    return subject


# ----------------------------------------------------------------------------- peers
def gym_cartpole():
    """Worker factory (module-level, so that spawned processes can unpickle it)."""
    import gymnasium

    return gymnasium.make("CartPole-v1")


def torchrl_cartpole():
    from torchrl.envs import GymEnv

    return GymEnv("CartPole-v1")


def _numpy_actions(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 2, size=n) for _ in range(NUM_ACTION_BATCHES)]


def _gym_subject(venv, n: int, warmup: int) -> Subject:
    try:
        venv.reset(seed=0)
    except TypeError:  # envpool's older gym API takes no seed here
        venv.reset()
    actions = _numpy_actions(n)
    k = len(actions)

    def step(i: int) -> None:
        venv.step(actions[i % k])

    subject = Subject(n, step, close=venv.close, env=venv, host=True)
    subject.run(warmup)
    return subject


def gym_vector_subject(n: int, warmup: int = 5) -> Subject:
    """Gymnasium's numpy-vectorized CartPole (one process, arrays of N)."""
    gymnasium = optional_import("gymnasium")
    venv = gymnasium.make_vec(
        "CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point"
    )
    return _gym_subject(venv, n, warmup)


def gym_sync_subject(n: int, warmup: int = 5) -> Subject:
    """Gymnasium ``SyncVectorEnv``: N Python envs in a loop."""
    optional_import("gymnasium")
    from gymnasium.vector import SyncVectorEnv

    return _gym_subject(SyncVectorEnv([gym_cartpole] * n), n, warmup)


def worker_start_method() -> str:
    """``fork`` where available: workers start in well under a second instead of tens of
    seconds on 2 cores (spawn re-imports torch per worker); the timed steady-state stepping
    does not depend on how the workers were started. Passed explicitly, so the global start
    method stays unset."""
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def gym_async_subject(n: int, warmup: int = 5) -> Subject:
    """Gymnasium ``AsyncVectorEnv``: one worker process per env."""
    optional_import("gymnasium")
    from gymnasium.vector import AsyncVectorEnv

    method = worker_start_method()
    subject = _gym_subject(AsyncVectorEnv([gym_cartpole] * n, context=method), n, warmup)
    subject.notes.append(f"workers started with {method}")
    return subject


def torchrl_parallel_subject(n: int, warmup: int = 5) -> Subject:
    """TorchRL ``ParallelEnv`` of N ``GymEnv("CartPole-v1")`` workers."""
    optional_import("torchrl")
    from torchrl.envs import ParallelEnv

    method = worker_start_method()
    with preserve_torch_threads():
        penv = ParallelEnv(n, torchrl_cartpole, mp_start_method=method)
        td = penv.reset()
    actions = [penv.full_action_spec.rand() for _ in range(NUM_ACTION_BATCHES)]
    k = len(actions)
    state = {"td": td}

    def step(i: int) -> None:
        cur = state["td"]
        cur.update(actions[i % k])
        _, state["td"] = penv.step_and_maybe_reset(cur)

    notes = [f"workers started with {method}"]
    subject = Subject(n, step, close=penv.close, env=penv, notes=notes, host=True)
    subject.run(warmup)
    return subject


def envpool_subject(n: int, warmup: int = 5) -> Subject:
    """envpool's C++ CartPole-v1 thread pool, when envpool is installed."""
    envpool = optional_import("envpool", "pip install envpool (Linux x86_64 wheels only)")
    venv = envpool.make_gym("CartPole-v1", num_envs=n)
    return _gym_subject(venv, n, warmup)


PEERS: dict[str, Callable[[int], Subject]] = {
    "gymnasium SyncVectorEnv": gym_sync_subject,
    "gymnasium AsyncVectorEnv": gym_async_subject,
    "torchrl ParallelEnv": torchrl_parallel_subject,
    "envpool": envpool_subject,
}
