"""Checkpoint files: a state dict on disk, written atomically, refused when altered (host code).

Layout: ``MAGIC`` (16 bytes), payload length (8 bytes, little endian), SHA-256 of the payload
(32 bytes), payload (``torch.save`` bytes). ``save_state`` writes it to a temporary file
``.<name>.<pid>.<8 hex>.tmp`` beside the target (flushed, ``fsync``-ed, held under an
exclusive ``flock`` where ``fcntl`` exists) and renames it over the target (``os.replace``):
a reader sees the old file or the new one, and a save that raises leaves the old file and no
temporary. A symbolic link at the target is written through. A save killed outright leaves
its temporary, which the next save of that target removes (only other processes' ones that
nobody holds). ``load_state`` checks the magic, the length and the digest (corruption, not
tampering) before ``torch.load(weights_only=True)`` onto the CPU; a refused file raises
``ValueError`` naming what was expected and what was found.
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
    Raises whatever serializing or writing raised (``path`` keeps its old contents);
    ``TypeError`` when ``state`` is not a mapping."""
    if not isinstance(state, Mapping):
        raise TypeError(f"save_state: expected a dict, got {type(state).__name__}")
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getbuffer()
    path = os.path.realpath(os.fspath(path))  # through links
    folder, name = os.path.split(path)
    remove_stale_temporaries(path)
    while True:  # until a temporary is still named as created once locked (a cleanup races)
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        f = open(tmp, "xb")
        try:
            if fcntl is None or _lock_if_named(f.fileno(), tmp, blocking=True):
                break
        except BaseException:
            f.close()
            raise
        f.close()
    try:
        with f:  # held (locked) until renamed: a concurrent save's cleanup leaves it
            f.write(MAGIC + _LENGTH.pack(len(payload)) + hashlib.sha256(payload).digest())
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
    with contextlib.suppress(OSError):  # the rename made durable where a folder opens
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _lock_if_named(fd: int, path: str, blocking: bool) -> bool:
    """Take an exclusive ``flock`` on ``fd`` (``OSError`` if held and not ``blocking``);
    True when ``path`` still names that file."""
    fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    try:
        st, own = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporaries that killed saves of ``path`` left beside it (another
    process's, not held by a running save); return their paths. Does nothing where
    ``fcntl`` does not exist (a running save cannot be told from a dead one there)."""
    folder, name = os.path.split(os.path.realpath(os.fspath(path)))
    try:
        entries = [] if fcntl is None else os.listdir(folder)
    except OSError:
        return []
    pattern = re.compile(rf"\.{re.escape(name)}\.([0-9]+)\.[0-9a-f]{{8}}\.tmp")
    removed = []
    for entry in entries:
        match = pattern.fullmatch(entry)
        # this process's own are never stale (where flock is per process, as on NFS,
        # another thread's would look free)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        tmp = os.path.join(folder, entry)
        with contextlib.suppress(OSError):  # gone (renamed by its save), or held by a save
            fd = os.open(tmp, os.O_RDONLY)
            try:
                if _lock_if_named(fd, tmp, blocking=False):
                    os.unlink(tmp)
                    removed.append(tmp)
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
    what, v = f"load_state({path!r})", len(MAGIC) - 1
    if not data.startswith(MAGIC[:-1]):
        raise ValueError(f"{what}: expected a gpuparam state file (written by env.save or "
                         f"gpuparam.files.save_state), got {len(data)} bytes without its header")
    if len(data) < _HEADER:
        raise ValueError(f"{what}: expected a header of {_HEADER} bytes, got {len(data)} "
                         "bytes (the file is truncated)")
    if data[v] != MAGIC[-1]:
        raise ValueError(f"{what}: expected format version {MAGIC[-1]}, got {data[v]}")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    digest, payload = data[len(MAGIC) + _LENGTH.size : _HEADER], memoryview(data)[_HEADER:]
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
