"""Gymnasium's MJCF assets compile to the model MuJoCo's XML loader builds, field for field,
without MuJoCo's ``settotalmass`` deprecation warning (half_cheetah.xml uses it)."""

from __future__ import annotations

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

from gpuparam.envs.mujoco.model import asset_path, load_model  # noqa: E402

ASSETS = ("ant.xml", "half_cheetah.xml", "hopper.xml", "walker2d_v5.xml", "humanoid.xml")
STATS = ("meanmass", "meaninertia", "meansize", "extent", "center")


@pytest.mark.parametrize("xml", ASSETS)
def test_model_equals_mujocos_xml_loader(xml, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the reference load of half_cheetah.xml logs its warning here
    ref = mujoco.MjModel.from_xml_path(asset_path(xml))
    mjm = load_model(xml)
    differ = []
    for name in dir(ref):
        a = getattr(ref, name) if not name.startswith("_") else None
        if isinstance(a, np.ndarray) and a.dtype.kind in "biuf":
            b = getattr(mjm, name)
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                differ.append(name)
    assert differ == []
    for name in STATS:
        assert np.array_equal(getattr(ref.stat, name), getattr(mjm.stat, name)), name
    assert ref.opt == mjm.opt


def test_half_cheetah_loads_without_the_deprecation_warning(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert mujoco.MjSpec.from_file(asset_path("half_cheetah.xml")).compiler.settotalmass > 0
    seen: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(seen.append)
    try:
        load_model("half_cheetah.xml")
    finally:
        mujoco.set_mju_user_warning(previous)
    assert seen == []
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_a_task_parameter_the_env_lacks_raises(monkeypatch):
    # review: any missing name silently read the first parameter's rows; only the planar
    # health parameters (each kind has its own) may stand in
    import dataclasses

    import gpuparam as gp
    from gpuparam.envs.mujoco.ant import AntEnv

    make_task = AntEnv.make_task

    def misspelled(env):
        task = make_task(env)
        return dataclasses.replace(task, params=(*task.params, "contact_cost_wieght"))

    monkeypatch.setattr(AntEnv, "make_task", misspelled)
    with pytest.raises(KeyError, match="contact_cost_wieght"):
        gp.make("Ant-v5", num_envs=2, device="cpu", seed=0)
    for name in ("HalfCheetah-v5", "Hopper-v5"):  # their health parameters stand in
        assert gp.make(name, num_envs=2, device="cpu", seed=0).num_envs == 2


def test_a_robot_env_without_make_task_raises():
    # review: RobotEnv lost its make_task, so VecEnv's default (no task) built an env whose
    # observations and rewards stayed 0
    from gpuparam.envs.mujoco.ant import AntEnv
    from gpuparam.envs.mujoco.robot_env import RobotEnv

    class NoTask(RobotEnv):
        name, xml_file, frame_skip = "NoTask", AntEnv.xml_file, 5
        task_specs, max_episode_steps, qvel_normal = AntEnv.task_specs, 10, False
        obs_size = AntEnv.obs_size

    with pytest.raises(NotImplementedError, match="NoTask: a RobotEnv must implement make_task"):
        NoTask(num_envs=2, device="cpu", seed=0)


def test_a_planar_env_lacking_a_reward_weight_raises():
    # review: every missing planar name stood in (ctrl_cost_weight read
    # forward_reward_weight's rows); only the health parameters may
    from gpuparam.envs.mujoco.planar import HopperEnv

    class NoCtrl(HopperEnv):
        task_specs = tuple(s for s in HopperEnv.task_specs if s.name != "ctrl_cost_weight")

    with pytest.raises(KeyError, match="unknown parameter 'ctrl_cost_weight'"):
        NoCtrl(num_envs=2, device="cpu", seed=0)
