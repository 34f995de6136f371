"""MuJoCo Warp as a gpuparam physics backend: one world per env, physical parameters
copied from the parameter table into the model's per-world arrays when they are written
(the policy: docs/robots.md).

After every write of a physical parameter (``params.set``, randomization terms, curricula,
``load_state_dict``) ``params_changed`` copies the written rows into the model (one kernel
each, all worlds: unmasked worlds get their unchanged values back, bit for bit), then runs
MuJoCo Warp's ``set_const`` (``mj_setConst``, all worlds) with the groups a mass-type write
needs (``model.set_const_groups``), so the derived constants are consistent before the
next step; ``restore=False`` leaves ``d``'s kinematics at qpos0 values, which the next step
recomputes (it starts with ``forward``).

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

from gpuparam._device import stream_for, wp_device
from gpuparam.backend import Backend, BindContext
from gpuparam.envs.mujoco.model import PER_ELEMENT, set_const_groups
from gpuparam.kernels import locomotion as kloco
from gpuparam.pipeline import StepContext

PHYSICAL = (*PER_ELEMENT, "gravity")
# Model fields made per-world: the written parameters and the constants set_const derives.
BATCHED = (*PER_ELEMENT, "body_subtreemass", "body_invweight0", "dof_invweight0",
           "actuator_acc0")


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
        njmax, nconmax, deterministic: as ``RobotEnv``'s; the steps at which what did not
            fit was dropped are counted in ``constraint_overflows`` int32 ``[N]`` and
            ``contact_overflows`` int32 ``[1]``.

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
    post_constraint = True  # run rne_postconstraint after the substeps (cfrc_ext, ...)

    def __init__(self, mjm: mujoco.MjModel, frame_skip: int, noise_param: str,
                 qvel_normal: bool, forward_at_reset: bool = False,
                 njmax: int | None = None, nconmax: int | None = None,
                 deterministic: bool = False):
        super().__init__()
        for what, v in (("njmax", njmax), ("nconmax", nconmax)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{what}: expected an int >= 1 or None, got {v!r}")
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
            # dropped constraint rows are counted per world below (env.overflows): no print
            m.opt.warn_overflow = int(m.opt.warn_overflow) & ~int(mjw.OverflowType.NEFC)
            self.d = mjw.make_data(self.mjm, nworld=n, njmax=self.njmax, nconmax=self.nconmax)
            self.constraint_overflows = wp.zeros(n, dtype=wp.int32)
            self.contact_overflows = wp.zeros(1, dtype=wp.int32)
        d, mjm = self.d, self.mjm
        self.state = {"qpos": wp.to_torch(d.qpos), "qvel": wp.to_torch(d.qvel),
                      "qacc_warmstart": wp.to_torch(d.qacc_warmstart)}

        def rows(name: str) -> wp.array:
            return wp.from_torch(b.param_rows(name))

        # parameter names that trigger it -> (kernel, launch dim, args): a copy runs when
        # one of its names is written; body 0 (the world) has no mass parameter
        self._copies: dict[tuple[str, ...], tuple[wp.Kernel, object, list]] = {
            (name,): (kernel, (n, size), [rows(name), *col0, getattr(m, name)])
            for name, kernel, size, col0 in (
                ("body_mass", kloco.copy_rows, mjm.nbody - 1, [1]),
                ("geom_friction", kloco.copy_rows_first, mjm.ngeom, []),
                ("dof_damping", kloco.copy_rows, mjm.nv, [0]),
                ("dof_armature", kloco.copy_rows, mjm.nv, [0]),
                ("actuator_gear", kloco.copy_rows_first, mjm.nu, []),
            )
        }
        self._copies[("gravity",)] = (kloco.copy_gravity, n, [rows("gravity"), m.opt.gravity])
        self._action = wp.from_torch(ctx.action.reshape(n, -1))
        self._reset_args = [
            wp.from_torch(ctx.seed), ctx.env_offset, wp.from_torch(ctx.episode_count), m.qpos0,
            rows(self.noise_param), int(self.qvel_normal), d.qpos, d.qvel,
        ]
        self._masks: dict[int, tuple[torch.Tensor, wp.array]] = {}
        self._written = wp.zeros(1, dtype=wp.int32, device=dev)  # a masked write hit an env
        self.model_writes = wp.zeros(1, dtype=wp.int32, device=dev)  # copies run (counted)
        # the model and data were built on Warp's own stream; the steps run on torch's
        # (see _scope): finish them first (a setup-time wait, CUDA only)
        if b.device.type == "cuda":  # device-ok: CPU launches are synchronous
            wp.synchronize_device(dev)

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

    def step(self, ctx: StepContext) -> None:
        with self.scope(ctx):
            self.write_ctrl(ctx)
            d = self.d
            for _ in range(self.frame_skip):
                mjw.step(self.m, d)
                wp.launch(kloco.count_overflows, ctx.num_envs, [
                    d.nefc, d.njmax, d.nacon, d.naconmax, self.constraint_overflows,
                    self.contact_overflows,
                ])
            if self.post_constraint:
                mjw.rne_postconstraint(self.m, d)

    def write_ctrl(self, ctx: StepContext) -> None:
        """Before the substeps: the controls from ``ctx.action`` (here a copy; a subclass
        may map actions to PD targets, delay them, apply forces). Inside the step's stream
        scope."""
        wp.copy(self.d.ctrl, self._action)

    def reset(self, ctx: StepContext, mask: torch.Tensor) -> None:
        wmask = self.wp_mask(mask)
        with self.scope(ctx):
            mjw.reset_data(self.m, self.d, reset=wmask)
            self.reset_state(ctx, wmask)
            if self.forward_at_reset:
                # all worlds, at every step: forward changes nothing a later step reads (the
                # step recomputes every derived quantity from qpos, qvel and the warm start),
                # and it cannot sit behind a wp.capture_if: MuJoCo Warp's forward allocates
                # temporaries, which CUDA forbids in a conditional node's body
                mjw.forward(self.m, self.d)

    def reset_state(self, ctx: StepContext, wmask: wp.array) -> None:
        """The initial state of the envs of ``wmask`` after ``mjw.reset_data``: Gymnasium's
        reset noise here; a subclass draws its own (keyed by ``begin_episode``)."""
        wp.launch(kloco.reset_state, ctx.num_envs, [wmask, *self._reset_args])

    def add_copy(self, names: tuple[str, ...], kernel: wp.Kernel, dim, args: list,
                 replace: str | None = None) -> None:
        """Register a copy of parameter rows into model fields, launched (all worlds) after
        every write of one of ``names`` (``set_const`` follows per ``set_const_groups``).
        ``replace``: drop the copy registered for that name first (e.g. a damping copy that
        also adds a PD gain). Call from ``bind``."""
        if replace is not None:
            del self._copies[(replace,)]
        self._copies[tuple(names)] = (kernel, dim, args)

    def params_changed(self, names: tuple[str, ...], mask: torch.Tensor | None) -> None:
        """Copy the written physical parameters into the model (all worlds), then
        ``set_const`` if a mass-type one was written. Device work only. Eagerly the copies
        run unconditionally (always correct); in a captured graph they sit behind
        ``wp.capture_if`` on a device flag set from ``mask`` (bool ``[N]``; None: always),
        so a replay runs them only at steps whose mask holds an env (they must not
        allocate: CUDA forbids it in a conditional node's body;
        ``tests/envs/robots/test_model_writes.py`` checks). ``set_const`` allocates, so it
        runs at every replay of a step that may write a mass-type parameter (a reset-time
        mass term: every step), on both devices alike."""
        copies = [c for key, c in self._copies.items() if any(n in key for n in names)]
        groups = 0
        for n in names:
            groups |= self.set_const_groups.get(n, 0)
        if not copies and not groups:
            return

        def write() -> None:
            for kernel, dim, args in copies:
                wp.launch(kernel, dim, args)
            wp.launch(kloco.count_write, 1, [self.model_writes])

        with self.scope():
            if mask is None or not wp.get_device(self._device).is_capturing:
                write()
            else:
                self._written.zero_()  # a memset: captured as the launches are
                wp.launch(kloco.flag_any, mask.shape[0], [self.wp_mask(mask), self._written])
                wp.capture_if(self._written, on_true=write)
            if groups:  # (allocates: never inside a capture_if body)
                mjw.set_const(self.m, self.d, groups=groups, restore=False)
