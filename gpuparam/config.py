"""IsaacGymEnvs-style randomization configs (a dict, e.g. loaded from YAML) to terms."""

from __future__ import annotations

from collections.abc import Mapping

from gpuparam.randomization import registry
from gpuparam.randomization.terms import Linear, OnReset, Step, Term

_OPS = {"additive": "add", "scaling": "scale", "add": "add", "scale": "scale", "set": "set"}
_ENTRY_KEYS = {
    "range", "distribution", "operation", "schedule", "schedule_steps", "frequency",
    "setup_only", "num_buckets", "on",
}


def randomization_from_config(config: Mapping) -> list[Term]:
    """Terms for an IsaacGymEnvs randomization config, mapped entry by entry as the table in
    ``docs/randomization.md`` ("IsaacGymEnvs configs") says: every mapping holding a
    ``range`` (nested under groups or not) is an entry named by its key, its
    ``distribution``, ``operation``, ``schedule``, ``frequency``, ``setup_only`` and ``on``
    the term's class, ``op``, schedule (from "no change": 0 for add, 1 for scale) and
    trigger. A ``gaussian`` range is ``[mean, std]`` (IsaacGymEnvs names it var but samples
    with it as the std).

    Args:
        config: the ``randomization_params`` dict, or a dict holding it under that key.

    Returns a list of terms; add them with ``env.randomize(*terms)``, which checks the
    parameter names and ranges. Raises ``ValueError`` for unknown entry keys and entries
    gpuparam does not map (``observations``/``actions`` noise belongs in a transform)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"randomization_from_config: expected a dict, got {type(config).__name__}")
    if "randomization_params" in config:
        config = config["randomization_params"]
    frequency = config.get("frequency")
    return [_entry(name, e, frequency, path) for name, e, path in _entries(config, ())]


def _entries(node: Mapping, path: tuple[str, ...]):
    """``(name, entry, path)`` of every mapping holding a ``range``, depth first."""
    for key, value in node.items():
        if key == "frequency" and not path:
            continue
        if key in ("observations", "actions") and not path:
            raise ValueError(
                f"randomization_from_config: {key!r} is noise on data, not a parameter; "
                "use a transform"
            )
        sub = (*path, str(key))
        if isinstance(value, Mapping):
            if "range" in value:
                yield str(key), value, sub
            else:
                yield from _entries(value, sub)
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value):
            raise ValueError(
                f"randomization_from_config: {'.'.join(sub)}: expected a mapping (a group of "
                f"entries keyed by parameter name, or an entry with 'range'), got a list; write "
                f"the group as a dict so that no entry is dropped"
            )


def _entry(name: str, e: Mapping, frequency, path: tuple[str, ...]) -> Term:
    where = f"randomization_from_config: {'.'.join(path)}"
    unknown = set(e) - _ENTRY_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(_ENTRY_KEYS)}")
    picked = []
    # every registered distribution of a range (not Choice): the built-ins' names and
    # those of the distributions added (their constructor takes ``(param, a, b, ...)``)
    dists = {name: c for name, c in registry.distributions().items() if not c.table}
    for key, table in (("distribution", dists), ("operation", _OPS)):
        if key not in e:
            raise ValueError(f"{where}: missing {key!r}")
        if e[key] not in table:
            raise ValueError(f"{where}: {key} must be one of {list(table)}, got {e[key]!r}")
        picked.append(table[e[key]])
    dist, op = picked
    rng = e["range"]
    if not isinstance(rng, (list, tuple)) or len(rng) != 2:
        raise ValueError(f"{where}: range must be [low, high] or [mean, std], got {rng!r}")
    rng = tuple(tuple(v) if isinstance(v, list) else v for v in rng)
    setup_only, freq = e.get("setup_only", False), e.get("frequency", frequency)
    if not isinstance(setup_only, bool):
        raise ValueError(
            f"{where}: setup_only expected true or false (a YAML bool), got {setup_only!r}"
        )
    if setup_only or "on" in e:
        on = "startup" if setup_only else e["on"]
    elif freq is not None and (not isinstance(freq, int) or isinstance(freq, bool) or freq < 0):
        raise ValueError(f"{where}: frequency must be an int >= 0, got {freq!r}")
    else:
        on = "reset" if freq in (None, 0, 1) else OnReset(min_steps=freq)
    kw = dict(op=op, on=on, name=f"{dist.__name__}({name!r} from {'.'.join(path)})")
    kind = e.get("schedule")
    if kind is None:
        return dist(name, *rng, **kw)
    steps = e.get("schedule_steps")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{where}: schedule {kind!r} needs schedule_steps >= 1, got {steps!r}")
    if op == "set":
        raise ValueError(f"{where}: a schedule needs operation additive or scaling")
    if kind not in ("linear", "constant"):
        raise ValueError(f"{where}: schedule must be 'linear' or 'constant', got {kind!r}")
    unit = 0.0 if op == "add" else 1.0
    # "no change": add 0, scale by 1 (a Gaussian: mean 0 or 1, std 0)
    still = dist.constant(unit)
    if kind == "linear":
        return dist(name, schedule=Linear(still, rng, steps), **kw)
    return dist(name, schedule=Step([still, rng], at=[steps]), **kw)
