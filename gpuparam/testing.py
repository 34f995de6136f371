"""Captured against eager, checked from outside: the differential harness of the step
contract (``docs/pipeline.md``, "The capture contract").

:func:`check_capture` builds an env twice, once captured (the default) and once eager
(``capture=False``), drives both through the same random sequence of public operations
(actions, masked and whole parameter writes, masked resets, randomization terms at every
trigger, pushes, hooks of every kind, ``reset_stats(mask)`` of an ``ObsNorm`` and a
``RewardNorm``, state round trips) and compares every output, every parameter and the
final state bit for bit. A custom env gets the same proof::

    from gpuparam.testing import check_capture
    check_capture(lambda capture: MyEnv(64, device="cpu", capture=capture), steps=32)

Host code, for tests and checks: nothing here is on any step path.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import warp as wp

from gpuparam.kernels import episode as kepisode
from gpuparam.randomization.terms import Every, Gaussian, Interval, LogUniform, OnReset, Uniform
from gpuparam.spec import DiscreteSpec
from gpuparam.transforms import ObsNorm, RewardNorm, TransformedEnv

OPS = ("step", "set", "reset", "term", "hook", "reset_stats", "roundtrip", "push", "adapter")
# how often each operation is drawn, relative to a step
WEIGHTS = {"step": 10, "set": 3, "reset": 2, "term": 1, "hook": 1, "reset_stats": 1,
           "roundtrip": 1, "push": 1, "adapter": 1}
HOOK_KINDS = ("python", "torch", "warp")


class CaptureMismatch(AssertionError):
    """The captured env and the eager one disagreed: the message names the operation (its
    index in the sequence and what it was) and the first tensor that differs."""


@dataclass(frozen=True)
class Op:
    """One public operation of the sequence: ``kind`` (one of :data:`OPS`) and ``seed``,
    from which every choice it makes (values, masks, names, triggers) is drawn, the same
    for both envs."""

    kind: str
    seed: int

    def __post_init__(self) -> None:
        if self.kind not in OPS:
            raise ValueError(f"Op: kind expected one of {OPS}, got {self.kind!r}")


@dataclass(frozen=True)
class CaptureReport:
    """What :func:`check_capture` ran: the operations, the steps replayed from a capture
    (each one compared with an eager step), the captures made and the tensors compared."""

    ops: tuple[Op, ...]
    replayed_steps: int
    captures: int
    compared: int


def random_ops(steps: int, seed: int = 0, kinds: Sequence[str] = OPS) -> list[Op]:
    """A random sequence with ``steps`` steps and, between them, other operations of
    ``kinds`` (drawn by :data:`WEIGHTS`); it starts with two steps (the eager warm-up and
    the capture)."""
    rng = random.Random(seed)
    others = [k for k in kinds if k != "step"]
    ops, n = [Op("step", rng.getrandbits(31)), Op("step", rng.getrandbits(31))], 2
    weights = [WEIGHTS[k] for k in ["step", *others]]
    while n < steps:
        kind = rng.choices(["step", *others], weights)[0]
        ops.append(Op(kind, rng.getrandbits(31)))
        n += kind == "step"
    return ops


class _Side:
    """One of the two envs (captured or eager), wrapped with an ``ObsNorm`` and a
    ``RewardNorm`` in two groups of envs, and what was added to it."""

    def __init__(self, env, norms: bool):
        self.env, self.norms = env, ()
        n, dev = env.num_envs, env.device
        self.tenv = env
        if norms:
            groups = (torch.arange(n, device=dev) % 2).long()
            self.norms = (ObsNorm(tuple(env.observation_spec.shape), group_ids=groups,
                                  clip=10.0),
                          RewardNorm(gamma=0.99, group_ids=groups))
            self.tenv = TransformedEnv(env, *self.norms)
        self.out: Mapping | None = None
        self.adapter = None  # rsl_rl's adapter, once an "adapter" op wrapped the env

    def state(self) -> dict:
        state = {"env": self.env.state_dict()}
        for i, m in enumerate(self.norms):
            state[f"norm{i}"] = dict(m.state_dict())
        return state


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mask(n: int, g: torch.Generator, device) -> torch.Tensor:
    return (torch.rand(n, generator=g) < 0.5).to(device)


def _action(env, g: torch.Generator) -> torch.Tensor:
    spec, n = env.action_spec, env.num_envs
    if isinstance(spec, DiscreteSpec):
        a = torch.randint(0, spec.n, (n, *spec.shape), generator=g)
    else:
        # (the spec's bounds are host numbers: these are CPU tensors, as the generator's)
        low = torch.as_tensor(spec.low, dtype=torch.float32).clamp(-1.0, 1.0)
        high = torch.as_tensor(spec.high, dtype=torch.float32).clamp(-1.0, 1.0)
        a = low + (high - low) * torch.rand((n, *spec.shape), generator=g)
    return a.to(env.device)


def _param_name(env, rng: random.Random) -> str:
    """A parameter to write or randomize: half the time one a recompute listens to (model
    fields: masses, frictions, ...), when the env has such."""
    names = list(env.params.names)
    model = [n for n in names if n in tuple(getattr(env, "recompute_on", ()))
             + tuple(getattr(getattr(env, "backend", None), "recompute_on", ()))]
    return rng.choice(model if model and rng.random() < 0.5 else names)


def _values(env, name: str, g: torch.Generator, rows: int) -> torch.Tensor:
    """``rows`` values of ``name`` near its default (x0.8 .. x1.25, or a tenth of the
    range around 0), inside its range."""
    spec = env.params.spec[name]
    default = torch.as_tensor(spec.default, dtype=torch.float32).expand(spec.shape)
    u = torch.rand((rows, *spec.shape), generator=g)
    scaled = default * (0.8 + 0.45 * u)
    around0 = spec.low + (spec.high - spec.low) * (0.45 + 0.1 * u)
    v = torch.where(default != 0, scaled, around0)
    return v.clamp(spec.low, spec.high).to(env.device)


def _apply(side: _Side, op: Op) -> None:
    """Run ``op`` on one env; both envs draw the same choices from ``op.seed``."""
    env, tenv = side.env, side.tenv
    rng, g, n, dev = random.Random(op.seed), _gen(op.seed), env.num_envs, env.device
    if op.kind == "step" and side.adapter is not None:
        actions = torch.rand((n, side.adapter.num_actions), generator=g) * 2 - 1
        obs, rew, dones, _ = side.adapter.step(actions.to(dev))
        side.out = {**{f"obs/{k}": v for k, v in obs.items()}, "rewards": rew, "dones": dones}
    elif op.kind == "step":
        side.out = tenv.step(_action(env, g))
    elif op.kind == "set":
        name = _param_name(env, rng)
        how = rng.choice(("mask", "mask", "all", "env_ids"))
        if how == "all":
            env.params.set(name, _values(env, name, g, n))
        elif how == "mask":
            env.params.set(name, _values(env, name, g, n), mask=_mask(n, g, dev))
        else:
            ids = torch.randperm(n, generator=g)[: rng.randint(1, n)].to(dev)
            env.params.set(name, _values(env, name, g, len(ids)), env_ids=ids)
    elif op.kind == "reset":
        tenv.reset(None if rng.random() < 0.2 else _mask(n, g, dev))
    elif op.kind == "term":
        name = _param_name(env, rng)
        on = rng.choice(("reset", "step", Every(rng.randint(1, 4)), Interval(0.01, 0.05),
                         OnReset(rng.randint(1, 3)), "startup"))
        term = rng.choice((
            lambda: Uniform(name, 0.9, 1.1, op="scale", on=on),
            lambda: LogUniform(name, 0.9, 1.1, op="scale", on=on),
            lambda: Gaussian(name, 0.0, 0.01, op="add", on=on),
        ))()
        env.randomize(term)
    elif op.kind == "hook":
        kind = rng.choice(HOOK_KINDS)
        where = rng.choice((env.before_step, env.after_step))
        k = rng.choice((0.5, 2.0, -1.0))
        if kind == "python":
            def hook(env, td):
                td["reward"].add_(k)
        elif kind == "torch":
            def hook(env, td):
                td["reward"].mul_(k)
        else:
            reward = wp.from_torch(env.hook_outputs["reward"])

            def hook(env, td):
                wp.launch(kepisode.scale, dim=n, inputs=[k], outputs=[reward],
                          stream=env.context.stream, device=reward.device)
        where(hook, kind=kind)
    elif op.kind == "reset_stats":
        if side.norms:
            mask = _mask(n, g, dev)
            for m in side.norms:
                m.reset_stats(mask)
    elif op.kind == "roundtrip":
        tenv.load_state_dict(tenv.state_dict())
    elif op.kind == "adapter":
        if side.adapter is None and side.out is not None:
            try:
                from gpuparam.integrations.rsl_rl import RslRlVecEnv
            except ImportError:  # rsl_rl is an extra: the op does nothing without it
                return
            side.adapter = RslRlVecEnv(tenv)  # (resets every env)
    elif op.kind == "push":
        add_event = getattr(env, "add_event", None)
        if add_event is not None:
            from gpuparam.envs.mujoco import Push

            dofs = min(2, env.backend.m.nv)
            every = rng.choice((Every(rng.randint(1, 3)), rng.randint(1, 3)))
            add_event(Push([(-0.3, 0.3)] * dofs, every=every))


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().contiguous()
    return t.view(torch.uint8) if t.dim() and t.numel() else t.reshape(-1).view(torch.uint8)


def _flat(x: object, prefix: str = "") -> dict[str, object]:
    if isinstance(x, Mapping):
        out = {}
        for k, v in x.items():
            out.update(_flat(v, f"{prefix}/{k}" if prefix else str(k)))
        return out
    if isinstance(x, (list, tuple)) and any(isinstance(v, (torch.Tensor, Mapping)) for v in x):
        out = {}
        for i, v in enumerate(x):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: x}


def _compare(what: str, a: Mapping[str, object], b: Mapping[str, object]) -> int:
    """Compare two flat mappings bit for bit; the number of tensors compared."""
    if a.keys() != b.keys():
        raise CaptureMismatch(f"{what}: keys differ: captured only {sorted(a.keys() - b.keys())}"
                              f", eager only {sorted(b.keys() - a.keys())}")
    count = 0
    for key, x in a.items():
        y = b[key]
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            count += 1
            if x.shape != y.shape or x.dtype != y.dtype:
                raise CaptureMismatch(f"{what}: {key}: captured {tuple(x.shape)} {x.dtype}, "
                                      f"eager {tuple(y.shape)} {y.dtype}")
            if not torch.equal(_bits(x), _bits(y)):
                diff = (_bits(x).reshape(x.shape[0], -1) != _bits(y).reshape(y.shape[0], -1)
                        ).any(-1) if x.dim() else torch.ones(1, dtype=torch.bool)
                # host-ok: the harness's error path, between steps
                rows = torch.arange(diff.shape[0])[diff.cpu()].tolist()[:8]  # host-ok
                got, want = (t.reshape(t.shape[0], -1)[rows[0]].tolist() if t.dim()  # host-ok
                             else t.item() for t in (x, y))  # host-ok: error path
                raise CaptureMismatch(f"{what}: {key} differs at rows {rows}: captured {got}, "
                                      f"eager {want}")
        elif x != y:
            raise CaptureMismatch(f"{what}: {key}: captured {x!r}, eager {y!r}")
    return count


def check_capture(
    make_env: Callable[[bool], object],
    *,
    steps: int = 32,
    seed: int = 0,
    ops: Sequence[Op] | None = None,
    kinds: Sequence[str] = OPS,
    norms: bool = True,
) -> CaptureReport:
    """Prove that a captured env steps exactly as an eager one, bit for bit.

    Args:
        make_env: ``make_env(capture)`` builds the env (a ``gp.VecEnv``) with that
            ``capture`` argument; called twice, with True and False, each build the same
            otherwise (same ``num_envs``, device, seed and settings).
        steps: env steps in the random sequence (ignored when ``ops`` is given).
        seed: seed of the random sequence (:func:`random_ops`).
        ops: the sequence to run instead of a random one (e.g. drawn by hypothesis).
        kinds: the operations a random sequence draws from (default all of :data:`OPS`;
            ``"push"`` only acts on robots; ``"adapter"`` wraps rsl_rl's adapter once, when
            ``rsl_rl`` is installed, and later steps go through it).
        norms: wrap both envs in a ``TransformedEnv`` with an ``ObsNorm`` and a
            ``RewardNorm`` (two groups of envs), so normalization and ``reset_stats`` are
            checked too.

    Every operation runs on the captured env, then on the eager one; an error raised by
    one must be raised by the other (same type). After each, the latest step's outputs
    (every key) and every parameter are compared bit for bit; at the end, the whole
    ``state_dict()`` of both envs and their normalizers.

    Returns:
        a :class:`CaptureReport`. Raises :class:`CaptureMismatch` naming the first
        operation and tensor that differ, or when no step was replayed from a capture (a
        check of nothing).
    """
    if not callable(make_env):
        raise TypeError(f"check_capture: make_env expected a callable make_env(capture), "
                        f"got {make_env!r}")
    if ops is None:
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 3:
            raise ValueError(f"check_capture: steps expected an int >= 3 (a warm-up, a "
                             f"capture and a replay), got {steps!r}")
        ops = random_ops(steps, seed, kinds)
    ops = tuple(ops)
    for op in ops:
        if not isinstance(op, Op):
            raise TypeError(f"check_capture: ops expected gp.testing.Op items, got {op!r}")
    sides = [_Side(make_env(True), norms), _Side(make_env(False), norms)]
    cap, eager = sides
    if not cap.env.pipeline.capture_enabled or eager.env.pipeline.capture_enabled:
        raise ValueError("check_capture: make_env(True) must build a captured env and "
                         "make_env(False) an eager one (pass capture through)")
    replayed = compared = 0
    for i, op in enumerate(ops):
        was_captured = cap.env.pipeline.captured
        errors = []
        for side in sides:
            try:
                _apply(side, op)
                errors.append(None)
            except Exception as e:  # compared below: both envs must agree on it
                errors.append(e)
        what = f"op {i} {op}"
        if type(errors[0]) is not type(errors[1]):
            raise CaptureMismatch(f"{what}: captured raised {errors[0]!r}, eager raised "
                                  f"{errors[1]!r}") from errors[0] or errors[1]
        if op.kind == "step":
            replayed += was_captured and cap.env.pipeline.captured
            compared += _compare(what, _flat(dict(cap.out.items())),
                                 _flat(dict(eager.out.items())))
        compared += _compare(what, {n: cap.env.params[n] for n in cap.env.params.names},
                             {n: eager.env.params[n] for n in eager.env.params.names})
    compared += _compare("final state", _flat(cap.state()), _flat(eager.state()))
    if replayed == 0:
        raise CaptureMismatch("check_capture: no step was replayed from a capture (each op "
                              "dropped it, or the env never captured): nothing was proven")
    return CaptureReport(ops, replayed, cap.env.pipeline.captures, compared)


__all__ = ["OPS", "CaptureMismatch", "CaptureReport", "Op", "check_capture", "random_ops"]
