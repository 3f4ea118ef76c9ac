"""report.mutants.judged: how `laya-qual mutate --sample` judges each drawn mutant, which
makes the records a signed sampled figure is counted from, against a reference written from
docs/mutation.md ("Per mutant", "A kill must reproduce", "--time-box").

Each pytest run of the suite is the one part replaced: its outcome is drawn (passed, failed
naming a test, timed out), so every path of the judging is met in a few examples. The engine
is the real one: its copies of the installed packages, the mutated bytes each run sees, its
records and its figures.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.measure import mutant_run
from laya_qual.measure.mutant_run import Baseline, SampleRun
from laya_qual.measure.mutants import module_mutants
from laya_qual.measure.mutation import MutationError, RunResult
from laya_qual.synth import baseline_times, stage_outcomes, suite_node_ids

SOURCE = "laya/errors.py"  # a runtime module with no generator: the yield rule does not apply
WORKERS_AFTER_S = 30.0  # covering tests go to the xdist workers once their baseline time exceeds this
KILLING = ("failed", "timeout")


def reference_order(tests, times: dict[str, float]) -> list[str]:
    """Fastest first by baseline seconds (an untimed test counts 0), ties by node id."""
    return sorted(tests, key=lambda t: (times.get(t, 0.0), t))


def reference_through(order: list[str], failing: str | None) -> list[str]:
    """What a killing run had reached: through its first failing test, or all of it when the
    failure names no test of the run (a timeout, a crashed worker)."""
    return order[:order.index(failing) + 1] if failing in order else order


def reference_budget(serial_s: float, timeout: float | None) -> float:
    """A stage's deadline: --timeout, else four times its baseline seconds plus two minutes, at least five."""
    return timeout if timeout else max(300.0, 4 * serial_s + 120.0)


@pytest.fixture(scope="module")
def engine():
    """One engine, its copy of the installed packages made once; each example sets what it reads."""
    run = SampleRun([], population_size=0, seed=1, hypothesis_seed=7, workers=2, equivalents={}, tests_dir=None,
                    timeout=None, progress=lambda line: None)
    yield run
    run.close()


def mutants_of(engine: SampleRun):
    return module_mutants((engine.pristine / SOURCE).read_text(), SOURCE)


def scripted(engine: SampleRun, monkeypatch, m, data) -> "ScriptedSuite":
    original = (engine.pristine / SOURCE).read_text()
    suite = ScriptedSuite(data, original, m.apply(original))
    monkeypatch.setattr(mutant_run, "run_suite", suite)
    return suite


class ScriptedSuite:
    """Stands in for `run_suite`: records each call and what the copy held, and answers drawn
    outcomes (``data``), or those of a list in turn, or passed for every run."""

    def __init__(self, data, original: str, mutated: str):
        self.data, self.original, self.mutated, self.calls = data, original, mutated, []

    def __call__(self, root: Path, *, seed: int, workers: int, tests, timeout: float, **_) -> RunResult:
        held = (root / SOURCE).read_text()
        copy = {self.mutated: "mutated", self.original: "unmutated"}.get(held, "other")
        if isinstance(self.data, list):
            outcome, failing = self.data[len(self.calls)]
        elif self.data is not None:
            outcome, failing = self.data.draw(stage_outcomes(list(tests)), label=f"run {len(self.calls) + 1}")
        else:
            outcome, failing = "passed", None
        self.calls.append({"copy": copy, "tests": list(tests), "workers": workers, "timeout": timeout,
                           "seed": seed, "outcome": outcome, "failing": failing})
        return RunResult(outcome, failing, 1.0, 0 if outcome == "passed" else 1, f"{failing} failed\n")


@pytest.mark.laya_claim("report.mutants.judged")
@settings(deadline=None)
@given(data=st.data(), covering=suite_node_ids(), covered=st.booleans(), confirm=st.booleans(),
       times=baseline_times(),
       suite_s=st.floats(0, 400), timeout=st.sampled_from([None, 45.0]), workers=st.sampled_from([0, 2]))
