"""MuJoCo Warp as a gpuparam physics backend: one world per env; parameter writes reach the
model as :meth:`MjwBackend.params_changed` says (the policy: docs/robots.md).

Gravity is not a batchable MuJoCo Warp field: ``m.opt.gravity`` is replaced by an ``(N,)``
vec3 array before anything is captured (kernels index it by ``worldid % shape[0]``), and only
written in place afterwards.
"""

from __future__ import annotations

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from gpuparam._device import stream_for, torch_capturing, wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.backend import Backend, BindContext
from gpuparam.envs.mujoco.model import PER_ELEMENT, has_muscles
from gpuparam.envs.mujoco.setconst import MaskedSetConst, unsupported
from gpuparam.kernels import actions as kactions
from gpuparam.kernels import episode as kepisode
from gpuparam.kernels import locomotion as kloco
from gpuparam.kernels import setconst as ksetconst
from gpuparam.pipeline import StepContext

PHYSICAL = (*PER_ELEMENT, "gravity")
# Model fields made per-world: the written parameters and the constants set_const derives
# (and tendon_invweight0 in models with tendons).
BATCHED = (*PER_ELEMENT, "body_subtreemass", "body_invweight0", "dof_invweight0",
           "actuator_acc0")
GATINGS = ("mask", "graph")
# mjw.set_const's groups of the mass-derived constants (its docstring's table)
INERTIAL_GROUPS = int(mjw.SetConstGroup.FIXED | mjw.SetConstGroup.INERT0)
ALIGN = 256  # bytes: each temporary starts on a 256-byte boundary, as CUDA's allocators do
_O = mjw.OverflowType
# MuJoCo Warp's overflow bits (its per-world bitmask ``d.overflow``) that mean something did
# not fit a fixed buffer and was dropped, counted in ``env.overflows``: constraint rows,
# Jacobian non-zeros and active dofs (the solver's per-world buffers), then every other drop
# (broadphase pairs and contacts of the shared contact buffer, CCD contacts, heightfield
# contacts, EPA's horizon, contact and tactile sensor matches; a bit a later MuJoCo Warp adds
# lands here too). Solver iteration limits (ITERATIONS, LS_ITERATIONS) drop nothing: not
# counted (the legged recipe uses 1 iteration by design).
CONSTRAINT_DROPS = int(_O.NEFC | _O.NJMAX_NNZ | _O.NVMAX)
CONTACT_DROPS = int(_O.ALL) & ~(CONSTRAINT_DROPS | int(_O.ITERATIONS | _O.LS_ITERATIONS))

# MuJoCo Warp's sizes are int32 (kernel arguments, array dimensions); a dimension is padded
# up to a tile of 16 rows
SIZE_LIMIT = 2**31 - 16


def step_keys(ctx: StepContext) -> kepisode.StepKeys:
    """The keys of the envs' draws as one kernel argument: views of the step context's
    ``seed``, ``episode_count`` and ``step_count`` (buffers allocated once, so bound once)."""
    keys = kepisode.StepKeys()
    keys.seed, keys.env_offset = wp.from_torch(ctx.seed), ctx.env_offset
    keys.episode_count = wp.from_torch(ctx.episode_count)
    keys.step_count = wp.from_torch(ctx.step_count)
    return keys


