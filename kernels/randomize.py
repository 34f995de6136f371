"""Randomization terms on the device: one launch per trigger class, one thread per env.

A class is an array of ``TermRow``; the thread of env ``e`` walks it in order (a later term
on the same parameter overwrites an earlier one). A term that fires for ``e`` draws the 32
bits ``draw_bits(term_key(seed, env_offset + e, STREAM_TERM0 + uid), counter)`` (keyed by
the global env id and the env's event counter, which it then advances); component ``j`` of
a vector parameter uses the event's ``j``-th bits (``next_bits`` applied ``j`` times).
``make_randomize`` makes the kernel for the draws and triggers of a set of ids
(``gpuparam.randomization.registry``), its dispatch unrolled over them.
"""

from __future__ import annotations

import warp as wp
from gpuparam.kernels.index import thread_index
from gpuparam.kernels.rng import (
    STREAM_TERM0,
    draw_bits,
    log_uniform,
    next_bits,
    normal,
    term_key,
    uniform,
    uniform_in,
)

# No floating-point contraction: NVRTC would fuse ``a + (b - a) * u`` into one FMA that
# the CPU build rounds twice, and every draw must be bit-identical on CPU and GPU.
wp.set_module_options({"fuse_fp": False})

# operations on the nominal value
OP_SET = wp.constant(0)
OP_ADD = wp.constant(1)
OP_SCALE = wp.constant(2)
# triggers evaluated in the launch (the built-ins' registry ids; new ones after them)
PLAIN = wp.constant(0)  # every env the launch considers
EVERY = wp.constant(1)  # per-env countdown of k steps, the first one a random phase
INTERVAL = wp.constant(2)  # per-env countdown of random intervals
MIN_STEPS = wp.constant(3)  # only if >= period_lo global steps since the env's previous draw
RESTARTED = -1.0e300  # a clock after (re)start: timed triggers draw their first value


@wp.struct
class TermRow:
    """One term: constants, then views of its device state (``N``: num_envs)."""

    dist: int  # the distribution's id (gpuparam.randomization.registry)
    op: int  # OP_SET, OP_ADD or OP_SCALE
    trigger: int  # PLAIN, EVERY, INTERVAL or MIN_STEPS
    dt_col: int  # INTERVAL: column of the env's time step (clock in seconds), or -1 (steps)
    col: int  # first column of the parameter in the [C, N] parameter tables
    size: int  # components
    uid: int  # random stream STREAM_TERM0 + uid
    linear: int  # 1: a schedule's ranges are interpolated between breakpoints, 0: held
    low: float  # the parameter's valid range: every result is clamped into it
    high: float
    period_lo: float  # EVERY: k; INTERVAL: interval range; MIN_STEPS: the minimum
    period_hi: float
    ranges: wp.array(dtype=float)  # [nbp * size * 2] (a, b) per breakpoint and component
    #   (low, high or mean, std); CHOICE: the values [nch * size]
    cdf: wp.array(dtype=float)  # CHOICE: cumulative probabilities [nch] (the last one 2)
    steps: wp.array(dtype=wp.int64)  # schedule breakpoints [nbp] (global steps; [0]: none)
    mask: wp.array(dtype=wp.bool)  # [N], or empty (None): all envs
    pe: wp.array2d(dtype=float)  # [2 * size, N] per-env (a, b) per component, or empty
    counter: wp.array(dtype=wp.int32)  # [N] events drawn per env
    clock: wp.array(dtype=wp.float64)  # [N] time left (EVERY, INTERVAL); last draw (MIN_STEPS)
    clamped: wp.array(dtype=wp.int64)  # [1] draws clamped so far


@wp.func
def countdown(row: TermRow, env: int, effective: wp.array2d(dtype=float)) -> bool:
    """Whether a timed trigger (``Every``, ``Interval``) is due for ``env``: its clock
    counts down by the env's time step (``effective[row.dt_col]``, or 1 step); due once
    less than half a step is left, else the clock advances."""
    dt = wp.float64(1.0)
    if row.dt_col >= 0:
        dt = wp.float64(effective[row.dt_col, env])
    left = row.clock[env] - dt
    if left >= wp.float64(0.5) * dt:
        row.clock[env] = left
        return False
    return True


@wp.func
def every_due(
    row: TermRow, env: int, gstep: wp.int64, effective: wp.array2d(dtype=float), key: int
) -> bool:
    """``Every(k)`` (``period_lo`` = k): a restarted clock (``RESTARTED``) first takes a
    random phase in [1, k], drawn from event counter -1 (never used by a draw)."""
    if row.clock[env] < wp.float64(0.0):
        u = uniform(draw_bits(key, -1))
        row.clock[env] = wp.float64(wp.floor(u * row.period_lo) + 1.0)
    return countdown(row, env, effective)


