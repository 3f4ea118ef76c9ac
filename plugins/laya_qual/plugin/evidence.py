"""Evidence on test reports: every test process (the controller in-process, or each
xdist worker) attaches plain evidence to its reports, and the controller reads it
back by name.

Nothing but test reports crosses the xdist boundary: a claimed test's claim ids,
Hypothesis example counts and benchmark figures travel as named ``user_properties``,
so a run with ``-n 0`` and one with ``-n 2`` build the same claims from the same data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

CLAIM_PROPERTY = "laya_claims"
TEST_PROPERTY = "laya_test"
HYPOTHESIS_PROPERTY = "laya_hypothesis"
BENCHMARK_PROPERTY = "laya_benchmark"
_HYPOTHESIS_STATS = pytest.StashKey[dict]()


def collects_evidence(config: pytest.Config) -> bool:
    """This run writes a report or an evidence file, so its tests carry evidence."""
    return bool(config.getoption("laya_report", None) or config.getoption("laya_evidence_out", None))


def attach_claims(item: pytest.Item, ids: list[str], test: str) -> None:
    """Collection time: every phase report of ``item`` carries the claim ids it vouches
    for and the id the report names it by (worked out here, where the item's file is
    known: a report only has its node id and location)."""
    item.user_properties.append((CLAIM_PROPERTY, ids))
    item.user_properties.append((TEST_PROPERTY, test))


@dataclass(frozen=True)
class Evidence:
    """What one phase report of a claimed test carries, read back by property name."""

    test: str
    claims: list[str]
    hypothesis: dict | None
    benchmark: dict | None

    @classmethod
    def of(cls, report: pytest.TestReport) -> Evidence | None:
        """None for a report of a test that vouches for no claim."""
        properties = {name: value for name, value in report.user_properties}
        if not properties.get(CLAIM_PROPERTY):
            return None
        return cls(test=properties[TEST_PROPERTY], claims=list(properties[CLAIM_PROPERTY]),
                   hypothesis=properties.get(HYPOTHESIS_PROPERTY),
                   benchmark=properties.get(BENCHMARK_PROPERTY))


def _hypothesis_counts(stats: dict) -> dict:
    cases = [case for key, phase in stats.items() if key.endswith("-phase")
             for case in phase.get("test-cases", [])]
    statuses = [case.get("status") for case in cases]
    return {"examples": len(cases), "valid": statuses.count("valid"),
            "failing": statuses.count("interesting"),
            "invalid": statuses.count("invalid") + statuses.count("overrun"),
            "stoppedBecause": stats.get("stopped-because")}


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    """Innermost wrapper, so Hypothesis' own statistics callback (installed by its
    outer wrapper) is chained rather than replaced."""
    if not collects_evidence(item.config):
        yield
        return
    from hypothesis.statistics import collector

    previous = collector.value

    def note(stats: dict) -> None:
        item.stash[_HYPOTHESIS_STATS] = _hypothesis_counts(stats)
        if previous is not None:
            previous(stats)

    with collector.with_value(note):
        yield


def _reproduction(item: pytest.Item) -> dict:
    settings = getattr(item.obj, "_hypothesis_internal_use_settings", None)
    seed = getattr(item.obj, "_hypothesis_internal_use_seed", None)
    if seed is None:
        seed = item.config.getoption("hypothesis_seed", None)
    return {"seed": None if seed is None else str(seed),
            "derandomize": bool(getattr(settings, "derandomize", False))}


def _plain(value):
    return json.loads(json.dumps(value, default=str))


def _benchmark(item: pytest.Item) -> dict | None:
    fixture = getattr(item, "funcargs", {}).get("benchmark")
    if fixture is None or not hasattr(fixture, "disabled"):
        return None
    meta = getattr(fixture, "stats", None)
    if fixture.disabled or not meta:
        return {"measured": False,
                "reason": "benchmarking disabled (xdist or --benchmark-disable)" if fixture.disabled
                else "the benchmark fixture was not run"}
    s = meta.stats
    return {"measured": True, "name": fixture.name, "unit": "seconds", "median": s.median,
            "mean": s.mean, "min": s.min, "max": s.max, "stddev": s.stddev, "iqr": s.iqr, "rounds": s.rounds,
            "iterations": meta.iterations, "extraInfo": _plain(fixture.extra_info)}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """The call report carries the test's Hypothesis counts and benchmark figures."""
    report = (yield).get_result()
    if call.when != "call" or not collects_evidence(item.config):
        return
    stats = item.stash.get(_HYPOTHESIS_STATS, None)
    if stats is not None:
        report.user_properties.append((HYPOTHESIS_PROPERTY, {**stats, **_reproduction(item)}))
    bench = _benchmark(item)
    if bench is not None:
        report.user_properties.append((BENCHMARK_PROPERTY, bench))
