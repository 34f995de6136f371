"""Ant-v5 on MuJoCo Warp."""

from __future__ import annotations

from gpuparam.envs.mujoco.robot_env import LocomotionTask, RobotEnv
from gpuparam.kernels import locomotion as kloco
from gpuparam.spec import ParamSpec


class AntEnv(RobotEnv):
    """Gymnasium ``Ant-v5``: ``ant.xml``, frame_skip 5 (dt 0.05 s), 1000-step limit.

    Observation float32 ``[N, 105]``: ``qpos[2:]`` (13), ``qvel`` (14), ``cfrc_ext`` of
    bodies 1..13 clipped to the contact force range (78). Action float32 ``[N, 8]`` in
    ``[-1, 1]``. Reward ``forward_reward_weight * dx/dt + healthy_reward * healthy -
    ctrl_cost_weight * |a|^2 - contact_cost_weight * |clip(cfrc_ext)|^2``; terminated when
    unhealthy (non-finite state or torso z outside ``[healthy_z_min, healthy_z_max]``).
    Reset: ``qpos0 + U(-s, s)``, ``s * N(0, 1)`` velocities, ``s = reset_noise_scale``.
    """

    name = "Ant-v5"
    xml_file = "ant.xml"
    frame_skip = 5
    qvel_normal = True
    task_specs = (
        ParamSpec("forward_reward_weight", 1.0, -1e3, 1e3, doc="weight of x velocity"),
        ParamSpec("ctrl_cost_weight", 0.5, 0.0, 1e3, doc="weight of |action|^2"),
        ParamSpec("contact_cost_weight", 5e-4, 0.0, 1e3, doc="weight of |contact forces|^2"),
        ParamSpec("healthy_reward", 1.0, -1e3, 1e3, doc="reward per healthy step"),
        ParamSpec("terminate_when_unhealthy", 1.0, 0.0, 1.0, doc="1: unhealthy terminates"),
        ParamSpec("healthy_z_min", 0.2, -1e3, 1e3, unit="m", doc="lowest healthy torso z"),
        ParamSpec("healthy_z_max", 1.0, -1e3, 1e3, unit="m", doc="highest healthy torso z"),
        ParamSpec("contact_force_min", -1.0, -1e6, 1e6, doc="contact forces clipped from"),
        ParamSpec("contact_force_max", 1.0, -1e6, 1e6, doc="contact forces clipped to"),
        ParamSpec("reset_noise_scale", 0.1, 0.0, 10.0, doc="scale of the reset noise"),
    )

    def obs_size(self) -> int:
        m = self.mjm
        return m.nq - 2 + m.nv + 6 * (m.nbody - 1)

    def make_task(self) -> LocomotionTask:
        # every task parameter but the reset noise; body 1: the torso, its xy kept
        fields = ("forward_w", "ctrl_w", "contact_w", "healthy_r", "terminate", "z_min",
                  "z_max", "force_min", "force_max")
        names = tuple(s.name for s in self.task_specs[:-1])
        return LocomotionTask(kloco.ant, names, kloco.AntParams, fields, lambda b: [1],
                              lambda b: [b.d.qpos, b.d.qvel, b.d.xpos, b.d.cfrc_ext], (2,))
