"""A legged task is a config: :class:`LeggedTaskConfig` (the robot's names and sizes, the
observation terms, the rewards as ``(name, scale, term)``, terminations, the command and
state laws, reset ranges, the randomization recipe), bound by one :class:`LeggedTask` and
one :class:`LeggedEnv`. The task's kernel is generated from the config
(``kernels.legged_terms.make_task_kernel``); its terms are ``@wp.func``\\ s, the shared
ones in ``kernels/legged_terms.py``, a robot's own in its kernel module.

A new task (a complete one: ``go1.py``)::

    import dataclasses
    import warp as wp
    from gpuparam.envs.mujoco.go1 import GO1_JOYSTICK, Go1Env
    from gpuparam.envs.mujoco.legged_task import Obs, Reward
    from gpuparam.kernels import legged_terms as kt
    from gpuparam.kernels.legged_terms import (Ctx, Sensors, TaskData, TaskModel,
                                               TaskParams, TaskState)

    @wp.func
    def upright(c: Ctx, m: TaskModel, sn: Sensors, p: TaskParams, d: TaskData,
                st: TaskState, act: wp.array2d(dtype=float)) -> float:
        return c.up[2]  # the upvector's z (c: the step's context, kernels.legged_terms)

    GO1_UPRIGHT = dataclasses.replace(
        GO1_JOYSTICK, command=None,  # no command: c.cmd is 0, no command state drawn
        obs=GO1_JOYSTICK.obs[:6],  # without the command
        rewards=(Reward("upright", 1.0, upright, "upvector z"),
                 Reward("action_rate", -0.01, kt.action_rate, "|a - last a|^2")))

    class Go1UprightEnv(Go1Env):
        name = "Go1Upright-v0"
        config = GO1_UPRIGHT

Sizes: an observation term's ``size`` is an int or an expression of ``nu`` (actuators)
and ``feet`` (``"nu"``, ``"3 * feet"``). Outputs: ``"observation"`` float32 ``[N, O + P]``
(O: the sum of the observation terms' sizes, P: height-scan points),
``"privileged_observation"`` float32 ``[N, O + Q + P]`` (Q: the privileged terms'),
``"reward_terms"`` float32 ``[N, R]`` (``scale_k * term_k``, R rewards, in config order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np
import torch
import warp as wp

from gpuparam._device import wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.backend import BindContext, Task
from gpuparam.envs.mujoco.backend import check_sizes, step_keys
from gpuparam.envs.mujoco.legged import (
    LEGGED_PER_ELEMENT,
    LeggedBackend,
    legged_specs,
    playground_randomization,
)
from gpuparam.envs.mujoco.model import check_cone
from gpuparam.envs.mujoco.robot_env import RobotEnv
from gpuparam.envs.mujoco.terrain import TerrainGrid, add_terrain_hfield, scan_points
from gpuparam.envs.mujoco.terrain_env import TaskTerrain
from gpuparam.kernels import legged_terms as kt
from gpuparam.pipeline import StepContext
from gpuparam.randomization.terms import On, Term
from gpuparam.spec import BoxSpec, OutputSpec, ParamSpec


@dataclass(frozen=True)
class Obs:
    """An observation term: ``size`` components of ``value`` (a term ``@wp.func``), with
    uniform noise of the noise parameter ``noise`` (its name; None: none), minus ``bias``
    (a term, after the noise; None: none)."""

    name: str
    size: int | str
    value: object
    noise: str | None = None
    bias: object = None


@dataclass(frozen=True)
class Reward:
    """A reward term: parameter ``reward_<name>`` (default ``scale``) times ``term``."""

    name: str
    scale: float
    term: object
    doc: str = ""


@dataclass(frozen=True)
class State:
    """A per-env task state tensor: ``task.state[key]`` (checkpointed as
    ``task_<key>`` unless ``terrain_only`` and the env has no terrain grid), bound to
    ``kernels.legged_terms.TaskState.<field>``; ``shape`` per env (ints or ``"nu"`` /
    ``"feet"``), int32 (``bounded`` to ``[0, 2**31 - 1]`` at a load) or float32."""

    key: str
    field: str
    shape: tuple = ()
    int32: bool = False
    terrain_only: bool = False


@dataclass(frozen=True)
class Command:
    """A command law: its ``reset`` and ``update`` laws (``kernels.legged_terms``), its
    symmetric range parameter (``[3]`` or None, read as ``TaskParams.cmd_range``) and
    probability parameter (``[3]`` or None, ``TaskParams.cmd_prob``).

    A config whose parameters hold the command block (:data:`COMMAND_PARAMS`, made by
    :func:`command_specs`, one after the other) gets IsaacLab's command features for any
    law: the block is read as ``TaskParams.cmd`` (the laws draw ``U(command_low,
    command_high)``, ``kernels.legged_terms.command_draw``), standing and heading envs are
    drawn at each command draw (``command_drawn``, called by the kernel after a reset and
    by a law at its resample), the heading control and pinned commands run after the laws
    (``command_steer``), and the task keeps the state ``heading`` ``[N, 2]``."""

    reset: object
    update: object
    range_param: str | None = "command_range"
    prob_param: str | None = None


# the command block (``kernels.legged_terms.CMD_*`` rows, in this order)
COMMAND_PARAMS = ("command_low", "command_high", "rel_standing_envs", "rel_heading_envs",
                  "heading_stiffness", "heading_range", "command_fixed", "command_value")


def command_specs(high: Sequence[float], low: Sequence[float] | None = None,
                  heading_stiffness: float = 0.5) -> tuple[ParamSpec, ...]:
    """The command block's parameters (:data:`COMMAND_PARAMS`, in order): per component
    (vx m/s, vy m/s, yaw rate rad/s) ``command_low`` (default ``-high``) and
    ``command_high``; ``rel_standing_envs`` and ``rel_heading_envs`` (0: off);
    ``heading_stiffness``; ``heading_range`` (-pi, pi); ``command_fixed`` (0/1) and
    ``command_value`` (0, 0, 0). IsaacLab's ``UniformVelocityCommandCfg`` names in
    ``docs/legged.md``."""
    high = tuple(float(x) for x in high)
    low = tuple(-x for x in high) if low is None else tuple(float(x) for x in low)
    if len(high) != 3 or len(low) != 3:
        raise ValueError(f"command_specs: expected 3 values (vx, vy, yaw rate) for high and "
                         f"low, got {high!r} and {low!r}")
    unit = "m/s, m/s, rad/s"
    return (
        ParamSpec("command_low", low, -100.0, 100.0, shape=(3,), unit=unit,
                  doc="low end of the commands drawn from U(low, high) (vx, vy, yaw rate)"),
        ParamSpec("command_high", high, -100.0, 100.0, shape=(3,), unit=unit,
                  doc="high end of the commands drawn from U(low, high) (vx, vy, yaw rate)"),
        ParamSpec("rel_standing_envs", 0.0, 0.0, 1.0,
                  doc="at each command draw, probability that the command is 0 (standing)"),
        ParamSpec("rel_heading_envs", 0.0, 0.0, 1.0,
                  doc="at each command draw, probability of a heading env (yaw rate steered "
                      "to a heading target)"),
        ParamSpec("heading_stiffness", heading_stiffness, 0.0, 100.0, unit="1/s",
                  doc="yaw rate = clip(stiffness * wrap(target - yaw), yaw range)"),
        ParamSpec("heading_range", (-np.pi, np.pi), -10.0, 10.0, shape=(2,), ordered=True,
                  unit="rad", doc="(low, high): a heading env's target, drawn per command"),
        ParamSpec("command_fixed", 0.0, 0.0, 1.0, integer=True,
                  doc="1: the env's command is command_value (pinned, never resampled)"),
        ParamSpec("command_value", (0.0, 0.0, 0.0), -100.0, 100.0, shape=(3,), unit=unit,
                  doc="the pinned command while command_fixed is 1 (vx, vy, yaw rate)"),
    )


def _command_mode(cfg: LeggedTaskConfig) -> int:
    """0: no command; 1: a command law; 2: with the command block (all of it, or an error)."""
    if cfg.command is None:
        return 0
    names = {s.name for s in (*cfg.consts, *cfg.params)}
    have = [n for n in COMMAND_PARAMS if n in names]
    if have and len(have) != len(COMMAND_PARAMS):
        raise ValueError(f"LeggedTaskConfig: the command block needs all of "
                         f"{list(COMMAND_PARAMS)} (command_specs), got only {have}")
    return 2 if have else 1


# Playground's joystick observation noise (Go1, G1, T1): ``LeggedTaskConfig.noise`` entries
JOYSTICK_NOISE = (
    ("noise_level", 1.0, "scale of every observation noise (0: none, bit for bit)"),
    ("noise_linvel", 0.1, "local linear velocity noise (m/s)"),
    ("noise_gyro", 0.2, "gyro noise (rad/s)"),
    ("noise_gravity", 0.05, "gravity vector noise"),
    ("noise_joint_pos", 0.03, "joint angle noise (rad)"),
    ("noise_joint_vel", 1.5, "joint velocity noise (rad/s)"))


# the height scan's shaping (legged_gym's values; ``ctx`` scan_offset, scan_scale)
HEIGHT_SCAN_SPECS = (
    ParamSpec("height_scan_offset", 0.5, -10.0, 10.0, unit="m",
              doc="height scan value: clip(base_z - offset - h, -1, 1) * scale"),
    ParamSpec("height_scan_scale", 5.0, 0.0, 100.0, doc="scale of the height scan values"),
)
# the terrain curriculum's state (start xy, commanded distance, metric; the task kernel
# writes it at a reset, steps it on a terrain), checkpointed only with a terrain grid
TERRAIN_STATE = (State("start_xy", "start_xy", (2,), terrain_only=True),
                 State("cmd_distance", "cmd_distance", terrain_only=True),
                 State("metric", "metric", terrain_only=True))


def feet_state(*extra: State) -> tuple[State, ...]:
    """The state every legged task keeps (last action, per foot air time, swing peak, last
    contact) and ``extra``, in checkpoint order: the first two of ``extra``, the feet's,
    the rest."""
    return (*extra[:2], State("last_act", "last_act", ("nu",)),
            State("air_time", "air_time", ("feet",)),
            State("swing_peak", "swing_peak", ("feet",)),
            State("last_contact", "last_contact", ("feet",)), *extra[2:])


@dataclass(frozen=True)
class LeggedTaskConfig:
    """Everything a legged task is.

    Robot: ``spec(terrain)`` the editable ``mujoco.MjSpec`` of scene ``"flat"`` /
    ``"rough"``; ``base_body``, ``torso_body`` (``added_mass``; None: the base),
    ``keyframe`` (reset and default pose), ``joint_scale`` (reset scales joint angles);
    sensor names of the imu (``gyro``, ``linvel``, ``accel``, ``upvector``,
    ``global_linvel``, ``global_angvel``) and its site ``imu_site``; ``feet`` (site names)
    with sensor patterns (``"{}_floor_found"`` ...; ``foot_force`` None: none;
    ``foot_found`` a pattern or a tuple of them: a foot touches when any of its sensors
    does; ``contact_by_id``: after a step read at ``sensordata[sensor id]``, Playground's H1
    quirk); ``clip_ctrl``: ``legged.LeggedBackend``'s;
    ``extra_sensors`` (``Sensors.extra``), ``index_joints`` (``TaskModel.index``: actuator
    index of joint ``<name>``, else ``<name>_joint``), ``pose_weight`` (per actuator,
    cycled), fixed contact sensors ``terminating_sensors`` and penalized groups
    ``penalized_groups``.

    Physics and recipe: ``frame_skip``, ``max_episode_steps``, ``sizes`` (``(njmax,
    nconmax)`` per scene ``"flat"``, ``"rough"``, ``"grid"``), ``recipe`` (keyword
    arguments of ``legged.legged_specs``: action scale, reset ranges), ``randomization``
    (keyword arguments of ``legged.playground_randomization``).

    Task: ``noise`` ``((param, default, doc), ...)`` (the first: the level), ``obs`` and
    ``priv`` (:class:`Obs`), ``rewards`` (:class:`Reward`), ``terminations`` (terms),
    ``command`` (:class:`Command` or None: no command, ``c.cmd`` is 0), ``reset`` and
    ``update`` (the task's own state laws, after the command's), ``state``
    (:class:`State`), ``consts`` (scalar parameters, one consecutive block:
    ``TaskParams.consts``), ``params`` (the other parameters, after it), ``extra_block``
    (parameter names stored one after the other: ``TaskParams.extra``), ``ctx`` (``Ctx.k`` name ->
    parameter), ``defaults`` (``Ctx.k`` name -> value for the unmapped),
    ``reward_clip``, ``reward_exp`` (None, or ``(coef, names)``: the reward is ``dt * (sum
    of the other terms) * exp(coef * sum of these)``),
    ``progress_always`` (the terrain metric without a grid too),
    ``data`` (the ``TaskData`` fields read beyond ``qpos``, ``qvel``, ``sensordata``,
    ``site_xpos``, ``site_xmat``, ``actuator_force``); ``action_mode``,
    ``forward_after_step``, ``settle_steps``: ``legged.LeggedBackend``'s (what actions are
    relative to, a ``mj_forward`` after the substeps, physics steps settling a reset)."""

    spec: Callable[[str], mujoco.MjSpec]
    base_body: str
    feet: tuple[str, ...]
    noise: tuple
    obs: tuple[Obs, ...]
    priv: tuple[Obs, ...]
    rewards: tuple[Reward, ...]
    terminations: tuple
    state: tuple[State, ...]
    consts: tuple[ParamSpec, ...]
    params: tuple[ParamSpec, ...] = ()
    command: Command | None = None
    reset: object = kt.no_reset
    update: object = kt.no_update
    torso_body: str | None = None
    keyframe: str = "home"
    joint_scale: bool = False
    gyro: str = "gyro"
    linvel: str = "local_linvel"
    accel: str = "accelerometer"
    upvector: str = "upvector"
    global_linvel: str = "global_linvel"
    global_angvel: str = "global_angvel"
    imu_site: str = "imu"
    foot_found: str | tuple[str, ...] = "{}_floor_found"
    contact_by_id: bool = False
    foot_vel: str = "{}_global_linvel"
    foot_force: str | None = None
    extra_sensors: tuple[str, ...] = ()
    index_joints: tuple[str, ...] = ()
    pose_weight: tuple[float, ...] = (1.0,)
    terminating_sensors: tuple[str, ...] = ()
    penalized_groups: tuple[tuple[str, ...], ...] = ()
    frame_skip: int = 5
    max_episode_steps: int = 1000
    sizes: dict = field(default_factory=dict)
    recipe: dict = field(default_factory=dict)
    randomization: dict = field(default_factory=dict)
    extra_block: tuple[str, ...] = ()
    ctx: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    reward_clip: bool = False
    reward_exp: tuple | None = None
    progress_always: bool = False
    data: tuple[str, ...] = ()
    action_mode: str = "default"
    forward_after_step: bool = False
    settle_steps: int = 0
    clip_ctrl: bool = False

    @property
    def reward_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rewards)

    def param_specs(self, reward_defaults: dict | None = None) -> tuple[ParamSpec, ...]:
        """The task's parameters in table order: reward scales, noise, ``consts``,
        ``params`` (``reward_defaults``: name -> default overriding a scale's)."""
        over = reward_defaults or {}
        scales = [ParamSpec(f"reward_{r.name}", over.get(r.name, r.scale), -1e3, 1e3,
                            doc=f"scale of {r.name}: {r.doc}") for r in self.rewards]
        noise = [ParamSpec(n, v, 0.0, 100.0, doc=doc) for n, v, doc in self.noise]
        return (*scales, *noise, *self.consts, *self.params)


def _size(size: int | str, nu: int, feet: int) -> int:
    return size if isinstance(size, int) else int(eval(size, {}, {"nu": nu, "feet": feet}))


def add_contact_sensors(spec: mujoco.MjSpec, bodies: Sequence[str], feet: Sequence[str]):
    """For each body its collision geoms (group 3, not a foot) are made to collide with the
    floor, each with a floor-contact sensor ``<body>_<k>_floor_found``."""
    for body in dict.fromkeys(bodies):
        b = spec.body(body)
        for k, g in enumerate(x for x in b.geoms if x.group == 3 and x.name not in feet):
            g.name = f"{body}_{k}"
            g.conaffinity = 1  # the floor has contype 1 (and priority: its friction, condim)
            spec.add_sensor(name=f"{body}_{k}_floor_found", type=mujoco.mjtSensor.mjSENS_CONTACT,
                            objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=g.name,
                            reftype=mujoco.mjtObj.mjOBJ_GEOM, refname="floor",
                            intprm=[1, 1, 1])  # data "found", reduce "mindist", num 1


def build_model(cfg: LeggedTaskConfig, terrain: str | TerrainGrid, penalized: Sequence[str] = (),
                terminating: Sequence[str] = (), cone: str | None = None) -> mujoco.MjModel:
    """The task's scene: ``"flat"``, ``"rough"``, or a generated terrain grid replacing the
    flat floor (a heightfield geom named ``"floor"``); the ``penalized`` and
    ``terminating`` bodies made to touch the floor (:func:`add_contact_sensors`);
    ``cone``: None (the model's), ``"pyramidal"`` or ``"elliptic"``."""
    mj_cone = check_cone(cone)
    grid = isinstance(terrain, TerrainGrid)
    spec = cfg.spec("flat" if grid else terrain)
    if mj_cone is not None:
        spec.option.cone = mj_cone
    if grid:
        add_terrain_hfield(spec, terrain, replace="floor")
    add_contact_sensors(spec, (*penalized, *terminating), cfg.feet)
    return spec.compile()


def rows_block(b: BindContext, names: Sequence[str], scalars: bool = False) -> wp.array:
    """The effective-table rows ``[rows, N]`` of parameters stored one after the other, in
    ``names`` order (a view: kernels see every write): scalars (``scalars``, a block of
    constants read by row) or also vectors (a row per component)."""
    cols = [b.params.columns(n) for n in names]
    end = cols[0][0]
    for name, (c0, size) in zip(names, cols, strict=True):
        if c0 != end or (scalars and size != 1):
            kind = "scalars" if scalars else "parameters"
            raise ValueError(f"parameters {list(names)}: expected {kind} stored one after "
                             f"the other, got {name!r} at row {c0} (size {size}), expected "
                             f"row {end}")
        end = c0 + size
    return wp.from_torch(b.params.effective_table[cols[0][0] : end])


def _empty(ndim: int, dtype=float) -> wp.array:
    return wp.zeros((0,) * ndim, dtype=dtype)


class LeggedTask(Task):
    """The task of a :class:`LeggedTaskConfig` over a ``LeggedBackend``: its state
    (``state[key]``, checkpointed with the env as ``task_<key>``), its kernel after a
    step (``compute``), the task reset and observations after a reset (``observe``).

    ``compute(ctx)`` runs the task alone (with the height scan on a terrain): the parity
    tests write MuJoCo Warp's data and the task state, then call it."""

    def __init__(self, env: LeggedEnv):
        self.cfg, self.mjm, self.grid = env.task_config, env.mjm, env.grid
        self.penalized, self.terminating = env.penalized_contacts, env.terminating_contacts
        self.points = scan_points() if env.num_scan_points else None

    def _sensors_of(self, body: str) -> list[str]:
        names, k = [], 0
        while mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_SENSOR,
                                f"{body}_{k}_floor_found") >= 0:
            names.append(f"{body}_{k}_floor_found")
            k += 1
        return names

    def kernel_spec(self) -> tuple:
        """The ``make_task_kernel`` spec of the config for this model."""
        cfg, nu, nf = self.cfg, self.mjm.nu, len(self.cfg.feet)
        noise = [n for n, _, _ in cfg.noise]
        consts = [s.name for s in cfg.consts]
        consts_k = []
        for k, kname in enumerate(kt.CTX_CONSTS):
            param = cfg.ctx.get(kname)
            if param is None:
                consts_k.append((k, -1, 0, float(cfg.defaults.get(kname, 0.0))))
            elif param in consts:
                consts_k.append((k, 0, consts.index(param), 0.0))
            elif param in noise:
                consts_k.append((k, 1, noise.index(param), 0.0))
            else:
                consts_k.append((k, 2, list(cfg.extra_block).index(param), 0.0))
        obs = tuple((_size(o.size, nu, nf), o.value, o.bias,
                     -1 if o.noise is None else noise.index(o.noise)) for o in cfg.obs)
        priv = tuple((_size(o.size, nu, nf), o.value) for o in cfg.priv)
        cmd = cfg.command
        resets, updates = (cfg.reset,), (cfg.update,)
        if cmd is not None:  # the command's laws, then the task's
            resets, updates = (cmd.reset, cfg.reset), (cmd.update, cfg.update)
        rexp = None
        if cfg.reward_exp is not None:
            coef, names = cfg.reward_exp
            rexp = (float(coef), tuple(r.name in names for r in cfg.rewards))
        return (nf, tuple(consts_k), obs, priv, tuple(r.term for r in cfg.rewards),
                tuple(cfg.terminations), resets, updates, cfg.reward_clip, _command_mode(cfg),
                cfg.progress_always, rexp)

    @staticmethod
    def obs_sizes_of(env: LeggedEnv) -> tuple[int, int]:
        """(O, O + Q): the observation's and privileged observation's sizes without the
        height scan."""
        cfg, nu = env.task_config, env.mjm.nu
        nf = len(cfg.feet)
        o = sum(_size(t.size, nu, nf) for t in cfg.obs)
        return o, o + sum(_size(t.size, nu, nf) for t in cfg.priv)

    def bind(self, b: BindContext, backend: LeggedBackend) -> None:
        self.backend = backend
        cfg, mjm, n, dev, ctx = self.cfg, self.mjm, b.num_envs, b.device, b.step
        nf = len(cfg.feet)
        self.kernel = kt.make_task_kernel(self.kernel_spec())
        self.state = {}
        with wp.ScopedDevice(wp_device(dev)):
            ts = kt.TaskState()
            for name, t in kt.TaskState.vars.items():  # empty unless the config keeps it
                setattr(ts, name, _empty(t.type.ndim, t.type.dtype))
            states = cfg.state
            if _command_mode(cfg) == 2:  # the heading command's state, after the config's
                states = (*states, State("heading", "heading", (2,)))
            for s in states:
                shape = tuple({"nu": mjm.nu, "feet": nf}.get(x, x) for x in s.shape)
                v = self.state[s.key] = torch.zeros(
                    n, *shape, dtype=torch.int32 if s.int32 else torch.float32, device=dev)
                if self.grid is not None or not s.terrain_only:
                    backend.state[f"task_{s.key}"] = v  # checkpointed with the env
                    if s.int32:  # counters, steps: never negative
                        backend.state_bounds[f"task_{s.key}"] = (0, 2**31 - 1)
                setattr(ts, s.field, wp.from_torch(v))
            sn = self._sensors(backend)
            jnt = mjm.actuator_trnid[:, 0]
            model = kt.TaskModel()
            model.dt = backend.dt
            model.default_pose = wp.array(backend.default_pose, dtype=float)
            model.joint_low = wp.array(mjm.jnt_range[jnt, 0].astype(np.float32), dtype=float)
            model.joint_high = wp.array(mjm.jnt_range[jnt, 1].astype(np.float32), dtype=float)
            w = np.resize(np.array(cfg.pose_weight, np.float32), mjm.nu)
            model.pose_weight = wp.array(w, dtype=float)
            act_joint = list(jnt)
            idx = [act_joint.index(mjm.joint(j if mujoco.mj_name2id(
                mjm, mujoco.mjtObj.mjOBJ_JOINT, j) >= 0 else f"{j}_joint").id)
                for j in cfg.index_joints]
            model.index = wp.array(idx, dtype=int) if idx else _empty(1, int)
            self.terrain = TaskTerrain(mjm, backend, self.grid, self.points, n, dev)
            # views of buffers allocated once (the parameter table, MuJoCo Warp's data, the
            # step context): bound here, never rebound
            params = kt.TaskParams()
            params.scales = rows_block(b, [f"reward_{r}" for r in cfg.reward_names], True)
            params.noise = rows_block(b, [name for name, _, _ in cfg.noise], True)
            params.consts = rows_block(b, [s.name for s in cfg.consts], True)
            params.cmd_range = params.cmd_prob = params.cmd = _empty(2)
            if _command_mode(cfg) == 2:
                params.cmd = rows_block(b, COMMAND_PARAMS)
            if cfg.command is not None and cfg.command.range_param is not None:
                params.cmd_range = wp.from_torch(b.param_rows(cfg.command.range_param))
            if cfg.command is not None and cfg.command.prob_param is not None:
                params.cmd_prob = wp.from_torch(b.param_rows(cfg.command.prob_param))
            params.extra = rows_block(b, cfg.extra_block) if cfg.extra_block else _empty(2)
            d, data = backend.d, kt.TaskData()
            for name, t in kt.TaskData.vars.items():
                read = name in ("qpos", "qvel", "sensordata", "site_xpos", "site_xmat",
                                "actuator_force") or name in cfg.data
                if name == "kick_i":
                    value = wp.from_torch(backend.state["kick_steps"])
                else:
                    value = getattr(d, name) if read else None
                setattr(data, name, value if read else _empty(t.type.ndim, t.type.dtype))
        out, outputs = ctx.outputs, kt.TaskOutputs()
        outputs.obs = wp.from_torch(out["observation"])
        outputs.final_obs = wp.from_torch(out["final_observation"])
        outputs.priv = wp.from_torch(out["privileged_observation"])
        outputs.terms = wp.from_torch(out["reward_terms"])
        outputs.reward = wp.from_torch(out["reward"])
        outputs.terminated = wp.from_torch(out["terminated"])
        self._model = [model, sn, self.terrain.terrain, params]
        self._inputs = [step_keys(ctx), data, wp.from_torch(ctx.action.reshape(n, -1))]
        self._outputs = [ts, outputs]

    def _sensors(self, backend: LeggedBackend) -> kt.Sensors:
        cfg, mjm = self.cfg, self.mjm

        def adr(name: str) -> int:
            return int(mjm.sensor_adr[mjm.sensor(name).id])

        def ints(values: list[int]) -> wp.array:
            return wp.array(values or [0], dtype=int)

        sn = kt.Sensors()
        sn.gyro, sn.linvel, sn.accel = adr(cfg.gyro), adr(cfg.linvel), adr(cfg.accel)
        sn.upvector = adr(cfg.upvector)
        sn.global_linvel, sn.global_angvel = adr(cfg.global_linvel), adr(cfg.global_angvel)
        sn.imu_site = mjm.site(cfg.imu_site).id
        sn.base_body = backend.base
        # contact sensors are addressed by name, in the feet's order
        sn.foot_site = wp.array([mjm.site(f).id for f in cfg.feet], dtype=int)
        found = (cfg.foot_found,) if isinstance(cfg.foot_found, str) else cfg.foot_found
        names = [p.format(f) for f in cfg.feet for p in found]  # foot-major
        sn.found_per_foot = len(found)
        sn.foot_found = wp.array([adr(x) for x in names], dtype=int)
        sn.foot_found_step = wp.array([mjm.sensor(x).id if cfg.contact_by_id else adr(x)
                                       for x in names], dtype=int)
        sn.foot_vel = wp.array([adr(cfg.foot_vel.format(f)) for f in cfg.feet], dtype=int)
        # a task's own addresses: empty arrays (no bytes) when it has none
        sn.foot_force = (wp.array([adr(cfg.foot_force.format(f)) for f in cfg.feet], dtype=int)
                         if cfg.foot_force else _empty(1, int))
        groups = [[adr(s) for s in self._sensors_of(b)] for b in self.penalized]
        groups += [[adr(s) for s in g] for g in cfg.penalized_groups]
        pen, start = [], [0]
        for g in groups:
            pen += g
            start.append(len(pen))
        term = [adr(s) for b in self.terminating for s in self._sensors_of(b)]
        term += [adr(s) for s in cfg.terminating_sensors]
        sn.n_penalized, sn.n_terminating = len(groups), len(term)
        sn.penalized, sn.penalized_start = ints(pen), ints(start)
        sn.terminating = ints(term)
        sn.extra = (wp.array([adr(s) for s in cfg.extra_sensors], dtype=int)
                    if cfg.extra_sensors else _empty(1, int))
        return sn

    def compute(self, ctx: StepContext) -> None:
        self.terrain.scan(ctx)
        self._launch(ctx, 0, None)

    def observe(self, ctx: StepContext, mask: torch.Tensor, mode: int = 1) -> None:
        """After a reset: the task state's reset, the observation and privileged
        observation of the masked envs (``mode`` 2: the observations only)."""
        self.terrain.scan(ctx)
        self._launch(ctx, mode, mask)

    def observe_only(self, ctx: StepContext, mask: torch.Tensor) -> None:
        """The observation and privileged observation of the masked envs (bool ``[N]``)
        from their current data and task state (what ``observe`` runs after the task
        reset). Between steps (a tool for tests and recorders): the mask is copied into
        ``ctx.reset_mask``, the one explicit-reset mask the task's launches are bound to."""
        ctx.reset_mask.copy_(mask)
        self.observe(ctx, ctx.reset_mask, mode=2)

    def _launch(self, ctx: StepContext, mode: int, mask: torch.Tensor | None) -> None:
        # bound once per mode and mask role (None: all envs; the context's done or reset)
        self.backend.mask_launch(f"task_{mode}", mask, lambda w: BoundLaunch(
            self.kernel, ctx.num_envs, inputs=[*self._model, mode, w, *self._inputs],
            outputs=self._outputs, device=ctx.device)).launch(ctx.stream)



