"""Cancellation: what a caller's cancel token looks like, and the check that the gate,
the encoder and the heads call between steps.

A check is a no-argument callable that raises ``Cancelled`` (or returns); passing
``None`` everywhere means "never cancelled", so the uncancellable path costs nothing.
"""

from __future__ import annotations

from typing import Callable, Protocol

from laya.errors import Cancelled

CheckFn = Callable[[], None]


class CancelToken(Protocol):
    def is_set(self) -> bool: ...  # pragma: no cover — a Protocol's signature, never called


def cancel_check(cancel: CancelToken | None) -> CheckFn | None:
    """A check that raises ``Cancelled`` once ``cancel`` (e.g. a threading.Event) is set."""
    if cancel is None:
        return None

    def check() -> None:
        if cancel.is_set():
            raise Cancelled("request cancelled")

    return check