def test_a_mutant_is_killed_only_by_a_failure_that_reproduces_in_the_order_it_ran(
        engine, data, covering, covered, confirm, times, suite_s, timeout, workers):
    m = data.draw(st.sampled_from([m for m in mutants_of(engine) if not re.search(r"\b(yield|await)\b", m.original)]),
                  label="mutant")
    engine.workers, engine.timeout, engine.confirm = workers, timeout, confirm
    engine.suite = Baseline({SOURCE: {m.line: set(covering)}} if covered else {}, dict(times), suite_s)
    shutil.rmtree(engine.tmp / "m0", ignore_errors=True)  # what an example Hypothesis stopped mid-run left
    with pytest.MonkeyPatch.context() as patch:
        suite = scripted(engine, patch, m, data)
        record = engine.run_mutant(m, 0)

    executed = covered or m.at_import
    order = reference_order(covering, times) if covered else []
    serial = sum(times.get(t, 0.0) for t in order)
    stages = ([("covering tests", order, workers if serial > WORKERS_AFTER_S else 0, reference_budget(serial, timeout))]
              if executed and order else [])
    if executed and (confirm or m.at_import or not order):
        stages.append(("suite", reference_order(times, times), None, reference_budget(suite_s, timeout)))
    calls, judged, killed_by = iter(suite.calls), [], None
    for name, tests, stage_workers, budget in stages:
        first = next(calls)
        assert (first["copy"], first["tests"], first["timeout"], first["seed"]) == ("mutated", tests, budget, 7), first
        assert stage_workers is None or first["workers"] == stage_workers, (name, first)
        judged.append((name, first["outcome"]))
        if first["outcome"] not in KILLING:
            continue
        through = reference_through(tests, first["failing"])
        unmutated, again = next(calls), next(calls)
        assert (unmutated["copy"], unmutated["tests"]) == ("unmutated", through), unmutated
        assert (again["copy"], again["tests"]) == ("mutated", through), again
        reproduced = unmutated["outcome"] == "passed" and again["outcome"] in KILLING
        got = record["stages"][len(judged) - 1]["reproduction"]
        assert (got["reproduced"], got["tests"], got["unmutated"]["outcome"], got["mutantAgain"]["outcome"]) == (
            reproduced, len(through), unmutated["outcome"], again["outcome"]), got
        assert got.get("order", through) == through
        if reproduced:
            killed_by = first["outcome"]
            break
    assert next(calls, None) is None, "a run after the mutant was judged"
    assert [(s["stage"], s["outcome"]) for s in record["stages"]] == (
        judged if executed else [("not executed by the suite", "not run")])
    assert record["killedBy"] == ("suite" if killed_by else None)
    assert record["status"] == {"failed": "killed", "timeout": "timeout", None: "survived"}[killed_by]
    assert record["coveringTests"] == len(order) and record["part"] == "runtime"
    assert sorted(p.name for p in engine.tmp.iterdir()) == ["pristine"], "a copy was left behind"


A, B, C = (f"laya_qual/suite/test_{c}.py::test_{c}" for c in "abc")


@pytest.mark.laya_claim("report.mutants.judged")
@pytest.mark.parametrize("answers, through, status", [
    ([("failed", B), ("passed", None), ("failed", B)], [A, B], "killed"),        # reproduced: through B
    ([("failed", B), ("failed", B), ("failed", B)], [A, B], "survived"),        # red without the mutant too
    ([("failed", B), ("passed", None), ("passed", None)], [A, B], "survived"),  # the mutant's failure did not return
    ([("timeout", None), ("passed", None), ("timeout", None)], [A, B, C], "timeout"),  # names no test: all of them
    ([("failed", "x.py::crashed"), ("passed", None), ("failed", A)], [A, B, C], "killed"),
])
def test_the_boundaries_of_a_reproduced_kill(engine, monkeypatch, answers, through, status):
    """The covering stage of A, B, C (the suite stage after it, when the mutant survives it, passes)."""
    [m] = [m for m in mutants_of(engine) if not m.at_import][:1]
    engine.workers, engine.timeout, engine.confirm = 0, None, True
    engine.suite = Baseline({SOURCE: {m.line: {A, B, C}}}, {}, 10.0)
    shutil.rmtree(engine.tmp / "m0", ignore_errors=True)
    suite = scripted(engine, monkeypatch, m, [*answers, ("passed", None)])
    record = engine.run_mutant(m, 0)
    assert [(c["copy"], c["tests"]) for c in suite.calls[:3]] == [
        ("mutated", [A, B, C]), ("unmutated", through), ("mutated", through)]
    assert record["status"] == status and len(suite.calls) == (3 if status != "survived" else 4)
    assert record["stages"][0]["reproduction"]["reproduced"] is (status != "survived")


