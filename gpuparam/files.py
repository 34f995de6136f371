"""Checkpoint files: a state dict on disk, written atomically, refused when altered.

``save_state(state, path)`` serializes ``state`` (``torch.save``), then writes a header and
that payload to a temporary file in the directory of ``path`` (flushed and ``fsync``-ed)
and renames it over ``path`` (``os.replace``, atomic on POSIX and Windows): a reader sees
the old file or the new one, never part of one, and a failure at any point (an object that
does not serialize, a full disk) leaves the old file as it was and no temporary file.

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

import hashlib
import hmac
import io
import os
import pickle
import secrets
import struct
from collections.abc import Mapping

import torch

__all__ = ["MAGIC", "SavesState", "load_state", "save_state"]

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
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as f:  # created with the usual permissions (umask)
            f.write(header)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _sync_folder(folder)


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


class SavesState:
    """``save(path)`` / ``load(path)`` for an object with ``state_dict()`` and a validating
    ``load_state_dict(state)`` (envs, normalization modules, ``TransformedEnv``)."""

    def save(self, path: str | os.PathLike) -> None:
        """Write ``state_dict()`` to the file ``path`` atomically, with a digest
        (:func:`save_state`): an interrupted save leaves the old file. Synchronizes."""
        save_state(self.state_dict(), path)

    def load(self, path: str | os.PathLike) -> None:
        """Restore a file written by :meth:`save`: a file that is not one, truncated or
        altered is refused (:func:`load_state`), then ``load_state_dict`` validates the
        state whole. A refused load raises ``ValueError`` and changes nothing.
        Synchronizes."""
        self.load_state_dict(load_state(path))
