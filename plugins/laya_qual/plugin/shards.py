"""Splitting one qualification run over N machines: which tests shard K runs, balanced
by the durations recorded by earlier runs, and the store those durations live in.

Every shard collects the same tests and computes the same assignment from the same
inputs (the selection, the durations file, N), so no coordinator is needed; the
evidence of each shard records those inputs and ``laya-qual merge`` checks that the
shards agree and that together they ran every test exactly once.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path

DURATIONS_FORMAT = "laya-qual-durations/v1"
# Where `laya-qual run` keeps the durations it measured: next to its reports, the way
# pytest-benchmark keeps its storage next to the project.
DURATIONS_DIR = ".laya-qual"
DURATIONS_FILE = "durations.json"
# The estimate for a test no run has timed yet (seconds): the median of the known ones.
FALLBACK_SECONDS = 1.0


class ShardError(ValueError):
    """A --laya-shard or durations file that cannot be used, named."""


def parse_shard(text: str, option: str = "--laya-shard") -> tuple[int, int]:
    """``"K/N"`` with 1 <= K <= N; an error names ``option``, the one the user gave."""
    k, sep, n = text.partition("/")
    try:
        index, count = int(k), int(n)
    except ValueError:
        index = count = 0
    if not sep or not 1 <= index <= count:
        raise ShardError(f"{option} {text!r}: expected K/N with 1 <= K <= N, e.g. 2/5")
    return index, count


def default_durations(report_dir: Path) -> Path:
    return report_dir / DURATIONS_DIR / DURATIONS_FILE


def read_durations(path: str | Path | None) -> tuple[dict[str, float], str | None]:
    """(seconds per test id, sha256 of the file) -- ({}, None) when there is no file yet."""
    if path is None or not Path(path).exists():
        return {}, None
    try:
        data = Path(path).read_bytes()
        doc = json.loads(data)
        if doc.get("format") != DURATIONS_FORMAT:
            raise KeyError("format")
        seconds = {str(t): float(s) for t, s in doc["tests"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ShardError(f"durations file {path}: not a {DURATIONS_FORMAT} file ({e!r})") from None
    if any(not s >= 0 for s in seconds.values()):
        raise ShardError(f"durations file {path}: a duration is negative or not a number")
    return seconds, hashlib.sha256(data).hexdigest()


def write_durations(path: str | Path, records: list[dict]) -> Path:
    """Fold this run's per-test durations into the store (a test timed again is replaced)."""
    from laya.artifact.atomic import write_file

    path = Path(path)
    known, _ = read_durations(path) if path.exists() else ({}, None)
    known.update({r["test"]: round(r["duration"], 4) for r in records if r.get("duration") is not None})
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": DURATIONS_FORMAT, "tests": dict(sorted(known.items()))}
    write_file(path, json.dumps(body, indent=1).encode() + b"\n", replace=True)
    return path


def estimates(tests: list[str], durations: dict[str, float]) -> dict[str, float]:
    """Seconds per test: its recorded duration, else the median of the recorded ones."""
    known = [durations[t] for t in tests if t in durations]
    fallback = statistics.median(known) if known else FALLBACK_SECONDS
    return {t: durations.get(t, fallback) for t in tests}


def assign(tests: list[str], durations: dict[str, float], count: int,
           pinned: dict[str, int] | None = None) -> dict[str, int]:
    """Shard (1..count) of every test: ``pinned`` tests where they are pinned (the
    benchmarks, on shard 1), the rest longest first onto the shard with the least
    estimated time so far (ties: the lower shard, then the test id). Deterministic."""
    pinned = pinned or {}
    seconds = estimates(tests, durations)
    load = [0.0] * count
    out: dict[str, int] = {}
    for test, shard in sorted(pinned.items()):
        out[test] = shard
        load[shard - 1] += seconds.get(test, 0.0)
    for test in sorted((t for t in tests if t not in pinned), key=lambda t: (-seconds[t], t)):
        shard = min(range(count), key=lambda i: (load[i], i))
        out[test] = shard + 1
        load[shard] += seconds[test]
    return out
