"""``python -m gpuparam.train`` / ``gpuparam.play`` command lines (issue 42 items 1-2): every
bad value, path or resumed setting is one error line naming the flag, given before
anything is built (``parse_train`` / ``parse_play`` run in this process: no env is made);
config fields are overridable; the exported policy's ONNX matches PyTorch."""

from __future__ import annotations

import json
import os
import re

import pytest
import torch

import gpuparam as gp

pytest.importorskip("tyro")

from gpuparam.apps import runs  # noqa: E402
from gpuparam.apps.cli import parse_play, parse_train  # noqa: E402
from gpuparam.apps.config import G1, GO1, TrainCfg, default_config, tasks  # noqa: E402


def _refused(fn, argv, capsys, prog="gpuparam.train") -> str:
    with pytest.raises(SystemExit) as e:
        fn(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1].removeprefix(f"{prog}: error: ")


def _fake_run(root, task="Pendulum-v1", its=(1,), **changes) -> str:
    """A run folder as gpuparam.train writes it (config.json, model_<it>.pt and
    env_<it>.pt; the checkpoints empty: parse_train only looks them up)."""
    cfg = default_config(task)
    cfg.num_envs = 16
    for k, v in changes.items():
        setattr(cfg, k, v)
    run = os.path.join(root, task, "2026-01-01_00-00-00")
    os.makedirs(run)
    runs.save_config(cfg, os.path.join(run, "config.json"))
    for it in its:
        for name in (f"model_{it}.pt", f"env_{it}.pt"):
            open(os.path.join(run, name), "w").close()
    return run


def test_defaults_and_overrides(tmp_path):
    r = parse_train(["--task", "Go1Terrain-v0", "--num-envs", "16", "--device", "cpu",
                     "--log-dir", str(tmp_path), "--agent.algorithm.learning-rate", "3e-4",
                     "--agent.actor.hidden-dims", "32", "16", "--env.kwargs.terrain-rows", "4",
                     "--max-seconds", "60"])
    cfg = r.cfg
    assert (cfg.task, cfg.num_envs, cfg.max_seconds) == ("Go1Terrain-v0", 16, 60.0)
    assert cfg.agent.algorithm.learning_rate == 3e-4
    assert cfg.agent.algorithm.gamma == 0.97  # the task's config: Playground's discount
    assert cfg.agent.actor.hidden_dims == (32, 16)
    assert cfg.env.kwargs == {"terrain_rows": 4} and cfg.env.recipe == "legged"
    assert r.checkpoint is None and r.done == 0
    stamp = r"/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d"
    assert re.fullmatch(re.escape(str(tmp_path / "Go1Terrain-v0")) + stamp, r.run_dir)
    assert not os.listdir(tmp_path)  # parsing writes nothing
    for task in tasks():  # every task has a config
        assert default_config(task).task == task


def test_every_legged_task_of_the_suite_trains_with_its_playground_recipe():
    legged = [t for t in gp.registered() if t.startswith(("Go1", "G1", "Spot", "T1", "H1"))]
    assert set(legged) <= set(tasks())
    for task in legged:
        cfg = default_config(task)
        assert cfg.agent.algorithm.gamma == 0.97, task
        assert cfg.env.recipe == ("legged" if task in (*GO1, *G1) else "playground"), task


