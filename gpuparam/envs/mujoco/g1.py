"""Unitree G1 velocity tracking on MuJoCo Warp: MuJoCo Playground's
``G1JoystickFlatTerrain`` / ``G1JoystickRoughTerrain`` (``-v1``, as envpool names its
ports), on the legged recipe (``gpuparam.envs.mujoco.legged``) unchanged.

The task is Playground's ``locomotion/g1/joystick.py`` (the definition; envpool 1.2.5's
C++ port is the reference the tests compare with, ``tests/fixtures/g1_envpool_*.npz``):
physics ``load_g1`` (sim dt 0.002 s, 10 substeps per 0.02 s env step, Euler, Newton with 3
iterations), PD position control (the model's kp and joint damping as ``kp``, ``kd``) to
``ctrl = default_pose + action * action_scale`` (0.5; not clipped: the actuators clamp to
the joint ranges); the observation (103), privileged observation (216), 24 reward terms,
termination and gait phase of ``kernels/g1.py``; 1000-step episodes. Reset
(``legged.py``): keyframe ``knees_bent``, ``U(-0.5, 0.5)`` in x and y, yaw ``U(-3.14,
3.14)``, each joint angle times ``U(0.5, 1.5)`` (``reset_joint_scale``; the PD target the
same), base velocities ``U(-0.5, 0.5)``; then (the task) gait frequency ``U(1.25, 1.5)``
Hz, a command, a push interval. Commands: ``U(-a, a)`` per component (``command_range``:
1, 0.5, 1), all zero with probability 0.1 (``command_zero_prob``), redrawn once more than
500 steps (``command_resample_steps``) have passed since the last. Pushes (on, as
Playground's): every ``round(U(5, 10) s / dt)`` steps (drawn per episode) the base's x and
y velocity get ``U(0.1, 2.0)`` m/s in a direction ``U(0, 2 pi)``. Every reward scale,
noise scale and level, command range, PD gain, action scale, push and reset range is a
per-env parameter (``env.params``).

Deviations from Playground (each deliberate): resets are full resets as Playground's
``reset()`` defines them (fresh draws, task state zeroed); random numbers are gpuparam's
counter-based draws, not JAX's (same distributions); ``round`` of the push interval
rounds halves away from zero (JAX: to even); a push due at the first step of an episode
(an interval of 1 step) is not made; each joint's ``actuatorfrcrange`` is the force range
of its actuator (``g1_model``: the same joint torque, but ``actuator_force``, in the
privileged observation and the torque and energy terms, is the clamped force where
Playground reports the unclamped one: they differ only while a joint saturates). Where
envpool's port differs from Playground (its ``joint_deviation_hip`` term is 4 times
Playground's, its joint-angle noise is added after the default pose is subtracted),
this module follows Playground.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
import warp as wp

from gpuparam._device import wp_device
from gpuparam._launch import BoundLaunch
from gpuparam.backend import BindContext, Task
from gpuparam.envs.mujoco.backend import check_sizes, step_keys
from gpuparam.envs.mujoco.g1_model import FEET, g1_spec
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
from gpuparam.kernels import g1 as kg1
from gpuparam.pipeline import StepContext
from gpuparam.randomization.terms import On, Term
from gpuparam.spec import BoxSpec, OutputSpec, ParamSpec

# (term, default scale, doc): envpool's config order (its reward_<term> info keys)
REWARDS = (
    ("tracking_lin_vel", 1.0, "exp(-|cmd_xy - pelvis local linvel_xy|^2 / sigma)"),
    ("tracking_ang_vel", 0.75, "exp(-(cmd_yaw - pelvis gyro_z)^2 / sigma)"),
    ("lin_vel_z", 0.0, "pelvis and torso global linvel_z^2"),
    ("ang_vel_xy", -0.15, "|torso global angvel_xy|^2"),
    ("orientation", -2.0, "|torso upvector - (0.073, 0, 1)|^2"),
    ("base_height", 0.0, "(base z - base_height_target)^2"),
    ("torques", 0.0, "sum |tau| (actuator forces)"),
    ("action_rate", 0.0, "|action - last action|^2"),
    ("energy", 0.0, "sum |qvel| |tau|"),
    ("dof_acc", 0.0, "|joint qacc|^2"),
    ("feet_clearance", 0.0, "sum |foot z - max_foot_height| |foot vel_xy|^(1/2)"),
    ("feet_air_time", 2.0, "sum min(air time - 0.2, 0.3) at first contacts"),
    ("feet_slip", -0.25, "|pelvis linvel_xy| x feet in contact"),
    ("feet_height", 0.0, "sum (swing peak / max_foot_height - 1)^2 at first contacts"),
    ("feet_phase", 1.0, "exp(-sum (foot z - gait target)^2 / 0.01), if moving or commanded"),
    ("stand_still", -1.0, "sum |q - default| when |cmd| < 0.01"),
    ("alive", 0.0, "1"),
    ("termination", -100.0, "1 at a termination"),
    ("collision", -0.1, "1 when a hand touches its thigh"),
    ("contact_force", -0.01, "sum max(|foot force_z| - max_contact_force, 0)"),
    ("joint_deviation_knee", -0.1, "sum |q_knee - default|"),
    ("joint_deviation_hip", -0.25, "sum |q_hip roll, yaw - default| (roll free if cmd_y > 0.1)"),
    ("dof_pos_limits", -1.0, "joint angles beyond the soft limits (summed)"),
    ("pose", -0.1, "|q - default|^2"),
)
REWARD_TERMS = tuple(t for t, _, _ in REWARDS)
NOISE = (("noise_level", 1.0, "scale of every observation noise (0: none, bit for bit)"),
         ("noise_linvel", 0.1, "local linear velocity noise (m/s)"),
         ("noise_gyro", 0.2, "gyro noise (rad/s)"),
         ("noise_gravity", 0.05, "gravity vector noise"),
         ("noise_joint_pos", 0.03, "joint angle noise (rad)"),
         ("noise_joint_vel", 1.5, "joint velocity noise (rad/s)"))
# a terrain env's height scan (Go1Terrain-v0's values, legged_gym's): ``G1Params.scan``'s rows
SCAN_SPECS = (
    ParamSpec("noise_height_scan", 0.1, 0.0, 100.0,
              doc="height scan noise (m, before its scale)"),
    ParamSpec("height_scan_offset", 0.5, -10.0, 10.0, unit="m",
              doc="height scan value: clip(base_z - offset - h, -1, 1) * scale"),
    ParamSpec("height_scan_scale", 5.0, 0.0, 100.0, doc="scale of the height scan values"),
)
HIP = ("left_hip_roll", "left_hip_yaw", "right_hip_roll", "right_hip_yaw")
KNEE = ("left_knee", "right_knee")
TERMINATING = ("right_foot_left_foot_found", "left_foot_right_shin_found",
               "right_foot_left_shin_found")
COLLISION = ("left_hand_left_thigh_found", "right_hand_right_thigh_found")
# (njmax, nconmax) per world. Playground's (joystick.py): 29 * 2 + 8 * 4 = 90 constraint
# rows (joint friction loss and limits, 4 rows per pyramidal contact) and 8 contacts. MuJoCo
# Warp's box-plane collision keeps up to 8 contacts for the two feet and the foot-foot pair
# can add more: 8 per world overflowed the shared buffer within 60 zero-action steps at
# N = 8 (seen: 66 contacts), 16 did not; the heightfield gets more rows as well.
# On a terrain grid (a heightfield with steps and slopes) more contacts per foot: seen at
# most 126 contacts (8 per world) and 63 rows in 100 steps of 16 envs on 4 rows of every
# terrain type under random actions; sized with a margin.
SIZES = {"flat": (90, 16), "rough": (122, 16), "grid": (122, 24)}


def g1_task_specs(height_scan: bool = False) -> tuple[ParamSpec, ...]:
    """The task's parameters (Playground's values): reward scales, noise, reward
    constants, command law, gait, pushes; with ``height_scan`` the scan's (``SCAN_SPECS``)."""
    scales = [ParamSpec(f"reward_{t}", s, -1e3, 1e3, doc=f"scale of {t}: {doc}")
              for t, s, doc in REWARDS]
    noise = [ParamSpec(n, v, 0.0, 100.0, doc=doc) for n, v, doc in NOISE]
    return (
        *scales, *noise, *(SCAN_SPECS if height_scan else ()),
        ParamSpec("tracking_sigma", 0.25, 1e-4, 100.0, doc="width of the tracking rewards"),
        ParamSpec("max_foot_height", 0.15, 1e-3, 10.0, unit="m",
                  doc="swing height of the gait target and the foot terms"),
        ParamSpec("base_height_target", 0.5, 0.0, 10.0, unit="m",
                  doc="target of the base_height term"),
        ParamSpec("max_contact_force", 500.0, 0.0, 1e6, unit="N",
                  doc="foot normal force beyond which contact_force penalizes"),
        ParamSpec("command_zero_prob", 0.1, 0.0, 1.0,
                  doc="probability that a drawn command is all zero"),
        ParamSpec("command_resample_steps", 500.0, 0.0, 1e9, unit="steps",
                  doc="a new command once more steps than this have passed"),
        ParamSpec("push_enable", 1.0, 0.0, 1.0, doc="1: Playground's velocity pushes"),
        ParamSpec("soft_joint_limit_factor", 0.95, 0.0, 1.0,
                  doc="soft joint limits: each range shrunk about its centre by the factor"),
        ParamSpec("command_range", (1.0, 0.5, 1.0), 0.0, 100.0, shape=(3,),
                  unit="m/s, m/s, rad/s", doc="a: commands drawn from U(-a, a) (vx, vy, yaw)"),
        ParamSpec("gait_frequency", (1.25, 1.5), 0.0, 100.0, shape=(2,), ordered=True, unit="Hz",
                  doc="(low, high): gait frequency, drawn per episode"),
        ParamSpec("push_interval", (5.0, 10.0), 0.0, 1e5, shape=(2,), ordered=True, unit="s",
                  doc="(low, high): interval between pushes, drawn per episode"),
        ParamSpec("push_velocity", (0.1, 2.0), 0.0, 100.0, shape=(2,), ordered=True, unit="m/s",
                  doc="(low, high): velocity added to the base by a push"),
    )