def check_sizes(njmax: object, nconmax: object, num_envs: object = None,
                nv: int | None = None) -> None:
    """Refuse buffer sizes MuJoCo Warp cannot take, with a ``ValueError`` naming the
    argument, before anything is built: ``njmax`` and ``nconmax`` are ``None`` or ints in
    ``[1, SIZE_LIMIT]``; given ``num_envs``, the shared contact buffer ``nconmax *
    num_envs`` and given the model's ``nv``, the constraint Jacobian's ``njmax * nv``
    entries per world must not exceed ``SIZE_LIMIT`` either."""
    for what, v in (("njmax", njmax), ("nconmax", nconmax)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)
                              or not 1 <= v <= SIZE_LIMIT):
            raise ValueError(f"{what}: expected an int in [1, {SIZE_LIMIT}] or None (MuJoCo "
                             f"Warp's sizes are int32), got {v!r}")
    if (nconmax is not None and isinstance(num_envs, int) and num_envs > 0
            and nconmax * num_envs > SIZE_LIMIT):
        raise ValueError(f"nconmax: expected at most {SIZE_LIMIT // num_envs} with num_envs="
                         f"{num_envs} (the shared contact buffer, nconmax * num_envs, is "
                         f"int32-sized), got {nconmax}")
    if njmax is not None and nv is not None and njmax * max(nv, 1) > SIZE_LIMIT:
        raise ValueError(f"njmax: expected at most {SIZE_LIMIT // max(nv, 1)} for a model of "
                         f"{nv} dofs (the constraint Jacobian, njmax * nv per world, is "
                         f"int32-sized), got {njmax}")


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-nbytes // ALIGN) * ALIGN


class Arena:
    """A bump allocator over one device buffer of ``nbytes`` bytes (``uint8``), with the
    methods of Warp's public ``wp.Allocator`` protocol: installed with ``wp.ScopedAllocator``
    while ``mjw.set_const`` is captured, its temporaries are slices of this buffer (the
    captured graph replays them at the same addresses; each capture starts again at offset
    0, its temporaries being dead once it returns, in stream order); one beyond ``nbytes``
    raises ``RuntimeError`` at capture. It holds the sum of one call's temporaries for as
    long as the env lives (a few hundred floats per env: ``nq + 7 nv + 6 nbody`` and some)."""

    def __init__(self, device: wp.context.Device, nbytes: int):
        self.buffer = wp.empty(max(nbytes, 1), dtype=wp.uint8, device=device)
        self.nbytes, self.used = nbytes, 0

    def allocate(self, size_in_bytes: int) -> int:
        start, self.used = self.used, self.used + aligned(size_in_bytes)
        if self.used > self.nbytes:
            raise RuntimeError(
                f"set_const's temporaries: expected at most {self.nbytes} bytes (counted at "
                f"bind), got {self.used}"
            )
        return self.buffer.ptr + start

    def deallocate(self, ptr: int, size_in_bytes: int) -> None:
        pass


class Counting:
    """Warp's built-in allocator of ``device``, counting the aligned bytes it hands out
    (``nbytes``): sizes an :class:`Arena` from one eager call."""

    def __init__(self, device: wp.context.Device):
        self.inner, self.nbytes = wp.get_device_allocator(device), 0

    def allocate(self, size_in_bytes: int) -> int:
        self.nbytes += aligned(size_in_bytes)
        return self.inner.allocate(size_in_bytes)

    def deallocate(self, ptr: int, size_in_bytes: int) -> None:
        self.inner.deallocate(ptr, size_in_bytes)


