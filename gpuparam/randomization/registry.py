"""The registry of distributions and triggers: an integer id per ``Term`` class (and a
name) and per ``Trigger`` class, and the ``randomize`` kernel that dispatches on those ids.

A ``Term`` subclass that sets ``dist`` in its body registers itself when it is defined
(``Term.__init_subclass__``): its name is the one configs use
(``gp.randomization_from_config``), its id (the next free one: the built-ins take 0-3)
the one its ``TermRow.dist`` holds. Warp kernels cannot call Python objects, so the kernel
is generated from the registry: ``kernel(ids)`` builds (once per set of draws, cached here
and, compiled, on disk by Warp) a ``kernels.randomize.make_randomize`` kernel whose
dispatch is unrolled over the built-ins' ``draw`` functions and those of ``ids`` (the
distributions a launch's terms use). Envs that use only the built-ins keep the
built-ins' kernel when a new distribution is registered; a term of a new one builds (and
the first time compiles) a kernel that has it. Triggers likewise: a ``Trigger`` subclass
that sets ``due`` registers itself (ids from 1; 0 is ``PLAIN``), its ``due`` and
``fired`` unrolled in the kernel.
"""

from __future__ import annotations

from collections.abc import Iterable

import warp as wp

from gpuparam.kernels import randomize as kernels_randomize

_classes: list[type] = []  # id -> Term class
_triggers: list[type] = []  # id - 1 -> Trigger class (id 0: PLAIN, no test)
_kernels: dict[tuple, wp.Kernel] = {}


def register(cls: type) -> int:
    """Add the ``Term`` subclass ``cls`` (its ``dist`` name, ``draw`` and ``table``) and
    return its id. A class re-defined with the same module and qualified name (a module
    reloaded, a notebook cell run again) replaces the earlier one under the same id;
    another class under a taken name raises ``ValueError``."""
    name, draw = cls.dist, cls.draw
    where = f"{cls.__module__}.{cls.__qualname__}"
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{where}: dist must be a name (an identifier), got {name!r}")
    if not isinstance(draw, wp.Function):
        raise TypeError(f"{where}: draw must be a @wp.func (h: wp.uint32, a: float, b: float) "
                        f"-> float, got {type(draw).__name__}")
    for i, old in enumerate(_classes):
        if old.dist != name:
            continue
        if (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"{where}: distribution name {name!r} is taken by "
                             f"{old.__module__}.{old.__qualname__}")
        _classes[i] = cls
        return i
    _classes.append(cls)
    return len(_classes) - 1


def dist_id(name: str) -> int:
    """The id of the distribution named ``name`` (a term's ``dist``; ``KeyError`` if none
    is registered under it)."""
    for i, c in enumerate(_classes):
        if c.dist == name:
            return i
    raise KeyError(f"{name!r}: not a registered distribution; registered: "
                   f"{', '.join(c.dist for c in _classes)}")


def distributions() -> dict[str, type]:
    """``{name: Term class}`` of every registered distribution, in id order."""
    return {c.dist: c for c in _classes}


def by_name(name: str) -> type | None:
    """The registered ``Term`` class named ``name``, or None."""
    return distributions().get(name)


def register_trigger(cls: type) -> int:
    """Add the ``Trigger`` subclass ``cls`` (its ``due`` and ``fired``) and return its id
    (``TermRow.trigger``; 1-3 are the built-ins'); re-definitions replace as ``register``."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    for f in ("due", "fired"):
        if not isinstance(getattr(cls, f), wp.Function):
            raise TypeError(f"{where}: {f} must be a @wp.func, got "
                            f"{type(getattr(cls, f)).__name__}")
    if cls.launch not in ("step", "reset"):
        raise ValueError(f"{where}: launch must be 'step' or 'reset', got {cls.launch!r}")
    for i, old in enumerate(_triggers):
        if (old.__module__, old.__qualname__) == (cls.__module__, cls.__qualname__):
            _triggers[i] = cls
            return i + 1
    _triggers.append(cls)
    return len(_triggers)


def trigger_id(cls: type) -> int:
    """The id of a registered ``Trigger`` class or of its nearest registered base."""
    for base in cls.__mro__:
        for i, c in enumerate(_triggers):
            if c is base:
                return i + 1
    raise KeyError(f"{cls.__qualname__}: not a registered trigger (a Trigger subclass "
                   "setting due)")


def kernel(ids: Iterable[int], trigger_ids: Iterable[int] = ()) -> wp.Kernel:
    """The ``randomize`` kernel handling the built-in distributions and triggers and those
    of ``ids`` / ``trigger_ids`` (the ones a launch's terms use): one kernel for every env
    that uses only built-ins, and a distribution that does not build breaks only the
    launches that use it."""
    dists = sorted(set(range(kernels_randomize.CHOICE + 1)) | set(ids))
    trigs = sorted(set(range(1, kernels_randomize.MIN_STEPS + 1)) | set(trigger_ids) - {0})
    entries = tuple((i, _classes[i].draw, bool(_classes[i].table)) for i in dists)
    trig = tuple((i, _triggers[i - 1].due, _triggers[i - 1].fired) for i in trigs)
    k = _kernels.get((entries, trig))
    if k is None:
        ranged = tuple((i, d) for i, d, table in entries if not table)
        tables = tuple((i, d) for i, d, table in entries if table)
        k = kernels_randomize.make_randomize(ranged, tables, trig)
        _kernels[(entries, trig)] = k
    return k
