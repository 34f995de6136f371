"""``env.randomization``: an env's terms, their device state (``bind``: checked against
the parameter specs when added), their device rows and their bound launches.

Terms are grouped by trigger class: ``"startup"`` (applied once, when added), the reset
class (``"reset"``, ``OnReset``) and the step class (``"step"``, ``Every``, ``Interval``).
Each class with terms is an array of ``kernels.randomize.TermRow`` and one bound launch
(the step class before the physics, the reset class after the curricula); a class without
terms launches nothing. Rows are rebuilt when the set of terms changes, never per step,
around per-term device state kept for the term's life, so the views handed out stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import warp as wp

from gpuparam._checkpoint import check_like, check_randomization
from gpuparam._checks import check_env_ids, check_mask, ids_to_mask
from gpuparam._device import host_array, settle, to_wp, wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.kernels import randomize as K
from gpuparam.randomization import registry
from gpuparam.randomization.terms import OP, Term, Trigger, check_result, range_tensor


@dataclass(eq=False)
class Bound:
    """A term bound to one env: its ``kernels.randomize.TermRow`` (``base``: constants and
    views of the tensors below, built once) and those tensors, each the like-named array of
    ``TermRow`` (``mask``, ``pe``: None for none) except ``values``: the ranges, or for a
    table distribution (``Choice``) its values then its cumulative probabilities
    (``TermRow.cdf``); ``nch``: a table's number of values (0: ranges)."""

    term: Term
    nch: int
    base: K.TermRow
    values: torch.Tensor
    steps: torch.Tensor
    mask: torch.Tensor | None
    counter: torch.Tensor
    clock: torch.Tensor
    clamped: torch.Tensor
    pe: torch.Tensor | None = None
    owner: object = None  # a curriculum using the term's ranges (blocks removal)

    def ranges(self) -> torch.Tensor:
        """Device view ``[nbp, size, 2]`` of the term's ranges (writable)."""
        if self.nch:
            raise ValueError(f"{self.term}: a Choice has values, not ranges")
        return self.values.view(-1, self.base.size, 2)

    def check(self, env, mask: torch.Tensor | None) -> None:
        """``check_result`` of the term's draws (its Choice values, or the ranges of every
        schedule breakpoint) for the envs of ``mask``."""
        if self.nch:
            vals = self.values[:self.nch * self.base.size].view(self.nch, -1, 1).expand(-1, -1, 2)
        else:
            vals = self.ranges()
        check_result(self.term, env.params, mask, vals.cpu())  # host-ok: setup

    def row(self) -> K.TermRow:
        """``base`` with the term's current mask and per-env ranges."""
        r = self.base
        r.mask = None if self.mask is None else to_wp(self.mask)
        r.pe = None if self.pe is None else to_wp(self.pe)
        return r


def bind(term: Term, env, uid: int) -> Bound:
    """Check ``term`` against ``env`` and allocate its device state (counters at 0, clocks
    ``RESTARTED``); raises ``KeyError`` for an unknown parameter and ``ValueError`` for
    anything else, naming the term and parameter. Runs when terms are added (never per
    step); it may synchronize with the host."""
    params, n, dev = env.params, env.num_envs, env.device
    if term.param not in params:
        raise KeyError(
            f"{term}: unknown parameter {term.param!r}; valid names: {', '.join(params.names)}"
        )
    spec = params.spec[term.param]
    col, size = params.columns(term.param)
    mask = select_envs(f"{term}: parameter {term.param!r}", env, term.mask, term.env_ids)
    steps, linear, nch = [0], False, 0
    if term.table:
        values, nch = term.tables(size)
    else:
        if term.schedule is not None:
            steps, _, kind = term.schedule.breakpoints()
            linear = kind == "linear"
        values = torch.stack([range_tensor(r, size, term) for r in term.ranges()]).reshape(-1)
    r = K.TermRow()
    r.dist, r.op, r.col, r.size = registry.dist_id(term.dist), OP[term.op], col, size
    r.uid, r.low, r.high, r.linear = uid, spec.low, spec.high, int(linear)
    r.trigger, r.dt_col, r.period_lo, r.period_hi = K.PLAIN, -1, 0.0, 0.0
    if isinstance(term.on, Trigger) and not term.on.plain():
        r.trigger = registry.trigger_id(type(term.on))
        r.dt_col, r.period_lo, r.period_hi = term.on.row(env)
    b = Bound(
        term=term, nch=nch, base=r, values=values.to(dev, torch.float32),
        steps=torch.tensor(steps, dtype=torch.int64, device=dev), mask=mask,
        counter=torch.zeros(n, dtype=torch.int32, device=dev),
        clock=torch.full((n,), K.RESTARTED, dtype=torch.float64, device=dev),
        clamped=torch.zeros(1, dtype=torch.int64, device=dev),
    )
    split = nch * size if nch else values.numel()
    r.ranges, r.steps = to_wp(b.values[:split]), to_wp(b.steps)
    r.cdf = to_wp(b.values[split:]) if nch else None
    r.counter, r.clock, r.clamped = to_wp(b.counter), to_wp(b.clock), to_wp(b.clamped)
    b.check(env, mask)
    return b


