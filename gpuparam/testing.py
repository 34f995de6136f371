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

# the operations, and how often each is drawn relative to a step
WEIGHTS = {"step": 10, "set": 3, "reset": 2, "term": 1, "hook": 1, "reset_stats": 1,
           "roundtrip": 1, "push": 1, "adapter": 1}
OPS = tuple(WEIGHTS)


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
    unknown = [k for k in kinds if k not in OPS]
    if unknown:
        raise ValueError(f"random_ops: kinds expected names in {OPS}, got {unknown}")
    rng = random.Random(seed)
    kinds = ["step", *(k for k in kinds if k != "step")]
    weights = [WEIGHTS[k] for k in kinds]
    ops, n = [Op("step", rng.getrandbits(31)), Op("step", rng.getrandbits(31))], 2
    while n < steps:
        ops.append(Op(rng.choices(kinds, weights)[0], rng.getrandbits(31)))
        n += ops[-1].kind == "step"
    return ops


class _Side:
    """One of the two envs (captured or eager), wrapped with an ``ObsNorm`` and a
    ``RewardNorm`` in two groups of envs, and what was added to it."""

    def __init__(self, env, norms: bool):
        self.env = self.tenv = env
        self.norms = ()
        self.out: Mapping | None = None
        self.adapter = None  # rsl_rl's adapter, once an "adapter" op wrapped the env
        if norms:
            groups = torch.arange(env.num_envs, device=env.device) % 2
            self.norms = (ObsNorm(tuple(env.observation_spec.shape), group_ids=groups,
                                  clip=10.0),
                          RewardNorm(gamma=0.99, group_ids=groups))
            self.tenv = TransformedEnv(env, *self.norms)

    def state(self) -> dict:
        return {"env": self.env.state_dict(),
                **{f"norm{i}": dict(m.state_dict()) for i, m in enumerate(self.norms)}}


def _mask(n: int, g: torch.Generator, device) -> torch.Tensor:
    return (torch.rand(n, generator=g) < 0.5).to(device)


def _action(env, g: torch.Generator) -> torch.Tensor:
    spec, shape = env.action_spec, (env.num_envs, *env.action_spec.shape)
    if isinstance(spec, DiscreteSpec):
        return torch.randint(0, spec.n, shape, generator=g).to(env.device)
    # (the spec's bounds are host numbers: these are CPU tensors, as the generator's)
    low, high = (torch.as_tensor(b, dtype=torch.float32).clamp(-1.0, 1.0)
                 for b in (spec.low, spec.high))
    return (low + (high - low) * torch.rand(shape, generator=g)).to(env.device)


def _param_name(env, rng: random.Random) -> str:
    """A parameter to write or randomize: half the time one a recompute listens to (model
    fields: masses, frictions, ...), when the env has such."""
    names = list(env.params.names)
    listened = (*getattr(env, "recompute_on", ()),
                *getattr(getattr(env, "backend", None), "recompute_on", ()))
    model = [n for n in names if n in listened]
    return rng.choice(model if model and rng.random() < 0.5 else names)


def _values(env, name: str, g: torch.Generator, rows: int) -> torch.Tensor:
    """``rows`` values of ``name`` near its default (x0.8 .. x1.25, or a tenth of the
    range around 0), inside its range."""
    spec = env.params.spec[name]
    default = torch.as_tensor(spec.default, dtype=torch.float32).expand(spec.shape)
    u = torch.rand((rows, *spec.shape), generator=g)
    around0 = spec.low + (spec.high - spec.low) * (0.45 + 0.1 * u)
    v = torch.where(default != 0, default * (0.8 + 0.45 * u), around0)
    return v.clamp(spec.low, spec.high).to(env.device)


def _apply(side: _Side, op: Op) -> None:
    """Run ``op`` on one env; both envs draw the same choices from ``op.seed``."""
    env, tenv, n, dev = side.env, side.tenv, side.env.num_envs, side.env.device
    rng, g = random.Random(op.seed), torch.Generator().manual_seed(op.seed)
    if op.kind == "step" and side.adapter is not None:
        actions = torch.rand((n, side.adapter.num_actions), generator=g) * 2 - 1
        obs, rew, dones, _ = side.adapter.step(actions.to(dev))
        side.out = {**{f"obs/{k}": v for k, v in obs.items()}, "rewards": rew, "dones": dones}
    elif op.kind == "step":
        side.out = tenv.step(_action(env, g))
    elif op.kind == "set":
        name = _param_name(env, rng)
        how = rng.choice(("mask", "mask", "all", "env_ids"))
        if how == "env_ids":
            ids = torch.randperm(n, generator=g)[: rng.randint(1, n)].to(dev)
            env.params.set(name, _values(env, name, g, len(ids)), env_ids=ids)
        else:
            env.params.set(name, _values(env, name, g, n),
                           mask=_mask(n, g, dev) if how == "mask" else None)
    elif op.kind == "reset":
        tenv.reset(None if rng.random() < 0.2 else _mask(n, g, dev))
    elif op.kind == "term":
        name = _param_name(env, rng)
        on = rng.choice(("reset", "step", Every(rng.randint(1, 4)), Interval(0.01, 0.05),
                         OnReset(rng.randint(1, 3)), "startup"))
        term, a, b, how = rng.choice(((Uniform, 0.9, 1.1, "scale"),
                                      (LogUniform, 0.9, 1.1, "scale"),
                                      (Gaussian, 0.0, 0.01, "add")))
        env.randomize(term(name, a, b, op=how, on=on))
    elif op.kind == "hook":
        kind = rng.choice(("python", "torch", "warp"))
        where = rng.choice((env.before_step, env.after_step))
        k = rng.choice((0.5, 2.0, -1.0))
        if kind == "warp":
            reward = wp.from_torch(env.hook_outputs["reward"])

            def hook(env, td):
                wp.launch(kepisode.scale, dim=n, inputs=[k], outputs=[reward],
                          stream=env.context.stream, device=reward.device)
        else:
            def hook(env, td):
                td["reward"].mul_(k)
        where(hook, kind=kind)
    elif op.kind == "reset_stats" and side.norms:
        mask = _mask(n, g, dev)
        for m in side.norms:
            m.reset_stats(mask)
    elif op.kind == "roundtrip":
        tenv.load_state_dict(tenv.state_dict())
    elif op.kind == "adapter" and side.adapter is None and side.out is not None:
        try:
            from gpuparam.integrations.rsl_rl import RslRlVecEnv
        except ImportError:  # rsl_rl is an extra: the op does nothing without it
            return
        side.adapter = RslRlVecEnv(tenv)  # (resets every env)
    elif op.kind == "push" and getattr(env, "add_event", None) is not None:
        from gpuparam.envs.mujoco import Push

        every = rng.choice((Every(rng.randint(1, 3)), rng.randint(1, 3)))
        env.add_event(Push([(-0.3, 0.3)] * min(2, env.backend.m.nv), every=every))


