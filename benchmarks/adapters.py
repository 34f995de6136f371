"""Overheads of the training-library adapters over the bare step (issue 13).

Each adapter wraps a fresh CartPole-v1 env at the goal N and is stepped the way its library
steps it, with pre-generated actions in the library's format; all are timed interleaved with
the bare env, and the overhead is ``median_over_rounds(t_adapter / t_bare) - 1`` (as in
``benchmarks.overhead``). Goals (``benchmarks.goals``): ``RslRlVecEnv`` (its copies into
the double buffers and the device-side episode statistics included) and ``TorchRLEnv``
(``EnvBase.step`` with a TensorDict as TorchRL's loops pass it, i.e. without a ``"next"``
entry yet; its fresh copies and the output TensorDict included) at most 15%. ``SB3VecEnv`` and
``GymnasiumVectorEnv(numpy=True)`` return NumPy arrays and build per-env info dicts: their
cost is reported, without a goal; so is the skrl wrapper's. The NumPy adapters build
thousands of Python objects a step (SB3's per-env info dicts) and slowed the bare step timed
in the same rounds by about a quarter: they are timed in rounds of their own with a bare
step of their own, each overhead against the bare step of its rounds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from benchmarks.config import BARE, RunConfig
from benchmarks.subjects import NUM_ACTION_BATCHES, Subject, gp_subject, make_gp_env
from benchmarks.timing import attempt, interleave, median, optional_import, paired_ratio

LABELS = {
    "rsl_rl": "rsl_rl RslRlVecEnv.step (incl. copies + episode stats)",
    "torchrl": "TorchRLEnv.step (TensorDict in/out, incl. clones)",
    "skrl": "skrl wrapper step (clones)",
    "sb3": "SB3VecEnv.step (NumPy + per-env info dicts)",
    "gymnasium_numpy": "GymnasiumVectorEnv(numpy=True) SAME_STEP",
}
GOALS = ("rsl_rl", "torchrl")  # at most 15% (goals.py)
NUMPY = ("sb3", "gymnasium_numpy")  # timed in rounds of their own


def _logits(n: int, k: int, device) -> list[torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(0)
    return [torch.randn(n, k, generator=g).to(device) for _ in range(NUM_ACTION_BATCHES)]


def _discrete(n: int, device) -> list[torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(0)
    return [torch.randint(0, 2, (n,), generator=g).to(device) for _ in range(NUM_ACTION_BATCHES)]


def _subject(n: int, device: str, step: Callable[[int], None], env, warmup: int) -> Subject:
    s = Subject(n, step, device=device, env=env)
    s.run(warmup)
    return s


def rsl_rl_subject(n: int, device: str, warmup: int = 5) -> Subject:
    optional_import("rsl_rl", 'pip install "gpuparam[rsl_rl]"')
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    env = RslRlVecEnv(make_gp_env(BARE, n, device))
    acts = _logits(n, env.num_actions, env.device)
    return _subject(n, device, lambda i: env.step(acts[i % len(acts)]), env, warmup)


def torchrl_subject(n: int, device: str, warmup: int = 5) -> Subject:
    optional_import("torchrl", 'pip install "gpuparam[torchrl]"')
    from gpuparam.integrations.torchrl import TorchRLEnv

    env = TorchRLEnv(make_gp_env(BARE, n, device))
    td = env.reset()
    tds = [td.clone().set("action", a) for a in _discrete(n, env.device)]

    def step(i: int) -> None:
        # what a TorchRL loop passes in (step_mdp's output, as in rollouts and collectors):
        # no "next" entry yet. A "next" left from an earlier step would take
        # EnvBase.step's path that merges it into the new one (an override mechanism).
        env.step(tds[i % len(tds)]).del_("next")

    return _subject(n, device, step, env, warmup)


def skrl_subject(n: int, device: str, warmup: int = 5) -> Subject:
    optional_import("skrl", 'pip install "gpuparam[skrl]"')
    from gpuparam.integrations.skrl import wrap

    env = wrap(make_gp_env(BARE, n, device))
    env.reset()
    acts = [a.view(n, 1) for a in _discrete(n, env.device)]
    return _subject(n, device, lambda i: env.step(acts[i % len(acts)]), env, warmup)


def sb3_subject(n: int, device: str, warmup: int = 5) -> Subject:
    optional_import("stable_baselines3", 'pip install "gpuparam[sb3]"')
    from gpuparam.integrations.sb3 import SB3VecEnv

    env = SB3VecEnv(make_gp_env(BARE, n, device))
    env.reset()
    rng = np.random.default_rng(0)
    acts = [rng.integers(0, 2, size=n) for _ in range(NUM_ACTION_BATCHES)]
    return _subject(n, device, lambda i: env.step(acts[i % len(acts)]), env, warmup)


def gymnasium_numpy_subject(n: int, device: str, warmup: int = 5) -> Subject:
    optional_import("gymnasium", 'pip install "gpuparam[gymnasium]"')
    from gpuparam.integrations.gymnasium import GymnasiumVectorEnv

    env = GymnasiumVectorEnv(make_gp_env(BARE, n, device), numpy=True)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    acts = [rng.integers(0, 2, size=n) for _ in range(NUM_ACTION_BATCHES)]
    return _subject(n, device, lambda i: env.step(acts[i % len(acts)]), env, warmup)


BUILDERS = {
    "rsl_rl": rsl_rl_subject,
    "torchrl": torchrl_subject,
    "skrl": skrl_subject,
    "sb3": sb3_subject,
    "gymnasium_numpy": gymnasium_numpy_subject,
}


def measure(cfg: RunConfig) -> dict:
    n = cfg.goal_n
    repeats = cfg.repeats_for("paired")
    # the NumPy adapters build per-env Python objects every step (SB3: 0.3 s per step at
    # N=2^20, the CUDA goal N): their group runs the host peers' step counts
    steps = (cfg.steps_for(n), cfg.steps_for(n, host=True))
    out: dict = {"num_envs": n, "steps": steps[0], "steps_numpy": steps[1],
                 "repeats": repeats, "configs": {}}
    groups = [{"bare": gp_subject(BARE, n, cfg.device)}, {"bare": gp_subject(BARE, n, cfg.device)}]
    for key, build in BUILDERS.items():
        subject, failed = attempt(build, n, cfg.device)
        if failed:
            out["configs"][key] = failed
        else:
            groups[key in NUMPY][key] = subject
    try:
        times = [interleave({k: (lambda s=s, m=m: s.run(m)) for k, s in g.items()}, repeats)
                 for g, m in zip(groups, steps, strict=True)]
    finally:
        for g in groups:
            for s in g.values():
                s.close()
    for i, ts_by_key in enumerate(times):
        bare = ts_by_key.pop("bare")
        if i == 0:
            out["bare_step_s"] = median(bare) / steps[0]
        for key, ts in ts_by_key.items():
            out["configs"][key] = {
                "label": LABELS[key],
                "step_s": median(ts) / steps[i],
                "overhead": paired_ratio(ts, bare) - 1.0,
                "goal": key in GOALS,
            }
    return out
