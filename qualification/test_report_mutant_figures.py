"""report.figures.mutants and report.figures.kill-rate: the sampled-mutant figure made from a
run's records, and the figure a report signs from a results file (--laya-kill-rate), against
a reference written from docs/mutation.md ("Two figures, never one", "A kill must
reproduce", "Equivalents, decided before the outcome")."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from scipy.stats import beta

from laya_qual.measure.mutant_run import FORMAT, summarize
from laya_qual.measure.suite_figures import kill_rate
from laya_qual.synth import mutant_records

KILLS = ("killed", "timeout", "wrongly-equivalent")  # a wrong equivalence is a kill
SUITE, WITH_TESTS = {"suite"}, {"suite", "tests/"}


def lower_bound(k: int, n: int) -> float | None:
    return None if n == 0 else 0.0 if k == 0 else float(beta.ppf(0.05, k, n - k + 1))


def reference_figure(records: list[dict], killers: set[str]) -> dict:
    """K of N (equivalents out of N), overall and per part, each with its lower bound."""
    def one(rs):
        k = sum(r["status"] in KILLS and r["killedBy"] in killers for r in rs)
        return {"killed": k, "total": len(rs), "lowerBound95": lower_bound(k, len(rs))}

    counted = [r for r in records if r["status"] != "equivalent"]
    return {**one(counted), "parts": {p: one([r for r in counted if r["part"] == p]) for p in ("runtime", "harness")}}


def comparable(figure: dict) -> dict:
    def one(f):
        return {"killed": f["killed"], "total": f["total"], "lowerBound95": f["lowerBound95"]}

    return {**one(figure), "parts": {p: one(f) for p, f in figure["parts"].items()}}


def approx(figure: dict) -> dict:
    def one(f):
        return {**f, "lowerBound95": None if f["lowerBound95"] is None else pytest.approx(f["lowerBound95"], abs=1e-6)}

    return {**one(figure), "parts": {p: one(f) for p, f in figure["parts"].items()}}


EDGES = [
    [],
    [{"key": "a", "part": "runtime", "status": "killed", "killedBy": "tests/", "stages": []}],
    [{"key": "a", "part": "harness", "status": "wrongly-equivalent", "killedBy": "suite", "stages": []},
     {"key": "b", "part": "harness", "status": "equivalent", "killedBy": None, "stages": []}],
    [{"key": "a", "part": "runtime", "status": "survived", "killedBy": None, "lateReason": "late", "executed": False,
      "executedByTests": False, "stages": [{"reproduction": {"reproduced": False}}]}],
]


@pytest.mark.laya_claim("report.figures.mutants")
@settings(max_examples=60)
@given(records=mutant_records())
@example(records=EDGES[0]).via("no mutant counted")
@example(records=EDGES[1]).via("a kill by tests/ only: not the headline's")
@example(records=EDGES[2]).via("a wrong equivalence counts as killed; a filed one leaves N")
@example(records=EDGES[3]).via("a late reason stays survived; a failure that did not reproduce is listed")
def test_the_figure_counts_the_shipped_suites_kills_and_sets_the_rest_apart(records):
    s = summarize(records)
    counted = [r for r in records if r["status"] != "equivalent"]
    assert approx(reference_figure(records, SUITE)) == comparable(s)
    assert approx(reference_figure(records, WITH_TESTS)) == comparable(s["withProjectTests"])
    assert s["equivalent"] == len(records) - len(counted)
    assert s["survivors"] == sorted(r["key"] for r in counted if r["status"] == "survived")
    assert s["killedByTestsOnly"] == sorted(r["key"] for r in counted if r["status"] in KILLS and r["killedBy"] == "tests/")
    assert s["lateEquivalents"] == sorted(r["key"] for r in counted if "lateReason" in r)
    assert s["notReproduced"] == sorted(r["key"] for r in records
                                        if any(not st["reproduction"]["reproduced"] for st in r["stages"]))
    assert s["wronglyEquivalent"] == sorted(r["key"] for r in records if r["status"] == "wrongly-equivalent")


RUNTIME, HARNESS = "ab" * 32, {"laya_qual": "cd" * 32}


def results_file(tmp_path, records: list[dict], **changes):
    """A whole, finished results file of a sample measured on this code (RUNTIME, HARNESS)."""
    for r in records:
        if r["status"] == "equivalent":
            r["reason"] = "filed before the draw"
    result = {"format": FORMAT, "code": {"runtime": RUNTIME, "harness": HARNESS}, "scope": None, "complete": True,
              "population": 1000, "sample": len(records), "sampleSeed": 7, "hypothesisSeed": 5, "projectTests": True,
              "mutants": records, "summary": summarize(records), **changes}
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(result))
    return path


@pytest.mark.laya_claim("report.figures.kill-rate")
@settings(max_examples=20)
@given(records=mutant_records(12).filter(lambda rs: all(r["status"] != "wrongly-equivalent" for r in rs)))
def test_the_signed_figure_is_the_files_shipped_suite_figure(tmp_path_factory, records):
    path = results_file(tmp_path_factory.mktemp("kill-rate"), records)
    kind, figure = kill_rate(path, runtime=RUNTIME, harness=HARNESS)
    headline, second = reference_figure(records, SUITE), reference_figure(records, WITH_TESTS)
    assert kind == "mutantSample"
    assert (figure["killed"], figure["total"]) == (headline["killed"], headline["total"])
    assert figure["lowerBound"] == (None if headline["lowerBound95"] is None
                                    else pytest.approx(headline["lowerBound95"], abs=1e-6))
    assert {p: (f["killed"], f["total"]) for p, f in figure["parts"].items()} == {
        p: (f["killed"], f["total"]) for p, f in headline["parts"].items()}
    assert (figure["withProjectTests"]["killed"], figure["withProjectTests"]["total"]) == (second["killed"], second["total"])
    assert figure["equivalents"] == {r["key"]: r["reason"] for r in records if r["status"] == "equivalent"}
    assert (figure["population"], figure["sample"], figure["sampleSeed"]) == (1000, len(records), 7)


SAMPLE = [{"key": "k", "part": "runtime", "status": "killed", "killedBy": "suite", "stages": []}]


@pytest.mark.laya_claim("report.figures.kill-rate")
@pytest.mark.parametrize("case, message", [
    ("one figure only", "does not separate the shipped suite's kills"),
    ("a wrong equivalence", "the suite kills mutants filed as equivalent"),
    ("partial", "a partial or unfinished run"),
    ("unfinished", "a partial or unfinished run"),
    ("other runtime", "measured on runtime dirHash"),
    ("other harness", "measured with suite/harness"),
    ("not a results file", "not a laya-qual mutate results file"),
])
def test_a_file_that_is_no_figure_of_this_run_is_refused(tmp_path, case, message):
    records = [dict(r) for r in SAMPLE]
    if case == "a wrong equivalence":
        records[0]["status"] = "wrongly-equivalent"
    changes = {"partial": {"scope": ["request.validation"]}, "unfinished": {"complete": False},
               "other runtime": {"code": {"runtime": "ef" * 32, "harness": HARNESS}},
               "other harness": {"code": {"runtime": RUNTIME, "harness": {"laya_qual": "ef" * 32}}},
               "not a results file": {"format": "laya-qual-coverage-v1"}}.get(case, {})
    path = results_file(tmp_path, records, **changes)
    if case == "one figure only":
        result = json.loads(path.read_text())
        del result["summary"]["withProjectTests"]
        path.write_text(json.dumps(result))
    with pytest.raises(pytest.UsageError, match=message) as refused:
        kill_rate(path, runtime=RUNTIME, harness=HARNESS)
    assert str(path) in str(refused.value)
