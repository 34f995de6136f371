"""Training-loop time with each library, gpuparam vs Gymnasium's vector env (issue 13).

At one N (256), the same PPO configuration of a library (same rollout length, iterations,
epochs, minibatches and 32x32 networks, initialized from the same seed) trains CartPole-v1
for the same number of iterations once on gpuparam (through its adapter) and once on
Gymnasium's CartPole behind the entry that library's users take for a Gymnasium vector env:

- rsl_rl: no Gymnasium wrapper exists, so a minimal one converts NumPy to torch over
  ``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`` (NumPy-vectorized);
- skrl: ``skrl.envs.wrappers.torch.wrap_env`` over the same ``vector_entry_point`` env;
- SB3: ``make_vec_env`` (a ``DummyVecEnv`` of Gymnasium envs);
- TorchRL: ``torchrl.envs.GymWrapper`` over ``gymnasium.make_vec(..., vectorization_mode=
  "sync", vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})`` (``GymWrapper``
  rejects the ``vector_entry_point`` env, which has no ``autoreset_mode`` attribute, and
  NEXT_STEP auto-reset; DISABLED is the mode TorchRL prefers: its collector resets finished
  envs by mask). ``GymEnv(..., num_envs=N)`` would start N worker processes instead.
  gpuparam's side is ``TorchRLEnv(..., action_encoding="one_hot")``, the same ``OneHot``
  action spec, so one policy fits both; both run a ``Collector`` + ``GAE`` + ``ClipPPOLoss``.

The figure is ``t_gymnasium / t_gpuparam`` over whole training loops (rollout and update,
without building the runner, agent or collector), the median over alternating rounds.
"""

from __future__ import annotations

import contextlib
import io
import time

import numpy as np
import torch

import gpuparam as gp
from benchmarks import timing
from benchmarks.config import RunConfig
from benchmarks.timing import attempt, interleave, median, optional_import, paired_ratio

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


def _cartpole(n: int):
    return gp.make("CartPole-v1", num_envs=n, device="cpu", seed=0)


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
        torch.manual_seed(0)
        with contextlib.redirect_stdout(io.StringIO()):
            runner = OnPolicyRunner(env, _rsl_cfg(), log_dir=None, device="cpu")
        return _time(lambda: runner.learn(iterations))

    return run, lambda: RslRlVecEnv(_cartpole(n)), lambda: _GymRslRl(gym.make_vec(
        "CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point"))


def sb3_pair(n: int, iterations: int):
    optional_import("stable_baselines3", 'pip install "gpuparam[sb3]"')
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from gpuparam.integrations.sb3 import SB3VecEnv

    def run(venv) -> float:
        model = PPO("MlpPolicy", venv, n_steps=STEPS, batch_size=STEPS * n // 2, n_epochs=1,
                    policy_kwargs={"net_arch": [32, 32]}, device="cpu", seed=0)
        return _time(lambda: model.learn(total_timesteps=iterations * STEPS * n))

    return run, lambda: SB3VecEnv(_cartpole(n)), lambda: make_vec_env("CartPole-v1", n_envs=n,
                                                                      seed=0)


def _mlp(n_in: int, n_out: int) -> torch.nn.Sequential:
    nn = torch.nn
    return nn.Sequential(nn.Linear(n_in, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, n_out))


def skrl_pair(n: int, iterations: int):
    optional_import("skrl", 'pip install "gpuparam[skrl]"')
    gym = optional_import("gymnasium")
    from skrl.agents.torch.ppo import PPO
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory
    from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
    from skrl.trainers.torch import SequentialTrainer

    from gpuparam.integrations.skrl import wrap

    def model(mixin, outputs: int | None):
        """A skrl model: the 32x32 MLP, ``outputs`` wide (None: one per action)."""

        class MLP(mixin, Model):
            def __init__(self, obs_space, act_space, device):
                Model.__init__(self, observation_space=obs_space, action_space=act_space,
                               device=device)
                mixin.__init__(self)
                self.net = _mlp(self.num_observations, outputs or self.num_actions)

            def compute(self, inputs, role=""):
                return self.net(inputs["observations"]), {}

        return MLP

    Policy, Value = model(CategoricalMixin, None), model(DeterministicMixin, 1)

    def run(env) -> float:
        torch.manual_seed(0)
        obs, act, dev = env.observation_space, env.action_space, env.device
        agent = PPO(models={"policy": Policy(obs, act, dev), "value": Value(obs, act, dev)},
                    memory=RandomMemory(memory_size=STEPS, num_envs=n, device=dev),
                    observation_space=obs, action_space=act, device=dev,
                    cfg={"rollouts": STEPS, "learning_epochs": 1, "mini_batches": 2,
                         "experiment": {"write_interval": 0, "checkpoint_interval": 0}})
        trainer = SequentialTrainer(env=env, agents=agent, cfg={
            "timesteps": iterations * STEPS, "headless": True, "disable_progressbar": True,
            "close_environment_at_exit": False})
        return _time(trainer.train)

    def gym_env():
        venv = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
        # skrl's wrapper takes the env's device, else cuda:0 when available: both sides on
        # the CPU, as the gpuparam side
        venv.unwrapped.device = "cpu"
        return wrap_env(venv, verbose=False)

    return run, lambda: wrap(_cartpole(n)), gym_env


