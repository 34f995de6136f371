"""Training-loop time with each library, gpuparam vs Gymnasium's vector env (issue 13).

At one N (256 on CPU), the same PPO configuration of a library trains CartPole-v1 for the
same number of iterations once on gpuparam (through its adapter) and once on Gymnasium's
NumPy-vectorized CartPole (``gymnasium.make_vec(..., vectorization_mode=
"vector_entry_point")``) behind the library's usual entry (SB3: ``DummyVecEnv`` of
Gymnasium envs, what ``make_vec_env`` builds; rsl_rl has no Gymnasium wrapper, so a minimal
one converts NumPy to torch). The figure is ``t_gymnasium / t_gpuparam`` over whole training
loops (rollout and update), the median of alternating rounds.
"""

from __future__ import annotations

import contextlib
import io
import time

import numpy as np
import torch

import gpuparam as gp
from benchmarks.config import RunConfig
from benchmarks.features import attempt, optional_import
from benchmarks.timing import median

STEPS = 16  # rollout length per iteration, both sides


def _rsl_cfg() -> dict:
    return {
        "num_steps_per_env": STEPS, "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
        "actor": {"class_name": "MLPModel", "hidden_dims": [32, 32],
                  "distribution_cfg": {"class_name": "GaussianDistribution"}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32]},
    }


class _GymRslRl:
    """rsl_rl's VecEnv contract over a Gymnasium vector env (NumPy in, torch out)."""

    def __init__(self, venv):
        from tensordict import TensorDict

        self._td, self.venv = TensorDict, venv
        self.num_envs, self.num_actions, self.device = venv.num_envs, 1, torch.device("cpu")
        self.max_episode_length, self.cfg = 500, {}
        self.episode_length_buf = torch.zeros(venv.num_envs, dtype=torch.long)
        obs, _ = venv.reset(seed=0)
        self._obs = self._wrap(obs)

    def _wrap(self, obs):
        return self._td({"policy": torch.as_tensor(obs, dtype=torch.float32)},
                        batch_size=[self.num_envs])

    def get_observations(self):
        return self._obs

    def step(self, actions):
        a = (actions[:, 0] > 0).numpy().astype(np.int64)
        obs, rew, term, trunc, _ = self.venv.step(a)
        self._obs = self._wrap(obs)
        done = torch.as_tensor(term | trunc)
        self.episode_length_buf = torch.where(done, 0, self.episode_length_buf + 1)
        return (self._obs, torch.as_tensor(rew, dtype=torch.float32), done.long(),
                {"time_outs": torch.as_tensor(trunc & ~term)})


def _time(fn) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        fn()
    return time.perf_counter() - t0


def rsl_rl_pair(n: int, iterations: int):
    optional_import("rsl_rl", 'pip install "gpuparam[rsl_rl]"')
    gym = optional_import("gymnasium")
    from rsl_rl.runners import OnPolicyRunner

    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    def run(env) -> float:
        with contextlib.redirect_stdout(io.StringIO()):
            runner = OnPolicyRunner(env, _rsl_cfg(), log_dir=None, device="cpu")
        return _time(lambda: runner.learn(iterations))

    def gp_side() -> float:
        return run(RslRlVecEnv(gp.make("CartPole-v1", num_envs=n, device="cpu", seed=0)))

    def gym_side() -> float:
        venv = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
        return run(_GymRslRl(venv))

    return gp_side, gym_side


def sb3_pair(n: int, iterations: int):
    optional_import("stable_baselines3", 'pip install "gpuparam[sb3]"')
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from gpuparam.integrations.sb3 import SB3VecEnv

    def run(venv) -> float:
        model = PPO("MlpPolicy", venv, n_steps=STEPS, batch_size=STEPS * n // 2, n_epochs=1,
                    policy_kwargs={"net_arch": [32, 32]}, device="cpu", seed=0)
        return _time(lambda: model.learn(total_timesteps=iterations * STEPS * n))

    def gp_side() -> float:
        return run(SB3VecEnv(gp.make("CartPole-v1", num_envs=n, device="cpu", seed=0)))

    def gym_side() -> float:
        return run(make_vec_env("CartPole-v1", n_envs=n, seed=0))

    return gp_side, gym_side


PAIRS = {"rsl_rl": rsl_rl_pair, "sb3": sb3_pair}


def measure(cfg: RunConfig, bar) -> dict:
    n = 256
    iterations = cfg.steps if cfg.steps is not None else (3 if cfg.quick else 10)
    iterations = max(1, min(iterations, 10))
    rounds = 1 if cfg.repeats == 1 else (2 if cfg.quick else 3)
    bar.set_postfix_str(f"training loops N={n}")
    out: dict = {"num_envs": n, "iterations": iterations, "rollout_steps": STEPS,
                 "rounds": rounds, "libraries": {}}
    for lib, make in PAIRS.items():
        pair, failed = attempt(make, n, iterations)
        if failed:
            out["libraries"][lib] = failed
            continue
        gp_side, gym_side = pair
        times: dict[str, list[float]] = {"gpuparam": [], "gymnasium": []}
        try:
            for _ in range(rounds):
                times["gpuparam"].append(gp_side())
                times["gymnasium"].append(gym_side())
        except Exception as e:  # a broken library run is reported, not fatal
            out["libraries"][lib] = {"error": f"{type(e).__name__}: {e}"}
            continue
        out["libraries"][lib] = {
            "gpuparam_s": median(times["gpuparam"]),
            "gymnasium_s": median(times["gymnasium"]),
            "ratio": median([g / p for g, p in zip(times["gymnasium"], times["gpuparam"],
                                                   strict=True)]),
        }
    bar.update(1)
    return out


def units(cfg: RunConfig) -> int:
    return 1
