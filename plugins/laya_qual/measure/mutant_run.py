"""A sampled run of automatic mutants (``laya-qual mutate --sample N --seed S``): a
kill rate nobody chose, with its Clopper-Pearson lower bound.

The sample is drawn uniformly from the whole population (``laya_qual.measure.mutants``). Each
mutant is applied to its own isolated copy of the installed packages, exactly as a
catalogued defect is (``laya_qual.measure.mutation``). To keep a run affordable, the
unmutated suite runs once under coverage, every process it starts included, with one
context per test (``laya_qual.measure.coverage_run``'s measurement). A mutant on lines no
process executed cannot change any outcome: it is counted survived without a run. Any
other mutant runs first against the tests that executed one of its lines, in their own
process or in one they started; one they miss (or one on lines executed only while
modules were imported) is run against the whole suite unless ``confirm`` is off. A
mutant the suite misses is run against the project's own ``tests/`` when
``--tests-dir`` is given, so the results say whether the suite, tests/ or neither
kills it. A runtime mutant counts as killed only when the suite kills it; a harness
mutant when the suite or the project's tests do. A survivor listed in the equivalence
file with a written reason counts as equivalent; a listed mutant that is killed is a
wrong reason, reported as such, and the run exits non-zero.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path

from laya_qual.measure import coverage_run
from laya_qual.measure.mutants import Mutant
from laya_qual.measure.mutation import (BaselineRed, MutationError, RunResult, build_root, check_shadowing, child_env,
                                WHOLE_RUN_TIMEOUT_S, code_digests, deliverable_sigint, failure_excerpt, failures,
                                installed_layout, run_suite)

FORMAT = "laya-qual-mutant-sample-v1"
CONFIDENCE = 0.95
# Covering tests that take longer than this, serially, run on the xdist workers.
SERIAL_LIMIT_S = 30.0


def clopper_pearson_lower(killed: int, total: int, confidence: float = CONFIDENCE) -> float:
    """One-sided lower confidence bound of a binomial proportion (Clopper-Pearson):
    the p at which P(X >= killed | total, p) = 1 - confidence, by bisection on the exact tail."""
    if not 0 <= killed <= total or total < 1:
        raise ValueError(f"killed {killed} of {total}")
    if killed == 0:
        return 0.0
    alpha = 1 - confidence

    def tail(p: float) -> float:  # P(X >= killed), from log-space terms
        logs = [math.lgamma(total + 1) - math.lgamma(i + 1) - math.lgamma(total - i + 1)
                + i * math.log(p) + (total - i) * math.log1p(-p) for i in range(killed, total + 1)]
        top = max(logs)
        return math.exp(top) * sum(math.exp(x - top) for x in logs)

    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if tail(mid) < alpha else (lo, mid)
    return lo


# The context of what ran outside every test: module bodies executed while pytest imported them.
IMPORT = ""
# A mutant whose text holds these acts even where no line of it runs (a generator no longer is one).
_COMPILE_TIME = re.compile(r"\b(yield|await)\b")


def covering_tests(data_file: Path, root: Path) -> dict[str, dict[int, set[str]]]:
    """Per file of the copy (relative path) and executed line: the node ids of the tests
    that ran it, in their own process or in one they started (``IMPORT`` for import time).
    A line a fixture wider than one test ran while it was set up (``shared:<fixture>``, in
    the test process or in a process the fixture started) belongs to every test that used
    that fixture: its value, or the process it keeps, serves them all."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    users = coverage_run.fixture_uses(data_file.parent)

    def tests(context: str) -> set[str]:
        label = context.rpartition("|")[0]
        if label.startswith(coverage_run.SHARED):
            return users.get(label.removeprefix(coverage_run.SHARED), set())
        return {label}

    out: dict[str, dict[int, set[str]]] = {}
    resolved = root.resolve()
    for measured in data.measured_files():
        path = Path(measured).resolve()
        if resolved not in path.parents:
            continue
        by_line = data.contexts_by_lineno(measured)
        out[path.relative_to(resolved).as_posix()] = {
            line: set().union(*map(tests, contexts)) for line, contexts in by_line.items()}
    return out


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass
class Baseline:
    """What one green run under coverage tells the mutants: which tests executed each
    line (``covering_tests``), each test's serial seconds, and the run's seconds; empty
    until measured."""
    lines: dict[str, dict[int, set[str]]] = dataclasses.field(default_factory=dict)
    times: dict[str, float] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    left_out: list[str] = dataclasses.field(default_factory=list)  # red only under coverage

    def covering(self, m: Mutant) -> tuple[list[str], bool, bool]:
        """``(tests, executed, at_import)``: the tests that executed one of the mutant's
        lines, fastest first (a run stops at its first failure, so a mutant they kill is
        told apart sooner), whether any process executed one, and whether one ran while
        importing."""
        lines = self.lines.get(m.file, {})
        found = [lines[n] for n in range(m.line, m.end_line + 1) if n in lines]
        tests = set().union(*found)
        fastest_first = sorted(tests - {IMPORT}, key=lambda t: (self.times.get(t, 0.0), t))
        if m.at_import or (not found and _COMPILE_TIME.search(m.original)):
            # A module body (and a class body, a decorator, a default) runs on import in every
            # process, and the pytest processes import the harness and the runtime before
            # coverage starts in them, so its lines show only in the subprocesses' data;
            # dropping a yield changes what calling the function returns even where the
            # yield never runs.
            return fastest_first, True, True
        return fastest_first, bool(found), IMPORT in tests

    def serial(self, tests: Sequence[str]) -> float:
        return sum(self.times.get(t, 0.0) for t in tests)


