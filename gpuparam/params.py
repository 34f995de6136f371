"""The per-env parameter table: typed specs plus device tensors, changed by masked writes."""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType

import torch

from gpuparam._checkpoint import check_like, check_param_tables
from gpuparam._checks import check_env_ids, check_mask, ids_to_mask
from gpuparam._device import capturing, stream_for, to_wp
from gpuparam._launch import BoundLaunch, raw_view
from gpuparam.kernels import params as kparams
from gpuparam.spec import ParamSpec

ChangeCallback = Callable[[tuple[str, ...], "torch.Tensor | None"], None]


class _Values(Mapping):
    """Read-only mapping name -> view ``[num_envs, *shape]`` of one ``[C, num_envs]`` table."""

    def __init__(self, table: ParamTable, data: torch.Tensor):
        self._table, self._data = table, data

    def __getitem__(self, name: str) -> torch.Tensor:
        c0, size = self._table.columns(name)
        shape = self._table.spec[name].shape
        return self._data[c0 : c0 + size].T.view(self._table.num_envs, *shape)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.names)

    def __len__(self) -> int:
        return len(self._table.names)


def _refuse(where: str, spec: ParamSpec, v: torch.Tensor, mask: torch.Tensor | None,
            pair: bool = True) -> None:
    """Raise the ``ValueError`` naming the first row of ``v`` (float32 ``[rows, ...]``) in
    ``mask`` that ``spec.invalid`` refuses, ``pair=False``: components, not an ordered pair
    (torch ops and a read: a sync)."""
    v = v.reshape(v.shape[0], -1)
    bad = spec.invalid(v, pair)
    if mask is not None:
        bad &= mask
    if bool(bad.any()):  # host-ok: validated tensor values (the error path, or a capture)
        row = v[bad][0]
        out = row[~torch.isfinite(row) | (row < spec.low) | (row > spec.high)]
        if out.numel():
            raise ValueError(f"{where}: value {out[0].item()} outside its range "  # host-ok
                             f"[{spec.low}, {spec.high}] (or not finite); nothing was written")
        got = row.tolist()  # host-ok: the error path
        raise ValueError(f"{where}: expected {spec.requirement}, got {got}; nothing was written")


