"""Checkpoints of an env (``EnvCheckpoint``, behind ``env.state_dict``, ``load_state_dict``
and ``check_state_dict``): a state dict is checked whole before any of it is written.

One :func:`check_like` compares the saved dict with a template of the target's live buffers
(keys, list lengths, strings, ints, tensor dtypes and shapes; tensors dense and holding data,
on any device, so every copy of the load succeeds once the checks have); then the values,
as ``docs/checkpoints.md`` lists them (the physical state and outputs may hold NaN), and the
settings that define the env's model (``VecEnv.model_config``). Loads copy under
``torch.no_grad()``. Host code: it synchronizes.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping

import torch

from gpuparam._checks import check_max_episode_steps


def _fail(path: str, expected: str, got: object) -> None:
    raise ValueError(f"load_state_dict: {path}: expected {expected}, got {got}")


def _describe(v: object) -> str:
    """``v`` in a few words: a dict by its keys, a long value cut (an error message must
    not hold a whole state dict)."""
    if isinstance(v, torch.Tensor):
        return f"a {v.dtype} tensor {tuple(v.shape)}"
    kind = state_kind(v)
    if kind is not None:
        return kind
    if isinstance(v, Mapping):
        keys = sorted(map(str, v))
        return f"a dict with keys {keys[:12]}{' ...' if len(keys) > 12 else ''}"
    text = repr(v)
    return f"{text if len(text) <= 120 else text[:120] + ' ...'} ({type(v).__name__})"


def state_kind(state: object) -> str | None:
    """What a state dict holds, with the call that loads it, or None for anything else:
    an env's ``state_dict()``, a ``TransformedEnv``'s or a normalization module's (a file of
    one kind given to the load of another is named, not dumped, in the error)."""
    if not isinstance(state, Mapping):
        return None
    if set(state) == {"env", "transforms"} and isinstance(state["env"], Mapping):
        ts = state["transforms"]
        n = f"{len(ts)} transform{'' if len(ts) == 1 else 's'}" if isinstance(
            ts, (list, tuple)) else "its transforms"
        return (f"a TransformedEnv's state (the state of a {_env_name(state['env'])} env and "
                f"the statistics of {n}; load it with TransformedEnv(env, "
                "*transforms).load / load_state_dict, or its 'env' entry alone with "
                "env.load_state_dict(state['env']))")
    if isinstance(state.get("env"), str) and "tensors" in state:
        return (f"the state of a {_env_name(state)} env (env.state_dict(); load it with "
                "env.load / env.load_state_dict, tenv.env.load_state_dict under a "
                "TransformedEnv)")
    if {"count", "mean", "m2"} <= set(state):
        return ("the statistics of a normalization module (load them with ObsNorm / "
                "RewardNorm.load / load_state_dict)")
    return None


def _env_name(state: Mapping) -> str:
    name = state.get("env")
    return repr(name) if isinstance(name, str) else "gpuparam"


def check_like(saved: object, template: object, path: str = "state") -> None:
    """Raise ``ValueError`` naming the first place where ``saved`` differs from ``template``
    (a template entry of no type below, e.g. ``object()``, accepts any value)."""
    if isinstance(template, torch.Tensor):
        if (not isinstance(saved, torch.Tensor) or saved.dtype != template.dtype
                or saved.shape != template.shape):
            _fail(path, f"a {template.dtype} tensor {tuple(template.shape)}", _describe(saved))
        if saved.layout != torch.strided:  # a tensor the load's copy can read
            _fail(path, "a dense (strided) tensor", f"a {saved.layout} tensor")
        if saved.is_meta:
            _fail(path, "a tensor holding data", "a tensor on the meta device (no data)")
    elif isinstance(template, Mapping):
        if not isinstance(saved, Mapping):
            _fail(path, "a dict", _describe(saved))
        missing = [k for k in template if k not in saved]
        extra = [k for k in saved if k not in template]
        if missing or extra:
            _fail(path, f"keys {sorted(map(str, template))}",
                  f"missing {missing}, unexpected {extra}")
        for k, v in template.items():
            check_like(saved[k], v, f"{path}.{k}")
    elif isinstance(template, tuple) and all(isinstance(v, str) for v in template):
        if not isinstance(saved, (tuple, list)) or tuple(saved) != template:
            _fail(path, repr(template), _describe(saved))
    elif isinstance(template, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(template):
            _fail(path, f"a list of {len(template)}", _describe(saved))
        for i, (s, t) in enumerate(zip(saved, template, strict=True)):
            check_like(s, t, f"{path}[{i}]")
    elif isinstance(template, bool) or template is None or isinstance(template, str):
        if type(saved) is not type(template) or (isinstance(template, str) and saved != template):
            _fail(path, repr(template), _describe(saved))
    elif isinstance(template, numbers.Real):  # an int template wants an int
        kind = numbers.Integral if isinstance(template, numbers.Integral) else numbers.Real
        if isinstance(saved, bool) or not isinstance(saved, kind):
            _fail(path, "an int" if kind is numbers.Integral else "a number", _describe(saved))


def check_finite(t: torch.Tensor, path: str) -> None:
    """``t`` (floating point) holds no NaN or inf."""
    if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):  # host-ok
        _fail(path, "finite values", "NaN or inf")


def check_range(t: torch.Tensor, path: str, low: int = 0, high: int | None = None) -> None:
    """``t`` holds values ``>= low`` (and ``<= high`` when given): counters, ring slots."""
    bad = (t < low) if high is None else (t < low) | (t > high)
    if t.numel() and bool(bad.any()):  # host-ok: checkpoint loading
        _fail(path, f"values >= {low}" if high is None else f"values in [{low}, {high}]",
              f"[{t.min().item()}, {t.max().item()}]")  # host-ok: error path


def check_param_tables(state: Mapping, params, path: str = "params") -> None:
    """Both ``[C, N]`` tables finite and, row by row, inside the spec range of the
    parameter component the row holds (structure checked by :func:`check_like`)."""
    for key in ("nominal", "effective"):
        t = state[key]
        check_finite(t, f"{path}.{key}")
        for name in params.names:
            spec = params.spec[name]
            c0, size = params.columns(name)
            rows = t[c0 : c0 + size]
            # the bounds as the float32 tables hold them (1e-4 is 9.9999997e-05 there)
            low, high = torch.tensor((spec.low, spec.high), dtype=t.dtype, device=t.device)
            if bool(((rows < low) | (rows > high)).any()):
                lo, hi = rows.min().item(), rows.max().item()  # host-ok: error path
                _fail(f"{path}.{key} of {name!r}", f"values in [{spec.low}, {spec.high}]",
                      f"[{lo}, {hi}]")
            bad = spec.invalid(rows.T)  # whole numbers, (low, high) pairs
            if bool(bad.any()):
                _fail(f"{path}.{key} of {name!r}", spec.requirement,
                      rows.T[bad][0].tolist())  # host-ok: error path


def check_randomization(state: Mapping, path: str = "randomization") -> None:
    """Counters, clocks, ranges, uids and the global step of a randomization state."""
    step = state["global_step"]
    if step < 0:
        _fail(f"{path}.global_step", "an int >= 0", step)
    uids = [s["uid"] for s in state["terms"]]
    if any(u < 0 for u in uids) or len(set(uids)) != len(uids):
        _fail(f"{path} uids", "distinct ints >= 0", uids)
    if uids and max(uids) >= state["next_uid"]:
        _fail(f"{path}.next_uid", f"an int > {max(uids)}", state["next_uid"])
    check_range(state["clamped_removed"], f"{path}.clamped_removed")
    for i, s in enumerate(state["terms"]):
        where = f"{path}.terms[{i}] ({s['name']})"
        for key in ("counter", "clamped"):
            check_range(s[key], f"{where}.{key}")
        for key in ("clock", "vals", "pe"):
            if s[key] is not None:
                check_finite(s[key], f"{where}.{key}")


def check_curriculum(state: Mapping, num_levels: int, path: str = "curriculum") -> None:
    """Levels inside ``[0, num_levels)``, ADR sums finite and counts non-negative."""
    if state["num_levels"] != num_levels:
        _fail(f"{path}.num_levels", str(num_levels), state["num_levels"])
    levels = state["levels"]
    if levels.numel() and (bool((levels < 0).any())  # host-ok: checkpoint loading
                           or bool((levels >= num_levels).any())):  # host-ok
        _fail(f"{path}.levels", f"levels in [0, {num_levels})",
              f"[{levels.min().item()}, {levels.max().item()}]")  # host-ok: error path
    check_finite(state["adr_sums"], f"{path}.adr_sums")
    check_range(state["adr_counts"], f"{path}.adr_counts")


def _plain(v: object) -> object:
    """``v`` with lists as tuples (a saved tuple may come back as a list), or None unless
    ``v`` is made of strings, numbers, bools, None, lists and tuples."""
    if isinstance(v, (list, tuple)):
        items = tuple(_plain(x) for x in v)
        return (None if any(x is None and y is not None for x, y in zip(items, v, strict=True))
                     else items)
    return v if v is None or isinstance(v, (str, numbers.Real)) else None


def check_config(saved: object, config: Mapping, path: str = "config") -> None:
    """The settings that define the env's model (``VecEnv.model_config``) equal the saved
    ones, every one of them."""
    check_like(saved, {k: object() for k in config}, path)  # a dict of the same keys
    for key, want in config.items():
        got, want = _plain(saved[key]), _plain(want)
        if got is None and saved[key] is not None:
            _fail(f"{path}.{key}", repr(want), _describe(saved[key]))
        if got != want:
            raise ValueError(
                f"load_state_dict: {path}.{key}: expected {want!r} (this env's {key}, a "
                f"setting that defines its model), got {got!r} (the checkpoint's env was "
                f"built with it); build the env with {key}={got!r} to load this checkpoint")


_OWN = object()  # a template entry checked by its owner (randomization, a curriculum)
_HALF_DONE = ("a half-done step would not continue as the run does (counters and schedules "
              "advance at its end)")


class EnvCheckpoint:
    """``state_dict`` / ``load_state_dict`` / ``check_state_dict`` of one env (an object
    every ``VecEnv`` owns). ``lock``: the env's ``EnvLock`` (a save or load is one call on
    the env); ``check_not_stepping(what, why)``: raises ``RuntimeError`` from inside a step."""

    def __init__(self, env, lock, check_not_stepping: Callable[[str, str], None]):
        self._env = env
        self._lock = lock
        self._check_not_stepping = check_not_stepping

    def _tensors(self) -> dict[str, torch.Tensor]:
        ctx = self._env.context
        return {
            **{k if k == "state" else f"state.{k}": v for k, v in self._env.backend.state.items()},
            "step_count": ctx.step_count, "episode_count": ctx.episode_count,
            "running_return": ctx.running_return, "action": ctx.action, **ctx.outputs,
        }

    def state_dict(self) -> dict[str, object]:
        """``env.state_dict()``: seed, parameters (nominal and effective), state, counters,
        output buffers, randomization and curricula (``docs/checkpoints.md``; clones, this
        rank's envs; normalization statistics are saved by their modules). Synchronizes.
        Refused (``RuntimeError``) from inside a step (a half-done step would not continue
        as the run does) and while another thread's call on the env runs."""
        self._check_not_stepping("state_dict (or save): called", _HALF_DONE)
        with self._lock.call("save"):
            env = self._env
            state = {
                "env": env.name, "num_envs": env.num_envs, "env_offset": env.env_offset,
                "seed": env.seed,
                # settable at any time (SB3's set_attr): saved with the counters it truncates
                "max_episode_steps": env.max_episode_steps,
                "params": env.params.state_dict(),
                "tensors": {k: v.clone() for k, v in self._tensors().items()},
                "randomization": env.randomization.state_dict(),
                "curricula": [c.state_dict() for c in env.curricula],
            }
            if env.model_config():  # an env without such settings saves none
                state["config"] = dict(env.model_config())
            return state

    def check(self, state: object) -> dict:
        """Every check of :meth:`load_state_dict`, writing nothing; raises ``ValueError``
        naming the entry, what was expected and what was got. Returns ``state``."""
        env, params = self._env, self._env.params
        if not isinstance(state, Mapping):
            _fail("state", "a dict from env.state_dict()", _describe(state))
        if "tensors" not in state and state_kind(state) is not None:  # another kind of file
            _fail("state", f"the state of a {env.name!r} env (env.state_dict(), env.save)",
                  state_kind(state))
        for key, want in (("env", env.name), ("num_envs", env.num_envs)):
            if key in state and state[key] != want:
                _fail(key, repr(want), _describe(state[key]))
        config = env.model_config()
        if config and "config" in state:
            check_config(state["config"], config)
        if isinstance(state.get("curricula"), (list, tuple)):
            if len(state["curricula"]) != len(env.curricula):
                _fail("curricula", f"{len(env.curricula)} saved curricula (one per "
                      "curriculum added to this env)", len(state["curricula"]))
        # the structure (keys, types, tensor dtypes and shapes) of the target's own state
        template = {
            "env": env.name, "num_envs": 0, "env_offset": 0, "seed": 0, "max_episode_steps": 0,
            "params": {"names": params.names, "nominal": params.nominal_table,
                       "effective": params.effective_table},
            "tensors": self._tensors(), "randomization": _OWN,
            "curricula": [_OWN] * len(env.curricula),
        }
        if config:
            template["config"] = _OWN
        check_like(state, template)
        if not -(2**31) <= state["seed"] < 2**31:
            _fail("seed", "an int32 value", state["seed"])
        check_param_tables(state["params"], params)
        for key in ("step_count", "episode_count", "episode_length"):
            check_range(state["tensors"][key], f"tensors.{key}")
        for key, (low, high) in env.backend.state_bounds.items():  # ring slots, counters
            t = state["tensors"][key if key == "state" else f"state.{key}"]
            check_range(t, f"tensors.state.{key}", low, high)
        saved_offset = state["env_offset"]
        if saved_offset != env.env_offset:
            n, off = env.num_envs, env.env_offset
            raise ValueError(
                f"load_state_dict: the checkpoint holds global envs {saved_offset}.."
                f"{saved_offset + n - 1} (env_offset {saved_offset}), this env holds "
                f"{off}..{off + n - 1} (env_offset {off}): load each rank's checkpoint on "
                "the same rank of the same world size (resharding is not supported)"
            )
        check_max_episode_steps(state["max_episode_steps"], "load_state_dict: ")
        env.randomization.check_state(state["randomization"])
        for cur, s in zip(env.curricula, state["curricula"], strict=True):
            cur.check_state(s)
        return state

    def load_state_dict(self, state: dict) -> None:
        """``env.load_state_dict(state)``: a ``state_dict()`` of an env of the same kind,
        size and ``env_offset`` holding the same terms and curricula (add them first),
        checked whole first (:meth:`check`): a rejected load raises ``ValueError`` and
        changes nothing. Synchronizes; refused as :meth:`state_dict` is."""
        self._check_not_stepping("load_state_dict", _HALF_DONE)
        with self._lock.call("load"):
            self.check(state)
            env = self._env
            with torch.no_grad():  # a saved tensor requiring grad must not attach the buffers
                env.restore_seed(int(state["seed"]))
                env.max_episode_steps = int(state["max_episode_steps"])
                env.params.load_state_dict(state["params"])
                for k, t in self._tensors().items():
                    t.copy_(state["tensors"][k])
                env.randomization.load_state_dict(state["randomization"])
                for cur, s in zip(env.curricula, state["curricula"], strict=True):
                    cur.load_state_dict(s)