def tests_digest(tests_dir: Path) -> str:
    """The in-toto dirHash of the project's tests folder (every file but bytecode), so a
    resumed run or a reader knows which tests/ made the second figure."""
    from laya_qual.subjects import dir_hash, file_sha256

    files = [f for f in sorted(tests_dir.rglob("*")) if f.is_file() and "__pycache__" not in f.parts]
    return dir_hash({f.relative_to(tests_dir).as_posix(): file_sha256(f) for f in files})


def is_harness(m: Mutant) -> bool:
    """A mutant of the harness (``laya_qual``), which the project's own tests guard, as
    opposed to the runtime (``laya``), whose promises the suite must keep."""
    return m.file.startswith("laya_qual/")


class SampleRun:
    def __init__(self, mutants: Sequence[Mutant], *, population_size: int, seed: int, hypothesis_seed: int,
                 workers: int, equivalents: dict[str, str], tests_dir: Path | None, timeout: float | None,
                 progress: Callable[[str], None], checkpoint: Callable[[dict], None] = lambda r: None,
                 scope: Sequence[str] = (), confirm: bool = True, jobs: int = 1, time_box: float | None = None,
                 earlier: dict | None = None):
        self.mutants, self.population_size, self.seed, self.scope = list(mutants), population_size, seed, scope
        self.earlier = earlier  # the results of an interrupted or time-boxed run of this draw, to resume
        self.time_box = time_box  # seconds from the run's start after which no mutant starts
        self.hypothesis_seed, self.workers, self.timeout = hypothesis_seed, workers, timeout
        self.equivalents, self.tests_dir = equivalents, tests_dir and tests_dir.resolve()
        self.confirm, self.jobs = confirm, jobs
        self.progress, self.checkpoint = progress, checkpoint
        self.layout = installed_layout()
        self.digests = code_digests(self.layout)
        self.tmp = Path(tempfile.mkdtemp(prefix="laya-mutants-"))
        self.pristine = build_root(self.tmp / "pristine", self.layout)
        if code_digests(self.layout) != self.digests:
            raise MutationError("the installed packages changed while they were being copied")
        if self.tests_dir is not None:  # the project's tests decide the second figure: theirs is code measured too
            self.digests["testsDir"] = tests_digest(self.tests_dir)
        self.suite, self.tests = Baseline(), Baseline()  # until measured

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _measured(self, name: str, run: Callable[[Path, list[str]], RunResult],
                  rerun: Callable[[Path, list[str]], RunResult]) -> Baseline:
        """One run of ``name`` on an unmutated copy under coverage, a context per test,
        subprocesses included (``laya_qual.measure.coverage_run``'s measurement). It must be green,
        except for tests red only under coverage (a test timing a signal to a process that
        coverage slows): those, green when run again without it, are left out of the map
        (``leftOut``), so no mutant is run against them; any other red stops the run."""
        root = Path(shutil.copytree(self.pristine, self.tmp / f"baseline-{name.strip('/')}"))
        (root / f"{coverage_run.CONTEXT_MODULE}.py").write_text(coverage_run.CONTEXT_PLUGIN)
        check_shadowing(root)
        data_dir = root / ".laya-coverage"
        data_dir.mkdir()
        data, rc = data_dir / ".coverage", root / ".coveragerc-laya"
        rc.write_text(coverage_run.rcfile(data, root))
        self.progress(f"baseline: {name} under coverage (a context per test, subprocesses included), "
                      f"-n {self.workers}")
        r = run(root, coverage_run.pytest_args(rc))
        runs = coverage_run.recorded_runs(data_dir)  # by node id, as a stage names the tests it runs
        r, red = coverage_run.green_without_coverage(r, runs, lambda tests: rerun(root, tests), name,
                                                     lambda line: self.progress(f"baseline: {line}"))
        if r.outcome != "passed":
            self.progress(f"baseline: {name} is red ({r.outcome}); the end of its output:\n{r.output[-4000:]}")
            raise BaselineRed({"baseline": {"runs": [{"seed": self.hypothesis_seed, "verdict": "red", "of": name,
                                                      "failed": [r.first_failure], "seconds": r.seconds}]}})
        coverage_run.combine(rc, data_dir, data)
        lines = covering_tests(data, root)
        for by_line in lines.values():
            for n, tests in list(by_line.items()):
                tests.difference_update(red)
                if not tests:
                    del by_line[n]
        measured = Baseline(lines, {t: recorded["seconds"] for t, recorded in runs.items()}, r.seconds, red)
        self.progress(f"baseline: {name} green in {r.seconds:.0f}s; {len(measured.times)} tests, "
                      f"{sum(map(len, measured.lines.values()))} lines executed"
                      + (f"; left out (red only under coverage): {', '.join(red)}" if red else ""))
        return measured

    def baseline(self) -> dict:
        """The unmutated suite, and with ``tests_dir`` the project's tests, each whole and green."""
        whole = self.timeout or WHOLE_RUN_TIMEOUT_S
        self.suite = self._measured("suite", lambda root, extra: run_suite(
            root, seed=self.hypothesis_seed, workers=self.workers, timeout=whole, exitfirst=False,
            claims=self.scope, extra=extra), lambda root, tests: run_suite(
            root, seed=self.hypothesis_seed, workers=0, tests=tests, timeout=whole, exitfirst=False))
        out = {"seconds": round(self.suite.seconds, 1), "tests": len(self.suite.times), "subprocesses": True,
               "leftOut": self.suite.left_out}
        if self.tests_dir is not None:
            self.tests = self._measured("tests/", lambda root, extra: _run_tests_dir(
                root, self.tests_dir, self.workers, whole, exitfirst=False, extra=extra),
                lambda root, tests: _run_tests_dir(root, self.tests_dir, 0, whole, tests=tests, exitfirst=False))
            out["testsDir"] = {"seconds": round(self.tests.seconds, 1), "tests": len(self.tests.times),
                               "leftOut": self.tests.left_out}
        return out

    def _budget(self, serial: float) -> float:
        return self.timeout or max(300.0, 4 * serial + 120)

    def _workers(self, serial: float) -> int:
        return self.workers if serial > SERIAL_LIMIT_S else 0

    def _covering_suite(self, root: Path, covering: list[str]) -> dict:
        serial = self.suite.serial(covering)
        workers, budget = self._workers(serial), self._budget(serial)
        return self._judged("covering tests", root, covering, lambda at, tests: run_suite(
            at, seed=self.hypothesis_seed, workers=workers, tests=tests, timeout=budget), len(covering))

    def _whole_suite(self, root: Path) -> dict:
        """Every suite test of the baseline, fastest first: the run stops at its first failure,
        so a mutant a quick test kills does not wait for the slow ones."""
        budget = self._budget(self.suite.seconds)
        return self._judged("suite", root, _fastest_first(self.suite), lambda at, tests: run_suite(
            at, seed=self.hypothesis_seed, workers=self.workers, tests=tests, timeout=budget))

    def _judged(self, name: str, root: Path, tests: list[str], run: Callable[[Path, list[str]], RunResult],
                count: int | None = None) -> dict:
        """One stage: ``tests`` in this order on the mutated copy. A kill counts only if it
        reproduces (``reproduction``): the same tests in the same order, through the first
        one that failed, pass on an unmutated copy and fail again with the mutant. A failure
        that the unmutated code shows too (a test that depends on what ran before it, a
        machine under load) is no kill of the mutant's."""
        r = run(root, tests)
        stage = _stage(name, r, count)
        if _verdict(stage):
            stage["reproduction"] = self._reproduction(root, tests, r, run)
        return stage

    def _reproduction(self, root: Path, tests: list[str], killed: RunResult,
                      run: Callable[[Path, list[str]], RunResult]) -> dict:
        order = _through(tests, killed.first_failure)
        clean = Path(shutil.copytree(self.pristine, Path(tempfile.mkdtemp(dir=self.tmp)) / "unmutated"))
        try:
            unmutated = run(clean, order)
        finally:
            shutil.rmtree(clean.parent, ignore_errors=True)
        again = run(root, order)
        return {"reproduced": unmutated.outcome == "passed" and again.outcome in ("failed", "timeout"),
                **_order_record(order), "unmutated": _stage("unmutated", unmutated),
                "mutantAgain": _stage("mutant again", again)}

    def _project_tests(self, m: Mutant) -> tuple[list[str], bool] | None:
        """The project's tests a mutant's tests/ stage runs and whether they are all of them
        (fastest first), or None for no tests/ stage: those that executed one of its lines;
        all of them for one that ran only at import time, and for a harness mutant that no
        measured process executed, since a project test may run its line in a subprocess
        coverage does not follow (a test of `laya-qual coverage` starts it without coverage's
        variables, so that the run it measures is its own)."""
        if self.tests_dir is None:
            return None
        covering, executed, at_import = self.tests.covering(m)
        if at_import or (is_harness(m) and not executed and not self.suite.covering(m)[1]):
            return _fastest_first(self.tests), True
        return (covering, False) if executed else None

    def _tests(self, root: Path, m: Mutant) -> dict:
        tests, whole = self._project_tests(m)
        serial = self.tests.seconds if whole else self.tests.serial(tests)
        workers, budget = self._workers(serial), self._budget(serial)
        return self._judged("tests/", root, tests, lambda at, chosen: _run_tests_dir(
            at, self.tests_dir, workers, budget, tests=chosen), None if whole else len(tests))

    def _plan(self, root: Path, m: Mutant) -> list[tuple[str, Callable[[], dict]]]:
        """(killer, stage) in the order they run; the first stage that kills ends the mutant.
        The shipped suite's stages come first, for every mutant: its covering tests, then the
        whole suite (to confirm a survivor, or for a mutant no test owns), so whether the suite
        kills it is always decided by the suite itself. The project's tests (those of
        ``_project_tests``) run only for a mutant the suite missed: their kill makes the second,
        labelled figure (``withProjectTests``), never the headline."""
        covering, executed, at_import = self.suite.covering(m)
        project_tests = self._project_tests(m)
        plan: list[tuple[str, Callable[[], dict]]] = []
        if executed and covering:
            plan.append(("suite", lambda: self._covering_suite(root, covering)))
        if executed and (self.confirm or at_import or not covering):
            plan.append(("suite", lambda: self._whole_suite(root)))
        if project_tests is not None:
            plan.append(("tests/", lambda: self._tests(root, m)))
        return plan

    def run_mutant(self, m: Mutant, index: int) -> dict:
        covering, executed, _ = self.suite.covering(m)
        executed_by_tests = self.tests_dir is not None and self.tests.covering(m)[1]
        stages: list[dict] = []
        killed_by = None
        if executed or self._project_tests(m) is not None:
            root = Path(shutil.copytree(self.pristine, self.tmp / f"m{index}"))
            path = root / m.file
            path.write_text(m.apply(path.read_text()))
            for killer, stage in self._plan(root, m):
                stages.append(stage())
                if _verdict(stages[-1]) and stages[-1]["reproduction"]["reproduced"]:
                    killed_by = killer
                    break
            shutil.rmtree(root, ignore_errors=True)
        if not executed:
            stages.insert(0, {"stage": "not executed by the suite", "outcome": "not run", "firstFailure": None,
                              "seconds": 0.0})
        return _classified({"id": m.id, "key": m.key, "operator": m.operator, "file": m.file, "line": m.line,
                            "part": "harness" if is_harness(m) else "runtime", "original": m.original,
                            "replacement": m.replacement, "killedBy": killed_by, "executed": executed,
                            "executedByTests": executed_by_tests, "coveringTests": len(covering), "stages": stages,
                            "seconds": round(sum(s["seconds"] for s in stages), 1)}, self.equivalents, measured_now=True)

    def _resumed(self) -> dict[int, dict]:
        """The earlier run's records by their place in this draw, each classified again under
        this run's equivalence reasons. Only a run of this very draw (population, seed) on this
        very code, measured the same way (Hypothesis seed, scope, confirmation, the project's
        tests), is resumed; any difference is refused by name, so one figure never mixes two."""
        e = self.earlier or {}
        measured_as = {"code": self.digests, "population": self.population_size, "sampleSeed": self.seed,
                       "hypothesisSeed": self.hypothesis_seed, "scope": list(self.scope),
                       "confirmWholeSuite": self.confirm, "projectTests": self.tests_dir is not None}
        for field, value in measured_as.items():
            if e.get(field) != value:
                raise MutationError(f"cannot resume: the earlier run's {field} is {e.get(field)!r}, "
                                    f"this run's {value!r}")
        place = {m.key: i for i, m in enumerate(self.mutants)}
        outside = [r["key"] for r in e.get("mutants", []) if r.get("key") not in place]
        if outside:
            raise MutationError(f"cannot resume: the earlier run measured {len(outside)} mutants this draw of "
                                f"{len(self.mutants)} does not hold (a smaller --sample?), the first {outside[0]}")
        return {place[r["key"]]: _classified(r, self.equivalents, measured_now=False) for r in e.get("mutants", [])}

    def _started_in_time(self, m: Mutant, index: int, t0: float) -> dict | None:
        """The mutant's record, or None when the time box closed before it could start."""
        if self.time_box is not None and time.monotonic() - t0 >= self.time_box:
            return None
        return self.run_mutant(m, index)

    def run(self) -> dict:
        started, t0 = _now(), time.monotonic()
        result = {"format": FORMAT, "code": self.digests, "population": self.population_size,
                  "sampleSeed": self.seed, "sample": len(self.mutants), "hypothesisSeed": self.hypothesis_seed,
                  "maxWorkers": self.workers, "jobs": self.jobs, "scope": list(self.scope),
                  "confirmWholeSuite": self.confirm, "projectTests": self.tests_dir is not None,
                  "startedOn": started, "complete": False}
        done: dict[int, dict] = {}
        if self.earlier is not None:
            done = self._resumed()
            result["earlierRuns"] = _earlier_runs(self.earlier)
            self.progress(f"resuming: {len(done)} of the {len(self.mutants)} drawn measured before, "
                          f"{len(self.mutants) - len(done)} to run")
        remaining = [i for i in range(len(self.mutants)) if i not in done]
        result["baseline"] = self.baseline() if remaining else self.earlier.get("baseline")
        lock = threading.Lock()
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:  # starts them in index order
            futures = {pool.submit(self._started_in_time, self.mutants[i], i, t0): i for i in remaining}
            for future in as_completed(futures):
                record = future.result()
                if record is None:
                    continue
                with lock:
                    done[futures[future]] = record
                    records = [done[i] for i in sorted(done)]
                    self.progress(f"[{len(done)}/{len(self.mutants)}] {record['id']}: {record['status']}"
                                  f" ({record['seconds']:.0f}s, {record['coveringTests']} covering tests"
                                  f"{', never executed' if never_run(record) else ''})")
                    self.checkpoint(result | {"mutants": records, "summary": summarize(records)})
        records = [done[i] for i in sorted(done)]
        if self.time_box is not None:
            # Mutants start in index order and every started one finishes, so the measured ones are
            # the first K of the draw (with this seed, the sample --sample K draws). Two jobs racing
            # past the box's end can leave one gap; what follows it is dropped, by position alone.
            first_gap = next((i for i in range(len(self.mutants)) if i not in done), len(self.mutants))
            records = records[:first_gap]
            if not records:
                raise MutationError(f"the time box ({self.time_box / 60:g} minutes) closed before any mutant started")
            result |= {"sample": len(records), "timeBox": {"minutes": round(self.time_box / 60, 2),
                                                           "requestedSample": len(self.mutants),
                                                           "closed": len(records) < len(self.mutants)}}
        return result | {"complete": True, "mutants": records, "summary": summarize(records),
                         "finishedOn": _now(), "wallSeconds": round(time.monotonic() - t0, 1)}


