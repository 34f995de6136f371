"""The base of the MuJoCo Warp robots: a model, its per-world physical parameters, a task."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import mujoco
import torch
import warp as wp

from gpuparam._launch import BoundLaunch
from gpuparam.backend import BindContext, Task
from gpuparam.envs.mujoco.backend import GATINGS, MjwBackend, check_sizes
from gpuparam.envs.mujoco.events import Push
from gpuparam.envs.mujoco.model import PER_ELEMENT, Components, load_model, physical_specs
from gpuparam.kernels import locomotion as kloco
from gpuparam.pipeline import StepContext
from gpuparam.spec import BoxSpec, ParamSpec
from gpuparam.vecenv import VecEnv


@dataclass(eq=False)
class LocomotionTask(Task):
    """A task of one ``kernels.locomotion`` kernel run in two modes: after a step for every
    env (``observe`` = 0) and after a reset for the masked envs (``observe`` = 1).

    The kernel's arguments, as MuJoCo Warp orders them: the model (``dt``, then
    ``model(backend)``, then the parameter view: a ``params_type`` struct whose ``fields``
    view the rows ``[N]`` of the scalar parameters ``params``, in that order; a name the
    env lacks raises ``KeyError``), the data in (``observe``, the mask,
    ``data(backend)``, the action), then the outputs (the task's previous position float32
    ``[N, *prev_shape]``, ``backend.state["task_prev_position"]``, checkpointed with the
    env; a ``kernels.locomotion.TaskOutputs``).
    """

    kernel: wp.Kernel
    params: tuple[str, ...]
    params_type: type
    fields: tuple[str, ...]
    model: Callable[[MjwBackend], list]
    data: Callable[[MjwBackend], list]
    prev_shape: tuple[int, ...]

    def bind(self, b: BindContext, backend: MjwBackend) -> None:
        self.backend = backend
        n, out = b.num_envs, b.step.outputs
        prev = torch.zeros(n, *self.prev_shape, dtype=torch.float32, device=b.device)
        backend.state["task_prev_position"] = prev
        # views of buffers allocated once (parameter table, model and data, step context):
        # bound here, never rebound
        rows = [wp.from_torch(b.param_rows(name)) for name in self.params]  # KeyError first
        params = self.params_type()
        for field, row in zip(self.fields, rows, strict=True):
            setattr(params, field, row)
        outputs = kloco.TaskOutputs()
        outputs.obs = wp.from_torch(out["observation"])
        outputs.final_obs = wp.from_torch(out["final_observation"])
        outputs.reward = wp.from_torch(out["reward"])
        outputs.terminated = wp.from_torch(out["terminated"])
        self._model = [backend.dt, *self.model(backend), params]
        self._data = [*self.data(backend), wp.from_torch(b.step.action)]
        self._outputs = [wp.from_torch(prev), outputs]

    def compute(self, ctx: StepContext) -> None:
        self._launch(ctx, 0, None)

    def observe(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self._launch(ctx, 1, mask)

    def _launch(self, ctx: StepContext, observe: int, mask: torch.Tensor | None) -> None:
        # bound once per mode and mask role (None: all envs; the context's done or reset)
        self.backend.mask_launch(f"task_{observe}", mask, lambda w: BoundLaunch(
            self.kernel, ctx.num_envs, inputs=[*self._model, observe, w, *self._data],
            outputs=self._outputs, device=ctx.device)).launch(ctx.stream)


class RobotEnv(VecEnv):
    """A Gymnasium v5 MuJoCo locomotion task on MuJoCo Warp, one world per env.

    Parameters (``env.params``): the physical ones, one component per model element
    (``body_mass`` per moving body, ``geom_friction`` per geom, ``dof_damping`` and
    ``dof_armature`` per dof, ``actuator_gear`` per actuator, ``gravity`` a 3-vector; the
    component names are in ``env.components``, and ``env.component_index(name, element)`` /
    ``env.set_components`` address them by name), then the task's (reward weights,
    healthy ranges, reset-noise scale; scalars per env).

    Args (beyond ``VecEnv``'s):
        cone: friction cone, ``None`` (the XML's, pyramidal in Gymnasium's assets),
            ``"pyramidal"`` or ``"elliptic"``.
        njmax, nconmax: MuJoCo Warp's constraint rows and contacts per world (the contact
            buffer is shared by all worlds: ``nconmax * N``; ``None``: its estimate for the
            model); what does not fit is dropped and counted in :attr:`overflows` (raise
            them when a count grows, e.g. under extreme gravity or masses).
        deterministic: MuJoCo Warp's ``opt.deterministic`` (stable contact and constraint
            order, invariant atomics): bit-identical CUDA replays, at some speed cost (CPU
            runs are deterministic either way).
        gating: ``"mask"`` (default) or ``"graph"``: how the work only some steps need (the
            reset's ``forward`` of the robots whose observation reads it) is skipped:
            ``"mask"`` runs it at every step (no conditional graph node), ``"graph"``
            behind ``wp.capture_if`` on whether the step resets an env. Same bits either
            way (docs/robots.md).

    Subclasses set ``name``, ``xml_file``, ``frame_skip``, ``task_specs``,
    ``max_episode_steps``, ``qvel_normal`` and implement ``obs_size`` and ``make_task`` (a
    :class:`LocomotionTask`).
    """

    xml_file: str
    frame_skip: int
    task_specs: tuple[ParamSpec, ...] = ()
    qvel_normal: bool = False
    forward_at_reset: bool = False
    solver: int | None = None
    max_episode_steps = 1000
    # the per-element parameters set_components names -> their Components field
    per_element: Mapping[str, str] = PER_ELEMENT

    def __init__(self, num_envs: int, device: str | torch.device | None = None, seed: int = 0,
                 max_episode_steps: int | None = None, capture: bool = True,
                 env_offset: int = 0, cone: str | None = None,
                 njmax: int | None = None, nconmax: int | None = None,
                 deterministic: bool = False, gating: str = "mask",
                 **param_overrides: object):
        check_sizes(njmax, nconmax, num_envs)
        if gating not in GATINGS:
            raise ValueError(f"gating: expected one of {GATINGS}, got {gating!r}")
        self._sizes = dict(njmax=njmax, nconmax=nconmax, deterministic=deterministic,
                           gating=gating)
        self.mjm = self.make_model(cone)
        check_sizes(njmax, nconmax, num_envs, self.mjm.nv)  # before anything on the device
        self.components = Components.of(self.mjm)
        self.param_specs = self.make_param_specs()
        self.observation_spec = BoxSpec(shape=(self.obs_size(),), low=-math.inf, high=math.inf)
        self.action_spec = self.make_action_spec()
        super().__init__(num_envs, device=device, seed=seed,
                         max_episode_steps=max_episode_steps, capture=capture,
                         env_offset=env_offset, **param_overrides)

    def obs_size(self) -> int:
        raise NotImplementedError

    def model_config(self) -> dict[str, object]:
        """``cone``: the compiled model's friction cone (``"pyramidal"`` or ``"elliptic"``)."""
        elliptic = self.mjm.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
        return {**super().model_config(), "cone": "elliptic" if elliptic else "pyramidal"}

    def make_model(self, cone: str | None) -> mujoco.MjModel:
        """The compiled model (default: ``xml_file`` with ``cone`` and ``solver``)."""
        return load_model(self.xml_file, cone, self.solver)

    def make_param_specs(self) -> tuple[ParamSpec, ...]:
        """Every parameter: the physical ones of the model, then ``task_specs``."""
        return physical_specs(self.mjm) + tuple(self.task_specs)

    def make_action_spec(self) -> BoxSpec:
        """The action space (default: the actuators' control ranges)."""
        low, high = self.mjm.actuator_ctrlrange.T.tolist()  # host-ok: the host MjModel, at build
        return BoxSpec(shape=(self.mjm.nu,), low=tuple(low), high=tuple(high))

    def make_backend(self) -> MjwBackend:
        return MjwBackend(self.mjm, self.frame_skip, "reset_noise_scale", self.qvel_normal,
                          self.forward_at_reset, **self._sizes)

    def make_task(self) -> LocomotionTask:
        # VecEnv's default (None: the backend writes the outputs) would leave them all 0 here
        raise NotImplementedError(f"{type(self).__name__}: a RobotEnv must implement make_task "
                                  "(a LocomotionTask writing its observation and reward)")

    @property
    def overflows(self) -> dict[str, torch.Tensor]:
        """Env steps (not physics substeps) at which MuJoCo Warp dropped what did not fit
        its buffers, counted on the device since the env was built (read without a sync;
        ``.any()`` to check), from its overflow bitmask ``d.overflow``:
        ``"constraints"`` int32 ``[num_envs]``, per world: constraint rows beyond ``njmax``
        (or the Jacobian's non-zeros, active dofs); ``"contacts"`` int32 ``[1]``: steps at
        which some world lost contacts (collision pairs beyond the shared buffer in the
        broadphase, contacts beyond it in the narrowphase, CCD, heightfield, EPA or
        contact-sensor drops; the buffer of ``nconmax * num_envs`` is shared by all
        worlds). Solver iteration limits are not counted (nothing is dropped). Non-zero:
        results are wrong for those steps; rebuild with a larger ``njmax`` / ``nconmax``."""
        b = self.backend
        return {"constraints": wp.to_torch(b.constraint_overflows),
                "contacts": wp.to_torch(b.contact_overflows)}

    @property
    def dt(self) -> float:
        """Seconds per env step (MuJoCo timestep x frame_skip), as Gymnasium's ``env.dt``."""
        return self.backend.dt

    # ------------------------------------------------------------------ named components
    def component_index(self, name: str, element: str) -> int:
        """Index of model element ``element`` (e.g. ``"torso"``) among the components of
        vector parameter ``name`` (e.g. ``"body_mass"``): ``env.params[name][:, index]``.
        Raises ``KeyError`` naming the valid elements."""
        if name not in self.per_element:
            raise KeyError(f"{name!r} is not a per-element physical parameter; expected one "
                           f"of {', '.join(self.per_element)}")
        names = getattr(self.components, self.per_element[name])
        if element not in names:
            raise KeyError(f"{name}: unknown element {element!r}; valid: {', '.join(names)}")
        return names.index(element)

    def set_components(self, name: str, values: Mapping[str, float | torch.Tensor],
                       mask: torch.Tensor | None = None) -> None:
        """Write some named components of a per-element parameter, keep the others::

            env.set_components("body_mass", {"torso": 0.5}, mask=m)

        Args:
            name: ``body_mass``, ``geom_friction``, ``dof_damping``, ``dof_armature`` or
                ``actuator_gear`` (the legged robots also ``dof_frictionloss``:
                ``env.per_element``).
            values: element name -> a number or a float tensor ``[num_envs]`` on the device.
            mask: bool tensor ``[num_envs]`` on the device, or None for every env.

        Every name and value is checked (range, finiteness) before anything is written; a
        rejected call writes nothing. Synchronizes (validation).
        """
        if isinstance(values, Mapping):  # (anything else: params.set_components' error)
            values = {self.component_index(name, k): v for k, v in values.items()}
        self.params.set_components(name, values, mask=mask)

    # ------------------------------------------------------------------ state events
    def add_event(self, event: Push) -> Callable[[], None]:
        """Add a state event (``gp.Push``) run inside every step after the auto-reset;
        returns a function removing it."""
        if not isinstance(event, Push):
            raise TypeError(f"add_event: expected a gp.Push, got {type(event).__name__}")
        return self.add_stage(event.bind(self))
