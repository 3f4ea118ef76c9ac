"""`laya-qual run --plan`: the listing `--laya-plan` writes (what would run; nothing runs)
and the table and estimate printed from it, against a reference written from
docs/report-format.md ("Planning a run")."""

from __future__ import annotations

import json
import os
import re

import hypothesis.core
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.release.plan import render

pytest_plugins = ("pytester",)

LEVELS = {"base-kind": "once per base and head kind", "artifact": "every artifact"}
ROW = re.compile(r"(?P<name>.+?)\s+(?P<claims>\d+)\s+(?P<tests>\d+)\s+(?P<seconds>\d+)s(  \((?P<untimed>\d+) never timed\))?")


def group(test: dict) -> tuple[tuple, str]:
    """(order, row name): once per run, the base, each artifact by its number (its kind-level
    tests, then its own), every head at once, the benchmarks."""
    if test["benchmark"]:
        return (4,), "benchmarks (one runner, in-process)"
    if test["artifact"] is None:
        return (0,), "once per run"
    if test["artifact"] == "every head":
        return (3,), "every head at once"
    if test["level"] == "base":
        return (1,), f"{test['artifact']} (once per base)"
    number = int(test["artifact"].removeprefix("artifact").split("-")[0])
    return (2, number, list(LEVELS).index(test["level"])), f"{test['artifact']} ({LEVELS[test['level']]})"


def reference_plan(tests: list[dict], durations: dict[str, float], workers: int) -> tuple[list[tuple], str]:
    timed = sorted(durations[t["test"]] for t in tests if t["test"] in durations)
    middle = len(timed) // 2
    untimed = (timed[middle] if len(timed) % 2 else (timed[middle - 1] + timed[middle]) / 2) if timed else 1.0
    rows: dict[tuple, list[dict]] = {}
    for t in tests:
        rows.setdefault(group(t), []).append(t)
    table = []
    for (order, name) in sorted(rows):
        members = rows[(order, name)]
        seconds = sum(durations.get(t["test"], untimed) for t in members)
        never = sum(t["test"] not in durations for t in members)
        table.append((name, len({c for t in members for c in t["claims"]}), len(members), f"{seconds:.0f}",
                      str(never) if never and durations else None))
    bench = sum(durations.get(t["test"], untimed) for t in tests if t["benchmark"])
    suite = sum(durations.get(t["test"], untimed) for t in tests) - bench
    claims = len({c for t in tests for c in t["claims"]})
    total = (f"total: {claims} claims, {len(tests)} tests, {suite + bench:.0f}s of test time; about "
             f"{(suite / workers + bench) / 60:.1f} min wall on {workers} worker(s) plus start-up")
    return table, total


@st.composite
def listings(draw):
    """A --laya-plan listing: tests of the suite, of the base, of numbered artifacts at each
    level, of every head at once and benchmarks, with a few claim ids."""
    count = draw(st.integers(0, 30))
    tests = []
    for i in range(count):
        kind = draw(st.sampled_from(["suite", "base", "artifact", "every", "bench"]))
        number = draw(st.integers(0, 11))
        artifact = f"artifact{number}-{'hk'[number % 2]}"  # an artifact id: its number, then its name
        level = draw(st.sampled_from(list(LEVELS)))
        tests.append({"test": f"s.py::t{i}", "claims": draw(st.lists(st.sampled_from("abcde"), min_size=1,
                                                                      max_size=2, unique=True)),
                      "artifact": {"suite": None, "base": "artifact0-h", "artifact": artifact, "every": "every head",
                                   "bench": "every head"}[kind],
                      "level": {"suite": None, "base": "base", "artifact": level}.get(kind),
                      "benchmark": kind == "bench"})
    durations = {t["test"]: draw(st.integers(0, 600)) / 2 for t in tests if draw(st.booleans())}
    return tests, durations


@settings(max_examples=60, deadline=None)
@given(listing=listings(), workers=st.integers(1, 8))
@example(listing=([{"test": "s.py::t0", "claims": ["a"], "artifact": "artifact10-h", "level": "artifact",
                    "benchmark": False},
                   {"test": "s.py::t1", "claims": ["a"], "artifact": "artifact9-h", "level": "artifact",
                    "benchmark": False}], {}), workers=2)  # artifact10 after artifact9
@pytest.mark.laya_claim("release.plan")
def test_the_plan_table_and_estimate_are_as_documented(listing, workers):
    tests, durations = listing
    text = render(tests, durations, workers, "durations.json" if durations else None)
    lines = text.splitlines()
    assert lines[0].split() == ["group", "claims", "tests", "estimate"]
    table, total = reference_plan(tests, durations, workers)
    rows = [ROW.fullmatch(line) for line in lines[2:2 + len(table)]]
    assert [(m["name"], int(m["claims"]), int(m["tests"]), m["seconds"], m["untimed"]) for m in rows] == table
    assert lines[2 + len(table):] == ["", total, "estimates from durations.json" if durations else
                                      "no recorded durations yet (every test counted as 1 s): an unsharded "
                                      "`laya-qual run` records them"]


PROJECT = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.parametrize("n", range(3))
def test_param(n):
    open(f"ran-{n}", "w").close()

@pytest.mark.laya_claim("report.signature")
@pytest.mark.laya_claim("report.subjects")
def test_two_claims():
    open("ran", "w").close()

def test_unclaimed():
    pass
"""


@pytest.mark.laya_claim("release.plan")
def test_the_listing_names_every_claimed_test_and_nothing_runs(pytester, monkeypatch):
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(var)  # the inner run is a run of its own, not this worker's
    monkeypatch.setattr(hypothesis.core, "global_force_seed", hypothesis.core.global_force_seed)
    pytester.makepyfile(test_project=PROJECT)
    pytester.runpytest_inprocess("-p", "laya_qual", "--laya-plan", "plan.json", "-p", "no:randomly",
                                 "-p", "no:cacheprovider")
    listed = json.loads((pytester.path / "plan.json").read_text())["tests"]
    assert sorted((t["test"], sorted(t["claims"]), t["artifact"], t["benchmark"]) for t in listed) == sorted(
        [(f"test_project.py::test_param[{n}]", ["report.verdicts"], None, False) for n in range(3)]
        + [("test_project.py::test_two_claims", ["report.signature", "report.subjects"], None, False)])
    assert not list(pytester.path.glob("ran*"))  # nothing ran
    assert render(listed, {}, 2, None).splitlines()[2].split() == ["once", "per", "run", "3", "4", "4s"]
