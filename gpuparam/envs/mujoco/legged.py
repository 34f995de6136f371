"""The legged-robot recipe (legged_gym, IsaacLab, MuJoCo Playground) as pieces for any
MuJoCo Warp robot with a free-joint base and position actuators on hinge joints:
per-env parameters and a backend that uses them (``kernels.legged``).

- **PD actuators**: per-env, per-actuator ``kp``, ``kd``, ``torque_limit`` and
  ``motor_strength``, run inside MuJoCo Warp's actuation at every substep, exactly as
  MuJoCo Playground's PD: the P part is the position actuator (``actuator_gainprm[0] = kp
  * motor_strength = -actuator_biasprm[1]``, ``actuator_forcerange = +-torque_limit``), so
  ``actuator_force`` holds the P part only, as in Playground's observation and torque
  terms; the D part is the joint's damping (``dof_damping = passive + kd *
  motor_strength``), integrated with the passive forces. These per-world model fields are
  written by copy kernels whenever a parameter is written (``backend.py``).
  ``motor_strength`` scales both (as the legged_gym forks that randomize it);
  ``dof_damping`` is the passive damping beyond ``kd`` (0 on the actuated joints by default).
- **Action latency**: ``action_delay`` (per env, steps, rounded, ``0 .. max_action_delay``)
  picks the action of that many env steps before from a per-env device ring buffer
  (``state["action_history"]``, checkpointed, zeroed at each episode start: before the
  episode's first action the delayed action is 0, the default pose). Delay 0 is the
  current action, bit for bit.
- **Kicks**: MuJoCo Playground's half-sine force pushes on the base (``kick_*``), off by
  default (``kick_enable`` 0).
- **Reset**: Playground's: home pose at the env's origin, ``U(-r, r)`` in x and y, a random
  yaw, random base velocities. With a terrain grid, env ``i`` starts on column
  ``(env_offset + i) % cols`` of row ``round(terrain_level)`` (a per-env parameter read at
  every reset; a ``gp.Curriculum`` over it is the terrain curriculum).
- **Contact pairs**: a model with explicit contact pairs (G1's feet) gets ``pair_friction``
  (per pair), since ``geom_friction`` does not reach a pair.
- **Model randomization** (MuJoCo Playground's ``randomize.py``, legged_gym's and
  IsaacLab's events): ``dof_frictionloss`` (per dof), ``joint_offset`` (per actuated joint,
  added to the model's ``qpos0``: MuJoCo's kinematics rotate a hinge by ``qpos - qpos0``, so
  the links sit at ``q`` where they sat at ``q - offset``; the reset and the PD's default
  pose keep the keyframe's angles, as in Playground), ``body_ipos`` (every moving body's
  centre of mass; the base's plus ``base_com_offset``) and ``added_mass`` (on the torso
  body). Mass and centre-of-mass writes run ``set_const``; a joint offset changes nothing
  it derives. :func:`playground_randomization` builds Playground's terms.

Commands, observation noise, contacts and the height scan are the task's: a
``legged_task.LeggedTaskConfig`` (Go1: ``go1.py``; G1: ``g1.py`` and its own terms in
``kernels/g1.py``) whose kernel is generated from the shared terms of
``kernels/legged_terms.py``, built on the helpers of ``kernels.legged`` (noise, command
draws, step-keyed draws). What a new robot needs: ``docs/robots.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from gpuparam._launch import BoundLaunch
from gpuparam.backend import BindContext
from gpuparam.envs.mujoco.backend import BATCHED, PHYSICAL, MjwBackend, step_keys
from gpuparam.envs.mujoco.model import PER_ELEMENT, f32, physical_specs
from gpuparam.kernels import legged as kleg
from gpuparam.kernels import locomotion as kloco
from gpuparam.pipeline import StepContext
from gpuparam.randomization.terms import On, Term, Uniform
from gpuparam.spec import ParamSpec

PD = ("kp", "kd", "torque_limit", "motor_strength")
# the recipe's model parameters (each written into a per-world MuJoCo Warp field by a copy)
LEGGED_PHYSICAL = (*PD, "base_com_offset", "dof_frictionloss", "joint_offset", "body_ipos",
                   "added_mass")
# per-element parameters beyond the Gymnasium robots' (``RobotEnv.per_element``)
LEGGED_PER_ELEMENT = {**PER_ELEMENT, "dof_frictionloss": "dofs"}
MIN_MASS = 1e-6  # kg: ``body_mass``'s lower bound, also the torso's with ``added_mass``


def actuated_dofs(mjm: mujoco.MjModel) -> np.ndarray:
    """The dof each actuator drives, int ``[nu]``; raises ``ValueError`` unless every
    actuator is a position actuator (``gainprm[0] = -biasprm[1] > 0``; a ``kv``,
    ``biasprm[2] <= 0``, is kept as the model has it: Spot's feet-only scene) on a
    hinge or slide joint of its own, with a symmetric force range."""
    dofs = []
    for a in range(mjm.nu):
        name = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"actuator{a}"
        j = int(mjm.actuator_trnid[a, 0])
        ok = (int(mjm.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
              and int(mjm.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                           int(mujoco.mjtJoint.mjJNT_SLIDE))
              and mjm.actuator_gainprm[a, 0] > 0
              and mjm.actuator_biasprm[a, 1] == -mjm.actuator_gainprm[a, 0]
              and mjm.actuator_biasprm[a, 2] <= 0
              and mjm.actuator_forcelimited[a]
              and mjm.actuator_forcerange[a, 0] == -mjm.actuator_forcerange[a, 1])
        if not ok:
            raise ValueError(
                f"actuator {name!r}: expected a position actuator (kp; kv >= 0) on a hinge "
                "or slide joint with a symmetric force range, got transmission "
                f"{mujoco.mjtTrn(mjm.actuator_trntype[a]).name}, gainprm[0] "
                f"{mjm.actuator_gainprm[a, 0]}, biasprm[1:3] {mjm.actuator_biasprm[a, 1:3]}, "
                f"forcelimited {mjm.actuator_forcelimited[a]}, forcerange "
                f"{mjm.actuator_forcerange[a]}")
        dofs.append(int(mjm.jnt_dofadr[j]))
    if len(set(dofs)) != len(dofs):
        raise ValueError(f"actuators: expected one actuator per joint, got the dofs {dofs}")
    return np.array(dofs, dtype=np.int32)


def force_range_on_actuators(spec: mujoco.MjSpec) -> None:
    """Each joint's ``actuatorfrcrange`` in ``spec`` moved onto its position actuator
    (``forcerange``), so that the recipe's ``torque_limit`` writes it per env (G1, T1):
    with one actuator of gear 1 per joint the joint torque is the same, but
    ``actuator_force`` is then the clamped force, where the joint's limit reports the
    unclamped one."""
    for act in spec.actuators:
        joint = spec.joint(act.target)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = joint.actfrcrange
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE


def legged_specs(mjm: mujoco.MjModel, max_action_delay: int, terrain_rows: int, *,
                 action_scale: float, reset_xy: float, reset_yaw: float,
                 reset_velocity: float,
                 reset_joint_scale: tuple[float, float] | None = None) -> tuple[ParamSpec, ...]:
    """The physical parameters of ``mjm`` (``dof_damping`` as the passive damping beyond
    ``kd``) and the recipe's: PD gains from the model (``kp`` its actuators' gains, ``kd``
    their joints' damping, ``torque_limit`` their force ranges), the base's centre-of-mass
    offset, dry friction per dof, joint offsets, every body's centre of mass, the torso's
    added mass, action scale and delay, kicks, the reset ranges and the terrain level; with
    ``reset_joint_scale`` (low, high) also ``reset_joint_scale``, the range of the factor
    on each actuated joint's reset angle (Playground's G1: 0.5, 1.5)."""
    dofs = actuated_dofs(mjm)
    nu = mjm.nu
    phys = []
    for s in physical_specs(mjm):
        if s.name == "dof_damping":
            passive = mjm.dof_damping.copy()
            passive[dofs] = 0.0
            s = ParamSpec("dof_damping", f32(passive), 0.0, 1e6, shape=(mjm.nv,),
                          unit="N m s/rad", doc="passive damping of each dof beyond the PD's "
                          "kd (0 on the actuated joints by default)")
        phys.append(s)
    limit = mjm.actuator_forcerange[:, 1]
    return (*phys,
        ParamSpec("kp", f32(mjm.actuator_gainprm[:, 0]), 0.0, 1e4, shape=(nu,),
                  unit="N m/rad", doc="PD proportional gain of each actuator"),
        ParamSpec("kd", f32(mjm.dof_damping[dofs]), 0.0, 1e3, shape=(nu,),
                  unit="N m s/rad", doc="PD derivative gain of each actuator (as joint damping)"),
        ParamSpec("torque_limit", f32(limit), 0.0, 1e4, shape=(nu,), unit="N m",
                  doc="PD torque limit of each actuator (its force range +-limit)"),
        ParamSpec("motor_strength", 1.0, 0.0, 10.0, shape=(nu,),
                  doc="scale of each actuator's kp and kd"),
        ParamSpec("base_com_offset", 0.0, -0.5, 0.5, shape=(3,), unit="m",
                  doc="offset of the base's centre of mass in its frame (the derived "
                      "constants follow)"),
        ParamSpec("dof_frictionloss", f32(mjm.dof_frictionloss), 0.0, 1e4, shape=(mjm.nv,),
                  unit="N m", doc="dry friction (MuJoCo's frictionloss) of each dof"),
        ParamSpec("joint_offset", 0.0, -1.0, 1.0, shape=(nu,), unit="rad",
                  doc="offset of each actuated joint's zero (MuJoCo's qpos0: the angle at "
                      "which its link sits as modelled); the reset and default pose keep "
                      "the keyframe's angles (a calibration error, Playground's qpos0 jitter)"),
        ParamSpec("body_ipos", f32(mjm.body_ipos[1:].reshape(-1)), -10.0, 10.0,
                  shape=(mjm.nbody - 1, 3), unit="m",
                  doc="centre of mass of each moving body in its frame (x, y, z; the base's "
                      "plus base_com_offset; the derived constants follow)"),
        ParamSpec("added_mass", 0.0, -1e3, 1e3, unit="kg",
                  doc=f"mass added to the torso body (its mass: body_mass + added_mass, at "
                      f"least {MIN_MASS}; the derived constants follow)"),
        ParamSpec("action_scale", action_scale, 0.0, 10.0, unit="rad",
                  doc="PD target = default pose + action * action_scale"),
        ParamSpec("action_delay", 0.0, 0.0, float(max_action_delay), unit="steps",
                  doc=f"action latency in env steps (rounded), 0..{max_action_delay}"),
        ParamSpec("kick_enable", 0.0, 0.0, 1.0, doc="1: half-sine kicks on the base"),
        ParamSpec("kick_velocity", (0.0, 3.0), 0.0, 100.0, shape=(2,), ordered=True, unit="m/s",
                  doc="(low, high): velocity change magnitude of a kick (drawn per episode)"),
        ParamSpec("kick_duration", (0.05, 0.2), 0.001, 10.0, shape=(2,), ordered=True, unit="s",
                  doc="(low, high): duration of a kick (drawn per episode)"),
        ParamSpec("kick_wait", (1.0, 3.0), 0.0, 1e4, shape=(2,), ordered=True, unit="s",
                  doc="(low, high): wait before each kick (drawn per episode)"),
        ParamSpec("reset_xy_range", reset_xy, 0.0, 100.0, unit="m",
                  doc="reset: base x and y moved by U(-r, r)"),
        ParamSpec("reset_yaw_range", reset_yaw, 0.0, 3.1416, unit="rad",
                  doc="reset: base yaw U(-r, r)"),
        ParamSpec("reset_velocity_range", reset_velocity, 0.0, 100.0, unit="m/s, rad/s",
                  doc="reset: each base velocity U(-r, r)"),
        ParamSpec("terrain_level", 0.0, 0.0, float(max(terrain_rows - 1, 0)), integer=True,
                  doc="terrain row of the env's next episodes (a whole number; read at "
                      "reset)"),
        *(() if reset_joint_scale is None else (
            ParamSpec("reset_joint_scale", tuple(reset_joint_scale), 0.0, 10.0, shape=(2,),
                      ordered=True,
                      doc="reset: each actuated joint's angle = home x U(low, high), "
                          "its PD target the same"),)),
        *(() if mjm.npair == 0 else (
            ParamSpec("pair_friction", f32(mjm.pair_friction[:, 0]), 0.0, 100.0,
                      shape=(mjm.npair,), doc="sliding friction of each explicit contact "
                      "pair (both tangential directions; geom_friction does not reach "
                      "pairs), in the model's pair order"),)),
    )


def playground_randomization(env, on: On, *, frictionloss: tuple[float, float],
                             floor_geom: str | None = None, floor_pairs: Sequence[int] = (),
                             com_jitter: float = 0.0, floor_friction: tuple = (0.4, 1.0),
                             body_mass: tuple = (0.9, 1.1)) -> tuple[Term, ...]:
    """The terms of MuJoCo Playground's ``domain_randomize`` (``locomotion/<robot>/
    randomize.py``) for the legged env ``env`` (its ``backend`` built), drawn ``on`` a
    trigger (``"startup"``: once, as Playground at construction; ``"reset"``: each
    episode; any trigger ``gp.Uniform`` takes). Per component, independent draws:

    - floor friction ``= U(*floor_friction)`` (default ``(0.4, 1.0)``): ``geom_friction``
      of ``floor_geom`` (op ``set``; the other geoms are set to their defaults), or both
      tangential ``pair_friction`` components of the pairs ``floor_pairs`` (each pair its
      own draw; the other pairs set to their defaults);
    - ``dof_frictionloss`` of the actuated dofs ``x U(*frictionloss)``, ``dof_armature``
      ``x U(1.0, 1.05)`` (the base's dofs kept: op ``scale`` by 1);
    - with ``com_jitter`` ``r``: the torso's ``body_ipos + U(-r, r)`` per axis (op ``add``;
      the other bodies + 0);
    - every ``body_mass x U(*body_mass)`` (default ``(0.9, 1.1)``), then ``added_mass +
      U(-1, 1)`` kg on the torso;
    - ``joint_offset + U(-0.05, 0.05)`` rad per actuated joint (Playground's ``qpos0[7:]``).

    Additive and scaling terms act on the nominal values (at their defaults: Playground's
    model; a curriculum over them composes).

    Returns the terms for ``env.randomize(*terms)``; an invalid ``on`` raises
    ``ValueError`` (the terms' check)."""
    # the added mass first: its check of ``on`` is the one a bad trigger meets
    added = Uniform("added_mass", -1.0, 1.0, op="add", on=on,
                    name=f"playground added_mass on={on!r}")
    specs, mjm = env.params.spec, env.mjm
    act = np.zeros(mjm.nv, bool)
    act[actuated_dofs(mjm)] = True

    def term(param: str, lo, hi, op: str = "set") -> Uniform:
        return Uniform(param, lo, hi, op=op, on=on, name=f"playground {param} on={on!r}")

    def per_dof(lo: float, hi: float) -> tuple[list[float], list[float]]:
        return [lo if a else 1.0 for a in act], [hi if a else 1.0 for a in act]

    terms = []
    if floor_geom is not None:
        g = env.component_index("geom_friction", floor_geom)
        lo, hi = list(specs["geom_friction"].default), list(specs["geom_friction"].default)
        lo[g], hi[g] = floor_friction
        terms.append(term("geom_friction", lo, hi))
    if floor_pairs:
        lo, hi = list(specs["pair_friction"].default), list(specs["pair_friction"].default)
        for p in floor_pairs:
            lo[p], hi[p] = floor_friction
        terms.append(term("pair_friction", lo, hi))
    terms += [term("dof_frictionloss", *per_dof(*frictionloss), op="scale"),
              term("dof_armature", *per_dof(1.0, 1.05), op="scale")]
    if com_jitter:
        torso = env.backend.torso - 1  # its components in body_ipos: 3 torso .. 3 torso + 2
        lo = [0.0] * specs["body_ipos"].size
        hi = list(lo)
        lo[3 * torso : 3 * torso + 3] = [-com_jitter] * 3
        hi[3 * torso : 3 * torso + 3] = [com_jitter] * 3
        terms.append(term("body_ipos", lo, hi, op="add"))
    return (*terms, term("body_mass", *body_mass, op="scale"), added,
            term("joint_offset", -0.05, 0.05, op="add"))


class LeggedBackend(MjwBackend):
    """MuJoCo Warp worlds of a legged robot with the recipe's actuation (PD gains, action
    latency, kicks) and reset (see the module docstring).

    Args (beyond ``MjwBackend``'s sizes):
        mjm: the compiled model; keyframe ``keyframe`` is the reset pose and the default
            pose of the PD targets.
        frame_skip: physics steps per env step.
        base_body: name of the free-joint base body (kicked, its CoM offset).
        max_action_delay: K, the ring buffer keeps the last K + 1 actions.
        origins: float ``[rows, cols, 3]`` spawn origins of a terrain grid (``None``: one
            origin at 0).
        keyframe: the name of the reset keyframe (Go1: ``"home"``, G1: ``"knees_bent"``).
        joint_scale: the reset scales the actuated joints' angles by the per-env parameter
            ``reset_joint_scale`` (``legged_specs``), as Playground's G1 does.
        torso_body: the body ``added_mass`` adds to (``None``: the base; G1:
            ``"torso_link"``, Playground's and IsaacLab's torso).
        action_mode: what the PD targets are relative to (``kernels.legged.ACTION_MODES``):
            ``"default"`` the default pose, ``"current"`` the joint angles at the step's
            start, ``"cumulative"`` the previous targets (reset with the env; ``ctrl`` is then
            state, ``state["ctrl"]`` float32 ``[N, nu]``, checkpointed).
        clip_ctrl: the PD targets clipped to the actuators' control range (Playground's H1).
        forward_after_step: run ``mjw.forward`` after the substeps, so that the task reads
            sensors, site poses, actuator forces and ``qacc`` at the new ``qpos, qvel``
            (envpool's ports of Go1 Getup / Handstand; Playground reads them one substep
            stale). It changes no trajectory (``qacc_warmstart`` is left as it is).
        settle_steps: physics steps run after a reset holding the reset's ``ctrl`` (Go1
            Getup's settling; the episode starts from the settled state, time 0). They run
            over all worlds, the others' state restored after, at every reset (with
            ``gating="graph"`` only at steps where the mask holds an env).

    State (beyond ``MjwBackend``'s): ``"action_history"`` float32 ``[N, K + 1, nu]`` and
    ``"action_head"`` int32 ``[N]`` (the ring buffer), ``"kick_steps"`` int32 ``[N, 4]``
    (since the last kick, until the next, into the kick, kick length) and ``"kick_shape"``
    float32 ``[N, 4]`` (duration s, velocity m/s, direction x, y). A checkpoint load
    refuses a head outside ``[0, K]`` and negative kick counts (``state_bounds``).
    """

    recompute_on = PHYSICAL + LEGGED_PHYSICAL
    batched = BATCHED + ("actuator_gainprm", "actuator_biasprm", "actuator_forcerange",
                         "body_ipos", "dof_frictionloss", "qpos0")
    post_constraint = False  # the task reads sensors, never cfrc_ext

    def __init__(self, mjm: mujoco.MjModel, frame_skip: int, base_body: str,
                 max_action_delay: int, origins: np.ndarray | None = None,
                 njmax: int | None = None, nconmax: int | None = None,
                 deterministic: bool = False, keyframe: str = "home",
                 joint_scale: bool = False, torso_body: str | None = None,
                 gating: str = "mask", action_mode: str = "default",
                 forward_after_step: bool = False, settle_steps: int = 0,
                 clip_ctrl: bool = False):
        super().__init__(mjm, frame_skip, "reset_xy_range", qvel_normal=False,
                         forward_at_reset=True, njmax=njmax, nconmax=nconmax,
                         deterministic=deterministic, gating=gating)
        self.base = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, base_body)
        if self.base < 0 or mjm.jnt_type[mjm.body_jntadr[self.base]] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError(f"base_body: expected the free-joint base body, got {base_body!r}")
        torso_body = base_body if torso_body is None else torso_body
        self.torso = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, torso_body)
        if self.torso < 1:
            raise ValueError(f"torso_body: expected a moving body of the model (added_mass), "
                             f"got {torso_body!r}")
        key = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, keyframe)
        if key < 0:
            raise ValueError(f"keyframe: expected a keyframe of the model (the reset and "
                             f"default pose), got {keyframe!r}")
        self.joint_scale = bool(joint_scale)
        if action_mode not in kleg.ACTION_MODES:
            raise ValueError(f"action_mode: expected one of {kleg.ACTION_MODES}, got "
                             f"{action_mode!r}")
        self.action_mode = kleg.ACTION_MODES.index(action_mode)
        self.clip_ctrl = bool(clip_ctrl)
        self.forward_after_step, self.settle_steps = bool(forward_after_step), int(settle_steps)
        if mjm.npair:  # explicit contact pairs (G1's feet): their friction is a parameter
            self.recompute_on = (*self.recompute_on, "pair_friction")
            self.batched = (*self.batched, "pair_friction")
        self.home_qpos = mjm.key_qpos[key].astype(np.float32)
        self.home_ctrl = mjm.key_ctrl[key].astype(np.float32)
        dofs = actuated_dofs(mjm)
        qadr = mjm.jnt_qposadr[mjm.actuator_trnid[:, 0]]
        self.actuator_qposadr = qadr.astype(np.int32)
        self.default_pose = self.home_qpos[qadr]
        self.dof_actuator = np.full(mjm.nv, -1, np.int32)
        self.dof_actuator[dofs] = np.arange(mjm.nu, dtype=np.int32)
        self.max_action_delay = int(max_action_delay)
        self.origins = (np.zeros((1, 1, 3), np.float32) if origins is None
                        else np.asarray(origins, np.float32))

    def bind(self, b: BindContext) -> None:
        super().bind(b)
        n, dev, mjm, m = b.num_envs, b.device, self.mjm, self.m
        # few solver iterations are a legged recipe's choice (Playground's Go1: 1 iteration,
        # 5 line-search iterations): no print when they are used up
        quiet = int(mjw.OverflowType.ITERATIONS) | int(mjw.OverflowType.LS_ITERATIONS)
        m.opt.warn_overflow = int(m.opt.warn_overflow) & ~quiet
        shapes = {"action_history": (self.max_action_delay + 1, mjm.nu), "action_head": (),
                  "kick_steps": (4,), "kick_shape": (4,)}
        state = kleg.LeggedState()
        for k, shape in shapes.items():
            dtype = torch.float32 if k in ("action_history", "kick_shape") else torch.int32
            self.state[k] = torch.zeros(n, *shape, dtype=dtype, device=dev)
        self.state_bounds.update(action_head=(0, self.max_action_delay),
                                 kick_steps=(0, 2**31 - 1))
        state.history = wp.from_torch(self.state["action_history"])
        state.head = wp.from_torch(self.state["action_head"])
        state.kick_i = wp.from_torch(self.state["kick_steps"])
        state.kick_f = wp.from_torch(self.state["kick_shape"])

        def rows(name: str) -> wp.array:
            return wp.from_torch(b.param_rows(name))

        with wp.ScopedDevice(self._device):
            default_pose, home_qpos, home_ctrl, dof_actuator = (
                wp.array(a) for a in  # float32, float32, float32, int32
                (self.default_pose, self.home_qpos, self.home_ctrl, self.dof_actuator))
            origins = wp.array(self.origins, dtype=wp.vec3)
            joint_qposadr = wp.array(self.actuator_qposadr)
        self.add_copy((*PD, "dof_damping"), kleg.copy_pd, (n, mjm.nv),
                      [*(rows(p) for p in (*PD, "dof_damping")), dof_actuator],
                      [m.actuator_gainprm, m.actuator_biasprm, m.actuator_forcerange,
                       m.dof_damping], replace="dof_damping")
        # a centre of mass or a mass moves the inertia at qpos0 (and a mass the subtree
        # masses): the derived constants follow; a joint offset moves nothing they hold for
        # hinge and slide joints (at qpos = qpos0 every joint sits at its modelled pose,
        # MuJoCo's kinematics rotating by qpos - qpos0), only a tendon's
        # (tests/envs/robots/test_legged_randomize.py checks it with mj_setConst)
        self.add_copy(("body_ipos", "base_com_offset"), kleg.copy_body_ipos,
                      (n, mjm.nbody - 1), [rows("body_ipos"), rows("base_com_offset"), self.base],
                      [m.body_ipos], recompute=True)
        self.add_copy(("body_mass", "added_mass"), kleg.copy_body_mass, (n, mjm.nbody - 1),
                      [rows("body_mass"), rows("added_mass"), self.torso, MIN_MASS],
                      [m.body_mass[:, 1:]], replace="body_mass", recompute=True)
        self.add_copy(("dof_frictionloss",), kloco.copy_rows, (n, mjm.nv),
                      [rows("dof_frictionloss")], [m.dof_frictionloss])
        with wp.ScopedDevice(self._device):
            qpos0 = wp.array(mjm.qpos0.astype(np.float32))
        self.add_copy(("joint_offset",), kleg.copy_joint_offset, (n, mjm.nu),
                      [rows("joint_offset"), joint_qposadr, qpos0], [m.qpos0],
                      recompute=bool(mjm.ntendon))
        if mjm.npair:
            self.add_copy(("pair_friction",), kleg.copy_pair_friction, (n, mjm.npair),
                          [rows("pair_friction")], [m.pair_friction])
        # every array below is a view of a buffer allocated once (MuJoCo Warp's model and
        # data, the step context, the parameter table, the state above): bound once
        ctx, d = b.step, self.d
        keys = step_keys(ctx)
        action = kleg.ActionParams()
        action.action_scale, action.action_delay = rows("action_scale"), rows("action_delay")
        action.kick_enable = rows("kick_enable")
        action.clip = int(self.clip_ctrl)
        with wp.ScopedDevice(self._device):
            action.ctrl_low, action.ctrl_high = (
                wp.array(np.ascontiguousarray(r, np.float32)) for r in mjm.actuator_ctrlrange.T)
        if self.action_mode == 2:  # cumulative: the targets carry over, checkpointed state
            self.state["ctrl"] = wp.to_torch(d.ctrl)
        self._pre_step = BoundLaunch(
            kleg.pre_step, n, device=dev,
            inputs=[self.dt, self.base, default_pose, m.body_subtreemass, action,
                    self.action_mode, joint_qposadr, keys, self._action, d.qpos],
            outputs=[state, d.ctrl, d.xfrc_applied])
        spawn = kleg.SpawnParams()
        spawn.level, spawn.xy_range = rows("terrain_level"), rows("reset_xy_range")
        spawn.yaw_range, spawn.vel_range = rows("reset_yaw_range"), rows("reset_velocity_range")
        spawn.kick_wait, spawn.kick_duration = rows("kick_wait"), rows("kick_duration")
        spawn.kick_velocity = rows("kick_velocity")
        spawn.joint_scale_on = int(self.joint_scale)
        spawn.joint_scale = (rows("reset_joint_scale") if self.joint_scale  # KeyError: no spec
                             else wp.zeros((2, 1), dtype=float, device=self._device))
        spawn.joint_qposadr = joint_qposadr
        self._reset_model = [self.dt, home_qpos, home_ctrl, origins, spawn]
        # the reset reads no step count: an empty array in its place (no bytes passed)
        reset_keys = step_keys(ctx)
        reset_keys.step_count = wp.empty(0, dtype=wp.int32, device=self._device)
        self._reset_keys, self._reset_outputs = reset_keys, [d.qpos, d.qvel, d.ctrl, state]
        if self.settle_steps:  # the saved state of the worlds a settling leaves alone
            with wp.ScopedDevice(self._device):
                self._saved = [wp.empty_like(a) for a in
                               (d.qpos, d.qvel, d.qacc_warmstart, d.ctrl, d.time)]

    def step(self, ctx: StepContext) -> None:
        super().step(ctx)
        if self.forward_after_step:
            with self.scope(ctx):
                mjw.forward(self.m, self.d)

    def reset(self, ctx: StepContext, mask: torch.Tensor) -> None:
        super().reset(ctx, mask)
        if not self.settle_steps:
            return
        d = self.d
        live = [d.qpos, d.qvel, d.qacc_warmstart, d.ctrl, d.time]

        def settle():
            for src, dst in zip(live, self._saved, strict=True):
                wp.copy(dst, src)
            for _ in range(self.settle_steps):
                mjw.step(self.m, d)
            self.mask_launch("settle_restore", mask, lambda w: BoundLaunch(
                kleg.settle_restore, ctx.num_envs, inputs=[w, *self._saved], outputs=live,
                device=ctx.device)).launch()
            self.in_arena(lambda: mjw.forward(self.m, d))

        with self.scope(ctx):
            if self.gating == "mask":
                settle()
                return
            self._flag.zero_()
            self.mask_launch("flag_reset", mask, lambda w: BoundLaunch(
                kloco.flag_any, ctx.num_envs, inputs=[w], outputs=[self._flag],
                device=ctx.device)).launch()
            self.run_if(self._flag, settle)

    def write_ctrl(self, ctx: StepContext) -> None:
        self._pre_step.launch()  # on the scope's stream

    def reset_state(self, ctx: StepContext, mask: torch.Tensor) -> None:
        self.mask_launch("reset_base", mask, lambda w: BoundLaunch(
            kleg.reset_base, ctx.num_envs, inputs=[*self._reset_model, w, self._reset_keys],
            outputs=self._reset_outputs, device=ctx.device)).launch()