def _classified(record: dict, equivalents: dict[str, str], *, measured_now: bool) -> dict:
    """The record with its status: ``killed`` (or ``timeout``) when a stage killed it, by the
    suite or by the project's tests (``killedBy`` says which, and the figures count them
    apart). A written equivalence reason filed before the mutant was measured sets a survivor
    apart (``equivalent``); one filed after its result was known (a reason new or changed when
    a run is resumed) does not: the mutant stays ``survived`` and the reason is kept as
    ``lateReason``, for a second reading only. A killed mutant with a reason is a wrong reason."""
    killed_by, reason = record["killedBy"], equivalents.get(record["key"])
    filed_before = reason is not None and (measured_now or (
        record.get("reason") == reason and record.get("reasonFiled") == "before"))
    if killed_by:
        verdict = _verdict(record["stages"][-1])
        status = "wrongly-equivalent" if reason else ("timeout" if verdict == "timeout" else "killed")
    else:
        status = "equivalent" if filed_before else "survived"
    out = {k: v for k, v in record.items() if k not in ("status", "reason", "reasonFiled", "lateReason", "stages",
                                                        "seconds")}
    if reason and (filed_before or killed_by):
        out |= {"reason": reason, "reasonFiled": "before" if filed_before else "after"}
    elif reason:
        out["lateReason"] = reason
    return out | {"status": status, "stages": record["stages"], "seconds": record["seconds"]}