@wp.func
def interval_fired(row: TermRow, env: int, h: wp.uint32):
    """After a draw of ``Every``/``Interval``: the next interval, from the bits ``h`` after
    the value's."""
    row.clock[env] = wp.float64(row.period_lo + (row.period_hi - row.period_lo) * uniform(h))


@wp.func
def interval_due(
    row: TermRow, env: int, gstep: wp.int64, effective: wp.array2d(dtype=float), key: int
) -> bool:
    """``Interval(low_s, high_s)``: intervals uniform in ``[period_lo, period_hi]``, the
    first one (a restarted clock) from event counter -1 as ``every_due``'s phase."""
    if row.clock[env] < wp.float64(0.0):
        interval_fired(row, env, draw_bits(key, -1))
    return countdown(row, env, effective)


@wp.func
def min_steps_due(
    row: TermRow, env: int, gstep: wp.int64, effective: wp.array2d(dtype=float), key: int
) -> bool:
    """``OnReset(min_steps)`` (``period_lo``): only if >= min_steps global steps since the
    env's previous draw (``RESTARTED``: never drawn); stamps the step when due."""
    now = wp.float64(gstep)
    if now - row.clock[env] < wp.float64(row.period_lo):
        return False
    row.clock[env] = now
    return True


@wp.func
def fired_nothing(row: TermRow, env: int, h: wp.uint32):
    """After a draw of a trigger without a clock to rewind."""
    pass


@wp.func
def uniform_draw(h: wp.uint32, low: float, high: float) -> float:
    """``Uniform``: uniform in ``[low, high]``."""
    return uniform_in(h, low, high)


@wp.func
def log_uniform_draw(h: wp.uint32, low: float, high: float) -> float:
    """``LogUniform``: log-uniform in ``[low, high]`` (``0 < low <= high``)."""
    return log_uniform(low, high, uniform(h))


@wp.func
def gaussian_draw(h: wp.uint32, mean: float, std: float) -> float:
    """``Gaussian``: normal with ``mean`` and standard deviation ``std``."""
    return mean + std * normal(h)


@wp.func
def choice_draw(
    h: wp.uint32, j: int, size: int, values: wp.array(dtype=float), cdf: wp.array(dtype=float)
) -> float:
    """``Choice`` (a table distribution): component ``j`` of the value picked by the
    event's bits ``h`` from ``values`` ``[nch * size]`` with cumulative probabilities
    ``cdf`` ``[nch]`` (the last one 2, above any draw)."""
    u = uniform(h)
    pick = int(0)
    while pick < cdf.shape[0] - 1 and u >= cdf[pick]:
        pick += 1
    return values[pick * size + j]


@wp.func
def schedule_point(row: TermRow, gstep: wp.int64):
    """The schedule breakpoint ``p`` in effect at ``gstep`` and the fraction of the way to
    ``p + 1`` (0 unless ``row.linear``)."""
    nbp = row.steps.shape[0]
    p = int(0)
    frac = float(0.0)
    while p < nbp - 1 and gstep >= row.steps[p + 1]:
        p += 1
    if p < nbp - 1 and row.linear != 0:
        s0 = row.steps[p]
        if gstep > s0:
            frac = float(gstep - s0) / float(row.steps[p + 1] - s0)
    return p, frac


@wp.func
def range_at(row: TermRow, env: int, p: int, frac: float, j: int):
    """Component ``j``'s range ``(a, b)`` for ``env``: its per-env range, or breakpoint
    ``p``'s moved ``frac`` of the way to the next."""
    a = float(0.0)
    b = float(0.0)
    if row.pe.shape[0] > 0:
        a = row.pe[2 * j, env]
        b = row.pe[2 * j + 1, env]
    else:
        size = row.size
        k = 2 * (p * size + j)
        a = row.ranges[k]
        b = row.ranges[k + 1]
        if frac > 0.0:
            a = a + (row.ranges[k + 2 * size] - a) * frac
            b = b + (row.ranges[k + 2 * size + 1] - b) * frac
    return a, b


@wp.func
def write(
    row: TermRow,
    env: int,
    j: int,
    x: float,
    nominal: wp.array2d(dtype=float),
    effective: wp.array2d(dtype=float),
) -> int:
    """Write ``op(nominal, x)`` of component ``j`` for ``env``, clamped to the parameter's
    valid range; returns 1 if it was clamped, else 0."""
    v = x  # OP_SET
    if row.op == OP_ADD:
        v = nominal[row.col + j, env] + x
    elif row.op == OP_SCALE:
        v = nominal[row.col + j, env] * x
    vc = wp.clamp(v, row.low, row.high)
    effective[row.col + j, env] = vc
    return int(vc != v)