def torchrl_pair(n: int, iterations: int):
    optional_import("torchrl", 'pip install "gpuparam[torchrl]"')
    gym = optional_import("gymnasium")
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.envs import GymWrapper
    from torchrl.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    from gpuparam.integrations.torchrl import TorchRLEnv

    def run(env) -> float:
        torch.manual_seed(0)
        logits = TensorDictModule(_mlp(4, 2), in_keys=["observation"], out_keys=["logits"])
        policy = ProbabilisticActor(logits, spec=env.action_spec, in_keys=["logits"],
                                    distribution_class=OneHotCategorical, return_log_prob=True)
        value = ValueOperator(_mlp(4, 1), in_keys=["observation"])
        gae = GAE(gamma=0.99, lmbda=0.95, value_network=value, average_gae=True)
        loss = ClipPPOLoss(policy, value)
        opt = torch.optim.Adam(loss.parameters(), lr=3e-4)
        collector = Collector(env, policy, frames_per_batch=n * STEPS,
                              total_frames=n * STEPS * iterations)

        def learn() -> None:
            for data in collector:
                with torch.no_grad():
                    gae(data)
                flat = data.reshape(-1)
                for idx in torch.randperm(flat.shape[0]).split(flat.shape[0] // 2):
                    out = loss(flat[idx])
                    total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                    opt.zero_grad()
                    total.backward()
                    opt.step()

        try:
            return _time(learn)
        finally:
            collector.shutdown()

    return run, lambda: TorchRLEnv(_cartpole(n), action_encoding="one_hot"), \
        lambda: GymWrapper(gym.make_vec(
            "CartPole-v1", num_envs=n, vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED}), device="cpu")


# lib: pair(n, iterations) -> (run(env): seconds of the training loop, gpuparam's env(),
# Gymnasium's env()); a pair raises Skipped when its library is not installed
PAIRS = {"rsl_rl": rsl_rl_pair, "skrl": skrl_pair, "sb3": sb3_pair, "torchrl": torchrl_pair}
# what each library's Gymnasium side runs (recorded with the figures; see the module docstring)
GYM_SIDE = {
    "rsl_rl": "vector_entry_point, minimal VecEnv",
    "skrl": "vector_entry_point, wrap_env",
    "sb3": "DummyVecEnv, make_vec_env",
    "torchrl": "SyncVectorEnv, GymWrapper",
}


def _rounds(make, n: int, iterations: int, rounds: int) -> dict[str, list[float]]:
    """Seconds of each side's training loop, alternating, ``rounds`` times each."""
    run, gp_env, gym_env = make(n, iterations)
    return interleave({"gpuparam": lambda: run(gp_env()), "gymnasium": lambda: run(gym_env())},
                      rounds)


def measure(cfg: RunConfig) -> dict:
    n = 256
    iterations = cfg.steps if cfg.steps is not None else (3 if cfg.quick else 10)
    iterations = max(1, min(iterations, 10))
    rounds = 1 if cfg.repeats == 1 else (2 if cfg.quick else 5)
    out: dict = {"num_envs": n, "iterations": iterations, "rollout_steps": STEPS,
                 "rounds": rounds, "libraries": {}}
    for lib, make in PAIRS.items():
        with timing.preserve_torch_threads():  # a broken library run is recorded, not fatal
            times, failed = attempt(_rounds, make, n, iterations, rounds)
        if failed:
            out["libraries"][lib] = failed
            continue
        out["libraries"][lib] = {
            "gymnasium_side": GYM_SIDE[lib],
            "gpuparam_s": median(times["gpuparam"]),
            "gymnasium_s": median(times["gymnasium"]),
            "ratio": paired_ratio(times["gymnasium"], times["gpuparam"]),
        }
    return out
