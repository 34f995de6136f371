"""Unitree Go1 velocity tracking on MuJoCo Warp: MuJoCo Playground's
``Go1JoystickFlatTerrain`` / ``Go1JoystickRoughTerrain`` (``-v1``, as envpool names its ports)
and ``Go1Terrain-v0``, the flat task's rewards on a legged_gym-style terrain grid with a
height scan and a terrain curriculum.

The task is Playground's ``locomotion/go1/joystick.py`` (the definition; envpool 1.2.5's
C++ port is the reference the tests compare with, ``tests/fixtures/go1_envpool_*.npz``):
physics ``load_go1`` (sim dt 0.004 s, 5 substeps per 0.02 s env step, Euler, Newton with 1
iteration), PD position control (kp 35, kd 0.5; ``gpuparam.envs.mujoco.legged``) to ``ctrl
= default_pose + action * action_scale`` (0.5; actions nominally in [-1, 1], not clipped);
the observations, 16 reward terms and termination (base upside down) of
``kernels/go1.py``; 1000-step episodes. Commands: at a reset ``U(-a, a)`` per component;
after a countdown of ``round(Exponential(1) * command_resample_time / dt)`` steps each
component is kept with probability ``command_keep_prob``, else replaced by ``U(-a_k,
a_k)`` with probability ``b_k`` (``command_nonzero_prob``) or by 0; the countdown is
redrawn then and at a termination. Kicks (``kick_*``, off by default), the reset (home
pose, ``U(-0.5, 0.5)`` in x and y, yaw ``U(-3.14, 3.14)``, base velocities ``U(-0.5,
0.5)``) and action latency (``action_delay``, 0 by default): ``legged.py``. Every reward
scale, noise scale and level, command range, PD gain, action scale, kick range and reset
range is a per-env parameter (``env.params``).

Deviations from Playground (each deliberate): resets are full resets as Playground's
``reset()`` defines them (fresh draws, task state zeroed), not its training wrapper's
cached first state; random numbers are gpuparam's counter-based draws, not JAX's (same
distributions); ``round`` of the countdown rounds halves away from zero (JAX: to even);
commands are resampled at Playground's exponential countdown, not at ``gp.Interval``\\ s,
and have no heading mode; a kick's force uses the base subtree's mass of the env's world
(randomized masses included; Playground: the nominal model's); with kicks off the base's
applied wrench is written 0 at every step (Playground leaves it 0); ``"reward_terms"`` has a
17th term, the undesired-contact penalty (0 on Playground's scenes). On ``Go1Terrain-v0``
foot heights (swing peak, foot clearance) are heights above the terrain under the foot
(world z in Playground, whose terrains are near-flat), and the trunk, thighs and calves
collide with the ground (see ``Go1TerrainEnv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import mujoco
import numpy as np
import torch
import warp as wp

from gpuparam._device import wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.backend import BindContext, Task
from gpuparam.envs.mujoco.backend import check_sizes, step_keys
from gpuparam.envs.mujoco.go1_model import FEET, go1_spec
from gpuparam.envs.mujoco.legged import (
    LEGGED_PER_ELEMENT,
    LeggedBackend,
    legged_specs,
    param_block,
    playground_randomization,
)
from gpuparam.envs.mujoco.model import check_cone
from gpuparam.envs.mujoco.robot_env import RobotEnv
from gpuparam.envs.mujoco.terrain import TerrainGrid, add_terrain_hfield, scan_points
from gpuparam.envs.mujoco.terrain_env import TaskTerrain, TerrainGridEnv
from gpuparam.kernels import go1 as kgo1
from gpuparam.pipeline import StepContext
from gpuparam.randomization.terms import On, Term
from gpuparam.spec import BoxSpec, OutputSpec, ParamSpec

# (term, default scale, doc): envpool's config order (its reward_<term> info keys), then
# gpuparam's undesired-contact penalty
REWARDS = (
    ("tracking_lin_vel", 1.0, "exp(-|cmd_xy - local linvel_xy|^2 / sigma)"),
    ("tracking_ang_vel", 0.5, "exp(-(cmd_yaw - gyro_z)^2 / sigma)"),
    ("lin_vel_z", -0.5, "global linvel_z^2"),
    ("ang_vel_xy", -0.05, "|global angvel_xy|^2"),
    ("orientation", -5.0, "|upvector_xy|^2"),
    ("dof_pos_limits", -1.0, "joint angles beyond the soft limits (summed)"),
    ("pose", 0.5, "exp(-sum w (q - default)^2), w = (1, 1, 0.1) per leg"),
    ("termination", -1.0, "1 at a termination"),
    ("stand_still", -1.0, "sum |q - default| when |cmd| < 0.01"),
    ("torques", -0.0002, "|tau| + sum |tau| (actuator forces)"),
    ("action_rate", -0.01, "|action - last action|^2"),
    ("energy", -0.001, "sum |qvel| |tau|"),
    ("feet_clearance", -2.0, "sum |foot height - max_foot_height| |foot vel_xy|^(1/2)"),
    ("feet_height", -0.2, "sum (swing peak / max_foot_height - 1)^2 at first contacts, if moving"),
    ("feet_slip", -0.1, "sum |foot vel_xy|^2 in contact, if moving"),
    ("feet_air_time", 0.1, "sum (air time - 0.1) at first contacts, if moving"),
    ("undesired_contacts", 0.0, "number of penalized bodies touching the ground"),
)
REWARD_TERMS = tuple(t for t, _, _ in REWARDS)
NOISE = (("noise_level", 1.0, "scale of every observation noise (0: none, bit for bit)"),
         ("noise_linvel", 0.1, "local linear velocity noise (m/s)"),
         ("noise_gyro", 0.2, "gyro noise (rad/s)"),
         ("noise_gravity", 0.05, "gravity vector noise"),
         ("noise_joint_pos", 0.03, "joint angle noise (rad)"),
         ("noise_joint_vel", 1.5, "joint velocity noise (rad/s)"),
         ("noise_height_scan", 0.1, "height scan noise (m, before its scale)"))
DEFAULT_POSE_WEIGHT = (1.0, 1.0, 0.1) * 4
# (njmax, nconmax) per world. Playground's MJX buffers (joystick.py): flat 40 constraint
# rows and 4 contacts; rough 60 and 8. On the rough heightfield MuJoCo Warp keeps up to 4
# contacts per foot (16, i.e. 12 + 16 * 4 = 76 rows): sized for that, so nothing is ever
# dropped. On the grid the trunk, thighs and calves collide too: a robot lying on its side
# makes about 25 contacts and 110 rows (the contact buffer is shared by all worlds, and
# most robots stand on 4 feet).
SIZES = {"flat": (40, 4), "rough": (76, 16), "grid": (200, 64)}


def go1_task_specs(undesired_contacts: float = 0.0) -> tuple[ParamSpec, ...]:
    """The task's parameters (Playground's values): reward scales, noise, command law,
    reward constants, height-scan shaping, contact termination."""
    scales = [ParamSpec(f"reward_{t}", undesired_contacts if t == "undesired_contacts" else s,
                        -1e3, 1e3, doc=f"scale of {t}: {doc}") for t, s, doc in REWARDS]
    noise = [ParamSpec(n, v, 0.0, 100.0, doc=doc) for n, v, doc in NOISE]
    return (
        *scales, *noise,
        ParamSpec("tracking_sigma", 0.25, 1e-4, 100.0, doc="width of the tracking rewards"),
        ParamSpec("max_foot_height", 0.1, 1e-3, 10.0, unit="m",
                  doc="target swing height of a foot"),
        ParamSpec("soft_joint_limit_factor", 0.95, 0.0, 1.0,
                  doc="soft joint limits = hard limits x factor (each bound)"),
        ParamSpec("command_keep_prob", 0.5, 0.0, 1.0,
                  doc="at a resample, probability of keeping each command component"),
        ParamSpec("command_resample_time", 5.0, 0.0, 1e5, unit="s",
                  doc="mean of the exponential time between command resamples"),
        ParamSpec("height_scan_offset", 0.5, -10.0, 10.0, unit="m",
                  doc="height scan value: clip(base_z - offset - h, -1, 1) * scale"),
        ParamSpec("height_scan_scale", 5.0, 0.0, 100.0, doc="scale of the height scan values"),
        ParamSpec("terminate_on_contact", 1.0, 0.0, 1.0,
                  doc="1: a terminating body touching the ground ends the episode"),
        ParamSpec("command_range", (1.5, 0.8, 1.2), 0.0, 100.0, shape=(3,),
                  unit="m/s, m/s, rad/s", doc="a: commands drawn from U(-a, a) (vx, vy, yaw)"),
        ParamSpec("command_nonzero_prob", (0.9, 0.25, 0.5), 0.0, 1.0, shape=(3,),
                  doc="b: at a resample, probability of a non-zero new component"),
    )


def _collision_geoms(spec: mujoco.MjSpec, body: str) -> list:
    """The collision geoms of ``body`` (group 3, not a foot)."""
    b = spec.body(body)
    if b is None:
        raise ValueError(f"contact body: expected a body of the Go1 model, got {body!r}")
    return [g for g in b.geoms if g.group == 3 and g.name not in FEET]


@cache
def go1_bodies() -> tuple[str, ...]:
    """The bodies of the Go1 model, in its order (the world excluded)."""
    return tuple(b.name for b in go1_spec("flat").bodies[1:])


def check_contact_bodies(what: str, bodies: object) -> tuple[str, ...]:
    """``bodies`` (a list or tuple of Go1 body names) as a tuple, or a ``ValueError``
    naming the argument ``what``, the valid names and what was got (a lone str included)."""
    if not isinstance(bodies, (list, tuple)):
        hint = f" (one body: ({bodies!r},))" if isinstance(bodies, str) else ""
        raise ValueError(f"{what}: expected a list or tuple of Go1 body names, got "
                         f"{type(bodies).__name__} {bodies!r}{hint}")
    bad = [b for b in bodies if not isinstance(b, str) or b not in go1_bodies()]
    if bad:
        raise ValueError(f"{what}: expected Go1 body names ({', '.join(go1_bodies())}), got "
                         f"{type(bad[0]).__name__} {bad[0]!r}")
    return tuple(bodies)


def go1_model(terrain: str | TerrainGrid, penalized: Sequence[str] = (),
              terminating: Sequence[str] = (), cone: str | None = None) -> mujoco.MjModel:
    """The Go1 scene: ``"flat"``, ``"rough"`` (Playground's), or a generated terrain grid
    replacing the flat floor (a heightfield geom named ``"floor"``, so the foot contact
    sensors keep working). For each body in ``penalized`` and ``terminating`` its collision
    geoms are made to collide with the floor (only the feet do in Playground's model) and
    each gets a floor-contact sensor ``<body>_<k>_floor_found``. ``cone``: ``None`` (the
    model's pyramidal friction cone, Playground's), ``"pyramidal"`` or ``"elliptic"``."""
    mj_cone = check_cone(cone)
    penalized = check_contact_bodies("penalized", penalized)
    terminating = check_contact_bodies("terminating", terminating)
    grid = isinstance(terrain, TerrainGrid)
    spec = go1_spec("flat" if grid else terrain)
    if mj_cone is not None:
        spec.option.cone = mj_cone
    if grid:
        add_terrain_hfield(spec, terrain, replace="floor")
    for body in dict.fromkeys((*penalized, *terminating)):
        for k, g in enumerate(_collision_geoms(spec, body)):
            g.name = f"{body}_{k}"
            g.conaffinity = 1  # the floor has contype 1 (and priority: its friction, condim)
            spec.add_sensor(name=f"{body}_{k}_floor_found", type=mujoco.mjtSensor.mjSENS_CONTACT,
                            objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=g.name,
                            reftype=mujoco.mjtObj.mjOBJ_GEOM, refname="floor",
                            intprm=[1, 1, 1])  # data "found", reduce "mindist", num 1
    return spec.compile()


class Go1Task(Task):
    """The Go1 joystick task (``kernels.go1``) over a ``LeggedBackend``: its state
    (``backend.state["task_*"]``, checkpointed with the env), the observation and reward
    kernel after a step, the task reset and observation after a reset.

    ``compute(ctx)`` runs the task alone (with the height scan on a terrain): the parity
    tests write MuJoCo Warp's data and the task state, then call it."""

    def __init__(self, env: Go1Env):
        self.mjm = env.mjm
        self.penalized, self.terminating = env.penalized_contacts, env.terminating_contacts
        self.grid = env.grid
        self.points = scan_points() if env.num_scan_points else None

    def bind(self, b: BindContext, backend: LeggedBackend) -> None:
        self.backend = backend
        mjm, n, dev, ctx = self.mjm, b.num_envs, b.device, b.step
        shapes = {"command": (3,), "countdown": (), "last_act": (mjm.nu,), "air_time": (4,),
                  "swing_peak": (4,), "last_contact": (4,), "start_xy": (2,),
                  "cmd_distance": (), "metric": ()}
        self.state, ts = {}, kgo1.TaskState()
        for k, shape in shapes.items():
            dtype = torch.int32 if k == "countdown" else torch.float32
            v = self.state[k] = torch.zeros(n, *shape, dtype=dtype, device=dev)
            backend.state[f"task_{k}"] = v  # checkpointed with the env
            setattr(ts, k, wp.from_torch(v))
        backend.state_bounds["task_countdown"] = (0, 2**31 - 1)  # steps to the next command

        def adr(name: str) -> int:
            return int(mjm.sensor_adr[mjm.sensor(name).id])

        with wp.ScopedDevice(wp_device(dev)):
            sn = kgo1.Sensors()
            sn.gyro, sn.linvel, sn.accel = adr("gyro"), adr("local_linvel"), adr("accelerometer")
            sn.upvector = adr("upvector")
            sn.global_linvel, sn.global_angvel = adr("global_linvel"), adr("global_angvel")
            sn.imu_site = mjm.site("imu").id
            sn.base_body = backend.base
            # contact sensors are stored FR, FL, RL, RR: addressed by name, in FEET order
            sn.foot_found = wp.array([adr(f"{f}_floor_found") for f in FEET], dtype=int)
            sn.foot_vel = wp.array([adr(f"{f}_global_linvel") for f in FEET], dtype=int)
            sn.foot_site = wp.array([mjm.site(f).id for f in FEET], dtype=int)
            pen_start, pen = [0], []
            for body in self.penalized:
                pen += [adr(s) for s in self._sensors_of(body)]
                pen_start.append(len(pen))
            term = [adr(s) for body in self.terminating for s in self._sensors_of(body)]
            sn.n_penalized, sn.n_terminating = len(self.penalized), len(term)
            sn.penalized = wp.array(pen or [0], dtype=int)
            sn.penalized_start = wp.array(pen_start, dtype=int)
            sn.terminating = wp.array(term or [0], dtype=int)
            self.terrain = TaskTerrain(mjm, backend, self.grid, self.points, n, dev)
            jnt = mjm.actuator_trnid[:, 0]
            model = kgo1.Go1Model()
            model.dt = backend.dt
            model.default_pose = wp.array(backend.default_pose, dtype=float)
            model.joint_low = wp.array(mjm.jnt_range[jnt, 0].astype(np.float32), dtype=float)
            model.joint_high = wp.array(mjm.jnt_range[jnt, 1].astype(np.float32), dtype=float)
            model.pose_weight = wp.array(np.array(DEFAULT_POSE_WEIGHT, np.float32)[: mjm.nu],
                                         dtype=float)
        # every array below is a view of a buffer allocated once (MuJoCo Warp's data, the
        # step context, the parameter table, the task state): bound here, never rebound
        params = kgo1.Go1Params()
        params.scales = param_block(b, [f"reward_{t}" for t in REWARD_TERMS])
        params.noise = param_block(b, [name for name, _, _ in NOISE])
        params.consts = param_block(b, ("tracking_sigma", "max_foot_height",
                                   "soft_joint_limit_factor", "command_keep_prob",
                                   "command_resample_time", "height_scan_offset",
                                   "height_scan_scale", "terminate_on_contact"))
        params.cmd_range = wp.from_torch(b.param_rows("command_range"))
        params.cmd_nonzero = wp.from_torch(b.param_rows("command_nonzero_prob"))
        d, data = backend.d, kgo1.Go1Data()
        data.qpos, data.qvel, data.sensordata = d.qpos, d.qvel, d.sensordata
        data.site_xpos, data.site_xmat = d.site_xpos, d.site_xmat
        data.actuator_force, data.xfrc_applied = d.actuator_force, d.xfrc_applied
        data.kick_i = wp.from_torch(backend.state["kick_steps"])
        out, outputs = ctx.outputs, kgo1.Go1Outputs()
        outputs.obs = wp.from_torch(out["observation"])
        outputs.final_obs = wp.from_torch(out["final_observation"])
        outputs.priv = wp.from_torch(out["privileged_observation"])
        outputs.terms = wp.from_torch(out["reward_terms"])
        outputs.reward = wp.from_torch(out["reward"])
        outputs.terminated = wp.from_torch(out["terminated"])
        self._model, self._inputs = [model, sn, self.terrain.terrain, params], [
            step_keys(ctx), data, wp.from_torch(ctx.action.reshape(n, -1))]
        self._outputs = [ts, outputs]

    def _sensors_of(self, body: str) -> list[str]:
        """The floor-contact sensors ``go1_model`` added for ``body``."""
        names, k = [], 0
        while mujoco.mj_name2id(self.mjm, mujoco.mjtObj.mjOBJ_SENSOR,
                                f"{body}_{k}_floor_found") >= 0:
            names.append(f"{body}_{k}_floor_found")
            k += 1
        return names

    def compute(self, ctx: StepContext) -> None:
        self.terrain.scan(ctx)
        self._launch(ctx, 0, None)

    def observe(self, ctx: StepContext, mask: torch.Tensor, mode: int = 1) -> None:
        """After a reset: the task state's reset, the observation and privileged
        observation of the masked envs (``mode`` 2: the observations only)."""
        self.terrain.scan(ctx)
        self._launch(ctx, mode, mask)

    def _launch(self, ctx: StepContext, observe: int, mask: torch.Tensor | None) -> None:
        # bound once per mode and mask role (None: all envs; the context's done or reset)
        self.backend.mask_launch(f"go1_{observe}", mask, lambda w: BoundLaunch(
            kgo1.go1, ctx.num_envs, inputs=[*self._model, observe, w, *self._inputs],
            outputs=self._outputs, device=ctx.device)).launch(ctx.stream)

    def observe_only(self, ctx: StepContext, mask: torch.Tensor) -> None:
        """The observation and privileged observation of the masked envs (bool ``[N]``)
        from their current data and task state (what ``observe`` runs after the task
        reset). Between steps (a tool for tests and recorders): the mask is copied into
        ``ctx.reset_mask``, the one explicit-reset mask the task's launches are bound to."""
        ctx.reset_mask.copy_(mask)
        self.observe(ctx, ctx.reset_mask, mode=2)


class Go1Env(RobotEnv):
    """MuJoCo Playground's ``Go1JoystickFlatTerrain`` on MuJoCo Warp (see the module
    docstring for the task).

    Args (beyond ``RobotEnv``'s):
        cone: the friction cone, ``None`` (the model's pyramidal one, Playground's),
            ``"pyramidal"`` or ``"elliptic"`` (MuJoCo's; the same default sizes fit: an
            elliptic contact takes fewer constraint rows).
        max_action_delay: K, the largest ``action_delay`` (ring buffer of K + 1 actions).
        penalized_contacts: a list or tuple of bodies (e.g. ``("FR_thigh",)``) whose
            collision geoms are made to touch the ground; the ``undesired_contacts`` term
            counts those touching it.
        terminating_contacts: a list or tuple of bodies (e.g. ``("trunk",)``) whose
            touching the ground ends the episode (when ``terminate_on_contact`` is 1).
        njmax, nconmax: MuJoCo Warp's buffers per world, default Playground's (flat: 40
            rows, 4 contacts; rough: 76 and 16, every heightfield contact kept; terrain
            grid: 200 and 64); ``env.overflows`` counts steps that dropped some.

    Outputs (beyond ``VecEnv``'s; ``"observation"`` is float32 ``[N, 48 (+ P)]``, P the
    height-scan points): ``"privileged_observation"`` float32 ``[N, 123 (+ P)]``
    (after the auto-reset, as ``"observation"``; also returned by ``reset``),
    ``"reward_terms"`` float32 ``[N, 17]`` (``scale_k * term_k`` of this step, names in
    ``REWARD_TERMS``, before the sum, ``dt`` and the clip at 0).
    """

    name = "Go1JoystickFlatTerrain-v1"
    terrain = "flat"
    frame_skip = 5
    max_episode_steps = 1000
    reward_term_names = REWARD_TERMS
    per_element = LEGGED_PER_ELEMENT
    num_scan_points = 0  # P, the height-scan points in the observation (a terrain env's)
    default_penalized: tuple[str, ...] = ()
    default_terminating: tuple[str, ...] = ()
    undesired_contact_scale = 0.0

    def __init__(self, num_envs: int, device: str | torch.device | None = None, seed: int = 0,
                 max_episode_steps: int | None = None, capture: bool = True,
                 env_offset: int = 0,
                 max_action_delay: int = 4, penalized_contacts: Sequence[str] | None = None,
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
        self.penalized_contacts = check_contact_bodies(
            "penalized_contacts",
            self.default_penalized if penalized_contacts is None else penalized_contacts)
        self.terminating_contacts = check_contact_bodies(
            "terminating_contacts",
            self.default_terminating if terminating_contacts is None else terminating_contacts)
        self.grid = self.make_grid(seed, kwargs)
        rows, kind = SIZES["grid" if self.grid is not None else self.terrain]
        njmax = rows if njmax is None else njmax
        nconmax = kind if nconmax is None else nconmax
        super().__init__(num_envs, device=device, seed=seed,
                         max_episode_steps=max_episode_steps, capture=capture,
                         env_offset=env_offset, cone=cone, njmax=njmax,
                         nconmax=nconmax, deterministic=deterministic, **kwargs)

    def make_grid(self, seed: int, kwargs: dict) -> TerrainGrid | None:
        """The terrain grid (None: Playground's scene)."""
        return None

    def model_config(self) -> dict[str, object]:
        """``RobotEnv``'s, ``max_action_delay``, ``penalized_contacts`` and
        ``terminating_contacts`` (the bodies the model's contacts were built for)."""
        return {**super().model_config(), "max_action_delay": self.max_action_delay,
                "penalized_contacts": tuple(self.penalized_contacts),
                "terminating_contacts": tuple(self.terminating_contacts)}

    def make_model(self, cone: str | None) -> mujoco.MjModel:
        return go1_model(self.grid if self.grid is not None else self.terrain,
                         self.penalized_contacts, self.terminating_contacts, cone)

    def make_param_specs(self) -> tuple[ParamSpec, ...]:
        rows = 1 if self.grid is None else len(self.grid.difficulty)
        return (*legged_specs(self.mjm, self.max_action_delay, rows, action_scale=0.5,
                              reset_xy=0.5, reset_yaw=3.14, reset_velocity=0.5),
                *go1_task_specs(self.undesired_contact_scale))

    def make_action_spec(self) -> BoxSpec:
        return BoxSpec(shape=(self.mjm.nu,), low=-1.0, high=1.0)

    def obs_size(self) -> int:
        return 48 + self.num_scan_points

    def output_specs(self) -> dict[str, OutputSpec]:
        return {
            "privileged_observation": OutputSpec(
                (123 + self.num_scan_points,), reset=True,
                doc="the critic's observation: the noisy observation's first 48, "
                    "noise-free state, contacts, kick, (height scan)"),
            "reward_terms": OutputSpec((len(REWARD_TERMS),),
                                       doc="scale_k * term_k before the sum, dt and clip"),
        }

    def make_backend(self) -> LeggedBackend:
        origins = None
        if self.grid is not None:
            origins = self.grid.origins.copy()
            origins[..., 2] += self.spawn_height
        return LeggedBackend(self.mjm, self.frame_skip, "trunk", self.max_action_delay,
                             origins=origins, **self._sizes)

    def make_task(self) -> Go1Task:
        return Go1Task(self)

    def playground_randomization(self, on: On = "startup") -> tuple[Term, ...]:
        """MuJoCo Playground's ``locomotion/go1/randomize.py`` as terms, for
        ``env.randomize(*env.playground_randomization())``: floor friction ``U(0.4, 1.0)``
        (``geom_friction`` of ``"floor"``), joint frictionloss ``x U(0.9, 1.1)``, armature
        ``x U(1.0, 1.05)``, the trunk's centre of mass ``+ U(-0.05, 0.05)`` per axis
        (``body_ipos``), every body mass ``x U(0.9, 1.1)``, the trunk ``+ U(-1, 1)`` kg
        (``added_mass``), joint offsets ``U(-0.05, 0.05)`` rad (``joint_offset``: Playground's
        ``qpos0`` jitter). ``on``: ``"startup"`` (Playground's: once per env), ``"reset"``
        or another trigger. Details and the deviations: ``legged.playground_randomization``;
        ``set_const`` follows the mass and centre-of-mass writes (Playground's MJX does not
        recompute the model's derived quantities)."""
        return playground_randomization(self, on, frictionloss=(0.9, 1.1), floor_geom="floor",
                                        com_jitter=0.05)


class Go1RoughEnv(Go1Env):
    """MuJoCo Playground's ``Go1JoystickRoughTerrain``: the same task on its 20 m x 20 m
    heightfield (5 cm high, friction 1.0), dropped from z 0.35."""

    name = "Go1JoystickRoughTerrain-v1"
    terrain = "rough"


class Go1TerrainEnv(TerrainGridEnv, Go1Env):
    """The flat task's rewards on a legged_gym-style terrain grid (``terrain.py``: rows =
    difficulty, columns = flat, rough, slopes up/down, stairs up/down, obstacles), generated
    at build time from ``terrain_seed`` (default: the env's seed).

    Env ``i`` starts on column ``(env_offset + i) % cols`` of row ``terrain_level`` (a
    per-env parameter, read at every reset), 0.07 m above the tile's centre (the rough
    scene's drop height). The observation adds the height scan (legged_gym's 17 x 11
    points over [-0.8, 0.8] x [-0.5, 0.5] m in the base's yaw frame: ``clip(base_z -
    height_scan_offset - h, -1, 1) * height_scan_scale``, noisy) and the privileged
    observation its noise-free values; foot heights are above the terrain under the foot.
    Thighs and calves touching the ground are penalized (``reward_undesired_contacts``
    -1), the trunk touching it terminates (legged_gym's defaults). The terrain curriculum:
    :meth:`terrain_curriculum`.

    Args (beyond ``Go1Env``'s): ``terrain_rows`` (10), ``terrain_cols`` (one per type),
    ``terrain_types``, ``tile_size`` (8 m), ``terrain_seed`` (an int32 as ``seed``, its
    default; a negative one is taken modulo 2**32, as NumPy's generator takes only seeds
    >= 0); ``height_scan`` (True; False: blind, the observations without the scan, 48 and
    123 values). Each is checked (``generate_terrain``'s rules, named as here) before the
    terrain is generated.
    """

    name = "Go1Terrain-v0"
    spawn_height = 0.07
    default_penalized = tuple(f"{f}_{p}" for f in FEET for p in ("thigh", "calf"))
    default_terminating = ("trunk",)
    undesired_contact_scale = -1.0


GO1_ENVS = (Go1Env, Go1RoughEnv, Go1TerrainEnv)