def make_randomize(ranged: tuple, tables: tuple = (), triggers: tuple = ()) -> wp.Kernel:
    """The ``randomize`` kernel for a set of distributions (``TermRow.dist`` ids) and
    triggers (``TermRow.trigger`` ids).

    Args:
        ranged: ``((id, draw), ...)``: distributions of a pair ``(a, b)`` per component
            (``low, high`` or ``mean, std``, interpolated by schedules, per-env with
            curricula), ``draw(h: wp.uint32, a: float, b: float) -> float`` a ``@wp.func``
            of the component's 32 random bits ``h`` (component ``j`` gets the event's
            ``j``-th bits).
        tables: ``((id, draw), ...)``: distributions of a table, ``draw(h, j, size,
            values, cdf) -> float`` with ``h`` the event's first bits for every component
            (one pick per event: ``choice_draw``).
        triggers: ``((id, due, fired), ...)``: triggers other than ``PLAIN`` (every env
            the launch considers), ``due(row, env, gstep, effective, key) -> bool`` (may
            advance ``row.clock``) and ``fired(row, env, h)`` after a draw (``h``: the
            bits after the value's), both ``@wp.func`` (``every_due``, ...).

    One Warp module per set (cached on disk, like every module), built without
    floating-point contraction as this module.
    """
    ranged, tables, triggers = tuple(ranged), tuple(tables), tuple(triggers)

    # Every wp.static sits in the kernel itself, not in nested closure functions: the
    # kernel's module hash covers its own static values (the ids), so a kernel for another
    # set of ids never reuses this one's cached binary.
    @wp.kernel(module="unique", module_options={"fuse_fp": False}, enable_backward=False)
    def randomize(
        rows: wp.array(dtype=TermRow),
        gated: int,
        gate: wp.array(dtype=wp.bool),
        seed: wp.array(dtype=wp.int32),
        gstep: wp.array(dtype=wp.int64),
        env_offset: int,
        nominal: wp.array2d(dtype=float),
        effective: wp.array2d(dtype=float),
        changed_out: wp.array(dtype=wp.bool),
    ):
        """One thread per env: every term of ``rows`` that fires for the env draws and
        writes (every component, clamped, counted).

        Args:
            rows: the class's terms ``[T]``, in order.
            gated: 1: only envs where ``gate`` (bool ``[N]``) is True are considered.
            seed: int32 ``[1]``, the env's seed; gstep: int64 ``[1]``, the global step.
            env_offset: global id of env 0 (draws are keyed by ``env_offset + env``).
            nominal: float32 ``[C, N]`` nominal parameter table.
            effective: float32 ``[C, N]`` effective parameter table (written: an output
                read too, by ``op`` and the ``Interval`` clock).
            changed_out: bool ``[N]``: whether any term wrote the env.
        """
        env = thread_index(wp.tid())
        changed = bool(False)
        if gated == 0 or gate[env]:
            s = seed[0]
            g = gstep[0]
            for t in range(rows.shape[0]):
                row = rows[t]
                key = int(term_key(s, env_offset + env, STREAM_TERM0 + row.uid))
                # due: in the mask, and the trigger's test (PLAIN: none)
                fires = bool(True)
                if row.mask.shape[0] > 0:
                    fires = row.mask[env]
                if fires:
                    for i in range(wp.static(len(triggers))):
                        if row.trigger == wp.static(triggers[i][0]):
                            fires = wp.static(triggers[i][1])(row, env, g, effective, key)
                if not fires:
                    continue
                changed = True
                c = row.counter[env]
                row.counter[env] = c + 1
                h = draw_bits(key, c)
                size = row.size
                p, frac = schedule_point(row, g)
                pick = h  # a table distribution: one pick per event, from these bits
                table = bool(False)
                for i in range(wp.static(len(tables))):
                    if row.dist == wp.static(tables[i][0]):
                        table = True
                        h = next_bits(h)
                nclamped = int(0)
                for j in range(size):
                    x = float(0.0)
                    if table:
                        for i in range(wp.static(len(tables))):
                            if row.dist == wp.static(tables[i][0]):
                                x = wp.static(tables[i][1])(pick, j, size, row.ranges, row.cdf)
                    else:
                        a, b = range_at(row, env, p, frac, j)
                        for i in range(wp.static(len(ranged))):
                            if row.dist == wp.static(ranged[i][0]):
                                x = wp.static(ranged[i][1])(h, a, b)
                        h = next_bits(h)
                    nclamped += write(row, env, j, x, nominal, effective)
                if nclamped > 0:
                    wp.atomic_add(row.clamped, 0, wp.int64(nclamped))
                # the trigger's bookkeeping after a draw (h: the bits after the value's)
                for i in range(wp.static(len(triggers))):
                    if row.trigger == wp.static(triggers[i][0]):
                        wp.static(triggers[i][2])(row, env, h)
        changed_out[env] = changed

    return randomize


# the built-in distributions' ids (``gpuparam.randomization.registry`` assigns them in this
# order and new ones after them)
UNIFORM = wp.constant(0)
LOGUNIFORM = wp.constant(1)
GAUSSIAN = wp.constant(2)
CHOICE = wp.constant(3)