def g1_model(terrain: str | TerrainGrid, cone: str | None = None) -> mujoco.MjModel:
    """The G1 scene ``"flat"`` or ``"rough"`` (Playground's), or a generated terrain grid
    replacing the flat floor (a heightfield geom named ``"floor"``, so the feet's contact
    pairs and sensors keep working), compiled with ``cone``: ``None`` (the model's
    pyramidal friction cone, Playground's), ``"pyramidal"`` or ``"elliptic"``."""
    mj_cone = check_cone(cone)
    grid = isinstance(terrain, TerrainGrid)
    spec = g1_spec("flat" if grid else terrain)
    if grid:
        add_terrain_hfield(spec, terrain, replace="floor")
    if mj_cone is not None:
        spec.option.cone = mj_cone
    return spec.compile()


class G1Task(Task):
    """The G1 joystick task (``kernels.g1``) over a ``LeggedBackend``: its state
    (``backend.state["task_*"]``, checkpointed with the env), the observation and reward
    kernel after a step, the task reset and observation after a reset.

    ``compute(ctx)`` runs the task alone: the parity tests write MuJoCo Warp's data and
    the task state, then call it."""

    def __init__(self, env: G1Env):
        self.mjm = env.mjm
        self.grid = env.grid
        self.points = scan_points() if env.num_scan_points else None

    def bind(self, b: BindContext, backend: LeggedBackend) -> None:
        self.backend = backend
        mjm, n, dev, ctx = self.mjm, b.num_envs, b.device, b.step
        shapes = {"command": (3,), "step": (), "last_act": (mjm.nu,), "air_time": (2,),
                  "swing_peak": (2,), "last_contact": (2,), "phase": (2,), "phase_dt": (),
                  "push_step": (), "push_interval": (), "start_xy": (2,),
                  "cmd_distance": (), "metric": ()}
        terrain_only = ("start_xy", "cmd_distance", "metric")  # the terrain curriculum's
        self.state, ts = {}, kg1.G1State()
        for k, shape in shapes.items():
            ints = k in ("step", "push_step", "push_interval")
            v = self.state[k] = torch.zeros(n, *shape, dtype=torch.int32 if ints
                                            else torch.float32, device=dev)
            if self.grid is not None or k not in terrain_only:
                backend.state[f"task_{k}"] = v  # checkpointed with the env
                if ints:  # counters and the push interval in steps: never negative
                    backend.state_bounds[f"task_{k}"] = (0, 2**31 - 1)
            setattr(ts, k, wp.from_torch(v))

        def adr(name: str) -> int:
            return int(mjm.sensor_adr[mjm.sensor(name).id])

        def qidx(joints: tuple[str, ...]) -> list[int]:  # actuator index of each joint
            act_joint = list(mjm.actuator_trnid[:, 0])
            return [act_joint.index(mjm.joint(f"{j}_joint").id) for j in joints]

        with wp.ScopedDevice(wp_device(dev)):
            sn = kg1.G1Sensors()
            sn.gyro, sn.linvel = adr("gyro_pelvis"), adr("local_linvel_pelvis")
            sn.accel = adr("accelerometer_pelvis")
            sn.global_linvel = adr("global_linvel_pelvis")
            sn.global_angvel = adr("global_angvel_pelvis")
            sn.upvector = adr("upvector_torso")
            sn.torso_linvel = adr("global_linvel_torso")
            sn.torso_angvel = adr("global_angvel_torso")
            sn.imu_site = mjm.site("imu_in_pelvis").id
            sn.foot_site = wp.array([mjm.site(f).id for f in FEET], dtype=int)
            sn.foot_found = wp.array([adr(f"{f}_floor_found") for f in FEET], dtype=int)
            sn.foot_vel = wp.array([adr(f"{f}_global_linvel") for f in FEET], dtype=int)
            sn.foot_force = wp.array([adr(f"{f}_force") for f in FEET], dtype=int)
            sn.terminating = wp.array([adr(s) for s in TERMINATING], dtype=int)
            sn.collision = wp.array([adr(s) for s in COLLISION], dtype=int)
            jnt = mjm.actuator_trnid[:, 0]
            model = kg1.G1Model()
            model.dt = backend.dt
            model.default_pose = wp.array(backend.default_pose, dtype=float)
            model.joint_low = wp.array(mjm.jnt_range[jnt, 0].astype(np.float32), dtype=float)
            model.joint_high = wp.array(mjm.jnt_range[jnt, 1].astype(np.float32), dtype=float)
            model.hip = wp.array(qidx(HIP), dtype=int)
            model.knee = wp.array(qidx(KNEE), dtype=int)
            self.terrain = TaskTerrain(mjm, backend, self.grid, self.points, n, dev)
        # every array below is a view of a buffer allocated once (MuJoCo Warp's data, the
        # step context, the parameter table, the task state): bound here, never rebound
        params = kg1.G1Params()
        params.scales = param_block(b, [f"reward_{t}" for t in REWARD_TERMS])
        params.noise = param_block(b, [name for name, _, _ in NOISE])
        params.consts = param_block(b, ("tracking_sigma", "max_foot_height",
                                        "base_height_target", "max_contact_force",
                                        "command_zero_prob", "command_resample_steps",
                                        "push_enable", "soft_joint_limit_factor"))
        params.cmd_range = wp.from_torch(b.param_rows("command_range"))
        params.gait_freq = wp.from_torch(b.param_rows("gait_frequency"))
        params.push_interval = wp.from_torch(b.param_rows("push_interval"))
        params.push_velocity = wp.from_torch(b.param_rows("push_velocity"))
        self._no_scan = torch.zeros(len(SCAN_SPECS), n, device=dev)  # rows never read
        params.scan = wp.from_torch(self._no_scan) if self.points is None else param_block(
            b, [spec.name for spec in SCAN_SPECS])
        d, data = backend.d, kg1.G1Data()
        data.qpos, data.qvel, data.qacc, data.sensordata = d.qpos, d.qvel, d.qacc, d.sensordata
        data.site_xpos, data.site_xmat = d.site_xpos, d.site_xmat
        data.actuator_force = d.actuator_force
        out, outputs = ctx.outputs, kg1.G1Outputs()
        outputs.obs = wp.from_torch(out["observation"])
        outputs.final_obs = wp.from_torch(out["final_observation"])
        outputs.priv = wp.from_torch(out["privileged_observation"])
        outputs.terms = wp.from_torch(out["reward_terms"])
        outputs.reward = wp.from_torch(out["reward"])
        outputs.terminated = wp.from_torch(out["terminated"])
        self._model = [model, sn, self.terrain.terrain, params]
        self._inputs = [step_keys(ctx), data, wp.from_torch(ctx.action.reshape(n, -1))]
        self._outputs = [ts, outputs]

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

    def _launch(self, ctx: StepContext, observe: int, mask: torch.Tensor | None) -> None:
        # bound once per mode and mask role (None: all envs; the context's done or reset)
        self.backend.mask_launch(f"g1_{observe}", mask, lambda w: BoundLaunch(
            kg1.g1, ctx.num_envs, inputs=[*self._model, observe, w, *self._inputs],
            outputs=self._outputs, device=ctx.device)).launch(ctx.stream)