@pytest.mark.laya_claim("report.mutants.judged")
@pytest.mark.parametrize("covering_s, suite_s, workers, budget", [
    (30.0, 45.0, 0, 300.0),    # exactly 30 s is still serial; 4 * 45 + 120 is exactly the floor of 300
    (30.5, 45.5, 2, 302.0),    # just over 30 s goes to the workers; the suite's budget rises above the floor
    (0.0, 0.0, 0, 300.0),      # an untimed covering test: serial, the floor
])
def test_covering_tests_go_to_the_workers_after_30_s_with_their_own_budget(
        engine, monkeypatch, covering_s, suite_s, workers, budget):
    engine.workers, engine.timeout, engine.confirm = 2, None, True
    shutil.rmtree(engine.tmp / "m0", ignore_errors=True)
    [m] = [m for m in mutants_of(engine) if not m.at_import][:1]
    test = "laya_qual/suite/test_a.py::test_a"
    suite = scripted(engine, monkeypatch, m, None)
    engine.suite = Baseline({SOURCE: {m.line: {test}}}, {test: covering_s} if covering_s else {}, suite_s)
    assert engine.run_mutant(m, 0)["status"] == "survived"
    cover, whole = suite.calls
    assert (cover["workers"], cover["timeout"]) == (workers, max(300.0, 4 * covering_s + 120))
    assert whole["timeout"] == budget and whole["tests"] == ([test] if covering_s else [])


@pytest.mark.laya_claim("report.mutants.judged")
@settings(deadline=None)
@given(n=st.integers(1, 6), started=st.sets(st.integers(0, 5)), minutes=st.sampled_from([0.5, 1.0, 2.5]))
@example(n=3, started={0, 1, 2}, minutes=1.0).via("boundary: every drawn mutant started, the box not closed")
@example(n=3, started={1, 2}, minutes=1.0).via("boundary: the first drawn never started, so nothing is measured")
def test_a_time_box_keeps_the_first_drawn_mutants_before_the_first_that_never_started(n, started, minutes):
    """docs/mutation.md, --time-box: the measured ones are the first K of the draw; what follows
    a gap is dropped by position alone; a box that closed before any started is an error."""
    run = SampleRun(module_mutants("def f(x):\n    return x < 3 and x > -3 or x == 9\n", "laya/m.py")[:n],
                    population_size=n, seed=1, hypothesis_seed=7, workers=0, equivalents={}, tests_dir=None,
                    timeout=None, progress=lambda line: None, time_box=minutes * 60, jobs=1)
    run.baseline = lambda: {"seconds": 1.0}
    run.run_mutant = lambda m, index: ({"id": m.id, "key": m.key, "part": "runtime", "status": "killed",
                                        "killedBy": "suite", "executed": True, "executedByTests": False,
                                        "coveringTests": 1, "stages": [], "seconds": 1.0}
                                       if index in started else None)  # None: the box was closed when it came up
    try:
        k = next((i for i in range(n) if i not in started), n)
        if k == 0:
            with pytest.raises(MutationError, match=rf"time box \({minutes:g} minutes\)"):
                run.run()
            return
        result = run.run()
    finally:
        run.close()
    assert result["sample"] == k and [r["key"] for r in result["mutants"]] == [m.key for m in run.mutants[:k]]
    assert result["timeBox"] == {"minutes": minutes, "requestedSample": n, "closed": k < n}
    assert result["summary"]["killed"] == k


@pytest.mark.laya_claim("report.mutants.judged")
def test_an_import_time_mutant_meets_the_whole_suite_even_without_confirmation(engine, monkeypatch):
    """docs/mutation.md: a mutant of what runs on import always goes to the whole suite."""
    m = next(m for m in mutants_of(engine) if m.at_import)
    engine.workers, engine.timeout, engine.confirm = 0, None, False
    engine.suite = Baseline({SOURCE: {m.line: {A}}}, {A: 1.0}, 10.0)
    shutil.rmtree(engine.tmp / "m0", ignore_errors=True)
    suite = scripted(engine, monkeypatch, m, None)
    assert [s["stage"] for s in engine.run_mutant(m, 0)["stages"]] == ["covering tests", "suite"]
    assert [c["tests"] for c in suite.calls] == [[A], [A]]
