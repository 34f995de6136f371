"""IsaacGymEnvs-style randomization configs (a dict, e.g. loaded from YAML) to terms.

The mapping is tabled in ``docs/randomization.md`` ("IsaacGymEnvs configs"): each
distribution to its term (a ``gaussian`` range is ``[mean, std]``: IsaacGymEnvs names it
var but samples with it as the std), ``additive``/``scaling`` to ``op="add"``/``"scale"``
on the nominal value (``set`` too), ``schedule: linear``/``constant`` to ``gp.Linear`` /
``gp.Step`` from "no change" (0 for add, 1 for scale), ``frequency: k`` to
``gp.OnReset(min_steps=k)`` (none: ``on="reset"``), ``setup_only`` to ``on="startup"``,
``on: step`` (a gpuparam extension) to ``on="step"``; ``num_buckets`` is ignored.
Entries may be nested under groups: every mapping holding a ``range`` is an entry named by
its key. ``observations``/``actions`` (noise on data) and unknown entry keys raise
``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuparam.randomization.terms import (
    Gaussian,
    Linear,
    LogUniform,
    OnReset,
    Step,
    Term,
    Uniform,
)

_DISTS = {"uniform": Uniform, "loguniform": LogUniform, "gaussian": Gaussian}
_OPS = {"additive": "add", "scaling": "scale", "add": "add", "scale": "scale", "set": "set"}
_ENTRY_KEYS = {
    "range", "distribution", "operation", "schedule", "schedule_steps", "frequency",
    "setup_only", "num_buckets", "on",
}


def randomization_from_config(config: Mapping) -> list[Term]:
    """Terms for an IsaacGymEnvs randomization config; see the module docstring for the
    mapping.

    Args:
        config: the ``randomization_params`` dict, or a dict holding it under that key.

    Returns a list of terms; add them with ``env.randomize(*terms)``, which checks the
    parameter names and ranges. Raises ``ValueError`` for entries gpuparam does not map
    (``observations``/``actions`` noise belongs in a transform)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"randomization_from_config: expected a dict, got {type(config).__name__}")
    if "randomization_params" in config:
        config = config["randomization_params"]
    frequency = config.get("frequency")
    terms: list[Term] = []
    _walk(config, frequency, terms, path=())
    return terms


def _walk(node: Mapping, frequency, terms: list[Term], path: tuple[str, ...]) -> None:
    for key, value in node.items():
        if key == "frequency" and not path:
            continue
        if key in ("observations", "actions") and not path:
            raise ValueError(
                f"randomization_from_config: {key!r} is noise on data, not a parameter; "
                "use a transform"
            )
        if isinstance(value, Mapping):
            if "range" in value:
                terms.append(_entry(str(key), value, frequency, (*path, str(key))))
            else:
                _walk(value, frequency, terms, (*path, str(key)))
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value):
            where = ".".join((*path, str(key)))
            raise ValueError(
                f"randomization_from_config: {where}: expected a mapping (a group of entries "
                f"keyed by parameter name, or an entry with 'range'), got a list; write the "
                f"group as a dict so that no entry is dropped"
            )


def _entry(name: str, e: Mapping, frequency, path: tuple[str, ...]) -> Term:
    where = f"randomization_from_config: {'.'.join(path)}"
    unknown = set(e) - _ENTRY_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(_ENTRY_KEYS)}")
    for key in ("distribution", "operation"):
        if key not in e:
            raise ValueError(f"{where}: missing {key!r}")
    dist = _DISTS.get(e["distribution"])
    if dist is None:
        raise ValueError(f"{where}: distribution must be one of {list(_DISTS)}, "
                         f"got {e['distribution']!r}")
    op = _OPS.get(e["operation"])
    if op is None:
        raise ValueError(f"{where}: operation must be one of {list(_OPS)}, got {e['operation']!r}")
    rng = e["range"]
    if not isinstance(rng, (list, tuple)) or len(rng) != 2:
        raise ValueError(f"{where}: range must be [low, high] or [mean, std], got {rng!r}")
    rng = tuple(tuple(v) if isinstance(v, list) else v for v in rng)
    on = _trigger(e, frequency, where)
    schedule = _schedule(e, rng, dist, op, where)
    kw = dict(op=op, on=on, name=f"{dist.__name__}({name!r} from {'.'.join(path)})")
    if schedule is not None:
        return dist(name, schedule=schedule, **kw)
    return dist(name, *rng, **kw)


def _trigger(e: Mapping, frequency, where: str):
    setup_only = e.get("setup_only", False)
    if not isinstance(setup_only, bool):
        raise ValueError(
            f"{where}: setup_only expected true or false (a YAML bool), got {setup_only!r}"
        )
    if setup_only:
        return "startup"
    if "on" in e:
        return e["on"]
    freq = e.get("frequency", frequency)
    if freq is not None and (not isinstance(freq, int) or isinstance(freq, bool) or freq < 0):
        raise ValueError(f"{where}: frequency must be an int >= 0, got {freq!r}")
    if freq is None or freq in (0, 1):
        return "reset"
    return OnReset(min_steps=freq)


def _schedule(e: Mapping, rng, dist, op: str, where: str):
    kind = e.get("schedule")
    if kind is None:
        return None
    steps = e.get("schedule_steps")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{where}: schedule {kind!r} needs schedule_steps >= 1, got {steps!r}")
    if op == "set":
        raise ValueError(f"{where}: a schedule needs operation additive or scaling")
    unit = 0.0 if op == "add" else 1.0
    # "no change": add 0, scale by 1 (a Gaussian: mean 0 or 1, std 0)
    still = (unit, 0.0) if dist is Gaussian else (unit, unit)
    if kind == "linear":
        return Linear(still, rng, steps)
    if kind == "constant":
        return Step([still, rng], at=[steps])
    raise ValueError(f"{where}: schedule must be 'linear' or 'constant', got {kind!r}")