class G1Env(RobotEnv):
    """MuJoCo Playground's ``G1JoystickFlatTerrain`` on MuJoCo Warp (see the module
    docstring for the task).

    Args (beyond ``RobotEnv``'s):
        cone: the friction cone, ``None`` (the model's pyramidal one, Playground's),
            ``"pyramidal"`` or ``"elliptic"``.
        max_action_delay: K, the largest ``action_delay`` (ring buffer of K + 1 actions).
        njmax, nconmax: MuJoCo Warp's buffers per world, default Playground's (flat: 90
            rows, 16 contacts; rough: 122 and 16); ``env.overflows`` counts steps that
            dropped some.

    Outputs (beyond ``VecEnv``'s; ``"observation"`` is float32 ``[N, 103]``):
    ``"privileged_observation"`` float32 ``[N, 216]`` (after the auto-reset, as
    ``"observation"``; also returned by ``reset``), ``"reward_terms"`` float32 ``[N, 24]``
    (``scale_k * term_k`` of this step, names in ``REWARD_TERMS``, before the sum and
    ``dt``).
    """

    name = "G1JoystickFlatTerrain-v1"
    terrain = "flat"
    frame_skip = 10
    max_episode_steps = 1000
    reward_term_names = REWARD_TERMS
    per_element = LEGGED_PER_ELEMENT
    num_scan_points = 0  # P, the height-scan points in the observation (a terrain env's)

    def __init__(self, num_envs: int, device: str | torch.device | None = None, seed: int = 0,
                 max_episode_steps: int | None = None, capture: bool = True,
                 env_offset: int = 0,
                 max_action_delay: int = 4, njmax: int | None = None,
                 nconmax: int | None = None, deterministic: bool = False,
                 cone: str | None = None, **kwargs):
        if (not isinstance(max_action_delay, int) or isinstance(max_action_delay, bool)
                or not 0 <= max_action_delay <= 1000):
            raise ValueError(f"max_action_delay: expected an int in [0, 1000], got "
                             f"{max_action_delay!r}")
        check_cone(cone)
        check_sizes(njmax, nconmax, num_envs)
        self.max_action_delay = max_action_delay
        self.grid = self.make_grid(seed, kwargs)
        rows, kind = SIZES["grid" if self.grid is not None else self.terrain]
        super().__init__(num_envs, device=device, seed=seed,
                         max_episode_steps=max_episode_steps, capture=capture,
                         env_offset=env_offset, cone=cone,
                         njmax=rows if njmax is None else njmax,
                         nconmax=kind if nconmax is None else nconmax,
                         deterministic=deterministic, **kwargs)

    def make_grid(self, seed: int, kwargs: dict) -> TerrainGrid | None:
        """The terrain grid (None: Playground's scene)."""
        return None

    def model_config(self) -> dict[str, object]:
        """``RobotEnv``'s and ``max_action_delay``."""
        return {**super().model_config(), "max_action_delay": self.max_action_delay}

    def make_model(self, cone: str | None) -> mujoco.MjModel:
        return g1_model(self.grid if self.grid is not None else self.terrain, cone)

    def make_param_specs(self) -> tuple[ParamSpec, ...]:
        rows = 1 if self.grid is None else len(self.grid.difficulty)
        return (*legged_specs(self.mjm, self.max_action_delay, rows, action_scale=0.5,
                              reset_xy=0.5, reset_yaw=3.14, reset_velocity=0.5,
                              reset_joint_scale=(0.5, 1.5)),
                *g1_task_specs(self.num_scan_points > 0))

    def make_action_spec(self) -> BoxSpec:
        return BoxSpec(shape=(self.mjm.nu,), low=-1.0, high=1.0)

    def obs_size(self) -> int:
        return 16 + 3 * self.mjm.nu + self.num_scan_points

    def output_specs(self) -> dict[str, OutputSpec]:
        return {
            "privileged_observation": OutputSpec(
                (42 + 6 * self.mjm.nu + self.num_scan_points,), reset=True,
                doc="the critic's observation: the noisy observation, noise-free state, "
                    "base height, actuator forces, contacts, foot velocities, air time, "
                    "(height scan)"),
            "reward_terms": OutputSpec((len(REWARD_TERMS),),
                                       doc="scale_k * term_k before the sum and dt"),
        }

    def make_backend(self) -> LeggedBackend:
        origins = None
        if self.grid is not None:
            origins = self.grid.origins.copy()
            origins[..., 2] += self.spawn_height
        return LeggedBackend(self.mjm, self.frame_skip, "pelvis", self.max_action_delay,
                             origins=origins, keyframe="knees_bent", joint_scale=True,
                             torso_body="torso_link", **self._sizes)

    def make_task(self) -> G1Task:
        return G1Task(self)

    def playground_randomization(self, on: On = "startup") -> tuple[Term, ...]:
        """MuJoCo Playground's ``locomotion/g1/randomize.py`` as terms, for
        ``env.randomize(*env.playground_randomization())``: the feet-floor friction ``U(0.4,
        1.0)`` (``pair_friction`` of the pairs with the floor, 0 and 1, each its own draw:
        Playground draws one for both), joint frictionloss ``x U(0.5, 2.0)``, armature ``x
        U(1.0, 1.05)``, every body mass ``x U(0.9, 1.1)``, ``torso_link`` ``+ U(-1, 1)`` kg
        (``added_mass``), joint offsets ``U(-0.05, 0.05)`` rad (``joint_offset``:
        Playground's ``qpos0`` jitter). ``on``: ``"startup"`` (Playground's: once per env),
        ``"reset"`` or another trigger. Details: ``legged.playground_randomization``."""
        floor = self.mjm.geom("floor").id
        pairs = tuple(i for i in range(self.mjm.npair)  # Playground's 0:2, the feet's
                      if floor in (self.mjm.pair_geom1[i], self.mjm.pair_geom2[i]))
        return playground_randomization(self, on, frictionloss=(0.5, 2.0), floor_pairs=pairs)