class ParamTable:
    """Per-env parameters of one env batch, on one device.

    Storage is two float32 tables ``[C, num_envs]`` (one row per parameter component, so a
    kernel reading one parameter for all envs reads contiguous memory): ``nominal_table``
    (set by the user or a curriculum) and ``effective_table`` (what the env kernels read:
    nominal after randomization). ``table[name]`` is a view ``[num_envs, *shape]`` of the
    effective values; ``table.nominal[name]`` the same view of the nominal values.

    Args:
        specs: one ``ParamSpec`` per parameter.
        num_envs: N.
        device: torch device of the tables.
    """

    def __init__(self, specs: Sequence[ParamSpec], num_envs: int, device: torch.device):
        self._specs = {s.name: s for s in specs}
        if len(self._specs) != len(specs):
            raise ValueError(f"duplicate parameter names in {[s.name for s in specs]}")
        self._names, self._spec_map = tuple(self._specs), MappingProxyType(self._specs)
        self.num_envs, self.device = num_envs, device
        starts = itertools.accumulate((s.size for s in specs), initial=0)  # one more
        self._cols = {s.name: (c0, s.size) for s, c0 in zip(specs, starts, strict=False)}
        self._where = {s.name: f"parameter {s.name!r}" for s in specs}  # errors name them so
        self.num_columns = c = sum(s.size for s in specs)
        self.defaults = torch.cat([s.default_tensor() for s in specs]).to(device)  # float32 [C]
        self.nominal_table = torch.empty(c, num_envs, dtype=torch.float32, device=device)
        self.effective_table = torch.empty_like(self.nominal_table)
        self.wp_nominal = to_wp(self.nominal_table)
        self.wp_effective = to_wp(self.effective_table)
        # a masked write (and a tensor's range check) is one launch bound once per kind
        # (``_bound``), pointed at the caller's mask and values by address: no copy per call
        self._all_envs = torch.ones(num_envs, dtype=torch.bool, device=device)  # never written
        self._no_values = to_wp(torch.zeros(1, 1, device=device))
        self._check_flag = torch.zeros(1, dtype=torch.int32, device=device)  # 0 between calls
        self._wp_device = self.wp_nominal.device
        self._wp_check_flag = to_wp(self._check_flag)
        self._launches: dict[tuple, BoundLaunch] = {}
        self._callbacks: list[tuple] = []  # (callback, kind, key or None, told of loads)
        self._listeners_changed = 0  # bumped when a callback is added or removed
        self.nominal = _Values(self, self.nominal_table)
        self.effective = _Values(self, self.effective_table)
        self.reset_to_default()

    # ------------------------------------------------------------------ reading
    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names, in table order (read-only)."""
        return self._names

    @property
    def spec(self) -> Mapping[str, ParamSpec]:
        """Read-only mapping name -> ``ParamSpec`` (default, low, high, shape, unit, doc)."""
        return self._spec_map

    def columns(self, name: str) -> tuple[int, int]:
        """``(first_row, size)`` of ``name`` in the ``[C, num_envs]`` tables."""
        self._spec(name)
        return self._cols[name]

    def __getitem__(self, name: str) -> torch.Tensor:
        """Effective values of ``name``: float32 view ``[num_envs, *shape]`` on the device."""
        return self.effective[name]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def _spec(self, name: str) -> ParamSpec:
        try:
            return self._specs[name]
        except (KeyError, TypeError):
            raise KeyError(
                f"unknown parameter {name!r}; valid names: {', '.join(self._specs)}"
            ) from None

    # ------------------------------------------------------------------ writing
    def set(
        self,
        name_or_dict: str | Mapping[str, object],
        value: object = None,
        mask: torch.Tensor | None = None,
        env_ids: torch.Tensor | Sequence[int] | None = None,
        validate: bool = True,
    ) -> None:
        """Write nominal and effective values of one or more parameters.

        Args:
            name_or_dict: a parameter name, or ``{name: value}`` to write several at once.
            value: a Python number, or a float tensor broadcastable to ``[num_envs, *shape]``
                (``[K, *shape]`` with ``env_ids``), on the table's device.
            mask: bool tensor ``[num_envs]`` on the device; only True envs are written.
            env_ids: long tensor ``[K]`` (or a list) of env indices; exclusive with ``mask``.
            validate: check every written value (finite, inside the spec's range) and the
                ``env_ids`` (in range, distinct), and raise ``ValueError`` before writing
                anything; a number is checked on the host, a tensor by one kernel whose
                flag is read back (a sync with the host; ``env_ids`` are read too). With
                ``validate=False`` nothing synchronizes (for hot loops and CUDA-graph
                capture): values are clamped to the range on the device, and the rest of
                what it trades away is listed in ``docs/guarantees.md``.

        ``on_change`` listeners hear of exactly the envs addressed: ``mask``, or the
        in-range ``env_ids``. Tensor values are detached (the tables never require grad).
        Device work: one Warp launch per parameter written (plus its range check for a
        validated tensor), reading ``mask`` and ``value`` where they are (a strided mask
        is copied first); nothing is allocated for contiguous masks and float32 values.
        """
        if not isinstance(name_or_dict, str) and isinstance(name_or_dict, Mapping):
            if value is not None:
                raise ValueError("set(dict, value): pass values inside the dict, not both")
            items = list(name_or_dict.items())
        else:
            items = [(name_or_dict, value)]
        if mask is not None and env_ids is not None:
            raise ValueError("set: pass mask or env_ids, not both")
        mask = self._checked_mask(mask)
        rows, slot = self.num_envs, None
        if env_ids is not None:  # row k to env env_ids[k]; ids out of range go to row N
            env_ids = check_env_ids(env_ids, self.num_envs, self.device, validate, distinct=True)
            rows = env_ids.shape[0]
            slot = torch.where((env_ids >= 0) & (env_ids < self.num_envs), env_ids, self.num_envs)
        checks: list = []
        writes = [self._prepare(n, v, rows, mask, validate, slot=slot, checks=checks)
                  for n, v in items]
        self._confirm(checks)
        if env_ids is not None:
            mask = ids_to_mask(env_ids, self.num_envs)
        names = (items[0][0],) if len(items) == 1 else tuple(n for n, _ in items)
        self._write(writes, mask, names, clamp=not validate)

    def set_components(
        self, name: str, values: Mapping[int, object], mask: torch.Tensor | None = None
    ) -> None:
        """Write some components of the vector parameter ``name`` (nominal and effective)
        for the masked envs; every other component keeps both its values (a randomized
        effective value included).

        Args:
            name: a parameter name.
            values: component index -> a number, or a float tensor broadcastable to
                ``[num_envs]`` on the table's device (as ``set`` takes).
            mask: bool tensor ``[num_envs]`` on the device, or ``None`` for all envs.

        Validated as ``set`` (indices; finite values inside the spec range; synchronizes
        for tensors) before anything is written; listeners hear of ``name`` for ``mask``.
        """
        size = self._spec(name).size
        mask = self._checked_mask(mask)
        if not isinstance(values, Mapping) or not values:
            raise ValueError(f"set_components: expected a non-empty dict of component "
                             f"values, got {values!r}")
        for j in values:
            if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < size:
                raise ValueError(f"parameter {name!r}: component index expected an int in "
                                 f"[0, {size}), got {j!r}")
        checks: list = []
        writes = [self._prepare(name, v, self.num_envs, mask, True, j, checks=checks)
                  for j, v in values.items()]
        self._confirm(checks)
        if self._spec(name).ordered:  # the pair as written: (low, high) with low <= high
            c0, _ = self._cols[name]
            pair = self.nominal_table[c0:c0 + 2].T.clone()  # [N, 2]
            for col, _, _, _, v, _ in writes:
                pair[:, col - c0] = v if isinstance(v, float) else v.reshape(-1)
            _refuse(f"parameter {name!r}", self._spec(name), pair, mask)
        self._write(writes, mask, (name,), clamp=False)

    def reset_to_default(self, mask: torch.Tensor | None = None) -> None:
        """Write every parameter's spec default (nominal and effective) for masked envs.

        Args:
            mask: bool tensor ``[num_envs]`` on the device, or ``None`` for all envs.
        """
        mask = self._checked_mask(mask)
        defaults = self.defaults.expand(self.num_envs, -1)  # [N, C], stride 0: every row
        self._write([(0, self.num_columns, 0.0, 0.0, defaults, None)], mask, self.names, False)

    def _prepare(self, name, value, rows: int, mask, validate: bool, component=None, slot=None,
                 checks: list | None = None):
        """One checked write ``(first_row, width, low, high, value, view)`` for ``_write``: a
        float, or a float32 tensor ``[num_envs, width]`` (``width`` 1 for ``component``). A
        tensor value has ``rows`` rows; with ``slot`` (``[rows]``) row k goes to env
        ``slot[k]`` (``num_envs``: dropped). A device range check is appended to ``checks``,
        which the caller confirms (``_confirm``) before writing anything."""
        spec = self._spec(name)
        where, (c0, width) = self._where[name], self._cols[name]
        target = (rows, *spec.shape) if spec.shape else (rows,)
        if component is not None:
            where, target = f"{where} component {component}", (rows,)
            c0, width = c0 + component, 1
        if type(value) is float or (not isinstance(value, torch.Tensor)  # (ABC checks: slow)
                                    and isinstance(value, numbers.Real)
                                    and not isinstance(value, bool)):
            try:
                v = float(value)
            except OverflowError:
                raise ValueError(
                    f"{where}: expected a number in [{spec.low}, {spec.high}], "
                    f"got one beyond float range ({str(value)[:20]}...)"
                ) from None
            if validate and not (math.isfinite(v) and spec.low <= v <= spec.high):
                raise ValueError(f"{where}: value {v} outside its range [{spec.low}, {spec.high}]")
            if validate and spec.integer and v != round(v):
                raise ValueError(f"{where}: expected {spec.requirement}, got {v}")
            return c0, width, spec.low, spec.high, v, None
        if isinstance(value, (list, tuple)):
            try:
                value = torch.as_tensor(value, dtype=torch.float32, device=self.device)
            except (OverflowError, RuntimeError, TypeError, ValueError) as e:
                raise ValueError(
                    f"{where}: expected a list of numbers, got one that does not "
                    f"convert to float32 ({e})"
                ) from None
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f"{where}: expected a number or a float tensor, got {type(value).__name__}"
            )
        dtype = value.dtype
        if dtype == torch.bool or dtype.is_complex:
            raise ValueError(f"{where}: expected a float tensor, got {dtype}")
        if value.device != self.device:
            raise ValueError(f"{where}: expected a tensor on {self.device}, got {value.device}")
        try:  # detached: the tables never join the caller's autograd graph
            v = value.detach()
            if dtype != torch.float32:
                v = v.to(torch.float32)
            if v.shape != target:
                v = v.expand(target)
            if v.dim() != 1:  # (a [rows] value is width 1 already: _view makes it [rows, 1])
                v = v.reshape(rows, width)
        except RuntimeError:
            raise ValueError(
                f"{where}: expected a number or a float tensor broadcastable to {target}, "
                f"got shape {tuple(value.shape)}"
            ) from None
        view = None  # the Warp view of v, when made (the write takes it too)
        # torch ops check at the call in a capture (a check launch would be recorded, not
        # run: eager on CPU; on CUDA a sync in a capture raises) and for the few whole-number
        # or (low, high) parameters; others by one device check, confirmed by _confirm
        if validate and (spec.integer or spec.ordered
                         or capturing(self.device, self._wp_device)):
            _refuse(where, spec, v, mask, pair=component is None)
        elif validate:  # sets the check flag if a value fails
            c = self._bound(("check", rows, spec.low, spec.high), kparams.check_values, rows, [
                self._all_envs, self._no_values, spec.low, spec.high, self._wp_check_flag])
            view = self._view(v)  # (rows <= num_envs: env_ids are checked distinct first)
            c.repoint(self._all_envs if mask is None else mask).set(1, view).launch(
                stream_for(self.device))
            checks.append((where, spec, v, mask))
        if slot is not None:
            v = v.new_empty(self.num_envs + 1, width).index_copy_(0, slot, v.view(rows, width))
            v, view = v[:-1], None
        return c0, width, spec.low, spec.high, v, view

    def _bound(self, key: tuple, kernel, dim: int, inputs: list) -> BoundLaunch:
        """The launch of ``kernel`` under ``key``, bound at its first use with ``inputs``
        (placeholders: the caller's mask is repointed per call, its values ``set``)."""
        c = self._launches.get(key)
        if c is None:
            c = self._launches[key] = BoundLaunch(kernel, dim, inputs=inputs,
                                                  device=self.device)
        return c

    def _view(self, v: torch.Tensor):
        """A 2-d Warp view of float32 ``v`` ``[rows, width]`` or ``[rows]`` (as ``[rows, 1]``)."""
        st = v.stride()
        if len(st) == 1:
            return raw_view(v.data_ptr(), v.dtype, (v.shape[0], 1), (st[0], 1), self.device)
        return raw_view(v.data_ptr(), v.dtype, tuple(v.shape), st, self.device)

    def _checked_mask(self, mask: torch.Tensor | None) -> torch.Tensor | None:
        """``mask`` checked (bool ``[num_envs]`` on the device, or None), contiguous: a
        strided one is copied, and the caller holds the copy until its launches are queued
        (a view does not hold its tensor, and the CPU reuses freed memory at once)."""
        check_mask(mask, self.num_envs, self.device)
        return mask if mask is None or mask.is_contiguous() else mask.contiguous()

    def _confirm(self, checks: list) -> None:
        """Raise the ``ValueError`` of the first failed device check in ``checks``: one read
        of the check flag (a sync). A set flag is cleared and the values checked again by
        torch ops, which name the bad value (a flag left set by an interrupted call thus
        costs one slow call, never a false error)."""
        if not checks or not self._check_flag.item():  # host-ok: validated tensor values
            return
        self._check_flag.zero_()
        for where, spec, v, mask in checks:  # the error path: find the first bad value
            _refuse(where, spec, v, mask)

    def _write(self, writes, mask: torch.Tensor | None, names: tuple[str, ...], clamp: bool):
        """One launch per write of :meth:`_prepare` (tensors of any strides) to both tables
        for the envs in ``mask`` (clamped with ``clamp``); then the listeners hear of ``names``."""
        m, stream = self._all_envs if mask is None else mask, stream_for(self.device)
        for c0, size, low, high, v, view in writes:  # (v is kept alive until launched)
            scalar = isinstance(v, float)
            c = self._bound(("write", c0, size, low, high, scalar, clamp), kparams.masked_write,
                            self.num_envs, [
                                self._all_envs, self._no_values, 0.0, int(scalar), c0, size,
                                low, high, int(clamp), self.wp_nominal, self.wp_effective])
            c.repoint(m)  # (first: it may select another recorded launch, which set() sets)
            if scalar:
                c.set(2, v)
            else:
                c.set(1, self._view(v) if view is None else view)
            c.launch(stream)
        if self._callbacks:
            self.notify(names, mask)

    # ------------------------------------------------------------------ change hooks
    def on_change(self, callback: ChangeCallback, kind: str = "torch",
                  key: Callable[[], object] | None = None,
                  loads: bool = True) -> Callable[[], None]:
        """Call ``callback(names, mask)`` after every write.

        ``names`` is a tuple of the parameter names written; ``mask`` a bool tensor
        ``[num_envs]`` on the device of the envs written, or ``None`` for all envs. Writes by
        ``set``, ``reset_to_default``, ``load_state_dict`` and randomization terms all notify.

        Writes inside a step (randomization, curricula) call it while the step is captured
        only: replays repeat the device work it launched, not its Python. So it must launch
        device work only (masked writes, no host sync, no host-side state change). ``kind``:
        ``"warp"`` when that work is Warp launches only (it then replays inside a Warp CPU
        graph), ``"torch"`` when it runs torch ops (the stages that write then run eagerly
        on CPU and in a CUDA graph on CUDA). ``key``:
        optional ``key()`` of host-side state the recorded work depends on (e.g. which
        buffers it launches into): a change drops the env's captured steps.
        ``loads=False``: not told of ``load_state_dict`` (a restore, not a write: what
        normalization modules' ``reset_on`` registers, so loading statistics and the env's
        state gives the same result in either order).
        Returns a function that removes the callback.
        """
        if key is not None and not callable(key):
            raise TypeError(f"on_change: key expected a callable or None, got {key!r}")
        if kind not in ("warp", "torch"):
            raise ValueError(f"on_change: kind expected 'warp' or 'torch', got {kind!r}")
        entry = (callback, kind, key, bool(loads))
        self._callbacks.append(entry)
        self._listeners_changed += 1

        def remove() -> None:
            self._callbacks.remove(entry)
            self._listeners_changed += 1

        return remove

    @property
    def listener_key(self) -> tuple:
        """Changes when a callback is added or removed, or a callback's ``key()`` changes
        (captured steps compare it)."""
        return (self._listeners_changed, *(k() for _, _, k, _ in self._callbacks if k is not None))

    @property
    def listeners_kind(self) -> str:
        """``"warp"`` when every ``on_change`` callback was registered with ``kind="warp"``,
        else ``"torch"``: the kind of the stages whose writes notify them."""
        return "warp" if all(k == "warp" for _, k, _, _ in self._callbacks) else "torch"

    def notify(self, names: tuple[str, ...], mask: torch.Tensor | None,
               load: bool = False) -> None:
        """Tell every ``on_change`` callback that ``names`` changed for ``mask`` (``load``:
        by ``load_state_dict``, told only to callbacks registered with ``loads=True``)."""
        for cb, _, _, loads in self._callbacks:
            if loads or not load:
                cb(names, mask)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, object]:
        """``{"names", "nominal", "effective"}``; tables are clones ``[C, num_envs]``."""
        return {
            "names": self.names,
            "nominal": self.nominal_table.clone(),
            "effective": self.effective_table.clone(),
        }

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore a ``state_dict()``; checks names, shapes, dtypes and values (finite,
        inside each spec range) before writing anything: a rejected load changes nothing.
        ``on_change`` listeners are told of the parameters and envs whose values the load
        changed, except those registered with ``loads=False`` (normalization modules'
        ``reset_on``: a load never resets statistics, so the statistics saved with the
        state may be loaded before or after it)."""
        tables = {"nominal": self.nominal_table, "effective": self.effective_table}
        check_like(state, {"names": self.names, **tables}, "params")  # keys, shapes, dtypes
        check_param_tables(state, self)  # finite, inside each spec range
        diff = torch.zeros_like(self.nominal_table, dtype=torch.bool)  # [C, N]
        with torch.no_grad():  # a saved table requiring grad must not attach ours
            for key, t in tables.items():
                diff |= t != state[key].to(self.device)
                t.copy_(state[key])
        changed = tuple(n for n, (c0, size) in self._cols.items()  # host-ok: a load
                        if self._callbacks and bool(diff[c0 : c0 + size].any()))
        if changed:  # listeners hear of the parameters and envs the load changed
            self.notify(changed, diff.any(0), load=True)

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "ParamTable cannot be pickled (it holds device tables and Warp views); save "
            "params.state_dict() (or env.state_dict()) and restore it with load_state_dict"
        )

    def __repr__(self) -> str:
        return f"ParamTable({', '.join(self.names)}; num_envs={self.num_envs}, {self.device})"
