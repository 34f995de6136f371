"""Humanoid-v5 on MuJoCo Warp (Newton solver: MuJoCo Warp has no PGS)."""

from __future__ import annotations

import mujoco

from gpuparam.envs.mujoco.robot_env import LocomotionTask, RobotEnv
from gpuparam.kernels import locomotion as kloco
from gpuparam.spec import ParamSpec


class HumanoidEnv(RobotEnv):
    """Gymnasium ``Humanoid-v5``: ``humanoid.xml``, frame_skip 5, 1000-step limit, with one
    deviation: the XML's PGS solver is replaced by Newton (MuJoCo Warp raises
    ``NotImplementedError: mjSOL_PGS is unsupported``), so trajectories differ from
    Gymnasium's at contacts.

    Observation float32 ``[N, 348]``: ``qpos[2:]``, ``qvel``, ``cinert[1:]``, ``cvel[1:]``,
    ``qfrc_actuator[6:]``, ``cfrc_ext[1:]``. Action ``[N, 17]`` in ``[-0.4, 0.4]``. Reward
    ``forward_reward_weight * d(mass center x)/dt + healthy - ctrl_cost_weight * |a|^2 -
    min(contact_cost_weight * |cfrc_ext|^2, contact_cost_max)``; healthy when
    ``healthy_z_min < z < healthy_z_max``. A reset runs ``mj_forward`` on every world (the
    observation needs its quantities).
    """

    name = "Humanoid-v5"
    xml_file = "humanoid.xml"
    frame_skip = 5
    solver = int(mujoco.mjtSolver.mjSOL_NEWTON)
    forward_at_reset = True
    task_specs = (
        ParamSpec("forward_reward_weight", 1.25, -1e3, 1e3, doc="weight of x velocity"),
        ParamSpec("ctrl_cost_weight", 0.1, 0.0, 1e3, doc="weight of |action|^2"),
        ParamSpec("contact_cost_weight", 5e-7, 0.0, 1e3, doc="weight of |contact forces|^2"),
        ParamSpec("contact_cost_max", 10.0, 0.0, 1e9, doc="contact cost clipped to"),
        ParamSpec("healthy_reward", 5.0, -1e3, 1e3, doc="reward per healthy step"),
        ParamSpec("terminate_when_unhealthy", 1.0, 0.0, 1.0, doc="1: unhealthy terminates"),
        ParamSpec("healthy_z_min", 1.0, -1e3, 1e3, unit="m", doc="healthy z > this"),
        ParamSpec("healthy_z_max", 2.0, -1e3, 1e3, unit="m", doc="healthy z < this"),
        ParamSpec("reset_noise_scale", 1e-2, 0.0, 10.0, doc="scale of the reset noise"),
    )

    def obs_size(self) -> int:
        m = self.mjm
        return m.nq - 2 + m.nv + 16 * (m.nbody - 1) + (m.nv - 6) + 6 * (m.nbody - 1)

    def make_task(self) -> LocomotionTask:
        # every task parameter but the reset noise; kept: each body's x at the last step
        fields = ("forward_w", "ctrl_w", "contact_w", "contact_cost_max", "healthy_r",
                  "terminate", "z_min", "z_max")
        names = tuple(s.name for s in self.task_specs[:-1])
        return LocomotionTask(kloco.humanoid, names, kloco.HumanoidParams, fields,
                              lambda b: [b.m.body_mass], lambda b: [_data(b)], (self.mjm.nbody,))


def _data(b) -> kloco.HumanoidData:
    """The data ``kernels.locomotion.humanoid`` reads (views of MuJoCo Warp's, bound once)."""
    data = kloco.HumanoidData()
    data.qpos, data.qvel = b.d.qpos, b.d.qvel
    data.cinert, data.cvel = b.d.cinert.view(float), b.d.cvel.view(float)
    data.qfrc_actuator, data.cfrc_ext, data.xipos = b.d.qfrc_actuator, b.d.cfrc_ext, b.d.xipos
    return data
