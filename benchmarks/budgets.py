"""What a GPU will pay per step, counted on any device: launches, graph segments, bytes.

For six subjects (bare CartPole; CartPole with 3 step-time terms, ObsNorm and RewardNorm;
Ant-v5 with 3 step-time physical terms; Go1 bare and with a reset-time or a step-time
``body_mass`` term) one eager step in steady state is recorded: every Warp launch
(``wp.launch``/``wp.launch_tiled``, and each replay of a launch bound once,
``gpuparam._launch.BoundLaunch``), split into gpuparam's own kernels and MuJoCo Warp's
(counted as launched by an eager CPU step: its solver's loop then runs its iterations from
the host; work behind a ``wp.capture_if`` counted when its flag is set, as a replay runs
it), and the bytes of the arrays each of gpuparam's launches takes, per env (each array
counted once per launch, at its full size: an upper bound of the traffic, since a kernel
may read part of an array). A captured step replays exactly these launches, in the
segments of ``env.pipeline.plan``: a GPU pays one graph launch per Warp segment.

These counts are device-independent: they must not grow (``tests/benchmarks`` holds the
limits).
"""

from __future__ import annotations

from functools import partial

import torch
import warp as wp
from torch.utils._python_dispatch import TorchDispatchMode  # (documented: "Extending PyTorch")

import gpuparam as gp
from benchmarks.config import randomization_terms
from gpuparam._launch import BoundLaunch

N = 64  # small: the counts per env do not depend on N


def _nbytes(args) -> int:
    """Bytes of the distinct Warp arrays among ``args``, the arrays held by a Warp struct
    argument's fields included (an array of structs counts its own bytes only)."""
    seen, total, todo = set(), 0, list(args)
    while todo:
        x = todo.pop()
        if wp.types.is_struct(x):
            todo += [v for k, v in vars(x).items() if not k.startswith("_")]
        elif isinstance(x, wp.array) and x.ptr is not None and x.ptr not in seen:
            seen.add(x.ptr)
            total += x.size * wp.types.type_size_in_bytes(x.dtype)
    return total


class _Recorder:
    """Records the kernels launched while active (the public launch functions wrapped)."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, int]] = []  # (module name, bytes of array arguments)

    def __enter__(self) -> _Recorder:
        def launch(fn):
            def rec(kernel, *a, **k):
                if not k.get("record_cmd"):  # (recorded, not launched: a BoundLaunch bound)
                    arrays = [*k.get("inputs", ()), *k.get("outputs", ())]
                    arrays += [x for arg in a if isinstance(arg, (list, tuple)) for x in arg]
                    self.launches.append((kernel.module.name, _nbytes(arrays)))
                return fn(kernel, *a, **k)

            return rec

        def replay(fn):
            def rec(r, *a, **k):  # a launch bound once (gpuparam._launch.BoundLaunch)
                self.launches.append((r.cmd.kernel.module.name, _nbytes(r.args)))
                return fn(r, *a, **k)

            return rec

        patches = [(wp, "launch", launch), (wp, "launch_tiled", launch),
                   (BoundLaunch, "launch", replay)]  # (launch_in and __call__ call launch)
        self._saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
        for owner, name, wrap in patches:
            setattr(owner, name, wrap(getattr(owner, name)))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, fn in self._saved:
            setattr(owner, name, fn)


def count_launches(step, env, reset_step: bool = False) -> dict:
    """The counts of one steady-state call of ``step()`` on ``env`` (see the module's
    docstring): ``launches``, ``physics_launches``, ``graph_segments``, ... ;
    ``reset_step``: also the launches of a step at which every env resets
    (``"launches_at_reset_step"``, ours and MuJoCo Warp's)."""
    step()  # steady state: the first steps build, warm up and capture
    step()
    with _Recorder() as rec:
        step()
    ours = [b for m, b in rec.launches if m.startswith("gpuparam")]
    theirs = [m for m, _ in rec.launches if not m.startswith("gpuparam")]
    plan = env.pipeline.plan
    out = {
        "launches": len(ours),
        "physics_launches": len(theirs),
        "graph_segments": sum(1 for kind, _ in plan if kind == "warp"),
        "eager_segments": sum(1 for kind, _ in plan if kind != "warp"),
        "plan": [[kind, list(names)] for kind, names in plan],
        "argument_bytes_per_env": sum(ours) / env.num_envs,
    }
    if reset_step:
        env.episode_length = env.max_episode_steps - 1  # every env truncates next step
        with _Recorder() as rec:
            step()
        out["launches_at_reset_step"] = len(rec.launches)
    return out


def _eager(name: str, *terms, norms: bool = False, **kw) -> dict:
    """The counts of an eager ``name`` env of N envs with ``terms`` (and ``ObsNorm`` +
    ``RewardNorm`` with ``norms``), stepped with a fixed action; Go1's with a reset step."""
    env = gp.make(name, N, device="cpu", seed=0, capture=False, **kw)
    if terms:
        env.randomize(*terms)
    stepped = gp.TransformedEnv(env, gp.ObsNorm((4,)), gp.RewardNorm()) if norms else env
    a = torch.ones(N, dtype=torch.int64) if name == "CartPole-v1" else torch.zeros(N, env.mjm.nu)
    return count_launches(lambda: stepped.step(a), env, reset_step=name.startswith("Go1"))


def _go1(*terms, gating: str = "mask") -> dict:
    return _eager("Go1JoystickFlatTerrain-v1", *terms, gating=gating)


def go1_bare(gating: str = "mask") -> dict:
    """Go1 without terms (``gating``: the robot env's option; ``"mask"`` runs the reset's
    ``forward`` at every step, ``"graph"`` only at steps where an env resets)."""
    return _go1(gating=gating)


def go1_reset_mass(gating: str = "mask") -> dict:
    """Go1 with a reset-time ``body_mass`` term: a copy at every step and the masked
    recompute of the derived constants (one launch per ``"model_writes"`` stage), issue 41."""
    return _go1(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="reset"), gating=gating)


