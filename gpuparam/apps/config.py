"""Train configs of the tasks ``python -m gpuparam.train`` knows: one dataclass tree per
task (the env, its training recipe, rsl_rl's runner and PPO settings), every field
overridable from the command line.

The runner and PPO settings are legged_gym's ``LeggedRobotCfgPPO`` (which IsaacLab's and
mjlab's velocity tasks keep: 5 epochs x 4 minibatches of 24 steps per env, learning rate
1e-3 with the adaptive KL schedule, clip 0.2, entropy 0.01, 512-256-128 ELU MLPs, a
checkpoint every 50 iterations), with rsl_rl's observation normalization, MuJoCo
Playground's discount for its joystick tasks (``gamma`` 0.97) and an initial action noise
of 0.5 on the quadruped (under N(0, 1) actions the Go1 flips over within about 30 steps):
the settings that trained ``examples/go1_policy.pt``. The Gymnasium robots and the classic
envs keep rsl_rl's defaults with 2 x 64 MLPs (the settings of ``examples/rsl_rl_train.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

__all__ = [
    "ActorCfg",
    "AgentCfg",
    "AlgorithmCfg",
    "EnvCfg",
    "TrainCfg",
    "default_config",
    "tasks",
]

GO1 = ("Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1", "Go1Terrain-v0")
G1 = ("G1JoystickFlatTerrain-v1", "G1JoystickRoughTerrain-v1", "G1Terrain-v0")
# the rest of MuJoCo Playground's locomotion suite: each env's own Playground randomization
PLAYGROUND = ("Go1Getup-v1", "Go1Handstand-v1", "Go1Footstand-v1",
              "SpotFlatTerrainJoystick-v1", "SpotJoystickGaitTracking-v1",
              "T1JoystickFlatTerrain-v1", "T1JoystickRoughTerrain-v1",
              "H1JoystickGaitTracking-v1", "H1InplaceGaitTracking-v1")
GYM_ROBOTS = ("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Humanoid-v5")
CLASSIC = ("CartPole-v1", "Pendulum-v1")


@dataclass
class EnvCfg:
    """The env: ``gp.make(task, num_envs, device=, seed=, **kwargs)`` plus the recipe.

    ``kwargs``: constructor arguments and initial parameter values passed to ``gp.make``
    (e.g. ``{"terrain_rows": 10}``; on the command line ``--env.kwargs.terrain-rows 4`` for
    a key the task's config has, ``--env.kwargs max_episode_steps 500`` where it has none).
    ``recipe``: ``"legged"`` (the legged
    sim-to-real recipe of docs/legged.md: observation noise, action latency, friction /
    mass / centre of mass / motor strength / gain randomization per episode, and the
    terrain curriculum on a terrain grid; Go1 and G1), ``"playground"`` (the env's own
    ``playground_randomization()`` once per env, MuJoCo Playground's ``randomize.py``; every
    legged task) or ``"none"`` (the env as ``gp.make`` builds it).
    ``command_levels`` (Go1 flat and rough only): levels of a command-range curriculum from
    a third of Playground's ranges up to them, promoted when an episode's mean linear
    tracking reward passes ``promote`` (0: Playground's full ranges from the start).
    ``kicks``: Playground's kicks on (Go1). ``clip_actions``: actions clamped to the action
    spec's bounds (Playground's PPO squashes them with tanh; the legged tasks do not clip).
    """

    kwargs: dict[str, int | float | bool | str] = field(default_factory=dict)
    recipe: str = "none"
    command_levels: int = 0
    promote: float = 0.7
    demote: float = 0.2
    kicks: bool = False
    clip_actions: bool = True


@dataclass
class ActorCfg:
    """An rsl_rl ``MLPModel`` (actor or critic)."""

    hidden_dims: tuple[int, ...] = (512, 256, 128)
    activation: str = "elu"
    obs_normalization: bool = True


@dataclass
class AlgorithmCfg:
    """rsl_rl's PPO."""

    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    learning_rate: float = 1e-3
    schedule: str = "adaptive"
    gamma: float = 0.99
    lam: float = 0.95
    entropy_coef: float = 0.01
    clip_param: float = 0.2
    value_loss_coef: float = 1.0
    max_grad_norm: float = 1.0
    desired_kl: float = 0.01


@dataclass
class AgentCfg:
    """rsl_rl's ``OnPolicyRunner``: rollout length, models, PPO, checkpoints, logger.

    ``save_interval``: iterations between two checkpoints (``model_<it>.pt``; the last
    iteration is always saved). ``logger``: rsl_rl's writer, ``"tensorboard"`` (default;
    installed with torch's ``tensorboard`` package) or ``"wandb"`` / ``"neptune"`` (not
    installed by gpuparam's extras: ``pip install wandb`` first; ``WANDB_MODE=offline``
    keeps it off the network).
    """

    num_steps_per_env: int = 24
    save_interval: int = 50
    init_noise_std: float = 1.0
    actor: ActorCfg = field(default_factory=ActorCfg)
    critic: ActorCfg = field(default_factory=ActorCfg)
    algorithm: AlgorithmCfg = field(default_factory=AlgorithmCfg)
    logger: str = "tensorboard"
    experiment_name: str = ""


@dataclass
class TrainCfg:
    """One training run (IsaacLab's flag names on the command line: ``--task``,
    ``--num-envs``, ``--max-iterations``, ``--seed``, ``--device``, ``--resume``,
    ``--load-run``, ``--checkpoint``, ``--video``, ``--video-interval``,
    ``--video-length``, ``--log-dir``; plus ``--max-seconds``; nested fields as
    ``--agent.algorithm.learning-rate 3e-4``, ``--env.kwargs.terrain-rows 4`` for a key of
    the task's ``env.kwargs``, ``--env.kwargs KEY VALUE ...`` where it has none).

    Runs go to ``<log_dir>/<task>/<YYYY-mm-dd_HH-MM-SS>/``. ``resume``: continue a run of
    ``<log_dir>/<task>`` (``load_run``: its folder name, default the latest; ``checkpoint``:
    ``model_<it>.pt``, default the last) in its own folder. ``video``: every
    ``video_interval`` iterations a clip of ``video_envs`` envs x ``video_length`` steps
    goes to ``videos/`` and TensorBoard. ``max_seconds`` (0: none) ends the run after the
    iteration that passes it, counted from the start (builds and compiles included).
    ``threads``: torch's CPU threads (results depend on it).
    """

    task: str = "Go1JoystickFlatTerrain-v1"
    num_envs: int = 4096
    max_iterations: int = 1500
    seed: int = 0
    device: str = ""
    resume: bool = False
    load_run: str = ""
    checkpoint: str = ""
    video: bool = False
    video_interval: int = 100
    video_length: int = 100
    video_envs: int = 3
    log_dir: str = "runs"
    max_seconds: float = 0.0
    threads: int = 1
    env: EnvCfg = field(default_factory=EnvCfg)
    agent: AgentCfg = field(default_factory=AgentCfg)


def _legged(task: str) -> TrainCfg:
    recipe = "playground" if task in PLAYGROUND else "legged"
    cfg = TrainCfg(task=task, env=EnvCfg(recipe=recipe))
    cfg.agent.algorithm.gamma = 0.97  # Playground's joystick tasks
    if task in GO1 or task.startswith(("Go1", "Spot")):  # the quadrupeds
        cfg.agent.init_noise_std = 0.5
    if task.endswith("Terrain-v0"):
        cfg.env.kwargs = {"terrain_rows": 10}
    return cfg


def _small(task: str, iterations: int) -> TrainCfg:
    small = ActorCfg(hidden_dims=(64, 64), obs_normalization=True)
    agent = AgentCfg(init_noise_std=1.0, actor=small, critic=dataclasses.replace(small),
                     algorithm=AlgorithmCfg(entropy_coef=0.0))
    return TrainCfg(task=task, num_envs=4096, max_iterations=iterations, agent=agent)


def tasks() -> tuple[str, ...]:
    """The task ids ``python -m gpuparam.train --task`` accepts."""
    return (*GO1, *G1, *PLAYGROUND, *GYM_ROBOTS, *CLASSIC)


def default_config(task: str) -> TrainCfg:
    """The task's train config (a fresh one per call)."""
    if task in GO1 or task in G1 or task in PLAYGROUND:
        return _legged(task)
    if task in GYM_ROBOTS:
        return _small(task, 1000)
    if task in CLASSIC:
        return _small(task, 200)
    raise ValueError(f"--task: expected one of {', '.join(tasks())}, got {task!r}")