class MjwBackend(Backend):
    """N MuJoCo Warp worlds of one model.

    Args:
        mjm: the compiled ``mujoco.MjModel`` (host).
        frame_skip: physics steps per env step.
        noise_param: the parameter holding the reset-noise scale.
        qvel_normal: reset ``qvel`` with ``scale * N(0, 1)`` (Ant, HalfCheetah) instead of
            ``U(-scale, scale)``.
        forward_at_reset: run ``mjw.forward`` after a reset (all worlds; the task reads
            ``mj_forward`` quantities of the new state, as Humanoid's observation does).
        njmax, nconmax, deterministic: as ``RobotEnv``'s; the env steps at which MuJoCo
            Warp dropped what did not fit are counted in ``constraint_overflows`` int32
            ``[N]`` (per world: :data:`CONSTRAINT_DROPS`) and ``contact_overflows`` int32
            ``[1]`` (some world: :data:`CONTACT_DROPS`).
        gating: how work that only some steps need is skipped (one of :data:`GATINGS`):
            ``"mask"`` runs it at every step, masks acting inside the kernels (no
            conditional graph node); ``"graph"`` puts the reset's ``forward`` (and
            ``mjw.set_const`` for a model :func:`unsupported` refuses) behind
            ``wp.capture_if`` on a flag set from the mask (docs/robots.md). Both give the
            same bits.

    Attributes (beyond ``Backend``'s):
        m, d: the ``mjw.Model`` and ``mjw.Data`` (world axis first).
        state: ``"qpos"`` float32 ``[N, nq]``, ``"qvel"`` ``[N, nv]``,
            ``"qacc_warmstart"`` ``[N, nv]`` (the solver's warm start): torch views of the
            ``d`` arrays (writing them sets the state the next step starts from), plus the
            task's previous root position (``"task_prev_position"``), so that
            ``env.state_dict()`` continues bit for bit.
        changed: bool ``[N]`` on the env's device: worlds written since the last commit
            whose derived constants await recomputation.
        recompute: the :class:`MaskedSetConst` of the model, or None (``mjw.set_const``
            is the fallback).
        dt: seconds per env step (``timestep * frame_skip``).
    """

    recompute_on = PHYSICAL
    batched = BATCHED
    commits = True  # the step's "model_writes" stages run commit()
    post_constraint = True  # run rne_postconstraint after the substeps (cfrc_ext, ...)

    def __init__(self, mjm: mujoco.MjModel, frame_skip: int, noise_param: str,
                 qvel_normal: bool, forward_at_reset: bool = False,
                 njmax: int | None = None, nconmax: int | None = None,
                 deterministic: bool = False, gating: str = "mask"):
        super().__init__()
        check_sizes(njmax, nconmax, nv=mjm.nv)
        if gating not in GATINGS:
            raise ValueError(f"gating: expected one of {GATINGS}, got {gating!r}")
        self.njmax, self.nconmax, self.deterministic = njmax, nconmax, bool(deterministic)
        self.gating = gating
        self.mjm, self.frame_skip = mjm, frame_skip
        self.noise_param, self.qvel_normal = noise_param, qvel_normal
        self.forward_at_reset = forward_at_reset
        self.dt = float(mjm.opt.timestep) * frame_skip

    def bind(self, b: BindContext) -> None:
        n, dev, ctx = b.num_envs, wp_device(b.device), b.step
        self._device, self._torch_device = dev, b.device
        batched = self.batched + (("tendon_invweight0",) if self.mjm.ntendon else ())
        with wp.ScopedDevice(dev):
            m = self.m = mjw.put_model(self.mjm, batch_sizes={f: n for f in batched})
            m.opt.gravity = wp.array(np.tile(self.mjm.opt.gravity, (n, 1)), dtype=wp.vec3)
            if self.deterministic:
                m.opt.deterministic = int(mjw.DeterminismType.ALL)
            # every drop is counted per step below (env.overflows): no print
            m.opt.warn_overflow = int(m.opt.warn_overflow) & ~(CONSTRAINT_DROPS | CONTACT_DROPS)
            self.d = mjw.make_data(self.mjm, nworld=n, njmax=self.njmax, nconmax=self.nconmax)
            self.constraint_overflows = wp.zeros(n, dtype=wp.int32)
            self.contact_overflows = wp.zeros(1, dtype=wp.int32)
            self._contact_seen = wp.zeros(1, dtype=wp.int32)  # a world saw a contact drop
        d = self.d
        self.state = {"qpos": wp.to_torch(d.qpos), "qvel": wp.to_torch(d.qvel),
                      "qacc_warmstart": wp.to_torch(d.qacc_warmstart)}

        # the worlds whose derived constants a commit recomputes, and the mask of "all"
        self.changed = torch.zeros(n, dtype=torch.bool, device=b.device)
        self._all = torch.ones(n, dtype=torch.bool, device=b.device)
        self._changed_wp = wp.from_torch(self.changed)
        self._mark = BoundLaunch(ksetconst.mark_changed, n, inputs=[self._all],
                                 outputs=[self._changed_wp], device=b.device)
        self.recompute = (MaskedSetConst(self.mjm, m, n, self.changed, b.device)
                          if unsupported(self.mjm) is None else None)
        # parameter names that trigger it -> (its launch, whether the derived constants
        # follow): a copy runs when one of its names is written; vector fields get their
        # first component (sliding friction, gear), body 0 (the world) has no mass parameter
        self._copies: dict[tuple[str, ...], tuple[BoundLaunch, bool]] = {}
        for name, out, recompute in (
            ("body_mass", m.body_mass[:, 1:], True),
            ("geom_friction", m.geom_friction.view(float)[:, :, 0], False),
            ("dof_damping", m.dof_damping, False),
            ("dof_armature", m.dof_armature, True),
            ("actuator_gear", m.actuator_gear.view(float)[:, :, 0], has_muscles(self.mjm)),
            ("gravity", m.opt.gravity.view(float), False),
        ):
            self.add_copy((name,), kloco.copy_rows, out.shape,
                          [wp.from_torch(b.param_rows(name))], [out], recompute=recompute)
        self._action = wp.from_torch(ctx.action.reshape(n, -1))
        self._copy_ctrl = BoundLaunch(kactions.copy_ctrl, n, inputs=[self._action],
                                      outputs=[d.ctrl], device=b.device)
        self._reset_model = [m.qpos0, wp.from_torch(b.param_rows(self.noise_param)),
                             int(self.qvel_normal)]
        self._reset_keys = [wp.from_torch(ctx.seed), ctx.env_offset]
        self._reset_outputs = [wp.from_torch(ctx.episode_count), d.qpos, d.qvel]
        # the masks a reset runs over, by role: the auto-reset's (the step's done envs), an
        # explicit reset's (``env.reset(mask)`` copies its mask into ctx.reset_mask) and all
        # envs (a task's step); each launch over one is bound once per role (mask_launch)
        self._roles: dict[str, tuple[torch.Tensor, wp.array]] = {
            role: (t, wp.from_torch(t)) for role, t in (
                ("done", ctx.done), ("reset", ctx.reset_mask), ("all", self._all))}
        # launches bound once: per step, and per mask (keyed by its cached view's id)
        self._count_overflows = BoundLaunch(
            kloco.count_overflows, n, inputs=[d.overflow, CONSTRAINT_DROPS, CONTACT_DROPS],
            outputs=[d.overflow, self._contact_seen, self.constraint_overflows,
                     self.contact_overflows], device=b.device)
        self._mask_launches: dict[tuple[str, str], BoundLaunch] = {}
        self._flag = wp.zeros(1, dtype=wp.int32, device=dev)  # a mask holds a world
        self._flag_changed = BoundLaunch(kloco.flag_any, n, inputs=[self._changed_wp],
                                         outputs=[self._flag], device=b.device)
        self.arena = None
        gated = [self.forward_at_reset, self.recompute is None]
        if (b.device.type == "cuda" and not self.deterministic  # device-ok: Warp's custom
                and self.gating == "graph" and any(gated)):
            # allocators are CUDA-only, and a CPU capture may allocate in a capture_if body.
            # Sized from one eager call of each gated body (their allocations depend on the
            # model's sizes only; the env's bind-time params_initial redoes the set_const,
            # its first reset the forward)
            nbytes = 0
            calls = [lambda: mjw.forward(self.m, self.d),
                     lambda: mjw.set_const(self.m, self.d, groups=INERTIAL_GROUPS, restore=False)]
            for call, use in zip(calls, gated, strict=True):
                if not use:
                    continue
                count = Counting(dev)
                with wp.ScopedDevice(dev), wp.ScopedAllocator(dev, count):
                    call()
                nbytes = max(nbytes, count.nbytes)
            self.arena = Arena(dev, nbytes)
        # the model and data were built on Warp's own stream; the steps run on torch's
        # (see scope): finish them first (a setup-time wait; a no-op on CPU)
        wp.synchronize_device(dev)

    def in_arena(self, call) -> None:
        """``call()``; while a graph is captured on CUDA its temporaries come from
        :attr:`arena` (so it may sit in a ``wp.capture_if`` body, where CUDA forbids graph
        memory nodes). Call inside the backend's stream scope."""
        if self.arena is None or not wp.get_device(self._device).is_capturing:
            call()
            return
        self.arena.used = 0
        with wp.ScopedAllocator(self._device, self.arena):
            call()

    def set_const(self) -> None:
        """``mjw.set_const(m, d, FIXED | INERT0, restore=False)``, all worlds (the fallback
        of a model :func:`unsupported` refuses), temporaries as :meth:`in_arena` says. Call
        inside the backend's stream scope."""
        self.in_arena(lambda: mjw.set_const(self.m, self.d, groups=INERTIAL_GROUPS,
                                            restore=False))

    def run_if(self, flag: wp.array, body) -> None:
        """``body()`` when ``flag[0]`` (int32 ``[1]``) is not 0, gated as :attr:`gating`
        says: with ``"mask"`` always; with ``"graph"`` ``wp.capture_if``, a conditional
        node in a captured graph (on both devices), a read of the flag when run eagerly.
        Inside a torch CUDA graph capture (a ``"torch"`` segment) ``body`` runs
        unconditionally: a conditional node there would end torch's capture and resume it
        under a new id, so torch's later allocations would leave its pool."""
        if self.gating == "mask" or torch_capturing(self._torch_device):
            body()
        else:
            wp.capture_if(flag, on_true=body)

    def scope(self, ctx: StepContext | None = None):
        """Make MuJoCo Warp's launches (which take no stream argument) go to the step's
        stream. ``sync_enter=False``: no wait on Warp's previous current stream, which would
        be a dependency on uncaptured work inside a CUDA graph capture (error 905); the
        step's stream is already ordered after the caller's work."""
        stream = ctx.stream if ctx is not None else stream_for(self._torch_device)
        if stream is not None:
            return wp.ScopedStream(stream, sync_enter=False)
        return wp.ScopedDevice(self._device)

    def mask_role(self, mask: torch.Tensor | None) -> tuple[str, wp.array]:
        """Which of the step context's masks ``mask`` is, and its Warp view (made at bind):
        ``"done"`` (``ctx.done``, the auto-reset's), ``"reset"`` (``ctx.reset_mask``, an
        explicit reset's) or ``"all"`` (None: every env). ``ValueError`` for another."""
        if mask is None:
            return "all", self._roles["all"][1]
        for role, (t, view) in self._roles.items():
            if mask is t:
                return role, view
        raise ValueError("a reset's mask: expected the step context's done or reset_mask "
                         f"(an explicit reset copies its mask there), got a tensor "
                         f"{tuple(mask.shape)}")

    def mask_launch(self, name: str, mask: torch.Tensor | None, bind) -> BoundLaunch:
        """The launch ``name`` over ``mask`` (see :meth:`mask_role`): ``bind(view)``, a
        ``BoundLaunch`` over the mask's Warp view, bound at its first use, once per role."""
        role, view = self.mask_role(mask)
        launch = self._mask_launches.get((name, role))
        if launch is None:
            launch = self._mask_launches[(name, role)] = bind(view)
        return launch

    def step(self, ctx: StepContext) -> None:
        with self.scope(ctx):
            self.write_ctrl(ctx)
            d = self.d
            self._contact_seen.zero_()  # a memset: captured as the launches are
            for _ in range(self.frame_skip):
                mjw.step(self.m, d)
            # d.overflow holds the bits of every substep (MuJoCo Warp ORs them in; the
            # kernel clears them): one count per env step, whatever frame_skip is
            self._count_overflows.launch()  # on the scope's stream, as MuJoCo Warp's
            if self.post_constraint:
                mjw.rne_postconstraint(self.m, d)

    def write_ctrl(self, ctx: StepContext) -> None:
        """Before the substeps: the controls from ``ctx.action`` (here a copy, the zero
        action for an env whose action has a NaN component; a subclass may map actions to
        PD targets, delay them, apply forces). Inside the step's stream scope."""
        self._copy_ctrl.launch()  # on the scope's stream, as MuJoCo Warp's

    def reset(self, ctx: StepContext, mask: torch.Tensor) -> None:
        _, wmask = self.mask_role(mask)
        with self.scope(ctx):
            mjw.reset_data(self.m, self.d, reset=wmask)
            self.reset_state(ctx, mask)
            if self.forward_at_reset:
                # all worlds (it changes nothing a later step reads: a step recomputes all
                # from qpos, qvel and the warm start); with "graph" gating only at steps
                # where ``mask`` holds an env, with deterministic at every step (its
                # launches keep capture-sized buffers, which the arena cannot hold)
                forward = lambda: self.in_arena(lambda: mjw.forward(self.m, self.d))  # noqa: E731
                if self.deterministic or self.gating == "mask":
                    forward()
                    return
                self._flag.zero_()
                self.mask_launch("flag_reset", mask, lambda w: BoundLaunch(
                    kloco.flag_any, ctx.num_envs, inputs=[w], outputs=[self._flag],
                    device=ctx.device)).launch()
                self.run_if(self._flag, forward)

    def reset_state(self, ctx: StepContext, mask: torch.Tensor) -> None:
        """The initial state of the envs of ``mask`` (``ctx.done`` or ``ctx.reset_mask``)
        after ``mjw.reset_data``: Gymnasium's reset noise here; a subclass draws its own
        (keyed by ``begin_episode``)."""
        self.mask_launch("reset_state", mask, lambda w: BoundLaunch(
            kloco.reset_state, ctx.num_envs, inputs=[*self._reset_model, w, *self._reset_keys],
            outputs=self._reset_outputs, device=ctx.device)).launch()

    def add_copy(self, names: tuple[str, ...], kernel: wp.Kernel, dim, inputs: list,
                 outputs: list, replace: str | None = None, recompute: bool = False) -> None:
        """Register a copy of parameter rows into model fields, launched (all worlds: a
        world not written gets its own values back, bit for bit) at every write of one of
        ``names``. ``recompute=True``: the copy writes a field the derived constants
        depend on (mass, inertia, centre of mass, armature, ``qpos0``, body poses): the
        write's worlds are marked in :attr:`changed`, recomputed by the next commit.
        ``replace``: drop the copy registered for that name first (e.g. a damping copy that
        also adds a PD gain). Call from ``bind``."""
        if replace is not None:
            del self._copies[(replace,)]
        self._copies[tuple(names)] = (BoundLaunch(kernel, dim, inputs=inputs, outputs=outputs,
                                                  device=self._torch_device), bool(recompute))

    def params_initial(self, names: tuple[str, ...]) -> None:
        """At construction: every copy, then ``mjw.set_const`` over all worlds if a copy
        feeds the derived constants (the constants of the default parameters, as every
        run before the masked recompute had them: their bits are kept)."""
        with self.scope():
            for copy, _ in self._copies.values():
                copy.launch()
            if any(rec for _, rec in self._copies.values()):
                mjw.set_const(self.m, self.d, groups=INERTIAL_GROUPS, restore=False)

    def params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """A write of ``names`` for ``mask`` (bool ``[N]``; None: all envs): the copies of
        ``names`` run now (where the write runs: inside the step's graph for a write
        inside a step), and if one of them feeds the derived constants the worlds of
        ``mask`` join :attr:`changed`, recomputed by the next commit (the step's or the
        reset's ``"model_writes"`` stage). Device work only."""
        hit = [c for key, c in self._copies.items() if any(n in key for n in names)]
        if not hit:
            return
        with self.scope():
            for copy, _ in hit:
                copy.launch()
            if any(rec for _, rec in hit):
                if mask is not None and not mask.is_contiguous():  # a caller's strided view
                    mask = mask.contiguous()  # (between steps: a step's masks are its own)
                self._mark.repoint(self._all if mask is None else mask).launch()

    def commit(self, ctx: StepContext) -> None:
        """The ``"model_writes"`` stage: the derived constants of the worlds in
        :attr:`changed` recomputed, ``changed`` cleared (one masked launch; a model
        :func:`unsupported` refuses runs ``mjw.set_const`` over all worlds when a world
        changed, gated as :attr:`gating` says). Nothing else reads or writes ``d``."""
        with self.scope(ctx):
            if self.recompute is not None:
                self.recompute.launch()
                return
            self._flag.zero_()
            self._flag_changed.launch()
            self.run_if(self._flag, self.set_const)
            self._changed_wp.zero_()  # a memset: captured as the launches are
