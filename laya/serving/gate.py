"""The one gate all computation on a base passes through.

Serializing forwards keeps results independent of thread scheduling (and of
torch's intra-op pools fighting each other); waiting observes the caller's cancel
check, so a cancelled request never blocks behind a long queue.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from laya.serving.cancel import CheckFn

POLL_SECONDS = 0.005


class Gate:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, check: CheckFn | None = None) -> Iterator[None]:
        """Hold the gate; while waiting, ``check()`` runs every few milliseconds and may raise."""
        if check is not None:
            check()
        while not self._lock.acquire(timeout=POLL_SECONDS):
            if check is not None:
                check()
        try:
            yield
        finally:
            self._lock.release()
