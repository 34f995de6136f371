"""``VecEnv``'s step and reset stages (a mixin of ``gpuparam.vecenv.VecEnv``): which stages a
step runs, in which order, and what each launches."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import warp as wp

from gpuparam._device import to_wp
from gpuparam.kernels import actions as kactions
from gpuparam.kernels import episode as kepisode
from gpuparam.pipeline import Stage, StepContext
from gpuparam.spec import DiscreteSpec

if TYPE_CHECKING:
    from gpuparam.vecenv import Hook


class EnvStages:
    """The stage lists of ``env.pipeline`` and ``env.reset_pipeline`` (see ``VecEnv``)."""

    def _step_stages(self) -> list[Stage]:
        rz, backend, task = self.randomization, self.backend, self.task
        listeners_ok = self.params.listeners_warp_only
        physics_ok = backend.warp_only and (task is None or task.warp_only)
        stages = list(self._first_stages)
        if self._before_step:
            stages.append(Stage("before_step", self._run_hooks(self._before_step)))
        if rz.step_active:
            stages.append(Stage("randomize_step", rz.launch_step, warp_only=listeners_ok))
        stages.append(Stage("physics", self._physics, warp_only=physics_ok))
        stages.append(Stage("episode", self._episode, warp_only=True))
        if self._after_step:
            stages.append(Stage("after_step", self._run_hooks(self._after_step)))
        for cur in self._curricula:
            stages.append(Stage("curriculum", cur.update, warp_only=cur.warp_only and listeners_ok))
        if rz.reset_active:
            stages.append(Stage(
                "randomize_reset", lambda c: rz.launch_reset(c, c.done), warp_only=listeners_ok
            ))
        stages.append(Stage("clock", self._tick, warp_only=True))
        stages.append(Stage("autoreset", lambda c: self._reset_envs(c, c.done),
                            warp_only=physics_ok))
        stages.extend(self._extra_stages)
        return stages

    def _reset_stages(self) -> list[Stage]:
        rz = self.randomization
        physics_ok = self.backend.warp_only and (self.task is None or self.task.warp_only)
        stages = []
        if rz.reset_active:
            stages.append(Stage(
                "randomize_reset", lambda c: rz.launch_reset(c, c.reset_mask),
                warp_only=self.params.listeners_warp_only,
            ))
        stages.append(Stage("reset", self._explicit_reset, warp_only=physics_ok))
        return stages

    def _listener_key(self) -> int:
        return self.params.listener_key

    def _run_hooks(self, hooks: list[Hook]) -> Callable[[StepContext], None]:
        def run(ctx: StepContext) -> None:
            for fn in hooks:
                fn(self, self._hook_td)

        return run

    def _physics(self, ctx: StepContext) -> None:
        self._count_invalid(ctx)
        self.backend.step(ctx)
        if self.task is not None:
            self.task.compute(ctx)

    def _episode(self, ctx: StepContext) -> None:
        out = ctx.outputs
        wp.launch(kepisode.end_step, ctx.num_envs, [
            self.max_episode_steps, to_wp(out["reward"]), to_wp(out["terminated"]),
            to_wp(ctx.step_count), to_wp(ctx.running_return), to_wp(out["truncated"]),
            to_wp(ctx.done), to_wp(out["episode_return"]), to_wp(out["episode_length"]),
        ], device=ctx.wp_device, stream=ctx.stream)

    def _tick(self, ctx: StepContext) -> None:
        wp.launch(kepisode.tick, 1, [to_wp(ctx.clock)], device=ctx.wp_device, stream=ctx.stream)

    def _count_invalid(self, ctx: StepContext) -> None:
        counter = to_wp(self.invalid_actions)
        if isinstance(self.action_spec, DiscreteSpec):
            args = [to_wp(ctx.action.reshape(-1)), self.action_spec.n, counter]
            kernel = kactions.count_invalid_discrete
        else:
            args = [to_wp(ctx.action.reshape(ctx.num_envs, -1)), counter]
            kernel = kactions.count_invalid_box
        wp.launch(kernel, ctx.num_envs, args, device=ctx.wp_device, stream=ctx.stream)

    def _reset_envs(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self.backend.reset(ctx, mask)
        if self.task is not None:
            self.task.observe(ctx, mask)

    def _explicit_reset(self, ctx: StepContext) -> None:
        wp.launch(kepisode.clear_counters, ctx.num_envs, [
            to_wp(ctx.reset_mask), to_wp(ctx.step_count), to_wp(ctx.running_return),
        ], device=ctx.wp_device, stream=ctx.stream)
        self._reset_envs(ctx, ctx.reset_mask)

    def add_stage(self, stage: Stage, first: bool = False) -> Callable[[], None]:
        """Append ``stage`` to every step, after the auto-reset (transforms use this), or
        with ``first=True`` put it before every other stage of the step (where an adapter
        turns a library's actions into ``context.action``); returns a function removing
        it. The capture is redone."""
        if not isinstance(stage, Stage):
            raise TypeError(f"add_stage: expected a gp.Stage, got {type(stage).__name__}")
        where = self._first_stages if first else self._extra_stages
        where.append(stage)
        self._structure_changed()

        def remove() -> None:
            if stage in where:
                where.remove(stage)
                self._structure_changed()

        return remove

    def _structure_changed(self) -> None:
        """The step's work changed: rebuild the stages and capture again."""
        self.pipeline.invalidate()
        self.reset_pipeline.invalidate()
