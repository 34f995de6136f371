"""MuJoCo Warp as a gpuparam physics backend: one world per env; parameter writes reach the
model as :meth:`MjwBackend.params_changed` says (the policy: docs/robots.md).

Gravity is not a batchable MuJoCo Warp field: ``m.opt.gravity`` is replaced by an ``(N,)``
vec3 array before anything is captured (kernels index it by ``worldid % shape[0]``), and only
written in place afterwards.
"""

from __future__ import annotations

from functools import reduce
from operator import or_

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from gpuparam._device import stream_for, torch_capturing, wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.backend import Backend, BindContext
from gpuparam.envs.mujoco.model import PER_ELEMENT, set_const_groups
from gpuparam.kernels import actions as kactions
from gpuparam.kernels import episode as kepisode
from gpuparam.kernels import locomotion as kloco
from gpuparam.pipeline import StepContext

PHYSICAL = (*PER_ELEMENT, "gravity")
# Model fields made per-world: the written parameters and the constants set_const derives.
BATCHED = (*PER_ELEMENT, "body_subtreemass", "body_invweight0", "dof_invweight0",
           "actuator_acc0")
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

    Attributes (beyond ``Backend``'s):
        m, d: the ``mjw.Model`` and ``mjw.Data`` (world axis first).
        state: ``"qpos"`` float32 ``[N, nq]``, ``"qvel"`` ``[N, nv]``,
            ``"qacc_warmstart"`` ``[N, nv]`` (the solver's warm start): torch views of the
            ``d`` arrays (writing them sets the state the next step starts from), plus the
            task's previous root position (``"task_prev_position"``), so that
            ``env.state_dict()`` continues bit for bit.
        set_const_groups: parameter name -> the ``mjw.SetConstGroup`` bits of the
            ``set_const`` its writes run.
        dt: seconds per env step (``timestep * frame_skip``).
    """

    recompute_on = PHYSICAL
    batched = BATCHED
    defers_writes = True  # params_changed records, commit_writes applies (gated)
    post_constraint = True  # run rne_postconstraint after the substeps (cfrc_ext, ...)

    def __init__(self, mjm: mujoco.MjModel, frame_skip: int, noise_param: str,
                 qvel_normal: bool, forward_at_reset: bool = False,
                 njmax: int | None = None, nconmax: int | None = None,
                 deterministic: bool = False):
        super().__init__()
        check_sizes(njmax, nconmax, nv=mjm.nv)
        self.njmax, self.nconmax, self.deterministic = njmax, nconmax, bool(deterministic)
        self.mjm, self.frame_skip = mjm, frame_skip
        self.noise_param, self.qvel_normal = noise_param, qvel_normal
        self.forward_at_reset = forward_at_reset
        self.dt = float(mjm.opt.timestep) * frame_skip
        self.set_const_groups = set_const_groups(mjm)

    def bind(self, b: BindContext) -> None:
        n, dev, ctx = b.num_envs, wp_device(b.device), b.step
        self._device, self._torch_device = dev, b.device
        with wp.ScopedDevice(dev):
            m = self.m = mjw.put_model(self.mjm, batch_sizes={f: n for f in self.batched})
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

        # parameter names that trigger it -> its launch: a copy runs when one of its names is
        # written; vector fields get their first component (sliding friction, gear), body 0
        # (the world) has no mass parameter
        self._copies: dict[tuple[str, ...], BoundLaunch] = {
            (name,): BoundLaunch(kloco.copy_rows, out.shape, device=b.device,
                                 inputs=[wp.from_torch(b.param_rows(name))], outputs=[out])
            for name, out in (
                ("body_mass", m.body_mass[:, 1:]),
                ("geom_friction", m.geom_friction.view(float)[:, :, 0]),
                ("dof_damping", m.dof_damping),
                ("dof_armature", m.dof_armature),
                ("actuator_gear", m.actuator_gear.view(float)[:, :, 0]),
                ("gravity", m.opt.gravity.view(float)),
            )
        }
        self._action = wp.from_torch(ctx.action.reshape(n, -1))
        self._copy_ctrl = BoundLaunch(kactions.copy_ctrl, n, inputs=[self._action],
                                      outputs=[d.ctrl], device=b.device)
        self._reset_model = [m.qpos0, wp.from_torch(b.param_rows(self.noise_param)),
                             int(self.qvel_normal)]
        self._reset_keys = [wp.from_torch(ctx.seed), ctx.env_offset]
        self._reset_outputs = [wp.from_torch(ctx.episode_count), d.qpos, d.qvel]
        self._masks: dict[int, tuple[torch.Tensor, wp.array]] = {}
        # launches bound once: per step, and per mask (keyed by its cached view's id)
        self._count_overflows = BoundLaunch(
            kloco.count_overflows, n, inputs=[d.overflow, CONSTRAINT_DROPS, CONTACT_DROPS],
            outputs=[d.overflow, self._contact_seen, self.constraint_overflows,
                     self.contact_overflows], device=b.device)
        self._mask_launches: dict[tuple[str, int], BoundLaunch] = {}
        # recorded writes (params_changed) until commit_writes: a device flag (a masked
        # write hit an env) and, on the host, the copies and set_const groups to run
        self._written = wp.zeros(1, dtype=wp.int32, device=dev)
        self._pending: dict[tuple[str, ...], None] = {}
        self._pending_groups = 0
        self._reset_any = wp.zeros(1, dtype=wp.int32, device=dev)  # a reset hit an env
        self.model_writes = wp.zeros(1, dtype=wp.int32, device=dev)  # writes run (counted)
        self._count_write = BoundLaunch(kloco.count_write, 1, outputs=[self.model_writes],
                                        device=b.device)
        self.arena = None
        if b.device.type == "cuda" and not self.deterministic:  # device-ok: Warp's custom
            # allocators are CUDA-only, and a CPU capture may allocate in a capture_if body.
            # Sized from one eager set_const with every group used and one eager forward
            # (their allocations depend on the model's sizes only; the env's bind-time
            # params_changed of every parameter redoes the model writes, its first reset
            # the forward)
            nbytes = 0
            calls = [lambda: mjw.set_const(self.m, self.d, restore=False,
                                           groups=reduce(or_, self.set_const_groups.values()))]
            if self.forward_at_reset:
                calls.append(lambda: mjw.forward(self.m, self.d))
            for call in calls:
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

    def set_const(self, groups: int) -> None:
        """``mjw.set_const(m, d, groups, restore=False)``, all worlds, temporaries as
        :meth:`in_arena` says. Call inside the backend's stream scope."""
        self.in_arena(lambda: mjw.set_const(self.m, self.d, groups=groups, restore=False))

    def run_if(self, flag: wp.array, body) -> None:
        """``body()`` when ``flag[0]`` (int32 ``[1]``) is not 0: ``wp.capture_if``, a
        conditional node in a captured graph (on both devices), a read of the flag when
        run eagerly. Inside a torch CUDA graph capture (a ``"torch"`` segment) ``body``
        runs unconditionally: a conditional node there would end torch's capture and
        resume it under a new id, so torch's later allocations would leave its pool."""
        if torch_capturing(self._torch_device):
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

    def wp_mask(self, mask: torch.Tensor) -> wp.array:
        """A cached Warp view of a static bool mask tensor ``[N]``."""
        m = self._masks.get(id(mask))
        if m is None:
            m = self._masks[id(mask)] = (mask, wp.from_torch(mask))
        return m[1]

    def mask_launch(self, name: str, wmask: wp.array, bind) -> BoundLaunch:
        """The launch ``name`` over ``wmask`` (a view from :meth:`wp_mask`): ``bind(wmask)``,
        a ``BoundLaunch``, made at its first use and kept with the mask's view."""
        key = (name, id(wmask))
        launch = self._mask_launches.get(key)
        if launch is None:
            launch = self._mask_launches[key] = bind(wmask)
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
        wmask = self.wp_mask(mask)
        with self.scope(ctx):
            mjw.reset_data(self.m, self.d, reset=wmask)
            self.reset_state(ctx, wmask)
            if self.forward_at_reset:
                # all worlds (it changes nothing a later step reads: a step recomputes all
                # from qpos, qvel and the warm start), only at steps where ``mask`` holds an
                # env; with deterministic at every step (its launches keep capture-sized
                # buffers, which the arena cannot hold)
                forward = lambda: self.in_arena(lambda: mjw.forward(self.m, self.d))  # noqa: E731
                if self.deterministic:
                    forward()
                    return
                self._reset_any.zero_()
                self.mask_launch("flag_reset", wmask, lambda w: BoundLaunch(
                    kloco.flag_any, ctx.num_envs, inputs=[w], outputs=[self._reset_any],
                    device=ctx.device)).launch()
                self.run_if(self._reset_any, forward)

    def reset_state(self, ctx: StepContext, wmask: wp.array) -> None:
        """The initial state of the envs of ``wmask`` after ``mjw.reset_data``: Gymnasium's
        reset noise here; a subclass draws its own (keyed by ``begin_episode``)."""
        self.mask_launch("reset_state", wmask, lambda w: BoundLaunch(
            kloco.reset_state, ctx.num_envs, inputs=[*self._reset_model, w, *self._reset_keys],
            outputs=self._reset_outputs, device=ctx.device)).launch()

    def add_copy(self, names: tuple[str, ...], kernel: wp.Kernel, dim, inputs: list,
                 outputs: list, replace: str | None = None) -> None:
        """Register a copy of parameter rows into model fields, launched (all worlds) after
        every write of one of ``names`` (``set_const`` follows per ``set_const_groups``).
        ``replace``: drop the copy registered for that name first (e.g. a damping copy that
        also adds a PD gain). Call from ``bind``."""
        if replace is not None:
            del self._copies[(replace,)]
        self._copies[tuple(names)] = BoundLaunch(kernel, dim, inputs=inputs, outputs=outputs,
                                                 device=self._torch_device)

    def params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Record a write of ``names`` for ``mask`` (bool ``[N]``; None: all envs), applied
        by :meth:`commit_writes`: a device flag is set if ``mask`` holds an env, and the
        copies and ``set_const`` groups of ``names`` join the pending ones. Device work
        only."""
        keys = [key for key in self._copies if any(n in key for n in names)]
        groups = reduce(or_, (self.set_const_groups.get(n, 0) for n in names), 0)
        if not keys and not groups:
            return
        with self.scope():
            if mask is None:
                self._written.fill_(1)
            else:
                self.mask_launch("flag_written", self.wp_mask(mask), lambda w: BoundLaunch(
                    kloco.flag_any, mask.shape[0], inputs=[w], outputs=[self._written],
                    device=self._torch_device)).launch()
        self._pending.update(dict.fromkeys(keys))
        self._pending_groups |= groups

    def commit_writes(self, ctx: StepContext | None, gated: bool) -> None:
        """Copy the recorded physical parameters into the model (one kernel each, all
        worlds: unmasked worlds get their unchanged values back, bit for bit), then
        :meth:`set_const` with the groups of ``set_const_groups`` if a mass-type one was
        written (``restore=False``: ``d``'s kinematics stay at qpos0 values, which the next
        step recomputes from ``forward``). With ``gated`` all of it sits behind
        :meth:`run_if` on the flag the writes set, so a reset-time mass term costs a
        conditional node at steps without a reset, on both devices. Nothing in the body
        allocates but ``set_const``, from the arena on CUDA
        (``tests/envs/robots/test_model_writes.py``). With ``deterministic`` ``set_const``
        runs after the body, whenever a write is committed (on both devices): Warp's
        deterministic launches keep capture-sized buffers for the graph's lifetime, which a
        reused arena cannot hold."""
        copies = [self._copies[key] for key in self._pending]
        groups = self._pending_groups
        if not copies and not groups:
            return
        self._pending, self._pending_groups = {}, 0

        def write() -> None:
            for copy in copies:
                copy.launch()
            self._count_write.launch()
            if groups and not self.deterministic:
                self.set_const(groups)

        with self.scope(ctx):
            if gated:
                self.run_if(self._written, write)
            else:
                write()
            self._written.zero_()  # a memset: captured as the launches are
            if groups and self.deterministic:
                self.set_const(groups)