def check_bodies(what: str, bodies: object, valid: Sequence[str], robot: str) -> tuple[str, ...]:
    """``bodies`` (a list or tuple of body names of the model) as a tuple, or a
    ``ValueError`` naming the argument ``what``, the valid names and what was got."""
    if not isinstance(bodies, (list, tuple)):
        hint = f" (one body: ({bodies!r},))" if isinstance(bodies, str) else ""
        raise ValueError(f"{what}: expected a list or tuple of {robot} body names, got "
                         f"{type(bodies).__name__} {bodies!r}{hint}")
    bad = [b for b in bodies if not isinstance(b, str) or b not in valid]
    if bad:
        raise ValueError(f"{what}: expected {robot} body names ({', '.join(valid)}), got "
                         f"{type(bad[0]).__name__} {bad[0]!r}")
    return tuple(bodies)


class LeggedEnv(RobotEnv):
    """A legged task on MuJoCo Warp from its :class:`LeggedTaskConfig` (class attribute
    ``config``); a variant sets ``name``, ``terrain`` (``"flat"`` / ``"rough"``),
    ``default_penalized`` / ``default_terminating`` bodies, ``reward_defaults``.

    Args (beyond ``RobotEnv``'s):
        cone: the friction cone, ``None`` (the model's), ``"pyramidal"`` or
            ``"elliptic"``.
        max_action_delay: K, the largest ``action_delay`` (ring buffer of K + 1 actions).
        penalized_contacts: bodies whose collision geoms are made to touch the ground; the
            ``undesired_contacts`` term counts those touching it.
        terminating_contacts: bodies whose touching the ground ends the episode (when
            the ``terminate_contact`` constant is 1).
        njmax, nconmax: MuJoCo Warp's buffers per world (default: the config's ``sizes``);
            ``env.overflows`` counts steps that dropped some.

    Outputs (beyond ``VecEnv``'s): ``"observation"`` float32 ``[N, O + P]``,
    ``"privileged_observation"`` float32 ``[N, O + Q + P]`` (after the auto-reset, as
    ``"observation"``; also returned by ``reset``), ``"reward_terms"`` float32 ``[N, R]``
    (module docstring).
    """

    config: LeggedTaskConfig
    scan_config: LeggedTaskConfig | None = None  # with a height scan (None: ``config``)
    terrain = "flat"
    robot = "robot"
    per_element = LEGGED_PER_ELEMENT
    num_scan_points = 0  # P, the height-scan points in the observation (a terrain env's)
    default_penalized: tuple[str, ...] = ()
    default_terminating: tuple[str, ...] = ()
    reward_defaults: dict = {}
    spawn_height = 0.0
    backend_class = LeggedBackend  # a subclass may add its own reset draws

    def __init_subclass__(cls, **kw):
        if "config" in cls.__dict__:  # a task's class: its config's step, limit, terms
            cls.frame_skip = cls.config.frame_skip
            cls.max_episode_steps = cls.config.max_episode_steps  # VecEnv's default limit
            cls.reward_term_names = cls.config.reward_names
        super().__init_subclass__(**kw)

    def __init__(self, num_envs: int, device: str | torch.device | None = None, seed: int = 0,
                 max_episode_steps: int | None = None, capture: bool = True,
                 env_offset: int = 0, max_action_delay: int = 4,
                 penalized_contacts: Sequence[str] | None = None,
                 terminating_contacts: Sequence[str] | None = None,
                 njmax: int | None = None, nconmax: int | None = None,
                 deterministic: bool = False, cone: str | None = None, **kwargs):
        # every argument of the model is checked before anything (the terrain) is built
        if (not isinstance(max_action_delay, int) or isinstance(max_action_delay, bool)
                or not 0 <= max_action_delay <= 1000):
            raise ValueError(f"max_action_delay: expected an int in [0, 1000], got "
                             f"{max_action_delay!r}")
        check_cone(cone)
        check_sizes(njmax, nconmax, num_envs)
        self.max_action_delay = max_action_delay
        valid = self.bodies()
        self.penalized_contacts = check_bodies(
            "penalized_contacts",
            self.default_penalized if penalized_contacts is None else penalized_contacts,
            valid, self.robot)
        self.terminating_contacts = check_bodies(
            "terminating_contacts",
            self.default_terminating if terminating_contacts is None else terminating_contacts,
            valid, self.robot)
        self.grid = self.make_grid(seed, kwargs)
        rows, kind = self.config.sizes["grid" if self.grid is not None else self.terrain]
        super().__init__(num_envs, device=device, seed=seed,
                         max_episode_steps=max_episode_steps, capture=capture,
                         env_offset=env_offset, cone=cone,
                         njmax=rows if njmax is None else njmax,
                         nconmax=kind if nconmax is None else nconmax,
                         deterministic=deterministic, **kwargs)

    @property
    def task_config(self) -> LeggedTaskConfig:
        """The config in use: ``scan_config`` with a height scan (if set), else ``config``."""
        scan = self.num_scan_points and self.scan_config is not None
        return self.scan_config if scan else self.config

    @classmethod
    def bodies(cls) -> tuple[str, ...]:
        """The bodies of the robot's model, in its order (the world excluded)."""
        return _bodies(cls.config.spec)

    def make_grid(self, seed: int, kwargs: dict) -> TerrainGrid | None:
        """The terrain grid (None: the config's scene)."""
        return None

    def model_config(self) -> dict[str, object]:
        """``RobotEnv``'s, ``max_action_delay``, ``penalized_contacts`` and
        ``terminating_contacts`` (the bodies the model's contacts were built for)."""
        return {**super().model_config(), "max_action_delay": self.max_action_delay,
                "penalized_contacts": tuple(self.penalized_contacts),
                "terminating_contacts": tuple(self.terminating_contacts)}

    def make_model(self, cone: str | None) -> mujoco.MjModel:
        return build_model(self.config, self.grid if self.grid is not None else self.terrain,
                           self.penalized_contacts, self.terminating_contacts, cone)

    def make_param_specs(self) -> tuple[ParamSpec, ...]:
        rows = 1 if self.grid is None else len(self.grid.difficulty)
        return (*legged_specs(self.mjm, self.max_action_delay, rows, **self.config.recipe),
                *self.task_config.param_specs(self.reward_defaults))

    def make_action_spec(self) -> BoxSpec:
        return BoxSpec(shape=(self.mjm.nu,), low=-1.0, high=1.0)

    def obs_size(self) -> int:
        return LeggedTask.obs_sizes_of(self)[0] + self.num_scan_points

    def output_specs(self) -> dict[str, OutputSpec]:
        return {
            "privileged_observation": OutputSpec(
                (LeggedTask.obs_sizes_of(self)[1] + self.num_scan_points,), reset=True,
                doc="the critic's observation: the noisy observation, then the "
                    "privileged terms, (height scan)"),
            "reward_terms": OutputSpec((len(self.config.rewards),),
                                       doc="scale_k * term_k before the sum, dt and clip"),
        }

    def make_backend(self) -> LeggedBackend:
        origins = None
        if self.grid is not None:
            origins = self.grid.origins.copy()
            origins[..., 2] += self.spawn_height
        cfg = self.task_config
        return self.backend_class(self.mjm, self.frame_skip, cfg.base_body, self.max_action_delay,
                             origins=origins, keyframe=cfg.keyframe, joint_scale=cfg.joint_scale,
                             torso_body=cfg.torso_body, action_mode=cfg.action_mode,
                             forward_after_step=cfg.forward_after_step,
                             settle_steps=cfg.settle_steps, clip_ctrl=cfg.clip_ctrl,
                             **self._sizes)

    def make_task(self) -> LeggedTask:
        return LeggedTask(self)

    def playground_randomization(self, on: On = "startup") -> tuple[Term, ...]:
        """MuJoCo Playground's ``domain_randomize`` as terms, for
        ``env.randomize(*env.playground_randomization())``: ``legged.playground_randomization``
        with the config's ``randomization`` values. ``on``: ``"startup"`` (Playground's:
        once per env), ``"reset"`` or another trigger."""
        return playground_randomization(self, on, **self.task_config.randomization)


_BODIES: dict = {}


def _bodies(spec: Callable[[str], mujoco.MjSpec]) -> tuple[str, ...]:
    if spec not in _BODIES:
        _BODIES[spec] = tuple(b.name for b in spec("flat").bodies[1:])
    return _BODIES[spec]
