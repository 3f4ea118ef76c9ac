"""How far a qualification run got, on stderr while it runs: tests done of the total
per artifact under qualification (and for the rest of the suite), time elapsed and
an estimate of the time this pass has left. With recorded durations (--laya-durations,
which `laya-qual run` passes once a run has recorded them) the estimate is the recorded
seconds of the tests left, divided among the workers, at this run's pace: the seconds
the tests done took now over the seconds recorded for them. So the start-up before the
first test, a slow test still running, and a machine busier (or quieter) than when the
durations were recorded do not skew it. Without recorded durations it is the pace in tests
since the first test finished, once a twentieth of the tests are done: before that, one
slow early test would make it hours.

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
PACE_AFTER = 20  # without recorded durations, estimate once 1/PACE_AFTER of the tests are done


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _file_and_name(test: str) -> str:
    """A test's file name and name: the same for a node id and for the id a report names it by."""
    path, sep, name = test.partition("::")
    return path.rpartition("/")[2] + sep + name


class Progress:
    """Counts per group; prints only in a run that writes a report or evidence."""

    def __init__(self, config: pytest.Config) -> None:
        from laya_qual.plugin.fixtures import representatives
        from laya_qual.plugin.shards import ShardError, read_durations

        self.config = config
        try:
            recorded, _ = read_durations(config.getoption("laya_durations", None))
        except ShardError:
            recorded = {}  # the selection refuses the file, naming it
        self.recorded = {_file_and_name(t): s for t, s in recorded.items()}
        self.seconds_left: dict[str, float] = {}  # each test not yet done: its recorded (or median) seconds
        self.seconds_done = 0.0  # recorded seconds of the tests done
        self.took: dict[str, float] = {}  # each test running or done: the seconds its phases took so far
        self.took_done = 0.0  # the seconds the tests done took in this run
        workers = config.getoption("numprocesses", None)
        self.workers = workers if isinstance(workers, int) and workers > 0 else 1
        self.artifacts = [test_id for _, test_id in representatives(config, "artifact")]
        self.total: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.started = time.monotonic()
        self.first_done: float | None = None  # when the first test finished: the pace in tests counts from there
        self.printed = self.started
        self.last: str | None = None

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
        from laya_qual.plugin.shards import estimates

        for nodeid in nodeids:
            group = self.group(nodeid)
            self.total[group] = self.total.get(group, 0) + 1
            self.done.setdefault(group, 0)
        if self.recorded:
            self.seconds_left = estimates([_file_and_name(n) for n in nodeids], self.recorded)

    def advance(self, test: str, report: pytest.TestReport) -> None:
        self.took[report.nodeid] = self.took.get(report.nodeid, 0.0) + report.duration
        if report.when != "teardown" or not self.total:
            return
        group = self.group(report.nodeid)
        self.done[group] = self.done.get(group, 0) + 1
        recorded = self.seconds_left.pop(_file_and_name(test), None)
        if recorded is not None:
            self.seconds_done += recorded
            self.took_done += self.took.pop(report.nodeid, 0.0)
        now = time.monotonic()
        if self.first_done is None:
            self.first_done = now
        if sum(self.done.values()) == sum(self.total.values()):
            self.last = self.line(now)  # after pytest's own last progress column: see finish
        elif self.done[group] == self.total.get(group) or now - self.printed >= EVERY_SECONDS:
            self.printed = now
            self._print(self.line(now))

    def finish(self) -> None:
        """The line of the last test, printed when the test loop has ended: pytest writes
        its final progress column then, and the line goes below it."""
        if self.last:
            self._print(self.last, column=False)
            self.last = None

    def line(self, now: float) -> str:
        done, total = sum(self.done.values()), sum(self.total.values())
        elapsed = now - self.started
        if self.seconds_done:
            pace = self.took_done / self.seconds_done
            seconds = pace * sum(self.seconds_left.values()) / self.workers
            left = f"~{_clock(seconds)} left in this pass (recorded durations)"
        elif done == total:
            left = "~0m00s left in this pass"
        elif done > 1 and done * PACE_AFTER >= total and self.first_done is not None:
            left = f"~{_clock((now - self.first_done) * (total - done) / (done - 1))} left in this pass"
        else:
            left = "time left: estimating"
        groups = ", ".join(f"{g} {self.done.get(g, 0)}/{self.total[g]}" for g in [SUITE, *self.artifacts]
                           if g in self.total)
        return f"laya_qual progress: {done}/{total} tests, {_clock(elapsed)} elapsed, {left} ({groups})"

    def _end_row(self, column: bool) -> bool:
        """Finish the terminal's row of test results as pytest does at the screen's edge
        (its progress column, then a newline), so the progress line below breaks neither
        the row nor the column; False when that cannot be done (no terminal reporter)."""
        tr = self.config.pluginmanager.getplugin("terminalreporter")
        writer = getattr(tr, "_tw", None)
        if writer is None or not hasattr(writer, "width_of_current_line"):
            return False
        if writer.width_of_current_line:
            if column and getattr(tr, "_show_progress_info", False):
                tr._write_progress_information_filling_space()
            writer.line()
        return True

    def _print(self, line: str, column: bool = True) -> None:
        end = "\n"
        if self.config.get_verbosity() > 0:  # a test's line is ended when the next one starts
            line, end = f"\n{line}", ""
        elif not self._end_row(column):
            line = f"\n{line}"  # its own line, even in the middle of a row of dots
        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is None:
            print(line, end=end, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(line, end=end, file=sys.stderr, flush=True)
