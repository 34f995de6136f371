"""TorchRL adapters: ``TorchRLEnv`` (an ``EnvBase`` over a gpuparam env), ``ObsNormTransform``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpuparam.integrations._extras import (
    Adapter,
    base_env,
    check_tensor,
    env_seed,
    held,
    require,
)

require("torchrl", "torchrl", "gpuparam.integrations.torchrl")

from tensordict import TensorDict, TensorDictBase  # noqa: E402
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded  # noqa: E402
from torchrl.envs import EnvBase, Transform, TransformedEnv  # noqa: E402

from gpuparam.spec import DiscreteSpec  # noqa: E402
from gpuparam.transforms import ObsNorm, RewardNorm  # noqa: E402
from gpuparam.transforms import TransformedEnv as GpTransformedEnv  # noqa: E402

__all__ = ["ObsNormTransform", "TorchRLEnv"]

_DONE_KEYS = ("done", "terminated", "truncated")
PRIVILEGED = "privileged_observation"  # the critic's observation an env may declare

class TorchRLEnv(Adapter, EnvBase):
    """A TorchRL ``EnvBase`` over a gpuparam env, batch ``[N]`` on the env's device.

    Args:
        env: the gpuparam env; its public attributes that ``EnvBase`` lacks (``params``,
            ``randomize``, ``transforms``, ...) are reachable on this wrapper.
        action_encoding: for discrete envs, ``"categorical"`` (default: ``Categorical(n)``
            int64 ``[N]``) or ``"one_hot"`` (``OneHot(n)`` int64 ``[N, n]``, what TorchRL's
            ``GymWrapper`` gives, so policies written for it run unchanged; integer, bool or
            floating-point rows (``OneHotCategorical`` samples float32 ones), exactly 0 or 1
            per entry; a complex dtype, another shape or device raises ``ValueError``). A row
            that is not one-hot (all zeros, several ones, entries other than 0 and 1, NaN) is
            an action
            outside the space: with the env's ``validate_actions`` (or TorchRL's
            ``run_type_checks``) it raises ``ValueError`` (a host check); else it is
            counted on the device in ``env.invalid_actions`` as the env's action ``n``
            (outside ``[0, n)``; the env takes the nearest valid action). Ignored for
            continuous envs.

    Specs (batch ``[N]``, ``env.device``):
        ``"observation"``: ``Unbounded`` float32 ``[N, *obs_shape]`` (parameters and
        normalization can move observations outside the env's nominal box).
        ``"action"``: ``Categorical(n)`` int64 ``[N]`` for discrete envs, ``Bounded`` float32
        ``[N, *act_shape]`` for continuous ones; a wrong shape, dtype or device raises the
        core env's ``ValueError``.
        ``"reward"``: float32 ``[N, 1]``; ``"done"``, ``"terminated"``, ``"truncated"``: bool
        ``[N, 1]``.
        ``"episode_return"`` float32 ``[N, 1]`` and ``"episode_length"`` int32 ``[N, 1]``
        (observation-spec entries): return (raw, before any ``gp.RewardNorm``) and length of
        the episode that ended at this step, valid where ``done`` (0 after a reset).
        ``"privileged_observation"`` float32 ``[N, *shape]`` (``Unbounded``), only over an
        env that declares that output (the legged tasks: the critic's noise-free state;
        e.g. a critic ``TensorDictModule(in_keys=["privileged_observation"])``): in
        ``reset`` and in ``"next"``; as the env writes it after its auto-reset, so for the
        envs done at a step ``("next", "privileged_observation")`` holds the new episode's
        first one (the env keeps no pre-reset copy; ``"observation"`` is the pre-reset one).
        ``"reward_raw"`` float32 ``[N, 1]``, only when ``env`` is a ``gp.TransformedEnv``
        holding a ``gp.RewardNorm``: the reward before normalization, a second entry of
        ``reward_spec`` (so ``env.reward_key`` is ambiguous), e.g. for
        ``RewardSum(in_keys=["reward_raw"], out_keys=["raw_return"])``.

    Reset: without ``"_reset"`` every env is reset. ``"_reset"``: bool ``[N, 1]`` or ``[N]`` on
    the device; anything else raises ``ValueError``. As TorchRL's ``VecGymEnvTransform``
    (without NaN placeholders), ``step`` returns the state it reached (the env's
    ``"final_observation"``) as ``("next", "observation")``, and a ``reset`` with
    ``"_reset"`` returns, for envs that finished at the last step, the first observations
    the env's own auto-reset drew (no physics runs again) and runs the env's masked reset
    for the other masked envs. Step and reset the gpuparam env through this wrapper only (a
    direct ``gp_env.step`` in between would be missed). A ``step`` loop that never calls
    ``reset`` continues the new episodes from their reset state; TorchRL's rollouts and
    collectors (``step_and_maybe_reset``) see exact data. Every returned tensor is a fresh
    copy.
    """

    def __init__(self, env, *, action_encoding: str = "categorical"):
        if action_encoding not in ("categorical", "one_hot"):
            raise ValueError("TorchRLEnv: action_encoding expected 'categorical' or 'one_hot', "
                             f"got {action_encoding!r}")
        n, dev = int(env.num_envs), torch.device(env.device)
        super().__init__(device=dev, batch_size=torch.Size([n]))
        self.__dict__["gp_env"] = env
        obs, act = env.observation_spec, env.action_spec
        self._one_hot = action_encoding == "one_hot" and isinstance(act, DiscreteSpec)
        raw_reward = isinstance(env, GpTransformedEnv) and any(
            isinstance(t, RewardNorm) for t in env.transforms)
        # what a step returns besides "observation": [N, 1] views of the env's outputs
        self._keys = ("reward", "episode_return", "episode_length",
                      *(("reward_raw",) if raw_reward else ()), *_DONE_KEYS)
        priv = base_env(env).output_specs().get(PRIVILEGED)
        self._priv = priv is not None
        extra = {} if priv is None else {PRIVILEGED: Unbounded(
            shape=(n, *priv.shape), dtype=torch.float32, device=dev)}
        self.observation_spec = Composite(
            observation=Unbounded(shape=(n, *obs.shape), dtype=torch.float32, device=dev),
            episode_return=Unbounded(shape=(n, 1), dtype=torch.float32, device=dev),
            episode_length=Unbounded(shape=(n, 1), dtype=torch.int32, device=dev),
            **extra,
            shape=(n,),
            device=dev,
        )
        if self._one_hot:
            self.action_spec = OneHot(act.n, shape=(n, act.n), dtype=torch.int64, device=dev)
        elif isinstance(act, DiscreteSpec):
            self.action_spec = Categorical(act.n, shape=(n,), dtype=act.dtype, device=dev)
        else:
            shape = (n, *act.shape)
            low, high = (torch.as_tensor(v, dtype=act.dtype).expand(shape).to(dev)
                         for v in (act.low, act.high))
            self.action_spec = Bounded(low, high, shape=shape, dtype=act.dtype, device=dev)
        reward = Unbounded(shape=(n, 1), dtype=torch.float32, device=dev)
        if raw_reward:  # a second reward key, so that RewardSum accepts it
            self.reward_spec = Composite(reward=reward, reward_raw=reward.clone(), shape=(n,),
                                         device=dev)
        else:
            self.reward_spec = reward
        self.done_spec = Composite(
            {k: Categorical(2, shape=(n, 1), dtype=torch.bool, device=dev) for k in _DONE_KEYS},
            shape=(n,),
            device=dev,
        )
        self._bs, self._dev = torch.Size([n]), dev
        # envs whose new episode the env's auto-reset started at the last step (valid after
        # a reset; refreshed from the done mask at the reset after a step, see _stepped)
        self._autoreset = torch.zeros(n, dtype=torch.bool, device=dev)
        self._stepped = [False]
        self._views: tuple = (None,)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            env = self.__dict__.get("gp_env")
            if env is None or name.startswith("_"):
                raise
        return getattr(env, name)

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``EnvBase.step``: writes ``"next"`` into ``tensordict`` and returns it. The common
        case (batch ``[N]``, no ``"_step"`` or ``"next"`` entry, ``run_type_checks`` off)
        skips TorchRL's completion and reshaping of done keys and rewards (already in their
        spec shapes); anything else goes through ``EnvBase.step``."""
        keys = tensordict.keys()
        if (
            "_step" in keys
            or "next" in keys
            or tensordict.batch_size != self._bs
            or self.run_type_checks
        ):
            return super().step(tensordict)
        return tensordict.set("next", self._step(tensordict))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        partial = tensordict.get("_step", None)
        if partial is not None and not bool(partial.all()):  # host-ok: "_step" is rare
            raise ValueError("TorchRLEnv: partial steps ('_step') are not supported; all "
                             "envs step together")
        action = tensordict.get("action")
        if self._one_hot:
            action = self._one_hot_index(action)
        with held(self.gp_env):  # until the env's buffers are read
            td = self.gp_env.step(action)
            if self._views[0] is not td:  # a new output TensorDict (a bare env keeps one)
                views = [("observation", td["final_observation"])]
                views += [(k, td[k].unsqueeze(-1)) for k in self._keys]  # TorchRL's shapes
                if self._priv:
                    views.append((PRIVILEGED, td[PRIVILEGED]))
                # (td, ((key, view), ...), done), no nn.Module bookkeeping (rebound per step)
                self.__dict__["_views"] = (td, tuple(views), td["done"])
            # a fresh copy of every entry: TorchRL keeps what it is given (rollouts stack them)
            out = {key: src.clone() for key, src in self._views[1]}
            self._stepped[0] = True  # the done mask is read at the next reset
        return TensorDict(out, batch_size=self._bs, device=self._dev, non_blocking=False)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None:
            n = self.batch_size[0]
            check_tensor("TorchRLEnv: '_reset'", mask, "a bool", lambda t: t.dtype == torch.bool,
                         ((n, 1), (n,)), self._dev)
            mask = mask.reshape(n)
        auto = self._autoreset
        with held(self.gp_env):  # until the env's buffers are read
            if mask is None:
                td = self.gp_env.reset()
                auto.zero_()
            else:
                if self._stepped[0]:  # the envs the last step reset (the env has not run since)
                    auto.copy_(self._views[2])
                # the other masked envs run the reset kernel; the output buffer keeps the
                # observations the step's auto-reset wrote for the envs it reset
                td = self.gp_env.reset(mask & ~auto)
                auto &= ~mask
            obs = td["observation"].clone()
            priv = td[PRIVILEGED].clone() if self._priv else None
            self._stepped[0] = False
        # zero episode statistics and done flags, in their spec shapes
        out = self.full_observation_spec.zero().update(self.full_done_spec.zero())
        if priv is not None:
            out.set(PRIVILEGED, priv)
        return out.set("observation", obs)

    def _one_hot_index(self, action) -> torch.Tensor:
        """The index of each row's 1; ``k`` (outside the action space) for a row that is
        not one-hot (see ``action_encoding``)."""
        n, k = self.batch_size[0], self.action_spec.shape[-1]
        check_tensor("TorchRLEnv: one-hot action", action, "a 0/1 integer, bool or float",
                     lambda t: not t.is_complex(), ((n, k),), self._dev)
        if action.dtype == torch.bool:
            action = action.to(torch.uint8)
        # exact comparisons: a float row is one-hot when its entries are exactly 0 and 1 (NaN
        # is neither); its sum is then exact too
        one_hot = (action.sum(-1) == 1) & ((action == 0) | (action == 1)).all(-1)
        check = self.run_type_checks or getattr(self.gp_env, "validate_actions", False)
        if check and not bool(one_hot.all()):  # host-ok: validate_actions / run_type_checks
            rows = torch.nonzero(~one_hot).flatten()[:4].tolist()  # host-ok: raising
            raise ValueError(
                f"TorchRLEnv: one-hot action expected exactly one 1 and {k - 1} zeros "
                f"per env, got rows {[action[i].tolist() for i in rows]} for envs {rows}"
            )
        return torch.where(one_hot, action.argmax(-1), k)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self.gp_env.reset(seed=env_seed(seed))
            self._autoreset.zero_()
            self._stepped[0] = False


class ObsNormTransform(Transform):
    """A TorchRL ``Transform`` that normalizes observations with a ``gp.ObsNorm``.

    Args:
        norm: the ``ObsNorm`` (per-group statistics, ``reset_stats(mask)``); a submodule, so
            ``state_dict`` and ``.to(device)`` reach it.
        in_keys: observation keys to normalize (default ``["observation"]``); every key is
            a float32 tensor ``[N, *norm.shape]`` on the norm's device.
        out_keys: where the results go (default: in place of ``in_keys``).

    ``step`` merges the next observations (the true next states: ``TorchRLEnv`` returns
    pre-reset observations) into the statistics, then normalizes them; ``reset`` and
    ``forward`` (e.g. on stored data) only normalize. Over a ``TorchRLEnv`` the norm is
    attached to its parameters: a write to a ``norm.reset_on`` parameter resets the written
    envs' groups; writes made during a step (reset-time randomization) take effect after
    that step's update, as in gpuparam's own ``TransformedEnv``. Updates follow the norm's
    own mode (``norm.freeze()`` or ``norm.eval()``), see ``train``.
    """

    def __init__(
        self,
        norm: ObsNorm,
        in_keys: Sequence | None = None,
        out_keys: Sequence | None = None,
    ):
        if not isinstance(norm, ObsNorm):
            raise TypeError(f"ObsNormTransform: expected a gp.ObsNorm, got {type(norm).__name__}")
        in_keys = ["observation"] if in_keys is None else list(in_keys)
        super().__init__(in_keys=in_keys, out_keys=in_keys if out_keys is None else out_keys)
        self.norm = norm
        self._attached, self._stepping = False, False
        self._deferred: torch.Tensor | None = None  # envs whose reset_on params changed in step

    def train(self, mode: bool = True) -> ObsNormTransform:
        """Set this module's mode only: TorchRL puts every transform in eval mode, and the
        norm keeps its own."""
        self.training = mode
        return self

    def reset_stats(self, mask: torch.Tensor | None = None, *, groups=None) -> None:
        """``norm.reset_stats(mask, groups=groups)``: ``mask`` bool ``[N]`` on the norm's
        device, ``groups`` bool ``[G]`` or long ``[K]``; either may be ``None``."""
        self.norm.reset_stats(mask, groups=groups)

    def _attach(self) -> None:
        parent = None if self._attached else self.parent
        if parent is None:  # attached already, or not inside an env (yet)
            return
        self._attached = True
        base = parent.base_env
        while isinstance(base, TransformedEnv):
            base = base.base_env
        if isinstance(base, TorchRLEnv):
            self.norm.to(base.device)
            self.norm.attach(base.gp_env, listen=False)  # we listen: to defer within steps
            if self.norm.reset_on:
                n = base.batch_size[0]
                self._deferred = torch.zeros(n, dtype=torch.bool, device=base.device)
                # not told of checkpoint loads: statistics and env load in either order
                base.params.on_change(self._on_param_change, loads=False)
        elif self.norm.reset_on:
            raise ValueError("ObsNormTransform: reset_on needs a TorchRLEnv as base env, "
                             f"got {type(base).__name__}")

    def _on_param_change(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """``params.on_change`` callback: reset now, or after the running step's update.
        Device work only within a step: that part of the step may be a captured graph whose
        replays repeat this work, not this Python."""
        if not any(n in self.norm.reset_on for n in names):
            return
        if self._stepping:
            self._deferred.logical_or_(True if mask is None else mask)
        else:
            self.norm.reset_stats(mask)

    def _flush(self) -> None:
        """Attach (once), then end the running step: the resets it deferred run now."""
        self._attach()
        self._stepping = False
        if self._deferred is not None:  # a device mask, all False unless a step wrote
            self.norm.reset_stats(self._deferred.clone())
            self._deferred.zero_()

    def _normalize(self, td: TensorDictBase, update: bool) -> TensorDictBase:
        for k_in, k_out in zip(self.in_keys, self.out_keys, strict=True):
            x = td.get(k_in)
            td.set(k_out, self.norm(x) if update else self.norm.normalize(x))
        return td

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        # runs right before the base env steps: hold reset_on resets until the update
        self._flush()
        self._stepping = True
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        self._attach()
        try:
            return self._normalize(next_tensordict, update=True)
        finally:
            self._flush()

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase):
        self._flush()
        return self._normalize(tensordict_reset, update=False)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Normalize ``in_keys`` of ``tensordict`` (batch ``[N]``) without updating."""
        return self._normalize(tensordict, update=False)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for k_in, k_out in zip(self.in_keys, self.out_keys, strict=True):
            spec = observation_spec[k_in]
            observation_spec[k_out] = Unbounded(shape=spec.shape, dtype=spec.dtype,
                                                device=spec.device)
        return observation_spec