class G1RoughEnv(G1Env):
    """MuJoCo Playground's ``G1JoystickRoughTerrain``: the same task on its 20 m x 20 m
    heightfield (5 cm high), dropped from z 0.8."""

    name = "G1JoystickRoughTerrain-v1"
    terrain = "rough"


class G1TerrainEnv(TerrainGridEnv, G1Env):
    """The flat task on a legged_gym-style terrain grid (``terrain.py``: rows = difficulty,
    columns = flat, rough, slopes up/down, stairs up/down, obstacles), generated at build
    time from ``terrain_seed`` (default: the env's seed): the grid of ``Go1Terrain-v0``
    with G1's task.

    Env ``i`` starts on column ``(env_offset + i) % cols`` of row ``terrain_level`` (a
    per-env parameter, read at every reset), 0.05 m above the tile's centre (as the rough
    scene's keyframe). The observation adds the height scan (legged_gym's 17 x 11 points
    over [-0.8, 0.8] x [-0.5, 0.5] m in the pelvis's yaw frame: ``clip(base_z -
    height_scan_offset - h, -1, 1) * height_scan_scale``, noisy; IsaacLab's G1 rough task
    scans the same pattern) and the privileged observation its noise-free values: ``[N,
    103 + 187]`` and ``[N, 216 + 187]``. Foot heights (swing peak, clearance, gait phase
    terms) are above the terrain under the foot. The terrain curriculum:
    :meth:`terrain_curriculum`. Only Playground's contact pairs collide (feet with the
    terrain, hands with thighs, foot with foot): a fallen G1's torso does not touch the
    terrain; the upside-down termination ends such an episode.

    Args (beyond ``G1Env``'s): ``terrain_rows`` (10), ``terrain_cols`` (one per type),
    ``terrain_types``, ``tile_size`` (8 m), ``terrain_seed`` (an int32 as ``seed``, its
    default; a negative one is taken modulo 2**32); ``height_scan`` (True; False: blind,
    the observations without the scan, 103 and 216 values). Each is checked before the
    terrain is generated.
    """

    name = "G1Terrain-v0"
    spawn_height = 0.05


G1_ENVS = (G1Env, G1RoughEnv, G1TerrainEnv)