@pytest.mark.parametrize(("argv", "match"), [
    (["--task", "Go3"], r"--task: expected one of .*Go1JoystickFlatTerrain-v1.*, got 'Go3'"),
    (["--num-envs", "0"], r"--num-envs: expected a number >= 1, got 0"),
    (["--max-iterations", "0"], r"--max-iterations: expected a number >= 1, got 0"),
    (["--max-seconds", "-1"], r"--max-seconds: expected a number >= 0, got -1.0"),
    (["--agent.num-steps-per-env", "0"], r"--agent.num-steps-per-env: expected a number >= 1"),
    (["--device", "tpu"], r"--device: expected cpu, cuda or cuda:<index>, got 'tpu'"),
    (["--env.recipe", "legged", "--task", "Pendulum-v1"],
     r"--env.recipe: 'legged' expected a Go1 or G1 task, got 'Pendulum-v1'"),
    (["--env.recipe", "legged", "--task", "Go1Getup-v1"],
     r"--env.recipe: 'legged' expected a Go1 or G1 task, got 'Go1Getup-v1'"),
    (["--env.recipe", "playground", "--task", "Ant-v5"],
     r"--env.recipe: 'playground' expected a legged task, got 'Ant-v5'"),
    (["--env.recipe", "dr"], r"--env.recipe: expected 'legged', 'playground' or 'none', got 'dr'"),
    (["--agent.logger", "mlflow"], r"--agent.logger: expected tensorboard, wandb or neptune"),
])
def test_bad_values_are_one_line(argv, match, tmp_path, capsys):
    line = _refused(parse_train, [*argv, "--log-dir", str(tmp_path)], capsys)
    assert re.search(match, line), line


def test_log_dir_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    line = _refused(parse_train, ["--log-dir", str(tmp_path / "f" / "runs")], capsys)
    assert line.startswith("--log-dir: expected a folder"), line


def test_resume_continues_the_latest_run(tmp_path):
    _fake_run(tmp_path, its=(1,))
    later = _fake_run(tmp_path / "x", its=(1, 3))  # another root: not looked at
    newest = os.path.join(tmp_path, "Pendulum-v1", "2026-02-01_00-00-00")
    os.makedirs(newest)
    runs.save_config(runs.load_config(later), os.path.join(newest, "config.json"))
    for name in ("model_3.pt", "env_3.pt", "model_12.pt", "env_12.pt"):
        open(os.path.join(newest, name), "w").close()
    r = parse_train(["--task", "Pendulum-v1", "--max-iterations", "20", "--resume",
                     "--log-dir", str(tmp_path)])
    # the latest run, its last checkpoint (by iteration, not by name), the run's settings
    assert r.run_dir == newest and r.checkpoint == os.path.join(newest, "model_12.pt")
    assert r.done == 13 and r.cfg.num_envs == 16
    r = parse_train(["--task", "Pendulum-v1", "--max-iterations", "20", "--resume",
                     "--log-dir", str(tmp_path), "--load-run", "2026-01-01_00-00-00",
                     "--checkpoint", "model_1.pt"])
    assert r.done == 2 and r.run_dir.endswith("2026-01-01_00-00-00")


@pytest.mark.parametrize(("argv", "match"), [
    (["--num-envs", "128"], r"--num-envs: the run in .* was made with 16, got 128 \(a resumed "
                            r"run continues the run as it was"),
    (["--seed", "5"], r"--seed: the run in .* was made with 0, got 5"),
    (["--agent.actor.hidden-dims", "8"], r"--agent.actor.hidden-dims: the run in .* was made "
                                         r"with \(64, 64\), got \(8,\)"),
    (["--agent.num-steps-per-env", "8"], r"--agent.num-steps-per-env: .* made with 24, got 8"),
    (["--max-iterations", "2"], r"--max-iterations: expected more than the 2 iterations the "
                                r"run in .* has done \(its model_1.pt\), got 2"),
    (["--checkpoint", "model_7.pt"], r"--checkpoint: expected a checkpoint file in .*, got "
                                     r"'model_7.pt' \(no such file; there: model_1.pt\)"),
    (["--load-run", "nope"], r"--load-run: expected a run folder under .*, got 'nope'"),
])
def test_resume_refuses_other_settings_before_building(argv, match, tmp_path, capsys):
    _fake_run(tmp_path)
    line = _refused(parse_train, ["--task", "Pendulum-v1", "--max-iterations", "4",
                                  "--resume", "--log-dir", str(tmp_path), *argv], capsys)
    assert re.search(match, line), line


