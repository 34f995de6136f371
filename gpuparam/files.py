"""Checkpoint files: a state dict on disk, written atomically, refused when altered.

``save_state(state, path)`` serializes ``state`` (``torch.save``), then writes a header and
that payload to a temporary file in the directory of ``path`` (flushed and ``fsync``-ed)
and renames it over ``path`` (``os.replace``, atomic on POSIX and Windows): a reader sees
the old file or the new one, never part of one, and a failure at any point (an object that
does not serialize, a full disk) leaves the old file as it was and no temporary file.
A symbolic link at ``path`` is written through: the file it points to is replaced, the
link stays.

A process killed while saving (``SIGKILL``, a power cut) cannot remove its temporary
file: it stays beside the target as ``.<name>.<pid>.<8 hex digits>.tmp``, and the next
``save_state`` of that target removes it. A writer holds an exclusive ``flock`` on its
temporary file until the rename, and only temporaries of other processes that nobody
holds are removed, so concurrent saves of one target keep theirs (POSIX; where ``fcntl``
does not exist, stale temporaries stay).

``load_state(path)`` reads the whole file and checks the header before deserializing: the
magic bytes, the payload length (a truncated or extended file is refused) and the SHA-256
digest of the payload (any altered byte is refused). Then the payload is loaded with
``torch.load(weights_only=True)`` (tensors, dicts, lists, tuples, strings and numbers: no
code runs) onto the CPU. A refused file raises ``ValueError`` naming what was expected
and what was found. The digest detects corruption (bit rot, torn copies, edits), not
tampering by someone who can also rewrite the digest.

File layout: ``MAGIC`` (16 bytes), payload length (8 bytes, little endian), SHA-256 of the
payload (32 bytes), payload (``torch.save`` bytes).

Host code: never on the step path.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import os
import pickle
import re
import secrets
import struct
from collections.abc import Mapping

import torch

try:
    import fcntl
except ImportError:  # Windows: no flock; stale temporaries are not cleaned there
    fcntl = None

__all__ = ["MAGIC", "load_state", "remove_stale_temporaries", "save_state"]

MAGIC = b"gpuparam-state\x00\x01"  # name, then format version 1
_LENGTH = struct.Struct("<Q")
_HEADER = len(MAGIC) + _LENGTH.size + hashlib.sha256().digest_size


def save_state(state: Mapping, path: str | os.PathLike) -> None:
    """Write ``state`` (a dict of tensors, dicts, lists, tuples, strings and numbers, e.g.
    ``env.state_dict()``) to ``path`` atomically, with a digest (see the module docstring).

    Raises whatever serializing or writing raised (``path`` then keeps its old contents);
    ``TypeError`` when ``state`` is not a mapping."""
    if not isinstance(state, Mapping):
        raise TypeError(f"save_state: expected a dict, got {type(state).__name__}")
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getbuffer()
    header = MAGIC + _LENGTH.pack(len(payload)) + hashlib.sha256(payload).digest()
    # through a symbolic link (chains and relative targets too): its target is replaced
    folder, name = os.path.split(os.path.realpath(os.fspath(path)))
    path = os.path.join(folder, name)
    remove_stale_temporaries(path)
    f, tmp = _create_temporary(folder, name)
    try:
        with f:  # held (locked) until renamed: a concurrent save's cleanup leaves it
            f.write(header)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
            if fcntl is None:  # (Windows cannot rename an open file; nothing is locked)
                f.close()
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # (renamed, or cleaned once unlocked)
            os.unlink(tmp)
        raise
    _sync_folder(folder)


def _create_temporary(folder: str, name: str) -> tuple[io.BufferedWriter, str]:
    """A new temporary file for the target ``name`` in ``folder``, opened for writing and,
    where ``fcntl`` exists, locked (``flock``) and still linked under its name (a cleanup
    may have removed it between its creation and the lock: then another one)."""
    while True:
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        f = open(tmp, "xb")  # created with the usual permissions (umask)
        if fcntl is None:
            return f, tmp
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            if _same_file(f.fileno(), tmp):
                return f, tmp
        except BaseException:
            f.close()
            raise
        f.close()


def _same_file(fd: int, path: str) -> bool:
    """``path`` still names the open file ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporary files that saves of ``path`` killed midway left beside it
    (``.<name>.<pid>.<8 hex digits>.tmp``, of another process, not held by a running
    save); return their paths. :func:`save_state` calls it before writing. Does nothing
    where ``fcntl`` does not exist (a running save cannot be told from a dead one there)."""
    folder, name = os.path.split(os.path.realpath(os.fspath(path)))
    if fcntl is None:
        return []
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    # exactly the names _create_temporary gives (another target's never match)
    pattern = re.compile(rf"\.{re.escape(name)}\.([0-9]+)\.[0-9a-f]{{8}}\.tmp")
    removed = []
    for entry in entries:
        match = pattern.fullmatch(entry)
        # this process's own are never stale (and where flock is a per-process POSIX lock,
        # as on NFS, another thread's would look free)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        tmp = os.path.join(folder, entry)
        try:
            fd = os.open(tmp, os.O_RDONLY)
        except OSError:  # gone (renamed by its save), or not ours to read
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a save is writing it
            if _same_file(fd, tmp):
                os.unlink(tmp)
                removed.append(tmp)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def load_state(path: str | os.PathLike) -> dict:
    """Read a file written by :func:`save_state` and return its dict (tensors on the CPU).

    Raises ``ValueError`` when the file is not such a file, is truncated or extended, or its
    digest does not match its contents; ``OSError`` when it cannot be read."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    what = f"load_state({path!r})"
    if not data.startswith(MAGIC[:-1]):
        raise ValueError(f"{what}: expected a gpuparam state file (written by env.save or "
                         f"gpuparam.files.save_state), got {len(data)} bytes without its header")
    if len(data) < _HEADER:
        raise ValueError(f"{what}: expected a header of {_HEADER} bytes, got {len(data)} "
                         "bytes (the file is truncated)")
    if data[len(MAGIC) - 1] != MAGIC[-1]:
        raise ValueError(f"{what}: expected format version {MAGIC[-1]}, got "
                         f"{data[len(MAGIC) - 1]}")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    digest = data[len(MAGIC) + _LENGTH.size : _HEADER]
    payload = memoryview(data)[_HEADER:]
    if len(payload) != length:
        raise ValueError(f"{what}: expected a payload of {length} bytes, got {len(payload)} "
                         "(the file is truncated or extended)")
    if not hmac.compare_digest(hashlib.sha256(payload).digest(), digest):
        raise ValueError(f"{what}: expected contents with SHA-256 {digest.hex()}, got "
                         "contents that do not match it (the file is corrupt)")
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # intact, but holding more than plain data
        raise ValueError(f"{what}: expected tensors, dicts, lists, tuples, strings and "
                         f"numbers, got an object torch.load(weights_only=True) refuses: "
                         f"{str(e).splitlines()[0]}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{what}: expected a saved dict, got {type(state).__name__}")
    return state


def _sync_folder(folder: str) -> None:
    """Make the rename durable where the OS allows opening a folder (POSIX)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
