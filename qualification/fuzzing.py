"""The fuzz claims' harness: a mutated pinned file, JSONL line or report bundle gets a named
answer, quickly (test_artifact_fuzz.py, test_jsonl_fuzz.py, test_report_fuzz.py).

Oracle: the mutations come from ``laya_qual.synth.fuzz``, which knows JSON,
safetensors and DSSE only from their public specs and imports nothing of laya. A
sound answer is defined here, not asked of the code under test:

- an artifact: a ``LayaError`` subclass (nothing else may escape), or a load whose
  served probabilities are finite, within [0, 1], sum to 1 (``math.fsum``) and are
  bitwise the same standalone and on the shared base;
- a JSONL stream: exactly one output object per input line, each a prediction with
  such probabilities or an error object naming a ``LayaError`` subclass, and every
  output line strict JSON (no NaN or Infinity);
- a bundle: ``VerifyError``, or acceptance of statements equal to the signed ones.

Every example must answer within ``bound_s``: 20 times what the unmutated artifact
takes to load and serve, and never less than 5 s. The bound interrupts (SIGALRM) a
run that would hang, where the test runs on the main thread.

Outcomes are recorded as Hypothesis events: ``--hypothesis-show-statistics`` prints
them per role and error type.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from pathlib import Path

import torch
from hypothesis import settings

import laya
from laya.errors import LayaError

EXAMPLES = max(settings.default.max_examples, 40)  # the thorough profile's 200 where it asks for more
MIN_BOUND_S = 5.0
BOUND_FACTOR = 20


class TimeBoundExceeded(AssertionError):
    pass


class within:
    """Fail if the block runs past ``seconds``; interrupt it (SIGALRM) where that is possible.
    Afterwards ``elapsed`` holds its wall time and ``bucket`` names its order of magnitude."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.interrupt = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")

    def _expire(self, signum, frame):
        raise TimeBoundExceeded(f"no answer within {self.seconds:.1f} s")

    def __enter__(self) -> "within":
        if self.interrupt:
            self.previous = signal.signal(signal.SIGALRM, self._expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.monotonic() - self.started
        if self.interrupt:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        if self.elapsed > self.seconds:
            raise TimeBoundExceeded(f"answered after {self.elapsed:.1f} s, over the bound of {self.seconds:.1f} s")

    @property
    def bucket(self) -> str:
        for limit, name in ((0.01, "10 ms"), (0.1, "100 ms"), (1.0, "1 s"), (10.0, "10 s")):
            if self.elapsed < limit:
                return f"answered in < {name}"
        return "answered in >= 10 s"


def assert_sound(probabilities, where: str) -> None:
    values = [float(p) for p in probabilities]
    assert all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in values), f"{where}: {values}"
    assert abs(math.fsum(values) - 1.0) <= 1e-5, f"{where}: sums to {math.fsum(values)}"


def served(directory: Path, requests) -> list:
    """Each request's outcome standalone and shared: (probabilities tensor) or the error's type."""
    standalone = laya.load_artifact(directory)
    shared = laya.open_adapters({"h": directory}, base=laya.load_artifact_base(directory))
    outcomes = []
    for request in requests(standalone):
        pair = []
        for predict in (standalone.predict, lambda r: shared.predict("h", r)):
            try:
                pair.append(torch.tensor(predict(request).probabilities))
            except LayaError as exc:
                pair.append(type(exc).__name__)
        outcomes.append(pair)
    return outcomes


def bound_for(directory: Path) -> float:
    """The per-example bound: BOUND_FACTOR x the clean artifact's load-and-serve time."""
    started = time.monotonic()
    served(directory, lambda model: [])
    return max(MIN_BOUND_S, BOUND_FACTOR * (time.monotonic() - started))
