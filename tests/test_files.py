"""Issue 24 (5): checkpoint files written atomically with a digest; altered files refused.

``env.save`` / ``env.load`` and ``norm.save`` / ``norm.load`` over ``gpuparam.files``: every
single-byte flip and every truncation of a saved Pendulum checkpoint is refused with
nothing changed (``torch.load`` + ``load_state_dict`` took 14 of 40 flips), and a save that
fails midway leaves the old file.
"""

from __future__ import annotations

import os

import pytest
import torch
from test_bad_input import assert_same_state

import gpuparam as gp
from gpuparam import files

N = 4


def pendulum(seed: int, steps: int) -> gp.VecEnv:
    env = gp.make("Pendulum-v1", num_envs=N, device="cpu", seed=seed)
    env.randomize(gp.Uniform("m", 0.5, 2.0, on="reset"),
                  gp.Gaussian("g", 0.0, 0.3, op="add", on="step"))
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        env.step(torch.rand(N, 1, generator=g) * 4 - 2)
    return env


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "pendulum.ckpt"
    env = pendulum(0, 7)
    env.save(path)
    return env, path


def test_save_load_resumes_bit_for_bit(saved):
    env, path = saved
    other = pendulum(1, 3)
    other.load(path)
    assert_same_state(other.state_dict(), env.state_dict())
    a = torch.linspace(-2, 2, N).view(N, 1)
    for _ in range(5):
        assert torch.equal(other.step(a)["observation"], env.step(a)["observation"])


def test_every_single_byte_flip_is_refused_with_nothing_changed(saved):
    _, path = saved
    target = pendulum(1, 3)
    before = target.state_dict()
    data = path.read_bytes()
    assert len(data) > 1000
    with open(path, "r+b") as f:
        for i in range(len(data)):
            for mask in (0x01, 0x80):  # the lowest and the highest bit of every byte
                f.seek(i)
                f.write(bytes([data[i] ^ mask]))
                f.flush()
                with pytest.raises(ValueError, match=r"load_state\(.*\): expected"):
                    target.load(path)
            f.seek(i)
            f.write(data[i : i + 1])
        f.flush()
    assert_same_state(target.state_dict(), before)
    target.load(path)  # the restored file loads


def test_truncated_or_extended_files_are_refused_with_nothing_changed(saved, tmp_path):
    _, path = saved
    target = pendulum(1, 3)
    before = target.state_dict()
    data = path.read_bytes()
    cut = tmp_path / "cut.ckpt"
    for size in [*range(0, 200), *range(200, len(data), 13), len(data) - 1]:
        cut.write_bytes(data[:size])
        with pytest.raises(ValueError, match=r"expected (a gpuparam state file|a header of 56 "
                                             r"bytes|a payload of \d+ bytes)"):
            target.load(cut)
    cut.write_bytes(data + b"\x00")
    with pytest.raises(ValueError, match=r"the file is truncated or extended"):
        target.load(cut)
    assert_same_state(target.state_dict(), before)


def test_other_files_are_refused(tmp_path):
    env = pendulum(1, 1)
    before = env.state_dict()
    plain = tmp_path / "plain.pt"
    torch.save(env.state_dict(), plain)  # a torch.save file: no header, no digest
    with pytest.raises(ValueError, match=r"expected a gpuparam state file \(written by "
                                         r"env.save or gpuparam.files.save_state\)"):
        env.load(plain)
    other = tmp_path / "cartpole.ckpt"
    gp.make("CartPole-v1", num_envs=N, device="cpu").save(other)  # intact, another env
    with pytest.raises(ValueError, match=r"load_state_dict: env: expected 'Pendulum-v1'"):
        env.load(other)
    code = tmp_path / "code.ckpt"
    files.save_state({"x": Opaque()}, code)  # intact, but not plain data
    with pytest.raises(ValueError, match=r"expected tensors, dicts, lists, tuples, strings "
                                         r"and numbers"):
        files.load_state(code)
    with pytest.raises(FileNotFoundError):
        env.load(tmp_path / "missing.ckpt")
    with pytest.raises(TypeError, match=r"save_state: expected a dict, got list"):
        files.save_state([1], tmp_path / "list.ckpt")
    assert_same_state(env.state_dict(), before)


class Opaque:
    """A picklable object that is not plain data."""


class FailsToPickle:
    def __reduce__(self):
        raise RuntimeError("serialization failed midway")


def _left(tmp_path) -> list[str]:
    return sorted(os.listdir(tmp_path))


def test_a_save_that_fails_midway_keeps_the_old_file(saved, tmp_path, monkeypatch):
    env, path = saved
    old = path.read_bytes()
    listing = _left(tmp_path)
    state = env.state_dict()
    # serialization raising after part of the state was pickled
    state["tensors"] = {**state["tensors"], "zz": FailsToPickle()}
    with pytest.raises(RuntimeError, match="serialization failed midway"):
        files.save_state(state, path)
    assert path.read_bytes() == old and _left(tmp_path) == listing
    # writing raising after the temporary file was written, before the rename
    def fail(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="No space left"):
        env.save(path)
    assert path.read_bytes() == old and _left(tmp_path) == listing
    monkeypatch.undo()
    env.step(torch.zeros(N, 1))
    env.save(path)  # a new save replaces the file whole
    assert path.read_bytes() != old and _left(tmp_path) == listing
    pendulum(2, 1).load(path)


@pytest.mark.parametrize("norm", [gp.ObsNorm((3,), num_envs=N, num_groups=2,
                                             group_ids=torch.tensor([0, 1, 0, 1])),
                                  gp.RewardNorm(num_envs=N)])
