"""``env.randomization``: the device tables of an env's terms and their recorded launches.

Terms are grouped by trigger class. Each class with terms has one device term table and
one recorded launch of ``kernels.randomize.randomize``: the step class (``"step"``,
``Every``, ``Interval``) before the env kernel, the reset class (``"reset"``, ``OnReset``)
after it, gated by the ``done`` buffer (and by the reset mask in ``env.reset``). A class
without terms launches nothing. Tables are rebuilt when terms are added or removed, never
per step.

Per term and env the tables hold the term's key (``kernels.rng.term_key``), its event
counter and its clock. On CPUs one kernel thread handles all envs (Warp runs CPU threads
one after the other) so that its loops over envs vectorize, and launches are replayed
without Warp's per-launch argument packing (``_Replay``); on GPUs a thread handles one env.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence

import torch

from gpuparam._checkpoint import check_randomization
from gpuparam._device import Replay, launch, to_wp
from gpuparam.kernels import randomize as K
from gpuparam.randomization.binding import Bound, bind, recheck, term_mask
from gpuparam.randomization.terms import Term

CLASSES = ("startup", "reset", "step")
_CPU_BLOCK = 1 << 20  # envs per thread on CPUs (a multiple of 8: all); one per thread on GPUs


class _Class:
    """Device tables and recorded launches of one trigger class."""

    def __init__(self, name: str):
        self.name = name
        self.bounds: list[Bound] = []
        self.cmds: dict[str, object] = {}
        self.names: tuple[str, ...] = ()
        self.track = False
        self.t: dict[str, torch.Tensor] = {}
        self.interleaved = name == "reset"  # counter layout, see _counter_strides


class Randomization:
    """The randomization terms of one env (``env.randomization``).

    Attributes (device tensors, read them without synchronizing):
        clamped: int64 scalar tensor, draws clamped to a parameter's valid range so far.
        global_step: int64 tensor ``[1]``, ``env.step`` calls since the env was built; it
            drives schedules and ``OnReset(min_steps)``.
    """

    def __init__(self, env):
        self._env = env
        self._n, self._dev = env.num_envs, env.device
        self._block = _CPU_BLOCK if self._dev.type == "cpu" else 1
        self._classes = {c: _Class(c) for c in CLASSES}
        self._next_uid = 0
        self._gstep = env.context.clock  # the env's global step (its clock stage ticks it)
        self._clamped_removed = torch.zeros((), dtype=torch.int64, device=self._dev)
        self._listeners: list[Callable[[], None]] = []
        self._globals: dict[str, torch.Tensor] = {
            "vals": torch.zeros(1, device=self._dev),
            "bp": torch.zeros(1, dtype=torch.int64, device=self._dev),
            "masks": torch.zeros(1, dtype=torch.bool, device=self._dev),
            "pe": torch.zeros(1, device=self._dev),
        }
        self.step_active = False
        self.reset_active = False

    # ------------------------------------------------------------------ public API
    @property
    def terms(self) -> tuple[Term, ...]:
        """The terms, in the order they were added."""
        return tuple(b.term for b in sorted(self._all(), key=lambda b: b.uid))

    def add(self, *terms: Term) -> Callable[[], None]:
        """Bind and add ``terms``; returns a function removing them again.

        Every term is checked before anything changes: an unknown parameter raises
        ``KeyError``; a bad range, mask or operation ``ValueError``, naming the term and
        the parameter. ``"startup"`` terms are applied at once.
        """
        if not terms:
            raise ValueError("randomize: pass at least one term")
        known = {id(b.term) for b in self._all()}
        for i, t in enumerate(terms):
            if not isinstance(t, Term):
                raise ValueError(f"randomize: expected gp.Uniform/..., got {type(t).__name__}")
            if id(t) in known or any(t is u for u in terms[:i]):
                raise ValueError(f"{t}: this term is already added to this env")
        new = [bind(t, self._env, self._next_uid + i) for i, t in enumerate(terms)]
        self._next_uid += len(new)
        for b in new:
            self._classes[b.cls].bounds.append(b)
        self._rebuild(restart=new)
        startup = [b for b in new if b.cls == "startup"]
        if startup:
            self._apply_startup(startup)
        return lambda: self.remove(*[t for t in terms if self._find(t) is not None])

    def remove(self, *terms: Term, restore: bool = True) -> None:
        """Remove ``terms``. With ``restore`` (default) their parameters' effective values go
        back to the nominal ones for the envs they covered (and listeners are notified)."""
        bounds = [self.bound(t) for t in terms]
        if len({id(b) for b in bounds}) != len(bounds):
            raise ValueError(f"remove: a term was passed twice in {list(terms)}")
        for b in bounds:
            if b.pinned_by is not None:
                raise ValueError(f"{b.term}: used by {b.pinned_by}; remove that first")
        for b in bounds:
            self._clamped_removed += b.state["clamped"][0]
            self._classes[b.cls].bounds.remove(b)
            if restore:
                self._restore(b)
        self._rebuild(restart=[])

    def clear(self, restore: bool = True) -> None:
        """Remove every term."""
        if self._all():
            self.remove(*self.terms, restore=restore)

    def set_mask(self, term: Term, mask=None, env_ids=None) -> None:
        """Confine ``term`` to ``mask`` (bool tensor ``[num_envs]`` on the env's device) or
        ``env_ids``; both None: all envs. Checks the term's ranges for the new envs like
        ``add``. A device copy, no table rebuild unless the term had no mask before or gets
        none now."""
        b = self.bound(term)
        m = term_mask(term, self._env, mask, env_ids)
        recheck(b, self._env, m)
        if m is not None or b.mask is not None:
            # masked envs advance alone from now on, or did until now: counters may differ
            b.uniform_counters = False
        if m is not None and b.mask is not None:
            b.mask.copy_(m)
            return
        b.mask = m
        self._rebuild(restart=[])

    def bound(self, term: Term) -> Bound:
        """The bound record of ``term`` (``KeyError`` if it is not added to this env)."""
        b = self._find(term)
        if b is None:
            raise KeyError(f"{term}: not added to this env")
        return b

    def counters(self, term: Term) -> torch.Tensor:
        """int32 tensor ``[num_envs]`` on the device: draws of ``term`` per env so far (a
        view of the class's counter table, strided for reset terms; ``clone()`` it to keep
        a copy)."""
        return self.bound(term).state["counter"]

    @property
    def clamped(self) -> torch.Tensor:
        """int64 scalar tensor on the device: draws clamped to their parameter's valid
        range so far, over all terms (removed ones included). Reading it does not sync."""
        total = self._clamped_removed.clone()
        for c in self._classes.values():
            if c.bounds:
                total += c.t["clamped"].sum()
        return total

    def clamped_by_term(self) -> dict[Term, torch.Tensor]:
        """``{term: int64 scalar tensor}`` of clamped draws per current term."""
        return {b.term: b.state["clamped"][0] for b in self._all()}

    @property
    def global_step(self) -> torch.Tensor:
        """int64 tensor ``[1]`` on the device: ``env.step`` calls since the env was built
        (the clock of schedules and ``OnReset(min_steps)``)."""
        return self._gstep

    def on_rebuild(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` after every table rebuild (device views change then)."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn)

    def tables(self) -> dict[str, torch.Tensor]:
        """The shared device tables (``vals``, ``bp``, ``masks``, ``pe``), 1D. Valid until
        the next rebuild (see ``on_rebuild``); for curricula and ADR."""
        return self._globals

    # ------------------------------------------------------------------ per-env ranges
    def pin(self, terms: Iterable[Term], owner: object) -> None:
        """Mark ``terms`` as used by ``owner`` (a curriculum): removing them raises."""
        for t in terms:
            self.bound(t).pinned_by = owner

    def unpin(self, terms: Iterable[Term]) -> None:
        for t in terms:
            b = self._find(t)
            if b is not None:
                b.pinned_by = None

    def attach_per_env_ranges(self, terms: Sequence[Term]) -> None:
        """Give ``terms`` per-env ranges (``Bound.state["pe"]``, float32 ``[2 * size, N]``,
        rows low/high or mean/std per component), initialized to their current range.
        Used by curricula; the terms must have no schedule and not be ``Choice``."""
        for t in terms:
            b = self.bound(t)
            if b.dist == K.CHOICE or b.scheduled:
                raise ValueError(f"{t}: per-env ranges need a term without schedule, not Choice")
            if b.pe_row >= 0:
                raise ValueError(f"{t}: already has per-env ranges (another curriculum?)")
            b.pe_row = 0  # placed by _rebuild
            b.state["pe"] = b.range_view()[0].reshape(-1, 1).expand(-1, self._n).clone()
        self._rebuild(restart=[])

    def detach_per_env_ranges(self, terms: Iterable[Term]) -> None:
        for t in terms:
            b = self._find(t)
            if b is not None:
                b.pe_row = -1
                b.state.pop("pe", None)
        self._rebuild(restart=[])

    # ------------------------------------------------------------------ step path
    def launch_step(self, ctx) -> None:
        """Stage of the step class, before the physics (``ctx``: the env's
        ``StepContext``)."""
        c = self._classes["step"]
        c.cmds["step"].launch(ctx.stream)
        self._env.params.notify(c.names, c.t["changed"] if c.track else None)

    def launch_reset(self, ctx, gate) -> None:
        """Stage of the reset class, for the envs of ``gate``: ``ctx.done`` (in a step) or
        ``ctx.reset_mask`` (in ``env.reset``)."""
        c = self._classes["reset"]
        c.cmds["done" if gate is ctx.done else "reset"].launch(ctx.stream)
        self._env.params.notify(c.names, c.t["changed"] if c.track else gate)

    # ------------------------------------------------------------------ tables
    def _all(self) -> list[Bound]:
        return [b for c in self._classes.values() for b in c.bounds]

    def _find(self, term: Term) -> Bound | None:
        return next((b for b in self._all() if b.term is term), None)

    def _restore(self, b: Bound) -> None:
        p = self._env.params
        rows = slice(b.col, b.col + b.size)
        if b.mask is None:
            p.effective_table[rows] = p.nominal_table[rows]
        else:
            p.effective_table[rows] = torch.where(
                b.mask, p.nominal_table[rows], p.effective_table[rows]
            )
        p.notify((b.param,), b.mask)

    def _rebuild(self, restart: list[Bound]) -> None:
        """Rebuild every device table and recorded launch; ``restart`` terms get fresh
        counters and clocks, the others keep theirs (copied)."""
        n, dev = self._n, self._dev
        bounds = self._all()
        fresh = {id(b) for b in restart}
        # shared tables: values, schedule steps, masks, per-env ranges
        vals, bps, masks, pes = [], [], [], []
        nv = nb = nm = npe = 0
        placed = []
        for b in bounds:
            v = b.state["vals"].clone() if "vals" in b.state else b.values.to(dev)
            m = b.mask
            placed.append((b, nv, nb, nm if m is not None else -1, npe if b.pe_row >= 0 else -1))
            vals.append(v)
            nv += v.numel()
            bps.append(torch.tensor(b.bp, dtype=torch.int64))
            nb += len(b.bp)
            if m is not None:
                masks.append(m)
                nm += 1
            if b.pe_row >= 0:
                pes.append(b.state["pe"])
                npe += b.size
        g = {
            "vals": torch.cat(vals) if vals else torch.zeros(1, device=dev),
            "bp": torch.cat(bps).to(dev) if bps else torch.zeros(1, dtype=torch.int64, device=dev),
            # the term masks, then one all-True row read by terms without a mask
            "masks": torch.cat([*masks, torch.ones(n, dtype=torch.bool, device=dev)]),
            "pe": torch.cat(pes).reshape(-1) if pes else torch.zeros(1, device=dev),
        }
        where = {id(b): (r0, bp0, mrow, pe) for b, r0, bp0, mrow, pe in placed}
        for b in bounds:
            r0, _, mrow, pe = where[id(b)]
            b.r0 = r0
            b.state["vals"] = g["vals"][r0 : r0 + b.values.numel()]
            if mrow >= 0:
                b.mask = g["masks"][mrow * n : (mrow + 1) * n]
            if pe >= 0:
                b.pe_row = pe
                b.state["pe"] = g["pe"][2 * pe * n : 2 * (pe + b.size) * n].view(2 * b.size, n)
        self._globals = g
        for c in self._classes.values():
            self._build_class(c, where, fresh)
        if restart:
            self._init_keys(restart, restart=True)
        self.step_active = bool(self._classes["step"].bounds)
        self.reset_active = bool(self._classes["reset"].bounds)
        for fn in list(self._listeners):
            fn()

    def _build_class(self, c: _Class, where, fresh) -> None:
        n, dev, T = self._n, self._dev, len(c.bounds)
        c.cmds = {}
        if T == 0:
            c.t, c.names, c.track = {}, (), False
            return
        ti = torch.zeros(T, K.NI, dtype=torch.int32)
        tf = torch.zeros(T, K.NF, dtype=torch.float32)
        st = {
            "keys": torch.zeros(T * n, dtype=torch.int32, device=dev),
            "counter": torch.zeros(T * n, dtype=torch.int32, device=dev),
            "clock": torch.zeros(T * n, dtype=torch.float64, device=dev),
            "clamped": torch.zeros(T, dtype=torch.int64, device=dev),
        }
        for t, b in enumerate(c.bounds):
            r0, bp0, mrow, pe = where[id(b)]
            cdf0 = r0 + b.nch * b.size
            ti[t] = torch.tensor([
                b.dist, b.op, b.timed, b.dtcol, mrow, b.col, b.size, r0, b.nbp, bp0, b.interp,
                pe, b.nch, cdf0, b.uid, self._lock(c, b),
            ])
            tf[t] = torch.tensor([b.low, b.high, b.plo, b.phi])
            rows = slice(t * n, (t + 1) * n)
            if id(b) not in fresh and "clock" in b.state:
                st["clock"][rows] = b.state["clock"]
                self._counter_view(c, st["counter"], t).copy_(b.state["counter"])
            if id(b) not in fresh and "clamped" in b.state:
                st["clamped"][t] = b.state["clamped"][0]
        for t, b in enumerate(c.bounds):
            rows = slice(t * n, (t + 1) * n)
            for key in ("keys", "clock"):
                b.state[key] = st[key][rows]
            b.state["counter"] = self._counter_view(c, st["counter"], t)
            b.state["clamped"] = st["clamped"][t : t + 1]
        c.t = {
            "ti": ti.reshape(-1).to(dev),
            "tf": tf.reshape(-1).to(dev),
            **st,
            "changed": torch.zeros(n, dtype=torch.bool, device=dev),
            # three regions each of n padded to 8 (see kernels.randomize.randomize)
            "scratch": torch.zeros(3 * (-(-n // 8) * 8), dtype=torch.int32, device=dev),
            "scratch_f": torch.zeros(3 * (-(-n // 8) * 8), dtype=torch.float32, device=dev),
        }
        c.names = tuple(dict.fromkeys(b.param for b in c.bounds))
        c.track = any(b.mask is not None or b.timed != 0 for b in c.bounds)
        self._init_keys([b for b in c.bounds if id(b) not in fresh], restart=False)
        ctx = self._env.context
        if c.name == "step":
            c.cmds["step"] = self._record(c, 0, T, ctx.done, ctx.done_words, False)
        elif c.name == "reset":
            c.cmds["done"] = self._record(c, 0, T, ctx.done, ctx.done_words, True)
            c.cmds["reset"] = self._record(c, 0, T, ctx.reset_mask, ctx.reset_words, True)

    @staticmethod
    def _lock(c: _Class, b: Bound) -> int:
        """``I_LOCK`` of ``b``: 1 when every env's counter is known to be the same (an
        unmasked term of an ungated class whose counters restarted together or were
        loaded equal)."""
        return int(c.name != "reset" and b.mask is None and b.uniform_counters)

    def _write_locks(self) -> None:
        """Rewrite the ``I_LOCK`` column of every class's term table (not per step)."""
        for c in self._classes.values():
            if c.bounds:
                c.t["ti"].view(-1, K.NI)[:, K.I_LOCK] = torch.tensor(
                    [self._lock(c, b) for b in c.bounds], dtype=torch.int32, device=self._dev
                )

    def _counter_strides(self, c: _Class) -> tuple[int, int]:
        """``(by term, by env)``: the counter of term ``t`` and env ``e`` is at ``t * st +
        e * se`` of the class's table: rows ``[T, N]``, or for the reset class (gated: a
        few scattered envs per step) ``[N, T]``, so that an env's counters of all terms
        share one cache line."""
        return (1, len(c.bounds)) if c.interleaved else (self._n, 1)

    def _counter_view(self, c: _Class, counter: torch.Tensor, t: int) -> torch.Tensor:
        """Term ``t``'s counters ``[N]`` (a view, strided for the reset class)."""
        st, se = self._counter_strides(c)
        return counter.as_strided((self._n,), (se,), t * st)

    def _record(self, c: _Class, first: int, count: int, gate, words, gated: bool, rec=True):
        n, g, t, p = self._n, self._globals, c.t, self._env.params
        terms = K.TermTables()
        terms.ti, terms.tf = to_wp(t["ti"][first * K.NI :]), to_wp(t["tf"][first * K.NF :])
        terms.num_terms, terms.n, terms.block = count, n, self._block
        terms.vals, terms.bp_step, terms.pe = to_wp(g["vals"]), to_wp(g["bp"]), to_wp(g["pe"])
        terms.gstep, terms.seed = to_wp(self._gstep), to_wp(self._env.context.seed)
        terms.env_offset = self._env.env_offset
        terms.ones_row = g["masks"].numel() // n - 1
        terms.ctr_t, terms.ctr_e = self._counter_strides(c)
        if c.interleaved and first:
            raise AssertionError("a class with interleaved counters launches all its terms")
        terms.track = int(c.track)
        clocks = K.TermClocks()
        clocks.clock = to_wp(t["clock"][first * n :])
        clocks.clamped_out = to_wp(t["clamped"][first:])
        inputs = [
            terms, int(gated), to_wp(gate), to_wp(words), clocks, to_wp(g["masks"]),
            to_wp(t["keys"][first * n :]), to_wp(t["counter"][first * n :]),
            to_wp(p.nominal_table.view(-1)), to_wp(p.effective_table.view(-1)),
            to_wp(t["changed"]), to_wp(t["scratch"]), to_wp(t["scratch_f"]),
        ]
        cmd = launch(K.randomize, -(-n // self._block), inputs, self._dev, record=rec)
        return Replay(cmd, self._dev) if rec else cmd

    def _apply_startup(self, new: list[Bound]) -> None:
        c = self._classes["startup"]
        first = c.bounds.index(new[0])
        env, ctx = self._env, self._env.context
        self._record(c, first, len(new), ctx.done, ctx.done_words, False, rec=False)
        masks = [b.mask for b in new]
        mask = None if any(m is None for m in masks) else torch.stack(masks).any(0)
        env.params.notify(tuple(dict.fromkeys(b.param for b in new)), mask)

    def _init_keys(self, bounds: list[Bound], restart: bool) -> None:
        """The key tables of ``bounds`` (and, with ``restart``, their counters from 0 and
        first clocks: phases, intervals)."""
        n = self._n
        if restart:
            for b in bounds:
                b.uniform_counters = True  # all from 0
        for c in self._classes.values():
            rows = [t for t, b in enumerate(c.bounds) if any(b is x for x in bounds)]
            if not rows:
                continue
            t = c.t
            inputs = [
                to_wp(t["ti"]), to_wp(t["tf"]),
                to_wp(torch.tensor(rows, dtype=torch.int32, device=self._dev)), int(restart),
                n, *self._counter_strides(c), self._env.seed, self._env.env_offset,
                to_wp(t["keys"]),
                to_wp(t["counter"]), to_wp(t["clock"]),
            ]
            launch(K.init_keys, len(rows) * n, inputs, self._dev)

    def reseed(self) -> None:
        """After ``env.reset(seed=...)`` (the seed's device copy is already set): new keys,
        counters from 0, fresh clocks."""
        self._init_keys(self._all(), restart=True)
        self._write_locks()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """Per term (in order): uid, name, counters, clocks, clamped count, current ranges,
        mask, per-env ranges; plus the global step and the next uid. Synchronizes."""
        terms = []
        for b in sorted(self._all(), key=lambda b: b.uid):
            s = b.state
            terms.append({
                "uid": b.uid, "name": repr(b.term), "counter": s["counter"].clone(),
                "clock": s["clock"].clone(), "clamped": s["clamped"].clone(),
                "vals": s["vals"].clone(), "mask": None if b.mask is None else b.mask.clone(),
                "pe": s["pe"].clone() if "pe" in s else None,
            })
        return {
            "terms": terms,
            "global_step": int(self._gstep.item()),  # host-ok: checkpointing
            "next_uid": self._next_uid,
            "clamped_removed": self._clamped_removed.clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()`` into an env holding the same terms (same names, same
        order: add them first). Checks everything before writing."""
        bounds = self.check_state(state)
        for b, s in zip(bounds, state["terms"], strict=True):
            b.uid = int(s["uid"])
            for key in ("counter", "clock", "clamped", "vals"):
                b.state[key].copy_(s[key])
            if b.mask is not None:
                b.mask.copy_(s["mask"])
            if s["pe"] is not None:
                b.state["pe"].copy_(s["pe"])
            c = b.state["counter"]
            b.uniform_counters = bool((c == c[:1]).all())  # host-ok: checkpointing
        self._write_locks()
        self._next_uid = int(state["next_uid"])
        self._gstep.fill_(int(state["global_step"]))
        self._clamped_removed.copy_(state["clamped_removed"])
        for c in self._classes.values():  # the uids key the draws
            if c.bounds:
                c.t["ti"].view(-1, K.NI)[:, K.I_UID] = torch.tensor(
                    [b.uid for b in c.bounds], dtype=torch.int32, device=self._dev
                )
        self._init_keys(bounds, restart=False)

    def check_state(self, state: dict) -> list[Bound]:
        """Raise ``ValueError`` unless ``state`` fits this env's terms; returns them."""
        bounds = sorted(self._all(), key=lambda b: b.uid)
        saved = list(state.get("terms", ()))
        names = [repr(b.term) for b in bounds]
        if [s["name"] for s in saved] != names:
            raise ValueError(
                f"randomization.load_state_dict: expected terms {names}, "
                f"got {[s['name'] for s in saved]}"
            )
        for b, s in zip(bounds, saved, strict=True):
            for key in ("counter", "clock", "clamped", "vals"):
                t, want = s.get(key), b.state[key]
                if not isinstance(t, torch.Tensor) or t.shape != want.shape or (
                    t.dtype != want.dtype
                ):
                    got = f"{t.dtype} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else t
                    raise ValueError(
                        f"randomization.load_state_dict: {b.term}: {key!r} expected "
                        f"{want.dtype} {tuple(want.shape)}, got {got}"
                    )
            if (s["mask"] is None) != (b.mask is None) or (s["pe"] is None) != (b.pe_row < 0):
                raise ValueError(f"randomization.load_state_dict: {b.term}: mask/ranges differ")
            for key, want in (("mask", b.mask), ("pe", b.state.get("pe"))):
                t = s[key]
                if t is not None and (t.shape != want.shape or t.dtype != want.dtype):
                    raise ValueError(
                        f"randomization.load_state_dict: {b.term}: {key!r} expected "
                        f"{want.dtype} {tuple(want.shape)}, got {t.dtype} {tuple(t.shape)}"
                    )
        for key in ("global_step", "next_uid"):
            v = state.get(key)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ValueError(f"randomization.load_state_dict: {key!r} expected an int, "
                                 f"got {v!r}")
        cr = state.get("clamped_removed")
        if not isinstance(cr, torch.Tensor) or cr.shape != self._clamped_removed.shape:
            raise ValueError("randomization.load_state_dict: 'clamped_removed' expected a "
                             f"tensor {tuple(self._clamped_removed.shape)}, got {cr!r}")
        for s in saved:
            if isinstance(s["uid"], bool) or not isinstance(s["uid"], numbers.Integral):
                raise ValueError(f"randomization.load_state_dict: uid expected an int, "
                                 f"got {s['uid']!r}")
        check_randomization(state, "randomization")
        return bounds