def _earlier_runs(earlier: dict) -> list[dict]:
    """When and how the resumed results were measured, earliest first (an interrupted run
    has no end)."""
    own = {"startedOn": earlier.get("startedOn"), "finishedOn": earlier.get("finishedOn"),
           "wallSeconds": earlier.get("wallSeconds"), "mutantsSoFar": len(earlier["mutants"]),
           "jobs": earlier.get("jobs"), "maxWorkers": earlier.get("maxWorkers"), "baseline": earlier.get("baseline")}
    return [*earlier.get("earlierRuns", []), own]


def read_results(path: Path) -> dict:
    """A sampled run's results, complete or the checkpoint an interrupted run left, to resume."""
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MutationError(f"{path}: cannot read the results to resume ({e})") from None
    if not isinstance(result, dict) or result.get("format") != FORMAT or not isinstance(result.get("mutants"), list):
        raise MutationError(f"{path}: not the results of a sampled mutant run ({FORMAT})")
    for r in result["mutants"]:
        if not isinstance(r, dict) or not _RECORD <= r.keys() or not isinstance(r["stages"], list):
            raise MutationError(f"{path}: a mutant record without its {', '.join(sorted(_RECORD))}: {r!r:.200}")
    return result


_RECORD = {"key", "part", "killedBy", "stages", "seconds"}  # what classifying a resumed record reads