def test_normalization_modules_save_and_load(norm, tmp_path):
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        if isinstance(norm, gp.ObsNorm):
            norm(torch.randn(N, 3, generator=g))
        else:
            norm(torch.randn(N, generator=g), torch.zeros(N, dtype=torch.bool))
    path = tmp_path / "norm.ckpt"
    norm.save(path)
    fresh = type(norm)(**({"shape": (3,), "num_groups": 2,
                           "group_ids": torch.tensor([0, 1, 0, 1])}
                          if isinstance(norm, gp.ObsNorm) else {}), num_envs=N)
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    data = path.read_bytes()
    for i in range(0, len(data), 3):  # a dense sample of single-byte flips
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:])
        with pytest.raises(ValueError, match=r"load_state\(.*\): expected"):
            fresh.load(path)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated"):
        fresh.load(path)
    assert_same_state(dict(fresh.state_dict()), before)
    path.write_bytes(data)
    fresh.load(path)
    assert_same_state(dict(fresh.state_dict()), dict(norm.state_dict()))


def test_a_transformed_env_saves_and_loads_its_statistics_with_the_env(tmp_path):
    def build():
        env = gp.make("Pendulum-v1", 8, device="cpu", seed=1)
        return gp.TransformedEnv(env, gp.ObsNorm((3,)), gp.RewardNorm())

    a, b = build(), build()
    act = torch.full((8, 1), 0.5)
    for _ in range(7):
        a.step(act)
    path = tmp_path / "run.gpstate"
    a.save(path)
    b.load(path)
    for ta, tb in zip(a.transforms, b.transforms, strict=True):
        assert torch.equal(ta.count, tb.count) and torch.equal(ta.mean, tb.mean)
    for _ in range(5):
        oa, ob = a.step(act), b.step(act)
        assert torch.equal(oa["observation"], ob["observation"])
        assert torch.equal(oa["reward"], ob["reward"])


def test_a_transformed_env_refuses_a_bad_transform_state_and_changes_nothing():
    env = gp.make("Pendulum-v1", 8, device="cpu", seed=1)
    t = gp.TransformedEnv(env, gp.ObsNorm((3,)))
    t.step(torch.zeros(8, 1))
    state = t.state_dict()
    state["transforms"][0]["count"] = -state["transforms"][0]["count"] - 1
    env_before = env.state_dict()
    count_before = t.transforms[0].count.clone()
    with pytest.raises(ValueError):
        t.load_state_dict(state)
    assert torch.equal(t.transforms[0].count, count_before)
    assert torch.equal(env.state_dict()["tensors"]["state"], env_before["tensors"]["state"])
    with pytest.raises(ValueError, match="TransformedEnv.load_state_dict: expected"):
        t.load_state_dict(env_before)


# ---------------------------------------------------------------- issue 33 (13): killed saves
KILLED_SAVE = """
import os, signal, sys
import torch
from gpuparam import files

def killed(src, dst):  # the temporary is written and fsync-ed: the process dies here
    os.kill(os.getpid(), signal.SIGKILL)

os.replace = killed
files.save_state({"x": torch.zeros(1000)}, sys.argv[1])
"""


def _temporaries(folder, name: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.startswith(f".{name}.")
                  and f.endswith(".tmp"))


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL and flock are POSIX")
def test_a_temporary_left_by_a_killed_save_is_removed_by_the_next_save(saved, tmp_path):
    import fcntl
    import signal
    import subprocess
    import sys

    env, path = saved
    old = path.read_bytes()
    done = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], timeout=300)
    assert done.returncode == -signal.SIGKILL
    stale = _temporaries(tmp_path, path.name)
    assert len(stale) == 1 and (tmp_path / stale[0]).stat().st_size > 4000  # it was written
    assert path.read_bytes() == old  # the old file stands
    # a save of another target leaves it; a running save's temporary (locked) is kept
    env.save(tmp_path / "other.ckpt")
    assert _temporaries(tmp_path, path.name) == stale
    running = tmp_path / f".{path.name}.1.0123abcd.tmp"  # another process's, still saving
    with open(running, "wb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        env.save(path)  # the next save of this target: the stale one goes
        assert _temporaries(tmp_path, path.name) == [running.name]
    env.save(path)  # released (its save would be over): removed too
    assert _temporaries(tmp_path, path.name) == []
    assert files.remove_stale_temporaries(path) == []
    pendulum(2, 1).load(path)


# ---------------------------------------------------------------- issue 33 (14): symlinks
@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="POSIX links")
def test_a_save_onto_a_symlink_writes_through_it(saved, tmp_path):
    env, path = saved
    (tmp_path / "runs").mkdir()
    link = tmp_path / "runs" / "latest.ckpt"
    link.symlink_to(os.path.join("..", path.name))  # relative, as `ln -s` makes them
    env.step(torch.zeros(N, 1))
    env.save(link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", path.name)
    assert path.read_bytes() == link.read_bytes()
    assert _left(tmp_path / "runs") == ["latest.ckpt"]  # nothing beside the link
    other = pendulum(1, 3)
    other.load(path)
    assert_same_state(other.state_dict(), env.state_dict())
    dangling = tmp_path / "next.ckpt"
    dangling.symlink_to(tmp_path / "runs" / "made.ckpt")
    env.save(dangling)  # creates the file it points to
    assert dangling.is_symlink() and (tmp_path / "runs" / "made.ckpt").is_file()
