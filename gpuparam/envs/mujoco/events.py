"""State events: randomization that writes the physical state instead of parameters."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import warp as wp

from gpuparam._checks import INT32_MAX
from gpuparam._launch import BoundLaunch
from gpuparam.kernels import locomotion as kloco
from gpuparam.pipeline import Stage
from gpuparam.randomization.terms import Every, Interval
from gpuparam.vecenv import VecEnv


class Push:
    """Random pushes (IsaacLab's ``push_by_setting_velocity``): a velocity drawn from
    ``U(low_j, high_j)`` is added to ``qvel[first_dof + j]`` of an env when its push timer
    runs out, per env, on the device.

    Args:
        velocity: ``[(low, high), ...]``, one range per pushed dof (m/s or rad/s), e.g.
            ``[(-0.5, 0.5), (-0.5, 0.5)]`` for the x and y velocity of a free-joint root:
            ``low <= high``, both and ``high - low`` finite in float32 (``qvel``'s type).
        every: when: ``gp.Every(k)`` (or an int k) pushes each env once every ``k`` env
            steps, with a per-env phase drawn once; ``gp.Interval(low_s, high_s)`` after
            per-env intervals drawn uniformly in seconds (``round(s / env.dt)`` steps).
            Intervals are counted by int32 timers: at most ``2**31 - 1`` steps (checked
            here for ``Every``, when added to an env for ``Interval``).
        first_dof: the first dof pushed (0: the root's first velocity component).

    Draws are counter-based, keyed by (env seed, global env id, a push stream, the env's
    push count): env ``i`` is pushed the same whatever ``num_envs`` is. The push runs as a
    stage after the auto-reset (it changes the state the next step starts from), inside
    the captured step. Add it with ``env.add_event(push)``. Its timers and counts
    (``push.timer``, ``push.count``: int32 ``[num_envs]``) start when it is added and are
    not restarted by ``env.reset(seed=...)`` nor saved by ``env.state_dict()``. A push
    count wraps back to 1 after ``2**31 - 1`` pushes of its env (its draws then repeat).
    """

    def __init__(self, velocity: Sequence[tuple[float, float]], every: Every | Interval | int,
                 first_dof: int = 0):
        try:
            v = np.array(list(velocity), dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            v = np.zeros(0)
        with np.errstate(over="ignore", invalid="ignore"):  # float32: the push kernel's type
            v32 = v.astype(np.float32)
            ok = (v.ndim == 2 and v.size > 0 and v.shape[1] == 2 and (v[:, 0] <= v[:, 1]).all()
                  and np.isfinite(v32).all() and np.isfinite(v32[:, 1] - v32[:, 0]).all())
        if not ok:
            raise ValueError(
                "Push: velocity expects [(low, high), ...] with low <= high, both and "
                f"high - low finite in float32 (|v| < 3.4e38), got {velocity!r}"
            )
        if isinstance(every, int) and not isinstance(every, bool):
            every = Every(every)
        if not isinstance(every, (Every, Interval)):
            raise ValueError(f"Push: every expects an int, gp.Every or gp.Interval, got {every!r}")
        if isinstance(every, Every) and every.k > INT32_MAX:
            raise ValueError(f"Push: every expects at most {INT32_MAX} steps (int32 timers), "
                             f"got {every!r}")
        if not isinstance(first_dof, int) or isinstance(first_dof, bool) or first_dof < 0:
            raise ValueError(f"Push: first_dof expects an int >= 0, got {first_dof!r}")
        self.velocity = [tuple(r) for r in v.tolist()]  # host-ok: NumPy, at construction
        self.every, self.first_dof = every, first_dof

    def steps(self, dt: float) -> tuple[int, int]:
        """The interval range in env steps for an env of step ``dt`` seconds; raises
        ``ValueError`` when it does not fit the int32 timers."""
        if isinstance(self.every, Every):
            return self.every.k, self.every.k
        lo = max(1, round(self.every.low_s / dt))
        hi = max(lo, round(self.every.high_s / dt))
        if hi > INT32_MAX:
            raise ValueError(
                f"Push: every={self.every!r} is up to {hi} steps of {dt} s; expected at most "
                f"{INT32_MAX} steps (int32 timers)"
            )
        return lo, hi

    def bind(self, env: VecEnv) -> Stage:
        """Allocate the per-env timers and return the stage that pushes."""
        nv = env.mjm.nv
        if self.first_dof + len(self.velocity) > nv:
            raise ValueError(
                f"Push: dofs {self.first_dof}..{self.first_dof + len(self.velocity) - 1} "
                f"pushed, {env.name} has {nv}"
            )
        k_lo, k_hi = self.steps(env.dt)
        n, dev = env.num_envs, env.device
        self.timer = torch.zeros(n, dtype=torch.int32, device=dev)
        self.count = torch.zeros(n, dtype=torch.int32, device=dev)
        ranges = torch.tensor(self.velocity, dtype=torch.float32, device=dev)
        lo, hi = self._keep = ranges.T.contiguous()  # float32 [k] each
        ctx = env.context
        inputs = [wp.from_torch(ctx.seed), ctx.env_offset, self.first_dof, wp.from_torch(lo),
                  wp.from_torch(hi), k_lo, k_hi]
        outputs = [wp.from_torch(self.timer), wp.from_torch(self.count), env.backend.d.qvel]
        # count 0: draws the first timers (no push), on torch's current stream after the
        # zeros above (the step's stream waits on it)
        push = BoundLaunch(kloco.push, n, inputs=inputs, outputs=outputs, device=dev)
        push()
        return Stage("push", lambda c: push.launch(c.stream), "warp")

