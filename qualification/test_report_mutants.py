"""The lower bound a sampled mutation run signs into a report, against scipy's Beta
quantile (the Clopper-Pearson bound written as a Beta quantile, not as the binomial
tail the harness bisects)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy.stats import beta

from laya_qual.measure.mutant_run import FORMAT, clopper_pearson_lower


def reference_lower(killed: int, total: int) -> float:
    return 0.0 if killed == 0 else float(beta.ppf(0.05, killed, total - killed + 1))


@pytest.mark.laya_claim("report.mutants.bound")
@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@example((0, 1)).via("no kill at all")
@example((1, 1)).via("one of one")
@example((300, 300)).via("every mutant of the goal's sample killed")
@example((270, 300)).via("the goal's rate exactly")
@example((299, 300)).via("one survivor")
def test_the_lower_bound_is_the_clopper_pearson_bound(counts):
    killed, total = counts
    assert clopper_pearson_lower(killed, total) == pytest.approx(reference_lower(killed, total), abs=1e-9)


@pytest.mark.laya_claim("report.mutants.bound")
@pytest.mark.parametrize("killed, total", [(-1, 3), (4, 3), (0, 0)])
def test_counts_that_are_no_sample_are_refused(killed, total):
    with pytest.raises(ValueError, match=f"killed {killed} of {total}"):
        clopper_pearson_lower(killed, total)


@pytest.mark.laya_claim("report.mutants.bound")
def test_the_results_file_of_this_run_carries_the_bound_of_its_counts(pytestconfig):
    """The file the run signs (--laya-kill-rate) states K, N and the bound of exactly those."""
    files = [json.loads(open(p).read()) for p in pytestconfig.getoption("laya_kill_rate", None) or []]
    samples = [f for f in files if f.get("format") == FORMAT]
    if not samples:
        pytest.skip("no sampled mutation results given (--laya-kill-rate)")
    for result in samples:
        s = result["summary"]
        counted = [r for r in result["mutants"] if r["status"] != "equivalent"]
        assert s["total"] == len(counted) == result["sample"] - s["equivalent"]
        assert s.get("notExecuted", 0) == sum(
            r["status"] == "survived" and r.get("executed") is False and not r.get("executedByTests")
            for r in result["mutants"])
        # The headline is the shipped suite's own kills; the second figure adds the project's tests/.
        for figure, killers in ((s, {"suite"}), (s["withProjectTests"], {"suite", "tests/"})):
            for part in (None, "runtime", "harness"):
                mine = [r for r in counted if part is None or r["part"] == part]
                killed = [r for r in mine if r["status"] in ("killed", "timeout") and r["killedBy"] in killers]
                f = figure if part is None else figure["parts"][part]
                assert (f["killed"], f["total"]) == (len(killed), len(mine)), (sorted(killers), part)
                if mine:
                    assert f["lowerBound95"] == pytest.approx(reference_lower(len(killed), len(mine)), abs=1e-6)
        assert s["killedByTestsOnly"] == sorted(r["key"] for r in counted if r["killedBy"] == "tests/")
