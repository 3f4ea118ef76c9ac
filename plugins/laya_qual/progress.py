"""How far a qualification run got, on stderr while it runs: tests done of the total
per artifact under qualification (and for the rest of the suite), time elapsed and
an estimate of the time left, from the pace so far.

The controller sees the collected node ids (in-process, or as xdist workers report
their collection) and every finished test; a test belongs to an artifact when that
artifact's parameter id is one of its node id's parameters.
"""

from __future__ import annotations

import re
import sys
import time

import pytest

SUITE = "suite"
EVERY_SECONDS = 30.0  # at most one line per this many seconds, plus one whenever an artifact completes


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """Counts per group; prints only in a run that writes a report or evidence."""

    def __init__(self, config: pytest.Config) -> None:
        from laya_qual.fixtures import representatives

        self.config = config
        self.artifacts = [test_id for _, test_id in representatives(config, "artifact")]
        self.total: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.started = time.monotonic()
        self.printed = self.started

    def group(self, nodeid: str) -> str:
        params = nodeid.rpartition("[")[2] if nodeid.endswith("]") else ""
        for artifact in self.artifacts:
            if re.search(rf"(^|-){re.escape(artifact)}(-|\]$)", params):
                return artifact
        return SUITE

    def expect(self, nodeids: list[str]) -> None:
        """The collection to count against (the first collection seen: every worker's is the same)."""
        if self.total:
            return
        for nodeid in nodeids:
            group = self.group(nodeid)
            self.total[group] = self.total.get(group, 0) + 1
            self.done.setdefault(group, 0)

    def advance(self, test: str, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not self.total:
            return
        group = self.group(report.nodeid)
        self.done[group] = self.done.get(group, 0) + 1
        now = time.monotonic()
        if self.done[group] == self.total.get(group) or now - self.printed >= EVERY_SECONDS:
            self.printed = now
            self._print(self.line(now))

    def line(self, now: float) -> str:
        done, total = sum(self.done.values()), sum(self.total.values())
        elapsed = now - self.started
        left = f"~{_clock(elapsed * (total - done) / done)} left" if done else "time left unknown"
        groups = ", ".join(f"{g} {self.done.get(g, 0)}/{self.total[g]}" for g in [SUITE, *self.artifacts]
                           if g in self.total)
        return f"laya_qual progress: {done}/{total} tests, {_clock(elapsed)} elapsed, {left} ({groups})"

    def _print(self, line: str) -> None:
        line = f"\n{line}"  # its own line, even in the middle of the terminal's row of dots
        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)
