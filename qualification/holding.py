"""Running code while laya.artifact.atomic's writer holds before publishing (its
``LAYA_TEST_HOLD_PUBLISH`` seam): how the suite makes a name taken, or a temporary
changed, exactly between writing and publishing."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from laya.artifact.atomic import HOLD_ENV

HOLD_TIMEOUT_S = 30.0  # a writer that never holds fails the test instead of hanging it


def while_held(held: Path, marker: Path, write: Callable[[], object],
               meanwhile: Callable[[list[Path]], None]) -> None:
    """``write()``, running ``meanwhile(temporaries)`` in another thread once the writer
    holds before publishing ``held`` (the seam lists its temporaries in ``marker`` and
    waits until the marker is gone); re-raises what the writer raised, and fails the test
    on what ``meanwhile`` raised or on a writer that never held."""
    failures: list[BaseException] = []

    def listed() -> str | None:
        """The seam's list once whole: the marker exists from its first byte on, and the seam
        ends its list with a newline (read half-written, a loaded machine once gave none)."""
        try:
            text = marker.read_text()
        except FileNotFoundError:
            return None
        return text if text.endswith("\n") else None

    def other_writer():
        waited, text = 0.0, listed()
        while text is None:
            if waited > HOLD_TIMEOUT_S:
                failures.append(TimeoutError("the writer never held before publishing"))
                return
            threading.Event().wait(0.005)
            waited += 0.005
            text = listed()
        try:
            meanwhile([Path(p) for p in text.split()])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
        finally:
            marker.unlink()

    os.environ[HOLD_ENV] = f"{held}{os.pathsep}{marker}"
    thread = threading.Thread(target=other_writer, daemon=True)
    thread.start()
    try:
        write()
    finally:
        del os.environ[HOLD_ENV]
        thread.join()
        assert not failures, failures
