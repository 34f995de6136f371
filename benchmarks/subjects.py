"""The things timed: gpuparam configurations, the training libraries' adapters and peer
vector envs, behind one interface, and the one loop that times them side by side.

A ``Subject`` owns its env and pre-generated actions (built before any timing, cycled in the
timed loop), and ``run(steps)`` returns the seconds ``steps`` batched steps take, device work
included. Builders raise ``Skipped`` when a peer or library is not installed.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

import gpuparam as gp
from benchmarks import timing
from benchmarks.config import BARE, GpSetup, randomization_terms
from benchmarks.timing import attempt, interleave, median, optional_import, sync

NUM_ACTION_BATCHES = 8  # distinct pre-generated action batches, cycled


@dataclass
class Subject:
    """One timed configuration at one N."""

    num_envs: int
    step: Callable[[int], object]  # step(i): one batched step with action batch i % K
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

    def warm(self, steps: int = 5) -> Subject:
        """``steps`` untimed steps (build, first launches, capture); returns self."""
        self.run(steps)
        return self


def cycled(step: Callable[[object], object], actions: list) -> Callable[[int], object]:
    """``step(i)`` of a Subject: ``step(actions[i % K])``."""
    return lambda i: step(actions[i % len(actions)])


def run_group(builders: dict[str, Callable[[], Subject]], steps, repeats: int):
    """Build every subject, time them round-robin (``interleave``) over ``repeats`` rounds
    of ``steps`` steps (an int, or a function of the subject), then close them.

    Returns ``(times, subjects, failed)``: seconds per round and the subjects of those that
    were built, ``{"skipped": ...}`` / ``{"error": ...}`` of those that were not.
    """
    subjects, failed = {}, {}
    for name, build in builders.items():
        subject, why = attempt(build)
        if why:
            failed[name] = why
        else:
            subjects[name] = subject
    counts = {k: steps(s) if callable(steps) else steps for k, s in subjects.items()}
    try:
        times = interleave({k: (lambda s=s, c=counts[k]: s.run(c))
                            for k, s in subjects.items()}, repeats)
    finally:
        for s in subjects.values():
            s.close()
    return times, subjects, failed


def rates(times: list[float], n: int, steps: int) -> dict:
    """The median of rounds of ``steps`` steps of N envs: env-steps/s and seconds per step."""
    return {"env_steps_per_s": n * steps / median(times), "step_s": median(times) / steps}


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


def gp_subject(setup: GpSetup, n: int, device: str) -> Subject:
    env = make_gp_env(setup, n, device)
    actions = gp_actions(env, n, env.device)
    env.reset()
    return Subject(n, cycled(env.step, actions), device=device, env=env).warm()


def obs_norm_subject(n: int, features: int, device: str) -> Subject:
    """What ``TransformedEnv`` does per step with an ``ObsNorm`` on a ``features``-dim
    observation: update with ``final_observation``, normalize it and ``observation``."""
    norm = gp.ObsNorm((features,), num_envs=n, device=device)
    g = torch.Generator(device="cpu").manual_seed(0)
    x, x2 = (torch.randn(n, features, generator=g).to(device) for _ in range(2))
    out, out2 = torch.empty_like(x), torch.empty_like(x2)
    return Subject(n, lambda i: norm.forward_pair(x, out, x2, out2), device=device,
                   env=norm).warm()


ADAPTERS = {  # key: (label, the library's module, gpuparam's extra)
    "rsl_rl": ("rsl_rl RslRlVecEnv.step (incl. copies + episode stats)", "rsl_rl", "rsl_rl"),
    "torchrl": ("TorchRLEnv.step (TensorDict in/out, incl. clones)", "torchrl", "torchrl"),
    "skrl": ("skrl wrapper step (clones)", "skrl", "skrl"),
    "sb3": ("SB3VecEnv.step (NumPy + per-env info dicts)", "stable_baselines3", "sb3"),
    "gymnasium_numpy": ("GymnasiumVectorEnv(numpy=True) SAME_STEP", "gymnasium", "gymnasium"),
}


def adapter_subject(key: str, n: int, device: str) -> Subject:
    """A bare CartPole-v1 of ``n`` envs behind the adapter ``key`` of ``ADAPTERS``, stepped
    the way its library steps it, with pre-generated actions in the library's format."""
    _, module, extra = ADAPTERS[key]
    optional_import(module, f'pip install "gpuparam[{extra}]"')
    base = make_gp_env(BARE, n, device)
    ints = gp_actions(base, n, base.device)
    rng = np.random.default_rng(0)
    numpy_ints = [rng.integers(0, 2, size=n) for _ in range(NUM_ACTION_BATCHES)]
    step = None
    if key == "rsl_rl":
        from gpuparam.integrations.rsl_rl import RslRlVecEnv

        env = RslRlVecEnv(base)
        g = torch.Generator(device="cpu").manual_seed(0)
        acts = [torch.randn(n, env.num_actions, generator=g).to(base.device)
                for _ in range(NUM_ACTION_BATCHES)]
    elif key == "torchrl":
        from gpuparam.integrations.torchrl import TorchRLEnv

        env = TorchRLEnv(base)
        td = env.reset()
        acts = [td.clone().set("action", a) for a in ints]

        def step(td) -> None:
            # what a TorchRL loop passes in (step_mdp's output, as in rollouts and
            # collectors): no "next" entry yet. A "next" left from an earlier step would
            # take EnvBase.step's path that merges it into the new one (an override).
            env.step(td).del_("next")
    elif key == "skrl":
        from gpuparam.integrations.skrl import wrap

        env, acts = wrap(base), [a.view(n, 1) for a in ints]
        env.reset()
    elif key == "sb3":
        from gpuparam.integrations.sb3 import SB3VecEnv

        env, acts = SB3VecEnv(base), numpy_ints
        env.reset()
    else:
        from gpuparam.integrations.gymnasium import GymnasiumVectorEnv

        env, acts = GymnasiumVectorEnv(base, numpy=True), numpy_ints
        env.reset(seed=0)
    return Subject(n, cycled(step or env.step, acts), device=device, env=env).warm()