def _fastest_first(baseline: Baseline) -> list[str]:
    """Every test of a baseline run, the quickest first."""
    return sorted(baseline.times, key=lambda t: (baseline.times[t], t))


def _verdict(stage: dict) -> str | None:
    """Whether a stage killed the mutant: ``failed``, ``timeout`` (counted as killed, listed apart), or None."""
    return {"failed": "failed", "timeout": "timeout"}.get(stage["outcome"])


def _stage(name: str, r: RunResult, tests: int | None = None) -> dict:
    """A stage's record; a failed one keeps what its first failure said (``failure``), so a kill
    no one expected can be read afterwards."""
    return {"stage": name, "outcome": r.outcome, "firstFailure": r.first_failure,
            **({"failure": failure_excerpt(r.output)} if r.outcome == "failed" else {}),
            "seconds": round(r.seconds, 1), **({"tests": tests} if tests is not None else {})}


def _through(tests: list[str], failing: str | None) -> list[str]:
    """The tests a killing run had reached: those before the first failing one in its order,
    and that one; all of them when the failure names no test of the list (a timeout, a
    crashed worker)."""
    return tests[:tests.index(failing) + 1] if failing in tests else list(tests)


# A reproduction run's order is kept whole up to this many tests, beyond it as a digest of the list.
_ORDER_KEPT = 100


