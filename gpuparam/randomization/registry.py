"""The registry of distributions and triggers: an integer id per ``Term`` class (and a
name) and per ``Trigger`` class, and the ``randomize`` kernel that dispatches on those ids.

A ``Term`` subclass that sets ``dist`` in its body registers itself when it is defined
(``Term.__init_subclass__``): its name is the one configs use
(``gp.randomization_from_config``), its id (the next free one: the built-ins take 0-3)
the one its ``TermRow.dist`` holds. A ``Trigger`` subclass that sets ``due`` registers
itself likewise (ids from 1; 0 is ``PLAIN``). Warp kernels cannot call Python objects, so
``kernel(ids, trigger_ids)`` builds (once per set, cached here and, compiled, on disk by
Warp) a ``kernels.randomize.make_randomize`` kernel whose dispatch is unrolled over the
built-ins and the classes a launch's terms use: envs that use only the built-ins keep the
built-ins' kernel when a new class is registered.
"""

from __future__ import annotations

from collections.abc import Iterable

import warp as wp

from gpuparam.kernels import randomize as kernels_randomize

_dists: dict[str, type] = {}  # name -> Term class, in id order
_triggers: dict[str, type] = {}  # qualified name -> Trigger class, in id order from 1
_kernels: dict[tuple, wp.Kernel] = {}


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register(cls: type) -> int:
    """Add the ``Term`` subclass ``cls`` (its ``dist`` name, ``draw`` and ``table``) and
    return its id. A class re-defined with the same module and qualified name (a module
    reloaded, a notebook cell run again) replaces the earlier one under the same id;
    another class under a taken name raises ``ValueError``."""
    name, where = cls.dist, _where(cls)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{where}: dist must be a name (an identifier), got {name!r}")
    if not isinstance(cls.draw, wp.Function):
        raise TypeError(f"{where}: draw must be a @wp.func (h: wp.uint32, a: float, b: float) "
                        f"-> float, got {type(cls.draw).__name__}")
    if name in _dists and _where(_dists[name]) != where:
        raise ValueError(f"{where}: distribution name {name!r} is taken by "
                         f"{_where(_dists[name])}")
    _dists[name] = cls  # a replaced class keeps its place
    return dist_id(name)


def dist_id(name: str) -> int:
    """The id of the distribution named ``name`` (a term's ``dist``; ``KeyError`` if none
    is registered under it)."""
    if name not in _dists:
        raise KeyError(f"{name!r}: not a registered distribution; registered: "
                       f"{', '.join(_dists)}")
    return list(_dists).index(name)


def distributions() -> dict[str, type]:
    """``{name: Term class}`` of every registered distribution, in id order."""
    return dict(_dists)


def register_trigger(cls: type) -> int:
    """Add the ``Trigger`` subclass ``cls`` (its ``due`` and ``fired``) and return its id
    (``TermRow.trigger``; 1-3 are the built-ins'); re-definitions replace as ``register``."""
    where = _where(cls)
    for f in ("due", "fired"):
        if not isinstance(getattr(cls, f), wp.Function):
            raise TypeError(f"{where}: {f} must be a @wp.func, got "
                            f"{type(getattr(cls, f)).__name__}")
    if cls.launch not in ("step", "reset"):
        raise ValueError(f"{where}: launch must be 'step' or 'reset', got {cls.launch!r}")
    _triggers[where] = cls
    return trigger_id(cls)


def trigger_id(cls: type) -> int:
    """The id of a registered ``Trigger`` class or of its nearest registered base."""
    for base in cls.__mro__:
        if _triggers.get(_where(base)) is base:
            return list(_triggers).index(_where(base)) + 1
    raise KeyError(f"{cls.__qualname__}: not a registered trigger (a Trigger subclass "
                   "setting due)")


def kernel(ids: Iterable[int], trigger_ids: Iterable[int] = ()) -> wp.Kernel:
    """The ``randomize`` kernel handling the built-in distributions and triggers and those
    of ``ids`` / ``trigger_ids`` (the ones a launch's terms use): one kernel for every env
    that uses only built-ins, and a distribution that does not build breaks only the
    launches that use it."""
    dists, trigs = list(_dists.values()), list(_triggers.values())
    ids = sorted(set(range(kernels_randomize.CHOICE + 1)) | set(ids))
    trigger_ids = sorted(set(range(1, kernels_randomize.MIN_STEPS + 1)) | set(trigger_ids) - {0})
    entries = tuple((i, dists[i].draw, bool(dists[i].table)) for i in ids)
    triggers = tuple((i, trigs[i - 1].due, trigs[i - 1].fired) for i in trigger_ids)
    key = (entries, triggers)
    if key not in _kernels:
        _kernels[key] = kernels_randomize.make_randomize(
            [(i, d) for i, d, table in entries if not table],
            [(i, d) for i, d, table in entries if table], triggers)
    return _kernels[key]