def test_resume_without_a_run_names_the_log_dir(tmp_path, capsys):
    line = _refused(parse_train, ["--resume", "--log-dir", str(tmp_path)], capsys)
    assert line.startswith("--log-dir: expected a run of Go1JoystickFlatTerrain-v1 with a "
                           "checkpoint"), line


def test_resume_needs_the_env_state(tmp_path, capsys):
    run = _fake_run(tmp_path)
    os.remove(os.path.join(run, "env_1.pt"))
    line = _refused(parse_train, ["--task", "Pendulum-v1", "--max-iterations", "4",
                                  "--resume", "--log-dir", str(tmp_path)], capsys)
    assert re.search(r"--checkpoint: expected the env's state .*env_1.pt beside", line), line


def test_config_round_trips(tmp_path):
    cfg = default_config("G1Terrain-v0")
    cfg.agent.actor.hidden_dims = (7, 5)
    runs.save_config(cfg, tmp_path / "c.json")
    assert runs.config_from_dict(json.loads((tmp_path / "c.json").read_text())) == cfg
    with pytest.raises(runs.RunError, match="unknown fields"):
        runs.config_from_dict({"nope": 1})
    assert isinstance(cfg, TrainCfg)


def test_play_finds_the_run_and_refuses_bad_paths(tmp_path, capsys):
    run = _fake_run(tmp_path)
    r = parse_play(["--task", "Pendulum-v1", "--log-dir", str(tmp_path), "--out",
                    str(tmp_path / "E"), "--no-video"])
    assert r.checkpoint == os.path.join(run, "model_1.pt") and r.kind == "checkpoint"
    assert r.train.num_envs == 4 and r.out == str(tmp_path / "E")
    line = _refused(parse_play, ["--task", "Pendulum-v1", "--log-dir", str(tmp_path / "no")],
                    capsys, prog="gpuparam.play")
    assert line.startswith("--log-dir: expected a run of Pendulum-v1"), line
    line = _refused(parse_play, ["--task", "Go1JoystickFlatTerrain-v1", "--log-dir",
                                 str(tmp_path), "--load-run", run], capsys, prog="gpuparam.play")
    assert line.startswith(f"--task: the run in {run} is of Pendulum-v1"), line


def test_exported_onnx_matches_pytorch(tmp_path):
    """The exported programs of a trained-like policy (normalizer with statistics, MLP,
    clamp) give PyTorch's actions: torch.export's exactly, ONNX Runtime's within 1e-5."""
    ort = pytest.importorskip("onnxruntime")
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    from gpuparam.apps.export import Policy, export_policy

    torch.manual_seed(0)
    obs = TensorDict({"policy": torch.randn(64, 6) * 3 + 1}, batch_size=[64])
    model = MLPModel(obs, {"actor": ["policy"]}, "actor", 2, hidden_dims=[16, 16],
                     obs_normalization=True,
                     distribution_cfg={"class_name": "GaussianDistribution", "init_std": 1.0})
    model.update_normalization(obs)  # statistics that are not the identity
    with torch.no_grad():
        model.mlp[-1].weight.mul_(40.0)  # large outputs: the clamp acts on some
    policy = Policy(model.as_jit(), torch.tensor([-1.0, -0.5]), torch.tensor([1.0, 0.5]))
    pt, onnx = export_policy(policy, 6, str(tmp_path / "exported"))
    assert sorted(os.listdir(tmp_path / "exported")) == ["policy.onnx", "policy.pt2"]
    x = torch.randn(5, 6) * 4
    with torch.no_grad():
        want = policy(x)
    assert (want.abs() == torch.tensor([1.0, 0.5])).any()  # the clamp acts
    got = torch.export.load(pt).module()(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    session = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]
    (out,) = session.run(["actions"], {"obs": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("script", "task"), [("go1_train.py", "Go1JoystickFlatTerrain-v1"),
                                              ("g1_train.py", "G1JoystickFlatTerrain-v1")])
def test_former_training_examples_point_to_the_entry_point(script, task):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "examples" / script)], cwd=root,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"python -m gpuparam.train --task {task}" in out.stderr
