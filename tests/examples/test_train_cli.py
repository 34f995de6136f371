"""The training examples' options (issue 43 items 6 and 8): every bad value is one argparse
error line naming the option, given before anything is built (``parse`` runs in this
process: no env, no training); a resumed run keeps its own seed and refuses another; the
log says why there is no episode length yet; ``--help`` keeps its lines apart."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("rsl_rl")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _script(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # as `python examples/<name>.py` has it
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refused(module, argv: list[str], capsys) -> str:
    """``parse(argv)`` exits with argparse's status 2; its one error line."""
    with pytest.raises(SystemExit) as e:
        module.parse(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert ".py: error: " in last, err
    return last


BAD = [
    (["--hidden", "256,,128"], r"argument --hidden: expected comma-separated positive ints "
                               r"\(layer sizes, e\.g\. 256,128\), got '256,,128'$"),
    (["--hidden", "abc"], r"argument --hidden: expected .* got 'abc'$"),
    (["--hidden", ""], r"argument --hidden: expected .* got ''$"),
    (["--hidden", "-4"], r"argument --hidden: expected .* got '-4'$"),
    (["--hidden", "0"], r"argument --hidden: expected .* got '0'$"),
    (["--hidden", "256,0"], r"argument --hidden: expected .* got '256,0'$"),
    (["--iterations", "0"], r"argument --iterations: expected an int >= 1, got 0$"),
    (["--num-envs", "-3"], r"argument --num-envs: expected an int >= 1, got -3$"),
    (["--steps-per-env", "x"], r"argument --steps-per-env: expected an int >= 1, got 'x'$"),
]


@pytest.mark.parametrize("name", ["go1_train", "g1_train"])
@pytest.mark.parametrize(("argv", "match"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_are_one_argparse_line(name, argv, match, tmp_path, monkeypatch, capsys):
    module = _script(name, monkeypatch)
    line = _refused(module, [*argv, "--out", str(tmp_path / "run")], capsys)
    assert re.search(match, line), line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("argv", "match"), [
    (["--colors", "1"], r"argument --colors: expected an int in \[2, 256\], got 1$"),
    (["--colors", "257"], r"argument --colors: expected an int in \[2, 256\], got 257$"),
    (["--max-seconds", "nan"], r"argument --max-seconds: expected a finite number >= 0, "
                               r"got nan$"),
    (["--levels", "-1"], r"argument --levels: expected an int >= 0, got -1$"),
])
def test_go1_train_ranges(argv, match, tmp_path, monkeypatch, capsys):
    line = _refused(_script("go1_train", monkeypatch), [*argv, "--out", str(tmp_path)], capsys)
    assert re.search(match, line), line


def test_paths_are_checked_before_anything_is_built(tmp_path, monkeypatch, capsys):
    m = _script("go1_train", monkeypatch)
    (tmp_path / "file").write_text("x")
    line = _refused(m, ["--out", str(tmp_path / "file")], capsys)
    assert re.search(r"--out: expected a folder, got the file .*file$", line), line
    line = _refused(m, ["--out", str(tmp_path / "run"), "--export",
                        str(tmp_path / "missing" / "policy.pt")], capsys)
    assert re.search(r"--export: expected a file in an existing folder, got .*policy\.pt "
                     r"\(.*missing does not exist\)$", line), line
    line = _refused(m, ["--out", str(tmp_path / "run"), "--export", str(tmp_path)], capsys)
    assert "--export: expected a file path, got the folder" in line
    line = _refused(m, ["--play", str(tmp_path / "none.pt")], capsys)
    assert re.search(r"--play: expected a saved policy file, got .*none\.pt' \(no such "
                     r"file\)$", line), line
    # corrupt files: one message whatever their bytes
    torch.manual_seed(0)
    bad = {"random.pt": bytes(torch.randint(0, 256, (3000,), dtype=torch.uint8).tolist()),
           "zip.pt": b"PK\x03\x04" + b"\x00" * 60, "empty.pt": b""}
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    torch.save([1, 2, 3], tmp_path / "list.pt")  # a torch file, not a checkpoint
    for name in (*bad, "list.pt"):
        line = _refused(m, ["--play", str(tmp_path / name)], capsys)
        assert line.endswith(f"--play: expected an exported TorchScript policy (--export) or "
                             f"an rsl_rl checkpoint (model.pt), got {tmp_path / name}, which "
                             f"loads as neither"), line


def _run_folder(path: Path, seed: int, done: int = 2) -> Path:
    path.mkdir()
    for f in ("model.pt", "env.pt", "train.pt"):
        (path / f).write_bytes(b"")
    args = {"task": "Go1JoystickFlatTerrain-v1", "num_envs": 4, "steps_per_env": 8,
            "hidden": "8", "levels": 5, "terrain_rows": 10, "kicks": False, "seed": seed}
    (path / "history.json").write_text(json.dumps({"args": args, "history": [{}] * done}))
    return path


def test_resume_keeps_the_runs_seed_and_refuses_another(tmp_path, monkeypatch, capsys):
    m = _script("go1_train", monkeypatch)
    tiny = ["--num-envs", "4", "--steps-per-env", "8", "--hidden", "8", "--iterations", "4"]
    run = _run_folder(tmp_path / "run", seed=5)
    args = m.parse([*tiny, "--out", str(run), "--resume", str(run)])
    assert args.seed == 5  # the run's (the seed --seed would give a new run: 0)
    assert m.parse([*tiny, "--out", str(run), "--resume", str(run), "--seed", "5"]).seed == 5
    line = _refused(m, [*tiny, "--out", str(run), "--resume", str(run), "--seed", "7"], capsys)
    assert line.endswith(f"--seed: the run in {run} was made with 5, got 7 (a resumed run "
                         "continues the run as it was: leave it out or give the run's)"), line
    line = _refused(m, [*tiny, "--num-envs", "8", "--out", str(run), "--resume", str(run)],
                    capsys)
    assert "--num-envs: the run in" in line and "made with 4, got 8" in line
    line = _refused(m, [*tiny[:-1], "2", "--out", str(run), "--resume", str(run)], capsys)
    assert line.endswith(f"--iterations: expected more than the 2 iterations the run in {run} "
                         "has done, got 2"), line
    (run / "env.pt").unlink()
    line = _refused(m, [*tiny, "--out", str(run), "--resume", str(run)], capsys)
    assert "--resume: expected a run folder written by this script" in line and "env.pt" in line
    assert m.parse(["--out", str(tmp_path / "new")]).seed == 0  # a new run: 0


def test_no_episode_length_says_why(monkeypatch):
    cli = _script("train_cli", monkeypatch)
    assert cli.episode_length(math.nan) == "none (no episode ended yet)"
    assert cli.episode_length(12.34) == "  12.3"


def test_help_keeps_the_continued_example_lines_apart(monkeypatch, capsys):
    m = _script("go1_train", monkeypatch)
    with pytest.raises(SystemExit) as e:
        m.parse(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--hidden 512,256,128 \\\n        --levels 0 --iterations 100000" in out
    assert "--iterations 1500 \\\n        --device cuda" in out