# ----------------------------------------------------------------------------- peers
def gym_cartpole():
    """Worker factory (module-level, so that spawned processes can unpickle it)."""
    import gymnasium

    return gymnasium.make("CartPole-v1")


def torchrl_cartpole():
    from torchrl.envs import GymEnv

    return GymEnv("CartPole-v1")


def _gym_subject(venv, n: int, notes: tuple[str, ...] = ()) -> Subject:
    try:
        venv.reset(seed=0)
    except TypeError:  # envpool's older gym API takes no seed here
        venv.reset()
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 2, size=n) for _ in range(NUM_ACTION_BATCHES)]
    return Subject(n, cycled(venv.step, actions), close=venv.close, env=venv,
                   notes=list(notes), host=True).warm()


def gym_vector_subject(n: int) -> Subject:
    """Gymnasium's numpy-vectorized CartPole (one process, arrays of N)."""
    gymnasium = optional_import("gymnasium")
    return _gym_subject(gymnasium.make_vec("CartPole-v1", num_envs=n,
                                           vectorization_mode="vector_entry_point"), n)


def gym_sync_subject(n: int) -> Subject:
    """Gymnasium ``SyncVectorEnv``: N Python envs in a loop."""
    vector = optional_import("gymnasium.vector")
    return _gym_subject(vector.SyncVectorEnv([gym_cartpole] * n), n)


def worker_start_method() -> str:
    """``fork`` where available: workers start in well under a second instead of tens of
    seconds on 2 cores (spawn re-imports torch per worker); the timed steady-state stepping
    does not depend on how the workers were started. Passed explicitly, so the global start
    method stays unset."""
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def gym_async_subject(n: int) -> Subject:
    """Gymnasium ``AsyncVectorEnv``: one worker process per env."""
    vector = optional_import("gymnasium.vector")
    method = worker_start_method()
    return _gym_subject(vector.AsyncVectorEnv([gym_cartpole] * n, context=method), n,
                        (f"workers started with {method}",))


def torchrl_parallel_subject(n: int) -> Subject:
    """TorchRL ``ParallelEnv`` of N ``GymEnv("CartPole-v1")`` workers."""
    envs = optional_import("torchrl.envs")
    method = worker_start_method()
    with timing.preserve_torch_threads():
        penv = envs.ParallelEnv(n, torchrl_cartpole, mp_start_method=method)
        td = penv.reset()
    actions = [penv.full_action_spec.rand() for _ in range(NUM_ACTION_BATCHES)]
    state = {"td": td}

    def step(action) -> None:
        state["td"].update(action)
        _, state["td"] = penv.step_and_maybe_reset(state["td"])

    return Subject(n, cycled(step, actions), close=penv.close, env=penv,
                   notes=[f"workers started with {method}"], host=True).warm()


def envpool_subject(n: int) -> Subject:
    """envpool's C++ CartPole-v1 thread pool, when envpool is installed."""
    envpool = optional_import("envpool", "pip install envpool (Linux x86_64 wheels only)")
    return _gym_subject(envpool.make_gym("CartPole-v1", num_envs=n), n)


PEERS: dict[str, Callable[[int], Subject]] = {
    "gymnasium SyncVectorEnv": gym_sync_subject,
    "gymnasium AsyncVectorEnv": gym_async_subject,
    "torchrl ParallelEnv": torchrl_parallel_subject,
    "envpool": envpool_subject,
}
