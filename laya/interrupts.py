"""SIGINT and SIGTERM as an orderly exit: the `laya` and `laya-qual keygen` commands
unwind (every ``finally`` runs, every temporary output is removed) and exit with the
shell's status for the signal, 128 + its number: 130 for SIGINT, 143 for SIGTERM.

Python's default turns SIGINT into KeyboardInterrupt (which click reports as exit 1)
and lets SIGTERM kill the process on the spot, skipping all cleanup.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(SystemExit):
    """Raised in the main thread by SIGINT or SIGTERM; exits with 128 + the signal number."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(128 + signum)


class SignalExit:
    """While entered, SIGINT and SIGTERM raise ``Interrupted``; inside ``deferred()`` they
    are held until the block ends, so a block that must finish (writing one output line)
    is never cut in half. Leaving restores the previous handlers."""

    def __init__(self) -> None:
        self._previous: dict[int, object] = {}
        self._deferring = 0
        self._pending: int | None = None

    def __enter__(self) -> "SignalExit":
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may set handlers; elsewhere the defaults stay
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame) -> None:
        if self._deferring:
            self._pending = signum
            return
        raise Interrupted(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if self._pending is not None and not self._deferring:
            raise Interrupted(self._pending)
