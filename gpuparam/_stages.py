"""The stage lists of an env's pipelines (their order: ``docs/pipeline.md``) and what users
add to them: hooks, curricula and stages."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict

from gpuparam._device import to_wp
from gpuparam._launch import BoundLaunch
from gpuparam.kernels import actions as kactions
from gpuparam.kernels import episode as kepisode
from gpuparam.pipeline import KINDS, Stage, StepContext, run_each
from gpuparam.spec import DiscreteSpec

Hook = Callable[[Any, TensorDict], None]  # fn(env, td)


def _hook_name(fn: Hook) -> str:
    """``fn``'s qualified name and where it is defined, for errors."""
    code = getattr(fn, "__code__", None)
    where = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    return f"{getattr(fn, '__qualname__', repr(fn))}{where}"


class EnvStages:
    """Builds the stage lists of ``env.pipeline`` and ``env.reset_pipeline`` and holds what
    users add to them (hooks, curricula, stages; in the order added; a change drops the
    captures). ``hook_outputs``: the locked TensorDict hooks receive, over the context's
    outputs and action."""

    def __init__(self, env: Any):
        self._env = env  # hooks are called with it; stages read its public parts
        ctx = env.context
        # locked: ``td[key] = x`` would detach the key from the env's buffer for good
        self.hook_outputs = TensorDict({**ctx.outputs, "action": ctx.action},
                                       batch_size=[ctx.num_envs], device=ctx.device).lock_()
        self.before: list[tuple[Hook, str]] = []
        self.after: list[tuple[Hook, str]] = []
        self.curricula: list = []
        self.first: list[Stage] = []
        self.extra: list[Stage] = []
        self._launches = self._bind(env, ctx)

    # ------------------------------------------------------------------ lists
    def step_stages(self) -> list[Stage]:
        randomization, listeners = self._env.randomization, self._listener_kind()
        physics, commit = self._physics_kind(), self._commit_stages()
        stages = [*self.first, *self._hook_stages("before_step", self.before)]
        if randomization.step_active:
            stages.append(Stage("randomize_step", randomization.launch_step, listeners))
        stages += commit  # the model as written before the physics reads it
        stages.append(Stage("physics", self._physics, physics))
        stages.append(Stage("episode", self._launches["end_step"].launch_in, "warp"))
        stages += self._hook_stages("after_step", self.after)
        for cur in self.curricula:  # a callable metric runs Python
            kind = listeners if cur.kind == "warp" else cur.kind
            stages.append(Stage("curriculum", cur.update, kind))
        if randomization.reset_active:
            stages.append(Stage("randomize_reset", lambda c: randomization.launch_reset(c, c.done),
                                listeners))
        stages += commit  # ... before the auto-reset reads it
        stages.append(Stage("clock", self._launches["tick"].launch_in, "warp"))
        stages.append(Stage("autoreset", lambda c: self._reset_envs(c, c.done), physics))
        return stages + self.extra + (commit if self.extra else [])

    def reset_stages(self) -> list[Stage]:
        randomization = self._env.randomization
        stages = []
        if randomization.reset_active:
            stages.append(Stage("randomize_reset",
                                lambda c: randomization.launch_reset(c, c.reset_mask),
                                self._listener_kind()))
        stages += self._commit_stages()
        stages.append(Stage("reset", self._explicit_reset, self._physics_kind()))
        return stages

    def _commit_stages(self) -> list[Stage]:
        """A ``"warp"`` stage committing what the writes before it marked on the device (the
        backend's ``commit``, e.g. the robots' derived constants); none without commits."""
        backend = self._env.backend
        return [Stage("model_writes", backend.commit, "warp")] if backend.commits else []

    def _listener_kind(self) -> str:
        return self._env.params.listeners_kind

    def _physics_kind(self) -> str:
        env = self._env
        ok = env.backend.kind == "warp" and (env.task is None or env.task.kind == "warp")
        return "warp" if ok else "torch"

    def _hook_stages(self, name: str, hooks: list[tuple[Hook, str]]) -> list[Stage]:
        """Consecutive hooks of one kind share a stage."""
        stages = []
        for kind, run in itertools.groupby(hooks, key=lambda h: h[1]):
            fns = tuple(fn for fn, _ in run)
            what = f"{kind} hooks " + ", ".join(map(_hook_name, fns))
            stages.append(Stage(name, functools.partial(self._run_hooks, fns), kind,
                                what=lambda what=what: what))
        return stages

    def _run_hooks(self, fns: tuple[Hook, ...], ctx: StepContext) -> None:
        # a raising hook does not skip the next ones of its stage, as a raising stage does
        # not skip the next stages (gp.Stage)
        error = run_each(fns, (self._env, self.hook_outputs))
        if error is not None:
            raise error

    # ------------------------------------------------------------------ stage bodies
    @staticmethod
    def _bind(env: Any, ctx: StepContext) -> dict[str, BoundLaunch]:
        """The launches of the stage bodies below, by name, bound once at construction:
        the context's buffers (and the env's ``invalid_actions``) are allocated once, so
        their Warp views never change and no step makes new ones."""
        out, n, dev = ctx.outputs, ctx.num_envs, ctx.device
        if isinstance(env.action_spec, DiscreteSpec):  # count the invalid actions
            invalid = (kactions.count_invalid_discrete,
                       [to_wp(ctx.action.reshape(-1)), env.action_spec.n])
        else:
            invalid = (kactions.count_invalid_box, [to_wp(ctx.action.reshape(n, -1))])
        return {
            "invalid_actions": BoundLaunch(invalid[0], n, inputs=invalid[1],
                                           outputs=[to_wp(env.invalid_actions)], device=dev),
            "end_step": BoundLaunch(kepisode.end_step, n, inputs=[
                to_wp(ctx.max_episode_steps), to_wp(out["reward"]), to_wp(out["terminated"]),
            ], outputs=[
                to_wp(ctx.step_count), to_wp(ctx.running_return), to_wp(out["truncated"]),
                to_wp(ctx.done), to_wp(out["episode_return"]), to_wp(out["episode_length"]),
            ], device=dev),
            "tick": BoundLaunch(kepisode.tick, 1, outputs=[to_wp(ctx.clock)], device=dev),
            "clear_counters": BoundLaunch(kepisode.clear_counters, n,
                                          inputs=[to_wp(ctx.reset_mask)],
                                          outputs=[to_wp(ctx.step_count),
                                                   to_wp(ctx.running_return)], device=dev),
        }

    def _physics(self, ctx: StepContext) -> None:
        env = self._env
        self._launches["invalid_actions"].launch(ctx.stream)
        env.backend.step(ctx)
        if env.task is not None:
            env.task.compute(ctx)

    def _reset_envs(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self._env.backend.reset(ctx, mask)
        if self._env.task is not None:
            self._env.task.observe(ctx, mask)

    def _explicit_reset(self, ctx: StepContext) -> None:
        self._launches["clear_counters"].launch(ctx.stream)
        self._reset_envs(ctx, ctx.reset_mask)

    # ------------------------------------------------------------------ registration
    def add(self, where: list, item, what: str) -> Callable[[], None]:
        """Append ``item`` to ``where`` (one of this object's lists); returns its remover.
        Both refused from inside a step."""
        self.check_not_stepping(f"add {what}")
        where.append(item)
        self.changed()

        def remove() -> None:
            self.check_not_stepping(f"remove {what}")
            if any(x is item for x in where):
                where.remove(item)
                self.changed()

        return remove

    def add_hook(self, where: list, fn: Hook, kind: str) -> Callable[[], None]:
        """``env.before_step(fn, kind)`` (``where``: ``before``) and ``env.after_step``
        (``after``): call ``fn(env, td)``, ``td`` being ``hook_outputs`` (locked: assigning
        a key raises). Before-step hooks run after the action is loaded, before step-time
        randomization; writing ``td["action"]`` in place changes the action taken.
        After-step hooks run after the physics and episode bookkeeping, before curricula,
        reset-time randomization and auto-reset: ``td`` holds this step's outputs
        (``"observation"`` pre-reset) and in-place writes (reward shaping) are seen by the
        caller. ``kind``: ``"python"`` runs ``fn`` at every step; ``"torch"`` or ``"warp"``
        declares device work only, recorded once into the step's graphs
        (``docs/pipeline.md``). Returns the remover; both refused from inside a step."""
        if not callable(fn):
            raise TypeError(f"hook: expected a callable fn(env, td), got {fn!r}")
        if kind not in KINDS:
            raise ValueError(f"hook kind: expected one of {KINDS}, got {kind!r}")
        return self.add(where, (fn, kind), "a hook")

    def add_stage(self, stage: Stage, first: bool) -> Callable[[], None]:
        """``env.add_stage``: append ``stage`` to every step, after the auto-reset
        (transforms), or with ``first`` before every other stage (an adapter's action
        conversion); returns its remover. The capture is redone. Refused inside a step."""
        if not isinstance(stage, Stage):
            raise TypeError(f"add_stage: expected a gp.Stage, got {type(stage).__name__}")
        return self.add(self.first if first else self.extra, stage, f"stage {stage.name!r}")

    def add_curriculum(
        self, curriculum, synced_by: Callable[[object], object]
    ) -> Callable[[], None]:
        """``env.add_curriculum``: bind a ``gp.Curriculum`` to the env; it updates at every
        step for the done envs, before reset-time randomization. Returns its remover, which
        refuses while ``synced_by(curriculum)`` (the env's sync schedule of it) is not None."""
        self.check_not_stepping("add a curriculum")
        curriculum.bind(self._env)
        remove = self.add(self.curricula, curriculum, "a curriculum")

        def remove_curriculum() -> None:
            self.check_not_stepping("remove a curriculum")
            if curriculum in self.curricula:
                synced = synced_by(curriculum)
                # its exchange would be applied to a curriculum bound to nothing
                if synced is not None:
                    raise ValueError(f"remove {curriculum}: {synced!r} syncs it; remove "
                                     "that schedule first (the function sync_every returned)")
                remove()
                curriculum.unbind()

        return remove_curriculum

    def check_not_stepping(self, what: str,
                           why: str = "the step's stage list cannot change while it runs"
                           ) -> None:
        """``RuntimeError`` for ``what`` (and why it cannot) from inside a step."""
        if self._env.stepping:
            raise RuntimeError(f"{what} during a step (from a hook or stage inside it, or "
                               f"another thread): {why}; do it between steps")

    def changed(self) -> None:
        """The step's work changed: rebuild the stages and capture again."""
        self._env.pipeline.invalidate()
        self._env.reset_pipeline.invalidate()