def _order_record(order: list[str]) -> dict:
    digest = hashlib.sha256("\n".join(order).encode()).hexdigest()
    return {"tests": len(order), **({"order": order} if len(order) <= _ORDER_KEPT else {"orderSha256": digest})}


def _run_tests_dir(root: Path, tests_dir: Path, workers: int, timeout: float, *, tests: Sequence[str] = (),
                   exitfirst: bool = True, extra: Sequence[str] = ()) -> RunResult:
    """The project's own tests (with ``tests``, those node ids, relative to the project)
    against the copy at ``root``, which shadows the install; a run past its timeout is
    killed with its process group. pytest starts in ``root``: ``python -m`` puts its
    working directory first on ``sys.path``, and in the project's directory that would
    import the project's own ``laya/`` instead of the mutated copy."""
    project = tests_dir.parent
    targets = [f"{project}/{t}" for t in tests] or [str(tests_dir)]
    cmd = [sys.executable, "-m", "pytest", *targets, f"--rootdir={project}", "-c", str(project / "pyproject.toml"),
           "-q", "-rfE", "-p", "no:cacheprovider", "-p", "no:randomly", "-n", str(workers),
           *(["-x"] if exitfirst else []), *extra]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=child_env(root), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return RunResult("timeout", None, time.monotonic() - start, None, output)
    outcome = "passed" if proc.returncode in (0, 5) else "failed"
    first = next(iter(failures(output)), f"pytest exit status {proc.returncode}")
    return RunResult(outcome, None if outcome == "passed" else first, time.monotonic() - start, proc.returncode,
                     output)


