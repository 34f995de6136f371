"""rsl_rl (rsl-rl-lib 5.x) ``VecEnv`` over a gpuparam env: ``RslRlVecEnv`` (tested training
examples: ``docs/training.md``, ``examples/rsl_rl_train.py``)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from gpuparam.integrations._extras import Adapter, base_env, check_tensor, require

require("rsl_rl", "rsl_rl", "gpuparam.integrations.rsl_rl")

from rsl_rl.env import VecEnv  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from gpuparam._device import to_wp  # noqa: E402
from gpuparam._launch import BoundLaunch  # noqa: E402
from gpuparam.kernels import actions as kactions  # noqa: E402
from gpuparam.pipeline import Stage, StepContext  # noqa: E402
from gpuparam.spec import DiscreteSpec  # noqa: E402
from gpuparam.vecenv import VecEnv as VecEnvBase  # noqa: E402

__all__ = ["RslRlEnvCfg", "RslRlVecEnv"]

# the output an env declares for its critic (``VecEnv.output_specs``): the "critic" group
CRITIC_KEY = "privileged_observation"


@dataclass(frozen=True)
class RslRlEnvCfg:
    """What ``RslRlVecEnv.cfg`` holds (rsl_rl logs it with the run)."""

    env: str
    num_envs: int
    max_episode_length: int
    privileged: tuple[str, ...]
    discrete_actions: int | None
    clip_actions: bool

    def to_dict(self) -> dict:
        """A plain dict of the fields (what rsl_rl's W&B and Neptune writers call)."""
        return asdict(self)


def _privileged_map(params, names: tuple[str, ...], ranges: dict) -> tuple:
    """``(cols, scale, offset)``: the rows of ``names`` in the ``[C, N]`` parameter tables and
    float64 ``[P]`` factors mapping each row's range (from ``ranges``, validated, else the
    spec's) to ``[-1, 1]``."""
    cols, lows, highs = [], [], []
    for name in names:
        a, size = params.columns(name)
        cols += range(a, a + size)
        spec, given = params.spec[name], ranges.get(name)
        what = f"RslRlVecEnv: privileged[{name!r}]"
        if given is not None and (not isinstance(given, (tuple, list)) or len(given) != 2):
            raise ValueError(f"{what}: expected a (low, high) pair or None, got {given!r}")
        try:
            low, high = (torch.as_tensor(v, dtype=torch.float64).flatten()
                         for v in ((spec.low, spec.high) if given is None else given))
        except (TypeError, ValueError, RuntimeError) as e:
            raise ValueError(f"{what}: low and high must be numbers or sequences of numbers; "
                             f"{e}") from None
        for v in (low, high):
            if v.numel() not in (1, size):
                raise ValueError(f"{what}: low/high expected a scalar or {size} values (one "
                                 f"per component), got {v.numel()}")
        low, high = low.expand(size), high.expand(size)
        if given is not None and not (
                torch.isfinite(low).all() and torch.isfinite(high).all() and (high > low).all()):
            raise ValueError(f"{what}: expected finite low < high, got {given!r}")
        lows.append(low)
        highs.append(high)
    low = torch.cat(lows)
    width = torch.cat(highs) - low
    scale = torch.where(width > 0, 2.0 / width.clamp(min=1e-30), 0.0)  # 0: a fixed spec range
    return cols, scale, torch.where(width > 0, -1.0 - low * scale, 0.0)


class RslRlVecEnv(Adapter, VecEnv):
    """rsl_rl's ``VecEnv`` contract over a gpuparam env or ``gp.TransformedEnv``.

    Args:
        env: ``gp.make(...)`` or a ``gp.TransformedEnv`` (then the policy sees normalized
            observations and rewards, and the episode statistics stay raw). It is reset here;
            reachable as ``env`` or ``gp_env``.
        privileged: parameter names for the critic's ``"privileged"`` observation group,
            float32 ``[N, P]`` (``P`` the summed sizes): each env's effective values mapped
            from their spec range ``[low, high]`` to ``[-1, 1]``. Or a mapping ``{name:
            (low, high)}`` giving the range to map from instead (scalars or one per
            component, ``high > low``; ``None`` for the spec range): robot parameters' spec
            ranges are validation bounds (``body_mass`` 1e-6 to 1e6), so pass the range
            they are randomized over. Configure rsl_rl's
            ``obs_groups={"actor": ["policy"], "critic": ["policy", "privileged"]}`` for an
            asymmetric actor-critic. Empty: no such group.
        clip_actions: clamp continuous actions to the action spec's bounds before stepping.
        log_interval: steps between two episode-statistics entries in ``extras["log"]``;
            set it to the runner's ``num_steps_per_env`` so each iteration logs once.
        episode_stats: what the entries hold (all raw: before any ``gp.RewardNorm``):
            ``"latest"`` (default; no work per step): the mean over envs of each env's most
            recently finished episode (envs that never finished one are left out), read
            from the env's ``episode_return`` / ``episode_length`` at the entry;
            ``"sums"``: the exact mean over every episode finished since the last entry,
            accumulated on the device (4 tensor ops a step); ``None``: no entries.
        log_values: more entries: ``{name: fn}``, each ``fn()`` a 0-dim device tensor
            computed at each entry without a host sync (e.g. ``{"Curriculum/level":
            lambda: curriculum.levels.float().mean()}``).

    Reward terms and terminations: over an env that declares a ``"reward_terms"`` output
    and ``reward_term_names`` (the legged tasks), each entry also holds
    ``"Episode_Reward/<term>"`` for every term (IsaacLab's convention: the mean over the
    episodes finished since the last entry of the term's sum over the episode, divided by
    ``max_episode_length``: a term paid at its scale at every step of a full episode reads
    its scale) and ``"Episode_Termination/terminated"`` / ``"Episode_Termination/time_out"``
    (the fraction of those episodes ended by a termination or by the time limit); 5 tensor
    ops a step, on the device. rsl_rl's logger writes every entry to TensorBoard.

    Critic group: over a gpuparam env that declares a ``"privileged_observation"`` output
    (``VecEnv.output_specs``, e.g. Go1's, float32 ``[N, C]``: the noise-free state its
    critic should see), the observations also hold ``"critic"``, a copy of it (after the
    auto-reset, as ``"policy"``); train on it with ``obs_groups={"actor": ["policy"],
    "critic": ["critic"]}``.

    Attributes (the rsl_rl contract): ``num_envs``; ``num_actions`` (``prod(action shape)``;
    for a Discrete(n) env 1 if n == 2, else n); ``max_episode_length``
    (``env.max_episode_steps``); ``device``; ``cfg`` (an ``RslRlEnvCfg``);
    ``episode_length_buf``.

    Discrete envs (rsl_rl's policies are Gaussian): with two actions the policy outputs one
    float per env and the env takes action 1 where it is > 0, else 0; with n > 2 actions it
    outputs n floats and the env takes their ``argmax`` (the first on ties). The actions
    rsl_rl stores stay the floats it sampled.

    Buffers: alternate steps write alternate preallocated output sets, so a step's outputs
    stay intact through the next step (rsl_rl acts on step t's observations and stores them
    after step t + 1); ``clone()`` what you keep longer.

    Over a gpuparam env or a ``gp.TransformedEnv`` of one, the adapter adds stages to the
    env's captured step (the output copy, and for Discrete(2) the action mapping), armed
    only while this adapter steps; ``close()`` removes them. Any other wrapper is stepped
    through its own ``step`` and its outputs copied with torch ops; a lock of this adapter's
    then stands in for ``env.hold()``.
    """

    def __init__(
        self,
        env,
        *,
        privileged: Sequence[str] | Mapping[str, tuple | None] = (),
        clip_actions: bool = False,
        log_interval: int = 24,
        episode_stats: str | None = "latest",
        log_values: Mapping[str, object] | None = None,
    ):
        if isinstance(privileged, str):
            privileged = (privileged,)
        ranges = dict(privileged) if isinstance(privileged, Mapping) else {}
        privileged = tuple(privileged)
        names = tuple(env.params.names)
        unknown = [p for p in privileged if p not in names]
        if unknown:
            raise ValueError(f"RslRlVecEnv: privileged names {unknown} unknown; "
                             f"valid names: {names}")
        if episode_stats not in ("latest", "sums", None):
            raise ValueError("RslRlVecEnv: episode_stats expected 'latest', 'sums' or None, "
                             f"got {episode_stats!r}")
        if not isinstance(log_interval, int) or isinstance(log_interval, bool) or log_interval < 1:
            raise ValueError(f"RslRlVecEnv: log_interval expected a positive int, "
                             f"got {log_interval!r}")
        self.env = self.gp_env = env
        n, dev = int(env.num_envs), torch.device(env.device)
        f32 = {"dtype": torch.float32, "device": dev}
        self.num_envs, self.device = n, dev
        self.max_episode_length = int(env.max_episode_steps)
        act = env.action_spec
        discrete = isinstance(act, DiscreteSpec)
        view = (n, *act.shape)
        self.num_actions = (1 if act.n == 2 else int(act.n)) if discrete else int(
            torch.Size(act.shape).numel())
        self._shapes = ((n, self.num_actions),)  # the actions taken
        clip = bool(clip_actions) and not discrete
        # over a gpuparam env, actions go straight into its action buffer and our stages
        # join its step (see the class docstring); over another wrapper, torch ops map them
        base = base_env(env)
        self._staged = isinstance(base, VecEnvBase)
        a = base.context.action if self._staged else torch.zeros(view, dtype=act.dtype,
                                                                 device=dev)
        self._action, self._logits = a, None
        # _map: the policy's floats [N, num_actions] into the env's actions `a`
        if discrete and self.num_actions == 1:  # Discrete(2): 1 where the float is > 0
            if self._staged:  # the floats, mapped by the armed action stage
                self._logits = torch.zeros(n, 1, **f32)
                self._map = self._logits.copy_
            else:
                self._map = lambda x: torch.gt(x, 0.0, out=a.view(n, 1))
        elif discrete:
            self._map = lambda x: torch.argmax(x, -1, out=a)
        elif clip:
            low, high = (torch.as_tensor(v, dtype=act.dtype).expand(view).to(dev)
                         for v in (act.low, act.high))
            self._map = lambda x: torch.clamp(x.view(view), low, high, out=a)
        else:
            self._map = lambda x: a.copy_(x.view(view))
        self.cfg = RslRlEnvCfg(
            env=str(getattr(env, "name", type(env).__name__)), num_envs=n,
            max_episode_length=self.max_episode_length, privileged=privileged,
            discrete_actions=int(act.n) if discrete else None, clip_actions=clip,
        )
        # the "privileged" group: (rows of the tables, scale, offset, a [P, N] buffer)
        self._priv = None
        if privileged:
            cols, scale, offset = _privileged_map(env.params, privileged, ranges)
            self._priv = (torch.tensor(cols, dtype=torch.int64, device=dev),
                          scale.to(**f32)[:, None], offset.to(**f32)[:, None],
                          torch.zeros(len(cols), n, **f32))
        # the env's own critic observation (e.g. Go1's): the "critic" group, staged only
        critic = base.context.outputs.get(CRITIC_KEY) if self._staged else None
        groups = {"policy": tuple(env.observation_spec.shape)}
        if self._priv is not None:
            groups["privileged"] = (self._priv[0].numel(),)
        if critic is not None:
            groups["critic"] = critic.shape[1:]
        # two output sets, written by alternate steps: (obs, rewards, dones, time_outs)
        self._sets = [(
            TensorDict({k: torch.zeros(n, *s, **f32) for k, s in groups.items()},
                       batch_size=[n], device=dev),
            torch.zeros(n, **f32), torch.zeros(n, dtype=torch.int64, device=dev),
            torch.zeros(n, dtype=torch.bool, device=dev),
        ) for _ in range(2)]
        self._k = 1  # the set last written: reset() below writes set 0
        self._lock = threading.Lock()  # the guard of a wrapper that is not a gpuparam env
        self._removers: list = []
        self._closed = False
        if self._staged:
            self._flag = torch.zeros(1, dtype=torch.int32, device=dev)
            self._removers.append(base.add_stage(Stage("rsl_rl_outputs", self._output_stage,
                                                       "warp")))
        if self._logits is not None:
            self._removers.append(base.add_stage(
                Stage("rsl_rl_actions", self._action_stage, "warp"), first=True))
        self._episode_stats, self._log_interval, self._steps = episode_stats, log_interval, 0
        log_values = dict(log_values or {})
        bad = [k for k, f in log_values.items() if not isinstance(k, str) or not callable(f)]
        if bad:
            raise ValueError(f"RslRlVecEnv: log_values expected {{name: callable}}, got "
                             f"entries {bad}")
        self._log_values = log_values
        # reward terms and termination causes of the finished episodes (see the docstring)
        term_names = tuple(getattr(base, "reward_term_names", ()) or ())
        terms = base.context.outputs.get("reward_terms") if self._staged else None
        self._terms = None
        if episode_stats is not None and terms is not None and term_names and (
                terms.shape[1:] == (len(term_names),)):
            t = len(term_names)
            # per env: this episode's sums [N, T]; finished: sums [1, T], a product buffer,
            # and per env the number of finished episodes that terminated [N]
            self._terms = (term_names, torch.zeros(n, t, **f32), torch.zeros(1, t, **f32),
                           torch.zeros(1, t, **f32), torch.zeros(n, **f32))
        self._launches: dict[str, tuple] = {}  # the stages' bound launches (_bound)
        self._donef = torch.zeros(n, **f32)
        self._acc = torch.zeros(3, n, **f32)
        self.last_log: dict[str, torch.Tensor] | None = None
        self.reset()

    def _bound(self, name: str, tensors: tuple[torch.Tensor, ...], build) -> list:
        """The launches ``build()`` binds (``BoundLaunch``) over ``tensors``, bound once and
        again only when one of them is another buffer (e.g. the env's outputs after a
        transform is added): eager and captured steps replay the same launches."""
        key = tuple(t.data_ptr() for t in tensors)
        cached = self._launches.get(name)
        if cached is None or cached[0] != key:
            cached = self._launches[name] = (key, build())
        return cached[1]

    def _action_stage(self, ctx: StepContext) -> None:
        dev = self.device
        for b in self._bound("actions", (ctx.action,), lambda: [BoundLaunch(
                kactions.pick_positive, self.num_envs,
                inputs=[to_wp(self._flag), to_wp(self._logits.reshape(-1))],
                outputs=[to_wp(ctx.action.reshape(-1))], device=dev)]):
            b.launch(ctx.stream)

    def _output_stage(self, ctx: StepContext) -> None:
        td = self.env.outputs  # this step's (after any transforms)
        keys = ("observation", "reward", "done", "truncated", "terminated")
        critic = (td[CRITIC_KEY],) if "critic" in self._sets[0][0].keys() else ()
        for b in self._bound("outputs", (*(td[k] for k in keys), *critic),
                             lambda: self._output_launches(td)):
            b.launch(ctx.stream)

    def _output_launches(self, td: TensorDict) -> list:
        n, dev, flag = self.num_envs, self.device, to_wp(self._flag)
        src = [to_wp(td["observation"].reshape(n, -1))]
        src += [to_wp(td[k]) for k in ("reward", "done", "truncated", "terminated")]
        out = []
        for k, s in enumerate(self._sets):  # set k is written when the flag is k + 1
            out.append(BoundLaunch(kactions.write_outputs, n, inputs=[flag, k + 1, *src],
                                   outputs=[to_wp(s[0]["policy"].reshape(n, -1)),
                                            *map(to_wp, s[1:])], device=dev))
            if "critic" in s[0].keys():
                out.append(BoundLaunch(
                    kactions.copy_rows_armed, n,
                    inputs=[flag, k + 1, to_wp(td[CRITIC_KEY].reshape(n, -1))],
                    outputs=[to_wp(s[0]["critic"].reshape(n, -1))], device=dev))
        out.append(BoundLaunch(kactions.disarm, 1, outputs=[flag], device=dev))
        return out

    def _write_privileged(self, obs: TensorDict) -> None:
        if self._priv is None:
            return
        cols, scale, offset, rows = self._priv  # rows [P, N]; the group [N, P], through .T
        torch.index_select(self.env.params.effective_table, 0, cols, out=rows)
        torch.addcmul(offset, rows, scale, out=obs["privileged"].T)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """int32 ``[N]`` on the device: the env's own ``env.episode_length`` (reading gives
        that tensor, assigning writes it, as ``OnPolicyRunner.learn(init_at_random_ep_len=
        True)`` does)."""
        return self.env.episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor | int) -> None:
        base_env(self.env).episode_length = value

    def get_observations(self) -> TensorDict:
        """The observations of the last ``step`` or ``reset`` (see the class docstring)."""
        return self._sets[self._k][0]

    def reset(self) -> tuple[TensorDict, dict]:
        """Reset every env; returns ``(obs, {})`` with ``obs`` as in ``step``."""
        with self._guard("reset"):
            obs = self._take(self.env.reset())
        return obs, {}

    def load(self, path: str | os.PathLike) -> TensorDict:
        """Load a checkpoint of the wrapped env (``env.load(path)``, as ``env.save(path)``
        wrote it) and take its observations as this adapter's: :meth:`get_observations`
        then returns the restored ones (as ``step``'s, a fresh output set), so a run resumes
        where the saved one stood. Returns them."""
        with self._guard("load"):
            self.env.load(path)
            return self._take(self.env.outputs)

    def _take(self, td: TensorDict) -> TensorDict:
        """Write ``td``'s observations into the next output set and make it the current."""
        k = self._k ^ 1
        obs = self._sets[k][0]
        obs["policy"].copy_(td["observation"])
        self._write_privileged(obs)
        if "critic" in obs.keys():
            obs["critic"].copy_(td[CRITIC_KEY])
        self._k = k
        return obs

    def _guard(self, what: str | None = None) -> contextlib.AbstractContextManager:
        """This call's hold on the env, taken before anything is written: over a gpuparam
        env its ``hold()``, else this adapter's own lock. A call named ``what`` (``step``,
        ``reset``) raises after ``close()``."""
        if what is not None and self._closed:
            raise RuntimeError(f"RslRlVecEnv.{what}: called after close()")
        if self._staged:
            return base_env(self.env).hold()
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(f"{self!r}: step/reset called while another call on this "
                               "adapter is running (two threads, or a hook calling step): "
                               "serialize the calls")
        held = contextlib.ExitStack()  # releases the lock when the call's block ends
        held.callback(self._lock.release)
        return held

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step every env; returns ``(obs, rewards, dones, extras)``.

        ``actions``: float ``[N, num_actions]`` on the device (any floating dtype; taken
        detached, so no autograd graph reaches the env; another dtype, shape or device
        raises ``ValueError`` before anything is written). ``obs``: a TensorDict batch
        ``[N]`` with ``"policy"`` float32 ``[N, *obs_shape]`` (after auto-reset) and
        ``"privileged"`` / ``"critic"`` if configured; ``rewards`` float32 ``[N]``; ``dones``
        int64 ``[N]`` (``terminated | truncated``); ``extras`` with ``"time_outs"`` bool
        ``[N]`` (truncated and not terminated: rsl_rl bootstraps those) and, every
        ``log_interval`` steps, ``"log"``: ``{"Episode/return": ..., "Episode/length": ...,
        "Episode/count": ...}``, 0-dim device tensors (mean raw return and length, and the
        number of episodes they cover, as ``episode_stats`` says; NaN when there is none),
        computed without a host sync. The latest entry stays readable as ``last_log``."""
        with self._guard("step"):  # raises after close(), before the actions are checked
            check_tensor("RslRlVecEnv: actions", actions, "a floating-point",
                         torch.is_floating_point, self._shapes, self.device)
            self._map(actions.detach())  # no autograd graph reaches the env
            k = self._k ^ 1
            obs, rewards, dones, time_outs = self._sets[k]
            if self._staged:
                self._flag.fill_(k + 1)  # the output stage writes set k during the step
            try:
                td = self.env.step(self._action)
            except BaseException:  # a step that failed midway leaves nothing armed
                if self._staged:
                    self._flag.fill_(0)
                raise
            self._k = k
            if not self._staged:
                for dst, key in ((obs["policy"], "observation"), (rewards, "reward"),
                                 (dones, "done")):
                    dst.copy_(td[key])
                torch.gt(td["truncated"], td["terminated"], out=time_outs)  # and not terminated
            self._write_privileged(obs)
            extras = {"time_outs": time_outs}
            if self._episode_stats is not None and (log := self._stats(td)) is not None:
                extras["log"] = log
            return obs, rewards, dones, extras

    def _stats(self, td) -> dict[str, torch.Tensor] | None:
        """Accumulate this step's finished episodes ("sums"); every ``log_interval`` steps,
        the entry (also ``last_log``)."""
        acc = self._acc  # return, length, count of finished episodes
        if self._episode_stats == "sums" or self._terms is not None:
            done = self._donef.copy_(td["done"])
            acc[2].add_(done)
        if self._episode_stats == "sums":
            acc[0].addcmul_(td["episode_return"], done)
            acc[1].addcmul_(td["episode_length"], done)
        if self._terms is not None:
            _, running, finished, prod, terminated = self._terms
            running.add_(td["reward_terms"])
            torch.mm(done[None], running, out=prod)  # the finished episodes' sums
            finished.add_(prod)
            running.addcmul_(running, done[:, None], value=-1.0)  # those envs start at 0
            terminated.add_(td["terminated"])
        self._steps += 1
        if self._steps < self._log_interval:
            return None
        self._steps = 0
        log = {}
        if self._terms is not None:  # over the episodes finished since the last entry
            names, _, finished, _, terminated = self._terms
            ended = acc[2].sum()
            per_term = finished[0] / (ended * self.max_episode_length)
            for k, name in enumerate(names):
                log[f"Episode_Reward/{name}"] = per_term[k]
            term = terminated.sum() / ended
            log["Episode_Termination/terminated"] = term
            log["Episode_Termination/time_out"] = 1.0 - term
            finished.zero_()
            terminated.zero_()
        if self._episode_stats == "latest":  # each env's last finished episode, if any
            length = td["episode_length"]
            torch.gt(length, 0, out=acc[2])
            acc[0].copy_(td["episode_return"]).mul_(acc[2])
            acc[1].copy_(length)
        ret, length, count = acc.sum(1).unbind()
        acc.zero_()
        log.update({name: fn() for name, fn in self._log_values.items()})
        self.last_log = {"Episode/return": ret / count, "Episode/length": length / count,
                         "Episode/count": count, **log}
        return self.last_log

    def close(self) -> None:
        """Remove this adapter's stages from the env's step; ``step`` and ``reset`` raise
        after this. Closing twice does nothing. Refused (``RuntimeError``) while another
        call on the env runs, as ``step`` is (that call has armed the stages it needs)."""
        with self._guard():
            for remove in self._removers:
                remove()
            self._removers = []
            self._closed = True