def go1_step_mass() -> dict:
    """Go1 with a step-time ``body_mass`` term: every world's constants recomputed at every
    step (one masked launch)."""
    return _go1(gp.Uniform("body_mass", 0.9, 1.1, op="scale", on="step"))


class _TorchWork(TorchDispatchMode):
    """Counts the torch ops run while active that do device work (every op but views and
    aliases: ``OpOverload.is_view``), and host reads of device values
    (``aten._local_scalar_dense``: ``.item()``, ``bool()``, ``int()``; a sync on CUDA)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[str] = []
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name() == "aten::_local_scalar_dense":
            self.reads += 1
        elif not func.is_view:
            self.kernels.append(str(func))
        return func(*args, **(kwargs or {}))


def count_device_work(fn) -> dict:
    """``fn()``'s device work, counted on any device: ``warp_launches`` (as ``_Recorder``),
    ``torch_kernels`` (torch ops that are not views, by name in ``torch_ops``), their sum
    ``kernels``, and ``host_reads`` (reads of device values, each a host sync on CUDA)."""
    with _Recorder() as rec, _TorchWork() as tw:
        fn()
    return {"warp_launches": len(rec.launches), "torch_kernels": len(tw.kernels),
            "kernels": len(rec.launches) + len(tw.kernels), "host_reads": tw.reads,
            "torch_ops": tw.kernels}


def masked_writes() -> dict:
    """Device work per call of the masked writes of ``benchmarks.host_time.write_calls``
    (CartPole-v1, N=64, device tensor masks; ``set``: a Python number; ``_tensor``: a device
    tensor with ``validate=False``; ``_tensor_validated``: validated, one flag read),
    counted at a steady-state call (the launches bound and the mask seen before)."""
    from benchmarks.host_time import NUM_MASKS, write_calls

    fns = write_calls("cpu", N)[0]
    out = {}
    for name, fn in fns.items():
        for i in range(2 * NUM_MASKS):  # steady state: every mask seen twice
            fn(i)
        out[name] = count_device_work(lambda f=fn: f(1))
    return out


SUBJECTS = {  # name: a function returning its counts (count_launches)
    "CartPole bare": partial(_eager, "CartPole-v1"),
    "CartPole rand3(step)+ObsNorm+RewardNorm": lambda: _eager(
        "CartPole-v1", *randomization_terms("step"), norms=True),
    "Ant-v5 rand3(step, physical)": lambda: _eager(
        "Ant-v5", gp.Uniform("geom_friction", 0.8, 1.2, op="scale", on="step"),
        gp.Uniform("dof_damping", 0.8, 1.2, op="scale", on="step"),
        gp.Uniform("actuator_gear", 0.9, 1.1, op="scale", on="step")),
    "Go1 bare": go1_bare,
    "Go1 body_mass(reset)": go1_reset_mass,
    "Go1 body_mass(step)": go1_step_mass,
}


def measure(cfg) -> dict:
    """Counts per subject (device-independent: measured on the CPU whatever ``cfg``)."""
    out: dict = {"num_envs": N, "subjects": {}}
    for name, fn in SUBJECTS.items():
        try:
            out["subjects"][name] = fn()
        except ImportError as e:  # the robots need gpuparam[mujoco]
            out["subjects"][name] = {"skipped": str(e)}
    try:
        out["masked_writes"] = masked_writes()
    except Exception as e:  # noqa: BLE001 (recorded, as attempt() does)
        out["masked_writes"] = {"error": f"{type(e).__name__}: {e}"}
    return out