# Who may kill a mutant for each figure: the headline is the shipped suite's own (what a
# user's `pytest -p laya_qual --laya-qualify` runs); the second adds the project's tests/.
SUITE_ONLY = frozenset({"suite"})
WITH_PROJECT_TESTS = frozenset({"suite", "tests/"})
PARTS = ("runtime", "harness")


def _killed(record: dict, by: frozenset[str]) -> bool:
    return record["status"] in ("killed", "timeout", "wrongly-equivalent") and record["killedBy"] in by


def _figure(counted: list[dict], by: frozenset[str]) -> dict:
    killed = sum(_killed(r, by) for r in counted)
    return {"killed": killed, "total": len(counted),
            "rate": round(killed / len(counted), 4) if counted else None,
            "lowerBound95": round(clopper_pearson_lower(killed, len(counted)), 6) if counted else None}


def _figures(counted: list[dict], by: frozenset[str]) -> dict:
    """K of N, its rate and lower bound, overall and per part (runtime, harness)."""
    return {**_figure(counted, by),
            "parts": {part: _figure([r for r in counted if r.get("part") == part], by) for part in PARTS}}


def never_run(record: dict) -> bool:
    """A mutant on lines no process of any baseline executed: counted survived without a run."""
    return record.get("executed") is False and not record.get("executedByTests")


def summarize(records: list[dict]) -> dict:
    """Two figures, never one: at the top level the shipped suite's kills (the headline),
    under ``withProjectTests`` the kills of the suite or the project's tests/ (which users
    never run); equivalents set apart with their reasons; per part, each with its lower bound."""
    counted = [r for r in records if r["status"] != "equivalent"]
    return {**_figures(counted, SUITE_ONLY), "equivalent": len(records) - len(counted),
            "withProjectTests": _figures(counted, WITH_PROJECT_TESTS),
            "survivors": sorted(r["key"] for r in counted if r["status"] == "survived"),
            "notExecuted": sum(r["status"] == "survived" and never_run(r) for r in counted),
            "killedByTestsOnly": sorted(r["key"] for r in counted if _killed(r, WITH_PROJECT_TESTS - SUITE_ONLY)),
            "wronglyEquivalent": sorted(r["key"] for r in records if r["status"] == "wrongly-equivalent"),
            "timeouts": sorted(r["key"] for r in counted if r["status"] == "timeout"),
            "lateEquivalents": sorted(r["key"] for r in counted if "lateReason" in r),
            "notReproduced": sorted(r["key"] for r in records if any(
                not s.get("reproduction", {}).get("reproduced", True) for s in r.get("stages", [])))}


