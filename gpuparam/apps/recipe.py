"""The env of a train config: ``gp.make`` plus the task's recipe (randomization,
curricula), wrapped for rsl_rl (``RslRlVecEnv``), with everything a checkpoint must restore.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import gpuparam as gp
from gpuparam.apps.config import G1, GO1, TrainCfg

__all__ = ["Built", "Tracking", "build_env"]

HARD = (1.5, 0.8, 1.2)  # Playground's Go1 command ranges (vx, vy, yaw rate)
EASY = tuple(a / 3 for a in HARD)


class Tracking:
    """Per-episode mean of the linear tracking term (``reward_terms[:, 0]``), the metric of
    the command curriculum: an ``after_step`` hook of device work only (recorded into the
    captured step). ``metric``: float32 ``[N]``, read by the curriculum at ``done``."""

    def __init__(self, env):
        n, dev = env.num_envs, env.device
        self.sum = torch.zeros(n, device=dev)
        self.len = torch.zeros(n, device=dev)
        self.metric = torch.zeros(n, device=dev)

    def __call__(self, env, td) -> None:
        self.sum.add_(td["reward_terms"][:, 0])
        self.len.add_(1.0)
        torch.div(self.sum, self.len, out=self.metric)
        keep = 1.0 - td["done"].float()
        self.sum.mul_(keep)
        self.len.mul_(keep)

    def state_dict(self) -> dict:
        return {k: getattr(self, k).clone() for k in ("sum", "len", "metric")}

    def load_state_dict(self, state: dict) -> None:
        for k, v in state.items():
            getattr(self, k).copy_(v)


@dataclass
class Built:
    """What :func:`build_env` returns: the gpuparam env, its rsl_rl adapter, the curriculum
    (or None) and the hooks whose state a checkpoint saves (``{name: obj}`` with
    ``state_dict`` / ``load_state_dict``)."""

    env: object
    wrapped: object
    curriculum: object | None
    hooks: dict

    def save(self, path: str) -> dict:
        """Write the env's state to ``path`` (``env.save``: parameters, randomization,
        curricula, normalizers, physics); returns the hooks' states (saved with the
        model)."""
        self.env.save(path)
        return {k: h.state_dict() for k, h in self.hooks.items()}

    def load(self, path: str, hooks: dict | None) -> None:
        """Restore what :meth:`save` wrote (the adapter's observations are then the
        restored ones: ``RslRlVecEnv.load``) and the hooks' states."""
        self.wrapped.load(path)
        for k, h in self.hooks.items():
            h.load_state_dict((hooks or {})[k])


def _legged_recipe(env, cfg: TrainCfg, num_envs: int, env_offset: int) -> tuple:
    """The legged sim-to-real recipe (docs/legged.md) on a Go1 or G1 task; returns
    ``(curriculum or None, hooks)``."""
    task, e = cfg.task, cfg.env
    if task in GO1:
        trunk = [-1.0] + [0.0] * (env.mjm.nbody - 2)  # body_mass components: the trunk only
        env.randomize(
            gp.Uniform("geom_friction", 0.4, 1.0, on="reset"),  # the floor's (priority)
            gp.Uniform("body_mass", trunk, [-x for x in trunk], op="add", on="reset"),
            gp.Uniform("base_com_offset", -0.05, 0.05, on="reset"),
            gp.Uniform("motor_strength", 0.9, 1.1, on="reset"),
            gp.Uniform("kp", 0.9, 1.1, op="scale", on="reset"),
            gp.Uniform("kd", 0.9, 1.1, op="scale", on="reset"),
            gp.Uniform("action_delay", 0.0, 1.0, on="reset"),
        )
        if e.kicks:
            env.params.set("kick_enable", 1.0)
    else:  # G1: the feet touch the floor through contact pairs (Playground's randomize.py)
        npair = env.params.spec["pair_friction"].shape[0]
        low, high = [1.0] * npair, [1.0] * npair
        low[:2], high[:2] = [0.4, 0.4], [1.0, 1.0]  # pairs 0, 1: left and right foot-floor
        env.randomize(
            gp.Uniform("pair_friction", low, high, on="reset"),
            gp.Uniform("motor_strength", 0.9, 1.1, on="reset"),
            gp.Uniform("kp", 0.9, 1.1, op="scale", on="reset"),
            gp.Uniform("action_delay", 0.0, 1.0, on="reset"),
        )
    hooks: dict = {}
    if task.endswith("Terrain-v0"):  # legged_gym's terrain curriculum, start on rows 0-3
        curriculum = env.terrain_curriculum()
        env.add_curriculum(curriculum)
        rows = int(e.kwargs.get("terrain_rows", 10))
        gen = torch.Generator().manual_seed(cfg.seed)
        start = torch.randint(0, min(rows, 4), (env_offset + num_envs,), generator=gen)
        curriculum.set_level(start[env_offset:].to(torch.int32).to(env.device))
        return curriculum, hooks
    if e.command_levels and task in GO1:
        tracking = hooks["tracking"] = Tracking(env)
        env.after_step(tracking, kind="torch")
        neg = tuple(-a for a in EASY), tuple(-a for a in HARD)  # command_low: -a
        curriculum = gp.Curriculum(e.command_levels,
                                   params={"command_low": neg, "command_high": (EASY, HARD)},
                                   metric=tracking.metric, promote=e.promote, demote=e.demote)
        env.add_curriculum(curriculum)
        return curriculum, hooks
    return None, hooks


def build_env(cfg: TrainCfg, num_envs: int | None = None, shard: tuple[int, int] | None = None
              ) -> Built:
    """Build the env of ``cfg`` (``num_envs``: instead of ``cfg.num_envs``; ``shard``:
    ``(rank, world_size)``, this rank's slice of the global envs) with its recipe, reset,
    and wrapped for rsl_rl (one log entry per iteration, reward terms and curriculum level
    included)."""
    from gpuparam.integrations.rsl_rl import RslRlVecEnv

    n = cfg.num_envs if num_envs is None else num_envs
    env = gp.make(cfg.task, n, device=cfg.device, seed=cfg.seed, shard=shard,
                  **cfg.env.kwargs)
    offset = env.env_offset if shard is not None else 0
    curriculum, hooks = None, {}
    if cfg.env.recipe == "legged":
        if cfg.task not in GO1 and cfg.task not in G1:
            raise ValueError(f"--env.recipe: 'legged' expected a Go1 or G1 task, got "
                             f"{cfg.task!r}")
        curriculum, hooks = _legged_recipe(env, cfg, env.num_envs, offset)
    elif cfg.env.recipe == "playground":  # MuJoCo Playground's randomize.py, once per env
        env.randomize(*env.playground_randomization(on="startup"))
    env.reset()
    log_values = {}
    if curriculum is not None:
        log_values["Curriculum/level"] = lambda: curriculum.levels.float().mean()
    wrapped = RslRlVecEnv(env, clip_actions=cfg.env.clip_actions,
                          log_interval=cfg.agent.num_steps_per_env, log_values=log_values)
    return Built(env, wrapped, curriculum, hooks)