def _flat(x: object, prefix: str = "") -> dict[str, object]:
    """Nested mappings (and lists of tensors or mappings) as one ``{"a/b[0]": leaf}``."""
    if isinstance(x, Mapping):
        items = [(f"{prefix}/{k}" if prefix else str(k), v) for k, v in x.items()]
    elif isinstance(x, (list, tuple)) and any(isinstance(v, (torch.Tensor, Mapping)) for v in x):
        items = [(f"{prefix}[{i}]", v) for i, v in enumerate(x)]
    else:
        return {prefix: x}
    return {key: leaf for p, v in items for key, leaf in _flat(v, p).items()}


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a 2-D tensor, a row per entry of its first dimension (a scalar: one row)."""
    t = t.detach().contiguous()
    return t.flatten(1) if t.dim() > 1 else t.reshape(-1, 1)


def _compare(what: str, a: Mapping[str, object], b: Mapping[str, object]) -> int:
    """Compare two flat mappings bit for bit; the number of tensors compared."""
    if a.keys() != b.keys():
        raise CaptureMismatch(f"{what}: keys differ: captured only {sorted(a.keys() - b.keys())}"
                              f", eager only {sorted(b.keys() - a.keys())}")
    count = 0
    for key, x in a.items():
        y = b[key]
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            if x != y:
                raise CaptureMismatch(f"{what}: {key}: captured {x!r}, eager {y!r}")
            continue
        count += 1
        if x.shape != y.shape or x.dtype != y.dtype:
            raise CaptureMismatch(f"{what}: {key}: captured {tuple(x.shape)} {x.dtype}, "
                                  f"eager {tuple(y.shape)} {y.dtype}")
        x, y = _rows(x), _rows(y)
        differ = (x.view(torch.uint8) != y.view(torch.uint8)).any(1)
        if bool(differ.any()):  # host-ok: the harness compares between steps
            rows = differ.nonzero().flatten()[:8].tolist()  # host-ok: error path
            got, want = x[rows[0]].tolist(), y[rows[0]].tolist()  # host-ok: error path
            raise CaptureMismatch(f"{what}: {key} differs at rows {rows}: captured {got}, "
                                  f"eager {want}")
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
    cap, eager = sides = (_Side(make_env(True), norms), _Side(make_env(False), norms))
    if not cap.env.pipeline.capture_enabled or eager.env.pipeline.capture_enabled:
        raise ValueError("check_capture: make_env(True) must build a captured env and "
                         "make_env(False) an eager one (pass capture through)")
    replayed = compared = 0
    for i, op in enumerate(ops):
        was_captured, what = cap.env.pipeline.captured, f"op {i} {op}"
        errors = [None, None]
        for j, side in enumerate(sides):
            try:
                _apply(side, op)
            except Exception as e:  # compared below: both envs must agree on it
                errors[j] = e
        if type(errors[0]) is not type(errors[1]):
            raise CaptureMismatch(f"{what}: captured raised {errors[0]!r}, eager raised "
                                  f"{errors[1]!r}") from errors[0] or errors[1]
        if op.kind == "step":
            replayed += was_captured and cap.env.pipeline.captured
            compared += _compare(what, _flat(dict(cap.out.items())),
                                 _flat(dict(eager.out.items())))
        compared += _compare(what, *({n: s.env.params[n] for n in s.env.params.names}
                                     for s in sides))
    compared += _compare("final state", _flat(cap.state()), _flat(eager.state()))
    if replayed == 0:
        raise CaptureMismatch("check_capture: no step was replayed from a capture (each op "
                              "dropped it, or the env never captured): nothing was proven")
    return CaptureReport(ops, replayed, cap.env.pipeline.captures, compared)


__all__ = ["OPS", "CaptureMismatch", "CaptureReport", "Op", "check_capture", "random_ops"]