def read_equivalents(path: Path | None) -> dict[str, str]:
    """``{mutant key: written reason}``; an entry without a reason is refused."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MutationError(f"{path}: cannot read the equivalence reasons ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) and v.strip() for v in data.values()):
        raise MutationError(f"{path}: must map each mutant key to a written reason (a non-empty string)")
    return data


def summary_lines(result: dict) -> list[str]:
    """What a sampled run says at its end, before naming its results file: the time box if it
    closed, the figure, per part, the survivors and any wrong equivalence."""
    s, box, lines = result["summary"], result.get("timeBox"), []
    if box and box["closed"]:
        lines.append(f"the time box of {box['minutes']:g} minutes closed after {result['sample']} of the "
                     f"{box['requestedSample']} drawn mutants: the figure is the first {result['sample']}'s")
    lines.append(f"the shipped suite killed {s['killed']} of {s['total']} sampled mutants ({s['equivalent']} "
                 f"equivalent set apart), population {result['population']}, sample seed {result['sampleSeed']}: "
                 f"rate {s['rate']:.1%}, 95% lower bound {s['lowerBound95']:.1%}")
    lines += _part_lines(s)
    t = s["withProjectTests"]
    if result.get("projectTests"):
        lines.append(f"with the project's tests/ (not shipped): killed {t['killed']} of {t['total']} (rate "
                     f"{t['rate']:.1%}, 95% lower bound {t['lowerBound95']:.1%}); {len(s['killedByTestsOnly'])} "
                     "killed by tests/ only")
        lines += _part_lines(t)
    lines.append(f"  {s['notExecuted']} survived on lines no process executed"
                 + ("" if result["confirmWholeSuite"] else
                    "; survivors of their covering tests were not confirmed on the whole suite"))
    lines += [f"  survived  {key}" for key in s["survivors"]]
    lines += [f"  a failure that did not reproduce (not counted a kill)  {key}" for key in s.get("notReproduced", [])]
    lines += [f"  WRONG EQUIVALENCE (a test kills it)  {key}" for key in s["wronglyEquivalent"]]
    return lines


def _part_lines(figures: dict) -> list[str]:
    return [f"  {part}: killed {f['killed']} of {f['total']} ({f['rate']:.1%}, 95% lower bound {f['lowerBound95']:.1%})"
            for part, f in figures["parts"].items() if f["total"]]


def main(*, drawn: list[Mutant], population_size: int, seed: int, hypothesis_seed: int | None, workers: int,
         timeout: float | None, equivalents: Path | None, tests_dir: Path | None, output: Path | None,
         require_rate: float | None, scope: Sequence[str], confirm: bool, jobs: int, time_box: float | None,
         earlier: dict | None = None) -> int:
    """``laya-qual mutate --sample N``: run the mutants drawn with ``seed`` from a population
    of ``population_size``, write the results, print the summary; exit 1 on a wrong
    equivalence reason or a lower bound below ``require_rate``. With ``time_box``
    (minutes), no mutant starts after that long: the first K drawn are measured. With
    ``earlier`` (``read_results``), the mutants it measured are kept, not run again."""
    import secrets

    from laya_qual.measure.mutation import _progress as progress

    deliverable_sigint()
    reasons = read_equivalents(equivalents)
    h_seed = secrets.randbelow(2**31) if hypothesis_seed is None else hypothesis_seed
    output = output or Path("reports") / f"mutants-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    run = SampleRun(drawn, population_size=population_size, seed=seed, hypothesis_seed=h_seed, workers=workers,
                    equivalents=reasons, tests_dir=tests_dir, timeout=timeout, progress=progress, scope=scope,
                    confirm=confirm, jobs=jobs, time_box=None if time_box is None else time_box * 60, earlier=earlier,
                    checkpoint=lambda partial: output.write_text(json.dumps(partial, indent=2) + "\n"))
    progress(f"{len(drawn)} of {population_size} mutants drawn with seed {seed}; hypothesis seed {h_seed}; "
             f"copies under {run.tmp}")
    try:
        result = run.run()
    finally:
        run.close()
    output.write_text(json.dumps(result, indent=2) + "\n")
    for line in summary_lines(result):
        print(line)
    print(f"results: {output}")
    s = result["summary"]
    if require_rate is not None and s["lowerBound95"] < require_rate:
        print(f"the kill rate's 95% lower bound {s['lowerBound95']:.1%} is below the required {require_rate:.1%}",
              file=sys.stderr)
        return 1
    return 1 if s["wronglyEquivalent"] else 0
