"""One call at a time on an env (``step``, ``reset``, checkpoints, ``env.hold()`` blocks): a
second call while one runs raises ``RuntimeError`` before anything changes (a non-blocking
lock, never a wait)."""

from __future__ import annotations

import contextlib
import threading


class EnvLock:
    """The lock of one env (``owner``, named in the error). ``busy``: held while a call or a
    ``hold()`` block runs; ``holder``: the thread holding the env through ``hold()``, or
    None; ``running``: the call running (``"step"``, ``"reset"``, ``"load"``, ``"save"``)
    or None, the one place that says a step runs."""

    def __init__(self, owner: object):
        self.owner = owner
        self.busy = threading.Lock()
        self.holder: int | None = None  # the thread holding the env through hold()
        self.running: str | None = None

    @contextlib.contextmanager
    def call(self, what: str = "call", hold: bool = False):
        """One call at a time (``what``: ``"step"``, ``"reset"``, ``"load"`` or ``"save"``;
        ``hold=True``: a ``hold()`` block); the thread holding the env enters without the
        lock while no call of it is running."""
        took = self.holder != threading.get_ident() or self.running is not None
        if took and not self.busy.acquire(blocking=False):
            raise RuntimeError(
                f"{self.owner!r}: step/reset called while another call on this env is running "
                "(two threads using one env, or a hook calling step): an env is not "
                "thread-safe; give each thread its own env or serialize the calls"
            )
        if took and hold:
            self.holder = threading.get_ident()
        self.running = None if hold else what
        try:
            yield self.owner
        finally:
            self.running = None
            if took:
                self.holder = None
                self.busy.release()