def select_envs(what: str, env, mask=None, env_ids=None) -> torch.Tensor | None:
    """``mask`` or ``env_ids`` as a bool tensor ``[N]`` on the env's device (a copy), or
    None for all envs; ``ValueError`` starting with ``what`` if they are malformed."""
    if mask is not None and env_ids is not None:
        raise ValueError(f"{what}: pass mask or env_ids, not both")
    try:
        if mask is not None:
            return check_mask(mask, env.num_envs, env.device, "mask").clone()
        if env_ids is not None:
            return ids_to_mask(check_env_ids(env_ids, env.num_envs, env.device), env.num_envs)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    return None


class Randomization:
    """The randomization terms of one env (``env.randomization``).

    Attributes:
        step_active, reset_active: whether the step / reset class has terms (and launches).
    """

    def __init__(self, env):
        self._env = env
        self._n, self._dev = env.num_envs, env.device
        self._bounds: dict[Term, Bound] = {}  # in the order added (= uid order): launch order
        self._next_uid = 0
        self._gstep = env.context.clock  # the env's global step (its clock stage ticks it)
        self._clamped_removed = torch.zeros((), dtype=torch.int64, device=self._dev)
        self._listeners: list[Callable[[], None]] = []
        self._changed = {c: torch.zeros(self._n, dtype=torch.bool, device=self._dev)
                         for c in ("step", "reset")}
        # "step", "done", "reset": (bound launch, parameters written, envs to notify)
        self._cmds: dict[str, tuple[BoundLaunch, tuple[str, ...], torch.Tensor | None]] = {}
        self.step_active = False
        self.reset_active = False

    # ------------------------------------------------------------------ terms
    @property
    def terms(self) -> tuple[Term, ...]:
        """The terms, in the order they were added."""
        return tuple(self._bounds)

    def add(self, *terms: Term) -> Callable[[], None]:
        """Bind and add ``terms``; returns a function removing them again.

        Every term is checked before anything changes: an unknown parameter raises
        ``KeyError``; a bad range, mask or operation ``ValueError``, naming the term and
        the parameter; a call during a step ``RuntimeError``. ``"startup"`` terms are
        applied at once.
        """
        self._between_steps("add")
        if not terms:
            raise ValueError("randomize: pass at least one term")
        for i, t in enumerate(terms):
            if not isinstance(t, Term):
                raise ValueError(f"randomize: expected gp.Uniform/..., got {type(t).__name__}")
            if t in self._bounds or t in terms[:i]:
                raise ValueError(f"{t}: this term is already added to this env")
        new = {t: bind(t, self._env, self._next_uid + i) for i, t in enumerate(terms)}
        startup = [b for b in new.values() if b.term.trigger_class == "startup"]
        if startup:  # its kernel and the others' compile before anything changes
            changed = torch.zeros(self._n, dtype=torch.bool, device=self._dev)
            rows = host_array([b.row() for b in startup], K.TermRow, self._dev)
            apply = self._bind_launch(startup, rows, None, changed)
        self._rebuild({**self._bounds, **new})
        self._next_uid += len(new)
        if startup:
            apply()
            settle(self._dev)  # the temporary rows are read before they are freed
            self._env.params.notify(tuple(dict.fromkeys(b.term.param for b in startup)), changed)
        return lambda: self.remove(*[t for t in terms if t in self._bounds])

    def remove(self, *terms: Term, restore: bool = True) -> None:
        """Remove ``terms``. With ``restore`` (default) their parameters' effective values go
        back to the nominal ones for the envs they covered (and listeners are notified)."""
        self._between_steps("remove")
        bounds = [self._get(t) for t in terms]
        if len({id(b) for b in bounds}) != len(bounds):
            raise ValueError(f"remove: a term was passed twice in {list(terms)}")
        for b in bounds:
            if b.owner is not None:
                raise ValueError(f"{b.term}: used by {b.owner}; remove that first")
        for b in bounds:
            self._clamped_removed += b.clamped[0]
            del self._bounds[b.term]
            if restore:
                self._restore(b)
        self._rebuild()

    def clear(self, restore: bool = True) -> None:
        """Remove every term."""
        if self._bounds:
            self.remove(*self.terms, restore=restore)

    def set_mask(self, term: Term, mask=None, env_ids=None) -> None:
        """Confine ``term`` to ``mask`` (bool tensor ``[num_envs]`` on the env's device) or
        ``env_ids`` (long tensor ``[K]`` or a list); both None: all envs. Checks the term's
        ranges for the new envs like ``add``. A masked term keeps its mask tensor: a new
        mask is copied into it (allowed during a step); giving a term its first mask or
        taking it away is a structural change (``RuntimeError`` during a step)."""
        b = self._get(term)
        m = select_envs(f"{term}: parameter {term.param!r}", self._env, mask, env_ids)
        b.check(self._env, m)
        if m is not None and b.mask is not None:
            b.mask.copy_(m)
            return
        self._between_steps("set_mask")
        b.mask = m
        self._rebuild()

    def counters(self, term: Term) -> torch.Tensor:
        """int32 tensor ``[num_envs]`` on the device: draws of ``term`` per env so far (the
        live counters; ``clone()`` them to keep a copy)."""
        return self._get(term).counter

    def mask(self, term: Term) -> torch.Tensor | None:
        """bool tensor ``[num_envs]`` on the device: the envs ``term`` is confined to (live),
        or None (all envs)."""
        return self._get(term).mask

    @property
    def clamped(self) -> torch.Tensor:
        """int64 scalar tensor on the device: draws clamped to their parameter's valid
        range so far, over all terms (removed ones included). Reading it does not sync."""
        return sum((b.clamped[0] for b in self._bounds.values()), self._clamped_removed.clone())

    def clamped_by_term(self) -> dict[Term, torch.Tensor]:
        """``{term: int64 scalar tensor}`` of clamped draws per current term."""
        return {t: b.clamped[0] for t, b in self._bounds.items()}

    @property
    def global_step(self) -> torch.Tensor:
        """int64 tensor ``[1]`` on the device: ``env.step`` calls since the env was built
        (the clock of schedules and ``OnReset(min_steps)``)."""
        return self._gstep

    def on_rebuild(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` after every rebuild of the rows (the launches changed)."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn)

    # ------------------------------------------------------------------ ranges (curricula)
    def ranges(self, term: Term) -> torch.Tensor:
        """float32 tensor ``[nbp, size, 2]`` on the device: the range ``(low, high)`` or
        ``(mean, std)`` per component of ``term``, one per schedule breakpoint (``nbp`` is 1
        without a schedule). The live values: writing them (ADR does, on the device)
        changes later draws. ``ValueError`` for a ``Choice``."""
        return self._get(term).ranges()

    def per_env_ranges(self, term: Term) -> torch.Tensor | None:
        """float32 tensor ``[2 * size, num_envs]``: the per-env ranges ``term`` draws from
        (rows ``2j``, ``2j + 1``: component ``j``'s low and high, or mean and std), or None."""
        return self._get(term).pe

    def check_free(self, term: Term, owner: object, per_env: bool = False) -> None:
        """Raise ``ValueError`` unless ``term`` (added) can be pinned by ``owner``: not
        pinned by another owner, without per-env ranges; with ``per_env``, able to take
        them (no schedule, not ``Choice``)."""
        b = self._get(term)
        if b.owner is not None and b.owner is not owner:
            raise ValueError(f"{owner}: {term} is already used by {b.owner}; a term can belong "
                             "to one curriculum")
        if b.pe is not None:
            raise ValueError(f"{owner}: {term} already has per-env ranges")
        if per_env and (b.nch or b.steps.numel() > 1):
            raise ValueError(f"{owner}: {term}: per-env ranges need a term without schedule, "
                             "not Choice")

    def pin(self, term: Term, owner: object, per_env: torch.Tensor | None = None) -> None:
        """Mark ``term`` as used by ``owner`` (a curriculum: removing the term raises). With
        ``per_env`` (float32 ``[2 * size, num_envs]``, contiguous rows owned by the caller,
        filled here with the range; no schedule, not ``Choice``) env ``e``'s component ``j``
        draws from ``per_env[2j, e]``, ``per_env[2j + 1, e]``. ``owner=None`` frees the term
        (its own range again); a term no longer added is skipped. Attaching or detaching
        per-env ranges raises ``RuntimeError`` during a step."""
        b = self._bounds.get(term) if isinstance(term, Term) else None
        if b is None:
            return
        if per_env is not None:  # checked before anything is written
            want = (2 * b.base.size, self._n)
            self.check_free(term, owner, per_env=True)
            if (not isinstance(per_env, torch.Tensor) or tuple(per_env.shape) != want
                    or per_env.dtype != torch.float32 or per_env.device != self._dev
                    or per_env.stride(1) != 1):
                got = (f"{per_env.dtype} {tuple(per_env.shape)} on {per_env.device}"
                       if isinstance(per_env, torch.Tensor) else repr(per_env))
                raise ValueError(f"{term}: per-env ranges expected float32 {want} with "
                                 f"contiguous rows on {self._dev}, got {got}")
        if (b.pe is None) != (per_env is None):
            self._between_steps("pin")
            if per_env is not None:
                per_env.copy_(b.ranges()[0].reshape(-1, 1).expand(want))
            b.pe = per_env
            self._rebuild()
        b.owner = owner

    # ------------------------------------------------------------------ step path
    def launch_step(self, ctx) -> None:
        """Stage of the step class, before the physics (``ctx``: the env's
        ``StepContext``): one launch; listeners hear of the envs it wrote."""
        self._run("step", ctx)

    def launch_reset(self, ctx, gate: torch.Tensor) -> None:
        """Stage of the reset class, for the envs of ``gate``: ``ctx.done`` (in a step) or
        ``ctx.reset_mask`` (in ``env.reset``): one launch; listeners hear of the envs it
        wrote (the gate itself when every term draws for every gated env)."""
        self._run("done" if gate is ctx.done else "reset", ctx)

    def _run(self, name: str, ctx) -> None:
        cmd, names, written = self._cmds[name]
        cmd.launch(ctx.stream)
        self._env.params.notify(names, written)

    def reseed(self) -> None:
        """After ``env.reset(seed=...)`` (the seed's device copy is already set): counters
        from 0, fresh clocks (the draws' keys follow the seed)."""
        for b in self._bounds.values():
            b.counter.zero_()
            b.clock.fill_(K.RESTARTED)

    # ------------------------------------------------------------------ internals
    def _get(self, term: Term) -> Bound:
        if not isinstance(term, Term) or term not in self._bounds:  # (a dict: hashable)
            raise KeyError(f"{term}: not added to this env")
        return self._bounds[term]

    def _between_steps(self, what: str) -> None:
        if self._env.stepping:
            raise RuntimeError(
                f"randomization.{what}: called during a step (from a hook?); the step in "
                "progress runs the terms it started with, so adding, removing or "
                "re-masking terms there would make the others lose or repeat draws; "
                "make the change between steps"
            )

    def _restore(self, b: Bound) -> None:
        p = self._env.params
        rows = slice(b.base.col, b.base.col + b.base.size)
        nominal, effective = p.nominal_table[rows], p.effective_table[rows]  # views
        effective.copy_(nominal if b.mask is None else torch.where(b.mask, nominal, effective))
        p.notify((b.term.param,), b.mask)

    def _bind_launch(self, bounds: list[Bound], rows: wp.array, gate: torch.Tensor | None,
                     changed: torch.Tensor) -> BoundLaunch:
        """The launch of the ``randomize`` kernel of ``bounds``' distributions and triggers
        over ``rows`` (``gate`` None: every env), bound; the kernel is compiled (or loaded
        from Warp's cache) first: ``ValueError`` naming the registered classes if it does
        not build (a draw or trigger of a wrong signature)."""
        env, p = self._env, self._env.params
        try:
            kernel = registry.kernel([b.base.dist for b in bounds],
                                     [b.base.trigger for b in bounds])
            wp.load_module(kernel.module, device=wp_device(self._dev))
        except Exception as e:  # Warp's codegen and compiler errors have no common type
            names = sorted({type(b.term).__name__ for b in bounds}
                           | {type(b.term.on).__name__ for b in bounds
                              if not isinstance(b.term.on, str)})
            raise ValueError(
                f"randomize: the randomize kernel for {', '.join(names)} does not build (a "
                f"draw must be @wp.func (h: wp.uint32, a: float, b: float) -> float): "
                f"{type(e).__name__}: {e}"
            ) from e
        inputs = [
            rows, int(gate is not None), to_wp(env.context.done if gate is None else gate),
            to_wp(env.context.seed), to_wp(self._gstep), env.env_offset,
            to_wp(p.nominal_table),
        ]
        outputs = [to_wp(p.effective_table), to_wp(changed)]
        return BoundLaunch(kernel, self._n, inputs=inputs, outputs=outputs, device=self._dev)

    def _rebuild(self, bounds: dict[Term, Bound] | None = None) -> None:
        """Rebuild the step and reset classes' rows and launches (a launch keeps its rows)
        for ``bounds`` (default: the current terms), which become the terms once every
        launch is bound."""
        bounds = self._bounds if bounds is None else bounds
        ctx, cmds = self._env.context, {}
        for cls, gates in (("step", {"step": None}),
                           ("reset", {"done": ctx.done, "reset": ctx.reset_mask})):
            group = [b for b in bounds.values() if b.term.trigger_class == cls]
            if not group:
                continue
            rows = host_array([b.row() for b in group], K.TermRow, self._dev)
            changed = self._changed[cls]
            names = tuple(dict.fromkeys(b.term.param for b in group))
            # without masks and timed triggers, every gated env is written
            track = any(b.mask is not None or b.base.trigger != K.PLAIN for b in group)
            for name, gate in gates.items():
                cmd = self._bind_launch(group, rows, gate, changed)
                cmds[name] = (cmd, names, changed if track else gate)
        self._bounds, self._cmds = bounds, cmds
        self.step_active = "step" in cmds
        self.reset_active = "reset" in cmds
        for fn in list(self._listeners):
            fn()

    # ------------------------------------------------------------------ checkpoints
    @staticmethod
    def _saved(b: Bound) -> dict[str, torch.Tensor | None]:
        """A term's checkpointed tensors (None: it has no mask / no per-env ranges)."""
        return {"counter": b.counter, "clock": b.clock, "clamped": b.clamped, "vals": b.values,
                "mask": b.mask, "pe": b.pe}

    def state_dict(self) -> dict[str, object]:
        """Per term (in order): uid, name, counters, clocks, clamped count, current ranges
        (``vals``), mask, per-env ranges; plus the global step and the next uid.
        Synchronizes."""
        terms = [{"uid": b.base.uid, "name": repr(b.term),
                  **{k: None if t is None else t.clone() for k, t in self._saved(b).items()}}
                 for b in self._bounds.values()]
        return {
            "terms": terms,
            "global_step": int(self._gstep.item()),  # host-ok: checkpointing
            "next_uid": self._next_uid,
            "clamped_removed": self._clamped_removed.clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()`` into an env holding the same terms (same names, same
        order: add them first). Checks everything before writing."""
        self.check_state(state)
        uids = [int(s["uid"]) for s in state["terms"]]
        moved = uids != [b.base.uid for b in self._bounds.values()]  # uids key the draws: new rows
        if moved:
            self._between_steps("load_state_dict")
        with torch.no_grad():  # a saved tensor requiring grad must not attach ours
            for b, s, uid in zip(self._bounds.values(), state["terms"], uids, strict=True):
                b.base.uid = uid
                for key, t in self._saved(b).items():
                    if t is not None:
                        t.copy_(s[key])
            self._next_uid = int(state["next_uid"])
            self._gstep.fill_(int(state["global_step"]))
            self._clamped_removed.copy_(state["clamped_removed"])
        if moved:
            self._rebuild()

    def check_state(self, state: dict) -> None:
        """Raise ``ValueError`` unless ``state`` fits this env's terms."""
        names = [repr(t) for t in self._bounds]
        terms = state.get("terms") if isinstance(state, Mapping) else None
        saved = ([t.get("name") if isinstance(t, Mapping) else t for t in terms]
                 if isinstance(terms, (list, tuple)) else terms)
        if saved != names:
            raise ValueError(f"randomization.load_state_dict: expected terms {names}, got "
                             f"{saved}")
        check_like(state, {
            "terms": [{"uid": 0, "name": repr(b.term), **self._saved(b)}
                      for b in self._bounds.values()],
            "global_step": 0, "next_uid": 0, "clamped_removed": self._clamped_removed,
        }, "randomization")
        check_randomization(state, "randomization")
