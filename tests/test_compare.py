"""`laya-qual compare OLD NEW` on real signed bundles that differ in one thing at a time,
its --fail-on thresholds on both sides of their limits, its exit codes; and the
predicate's `heads` field as a real run writes it and `verify` checks it."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from laya_qual.claims import CLAIMS
from laya_qual.cli import main
from laya_qual.report.model import canonical
from laya_qual.report.signing import keygen, load_signer, write_bundle
from laya_qual.subjects import SubjectError, artifact_subject, heads
from laya_qual.synth import write_artifact
from laya_qual.synth.reports import BATCH, CLAIM_IDS, HEAD, code_coverage, trained_task
from laya_qual.synth.reports import report_spec as spec
from laya_qual.synth.reports import signed_report as build
from laya_qual.report.verify import read_statements


def reference_dir_hash(root: Path) -> str:
    """in-toto dirHash written out here (sha256sum lines, bytewise-sorted paths), not laya_qual's."""
    files = sorted((p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()), key=str.encode)
    lines = "".join(f"{hashlib.sha256((root / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    keygen(d / "k")
    keygen(d / "other")
    return load_signer(d / "k"), d / "k.pub", load_signer(d / "other"), d / "other.pub"


@pytest.fixture
def pair(tmp_path, key):
    """pair(old_spec, new_spec) -> (OLD bundle, NEW bundle), signed by the module key; each
    call writes to directories of its own."""
    made = []

    def make(old: dict, new: dict) -> tuple[Path, Path]:
        made.append(None)
        root = tmp_path / f"pair{len(made)}"
        return build(root / "old", old, key[0]), build(root / "new", new, key[0])
    return make


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def compared(old: Path, new: Path, key, *extra) -> dict:
    result = cli("compare", old, new, "--public-key", key[1], "--json", *extra)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert result.stdout == json.dumps(report, indent=1, sort_keys=True) + "\n"  # as documented: diffable
    return report


def changes(report: dict) -> list[tuple]:
    return [(r["section"], r["item"], r.get("task"), r["figure"], r["old"], r["new"], r.get("assessment"))
            for r in report["rows"] if r["changed"]]


def head_hashes(old: Path, new: Path) -> tuple:
    return ("subjects", HEAD, None, "dirHash", reference_dir_hash(old.parent / "head-a"),
            reference_dir_hash(new.parent / "head-a"), None)


# --- one change at a time, named exactly --------------------------------------------------

def test_equal_reports_have_no_differences(pair, key):
    old, new = pair(spec(), spec())
    report = compared(old, new, key)
    assert changes(report) == [] and report["sameMachine"] is True
    assert all(r["assessment"] == "same" for r in report["rows"] if "assessment" in r)
    figures = {r["figure"]: r["old"] for r in report["rows"] if r["section"] == "heads" and r.get("task") == "route"}
    assert figures == {"temperature": 1.5, "calibration.outcome": "fitted", "act_threshold": 0.8,
                       "escalate_threshold": 1.0, "certification.target_risk": 0.1, "certification.delta": 0.05,
                       "certification.coverage": 0.75, "certification.acted": 30, "certification.errors": 1,
                       "certification.risk_upper_bound": 0.09, "certification.certified": True,
                       "calibration.ece_before": 0.2, "calibration.ece_after": 0.05, "calibration.nll_before": 0.9,
                       "calibration.nll_after": 0.7}
    harness = {r["figure"]: r["old"] for r in report["rows"] if (r["section"], r["item"]) == ("suite", "harness")}
    assert harness == {"version": version("laya-qual"), "laya_qual": "cd" * 32}  # the suite's identity
    bench = {r["figure"]: (r["old"], r["claims"]) for r in report["rows"] if r["section"] == "benchmarks"}
    assert bench == {"median": (0.5, ["bench.serve.batch"]), "batched_over_one_by_one": (4.0, ["bench.serve.batch"]),
                     "median_batched_s": (0.25, ["bench.serve.batch"]), "requests": (256, ["bench.serve.batch"])}


def test_a_verdict_change(pair, key):
    old, new = pair(spec(), spec(outcomes={**spec()["outcomes"], "report.signature": "failed"}))
    assert changes(compared(old, new, key)) == [
        ("result", "report", None, "result", "PASSED", "FAILED", "worse"),
        ("claims", "report.signature", None, "verdict", "passed", "failed", "worse")]


def catalogue_digest(ids) -> str:
    return hashlib.sha256(json.dumps([[c, CLAIMS[c].area, CLAIMS[c].statement] for c in ids],
                                     separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def test_a_claim_added_and_one_removed_change_the_catalogue(pair, key):
    renewed = (*CLAIM_IDS[:2], "bench.serve.batch", "report.subjects")
    old, new = pair(spec(), spec(catalogue=renewed, outcomes=dict.fromkeys(CLAIM_IDS[:2], "passed")))
    assert changes(compared(old, new, key)) == [
        ("result", "report", None, "result", "PASSED", "WARNED", "worse"),
        ("claims", "report.interop", None, "verdict", "passed", None, "worse"),
        ("claims", "report.subjects", None, "verdict", None, "not evaluated", None),
        ("suite", "claim catalogue", None, "sha256", catalogue_digest(CLAIM_IDS), catalogue_digest(renewed), None)]


def test_a_task_coverage_change(pair, key):
    old, new = pair(spec(), spec(tasks=[trained_task(**{"certification.coverage": 0.5, "certification.acted": 20})]))
    assert changes(compared(old, new, key)) == [
        head_hashes(old, new),
        ("heads", HEAD, "route", "certification.coverage", 0.75, 0.5, "worse"),
        ("heads", HEAD, "route", "certification.acted", 30, 20, None)]


def test_a_temperature_at_its_bound(pair, key):
    at_bound = trained_task(**{"temperature": 10.0, "certification.temperature": 10.0,
                               "calibration.outcome": "at_upper_bound"})
    old, new = pair(spec(), spec(tasks=[at_bound]))
    assert changes(compared(old, new, key)) == [
        head_hashes(old, new),
        ("heads", HEAD, "route", "temperature", 1.5, 10.0, None),
        ("heads", HEAD, "route", "calibration.outcome", "fitted", "at_upper_bound", None)]


def test_a_benchmark_median(pair, key):
    old, new = pair(spec(), spec(median=0.625))
    report = compared(old, new, key)
    assert changes(report) == [("benchmarks", BATCH, None, "median", 0.5, 0.625, "worse")]
    row = next(r for r in report["rows"] if r["changed"])
    assert (row["change"], row["relative"], row["better"], row["claims"]) == (0.125, 0.25, "lower",
                                                                                ["bench.serve.batch"])


def test_a_subjects_dir_hash(pair, key):
    old, new = pair(spec(), spec(weights=b"v" * 64))
    assert changes(compared(old, new, key)) == [head_hashes(old, new)]
    # shown by its first 16 hex digits (docs/laya-qual-cli.md), the full digests stay in --json
    before, after = head_hashes(old, new)[4:6]
    shown = [line.split() for line in cli("compare", old, new, "--public-key", key[1]).output.splitlines()
             if before[:8] in line]
    assert shown and shown[0][-3:] == [before[:16], "->", after[:16]], shown


def test_another_machine_is_not_called_a_regression_unless_asked(pair, key):
    old, new = pair(spec(), spec(cpu="Intel Xeon 8480", extra={**spec()["extra"], "batched_over_one_by_one": 3.0}))
    report = compared(old, new, key)
    assert report["sameMachine"] is False and report["acrossMachines"] is False
    assert changes(report) == [
        ("machine", "machine", None, "cpu", "AMD EPYC 9654", "Intel Xeon 8480", None),
        ("benchmarks", BATCH, None, "batched_over_one_by_one", 4.0, 3.0, "not comparable")]
    text = cli("compare", old, new, "--public-key", key[1]).output
    assert "DIFFERENT: OLD AMD EPYC 9654, 2 cores, no GPU, device cpu; NEW Intel Xeon 8480" in text
    assert "WORSE (0;" in text
    across = compared(old, new, key, "--across-machines")
    assert changes(across)[1][-1] == "worse" and across["acrossMachines"] is True
    text = cli("compare", old, new, "--public-key", key[1], "--across-machines").output
    assert "compared anyway (--across-machines)" in text and "WORSE (1;" in text


def test_a_gpu_is_part_of_the_machine(pair, key):
    old, new = pair(spec(), spec(gpu={"name": "NVIDIA H200", "count": 1, "cuda": "12.8"}))
    report = compared(old, new, key)
    assert changes(report) == [("machine", "machine", None, "gpu", None, "1x NVIDIA H200", None)]
    assert report["sameMachine"] is False


def kill_rate(killed: int) -> dict:
    return {"killed": killed, "total": 100, "catalogueDigest": "ee" * 32, "hypothesisSeeds": [0], "survivors": [],
            "probabilistic": {}, "timeouts": [], "survivorsConfirmedOnWholeSuite": True}


def test_kill_rate_compared(pair, key):
    old, new = pair(spec(kill_rate=kill_rate(98)), spec(kill_rate=kill_rate(95)))
    assert changes(compared(old, new, key)) == [("suite", "killRate", None, "killed", 98, 95, None),
                                                ("suite", "killRate", None, "rate", 0.98, 0.95, "worse")]


def test_each_coverage_says_which_coverage(pair, key):
    """Code coverage (the runtime's branches the suite executes) and a task's certification
    coverage are different figures: every row and line names its kind."""
    old, new = pair(spec(code_coverage=code_coverage(800, 816)),
                    spec(code_coverage=code_coverage(790, 816),
                         tasks=[trained_task(**{"certification.coverage": 0.5})]))
    assert [c for c in changes(compared(old, new, key)) if c[0] != "subjects"] == [
        ("suite", "code coverage", None, "packages.laya.branches.covered", 800, 790, None),
        ("suite", "code coverage", None, "laya.branches.fraction", 800 / 816, 790 / 816, "worse"),
        ("heads", HEAD, "route", "certification.coverage", 0.75, 0.5, "worse")]
    text = cli("compare", old, new, "--public-key", key[1]).output
    assert "\n    code coverage\n      " in text and "\n    coverage\n" not in text
    assert f"{HEAD} task route: certification.coverage  0.75 -> 0.5" in text


def test_seeds_and_settings_are_changed_not_measured(pair, key):
    """A seed or the machine's cores changing is a changed setting: no difference, no percentage."""
    old, new = pair(spec(kill_rate={**kill_rate(98), "sampleSeed": 9292}, cores=2),
                    spec(kill_rate={**kill_rate(98), "sampleSeed": 8686}, cores=4))
    report = compared(old, new, key)
    settings = [r for r in report["rows"] if r["figure"] in ("sampleSeed", "cores") and r["changed"]]
    assert [(r["figure"], r["old"], r["new"]) for r in settings] == [("cores", 2, 4), ("sampleSeed", 9292, 8686)] \
        or sorted((r["figure"], r["old"], r["new"]) for r in settings) == [("cores", 2, 4), ("sampleSeed", 9292, 8686)]
    assert all("change" not in r and "relative" not in r for r in settings)
    text = cli("compare", old, new, "--public-key", key[1]).output
    [line] = [line for line in text.splitlines() if "sampleSeed" in line]
    assert "9292" in line and "8686" in line and "%" not in line, line


def test_a_suite_figure_of_no_mutants_has_no_rate():
    """A rate row needs numbers on both sides of the division: a figure of total 0, or one
    whose killed count is missing, gets its numbers compared but no rate (and no error)."""
    from laya_qual.release.compare import Key, facts

    def suite_facts(figure: dict) -> dict:
        environment = {"cpu": {"model": "AMD EPYC 9654", "logical_cores": 2}}
        laya = {"subject": [], "predicate": {"result": "PASSED", "claims": [], "environment": environment,
                                              "harness": {"version": "1", "dirHash": {}}, "suite": {"killRate": figure},
                                              "benchmarks": []}}
        return {k.figure: v for k, v in facts(laya)[0].items() if (k.section, k.item) == ("suite", "killRate")}

    assert suite_facts({"killed": 3, "total": 4}) == {"killed": 3, "total": 4, "rate": 0.75}
    assert suite_facts({"killed": 0, "total": 0}) == {"killed": 0, "total": 0}
    assert suite_facts({"total": 4}) == {"total": 4}
    assert suite_facts({"killed": 3, "total": None}) == suite_facts({"killed": 3}) == {"killed": 3}
    assert suite_facts({"killed": 1, "total": True}) == {"killed": 1}  # a flag is not a count


# --- the text and markdown views ----------------------------------------------------------

def test_views_show_old_new_and_change(pair, key):
    old, new = pair(spec(), spec(median=0.625, outcomes={**spec()["outcomes"], "report.signature": "failed"}))
    text = cli("compare", old, new, "--public-key", key[1]).output
    assert "result   PASSED -> FAILED" in text and "report.signature  passed -> failed" in text
    assert "median  500 ms -> 625 ms (+0.125, +25.0%)  worse" in text
    assert "temperature  1.5" in text and "certification.coverage  0.75" in text
    # the suite's identity is summed up on the claims line, not listed digest by digest
    assert "claim catalogue same; suite (harness digests) same" in text
    assert not [line for line in text.splitlines() if line.strip().startswith(("harness", "claim catalogue"))], text
    md = cli("compare", old, new, "--public-key", key[1], "--markdown").output
    assert md.startswith("## Qualification reports compared: PASSED -> FAILED\n")
    assert ("\n### Claims\n\n1 verdict(s) changed, 0 added, 0 removed; claim catalogue same; suite (harness digests) "
            "same.\n\n| Claim | Old | New |\n|---|---|---|\n| `report.signature` | passed | failed |\n") in md
    assert f"| `{BATCH}` | median | 500 ms | 625 ms | +0.125, +25.0% | **worse** |" in md
    assert "### Heads" in md and "| certification.coverage | 0.75 | 0.75 |" in md
    # a head's figures are per task: the task has a column of its own
    assert "\n### Heads\n\n| Subject | Task | Figure | Old | New | Change | |\n|---|---|---|---|---|---|---|\n" in md
    assert "\n| `artifact/head-a` | route | certification.coverage | 0.75 | 0.75 |" in md


def test_the_claims_line_names_each_harness_digest_that_differs(pair, key):
    two = {"laya_qual": "cd" * 32, "laya_qual.suite": "ef" * 32}
    old, new = pair(spec(harness=two), spec(harness={"laya_qual": "00" * 32, "laya_qual.suite": "11" * 32}))
    text = cli("compare", old, new, "--public-key", key[1]).output
    assert "claim catalogue same; suite (harness digests) differ (laya_qual, laya_qual.suite)\n" in text, text


# --- --fail-on ----------------------------------------------------------------------------

def fail_on(old, new, key, *expressions, extra=()):
    return cli("compare", old, new, "--public-key", key[1], *[a for e in expressions for a in ("--fail-on", e)],
               *extra)


def tripped(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if " tripped: " in line]


@pytest.mark.parametrize("new_outcome, trips", [("failed", True), ("skipped", True), ("passed", False)])
def test_fail_on_verdict(pair, key, new_outcome, trips):
    old, new = pair(spec(), spec(outcomes={**spec()["outcomes"], "report.signature": new_outcome}))
    result = fail_on(old, new, key, "verdict")
    assert result.exit_code == (3 if trips else 0)
    verdict = {"skipped": "not evaluated"}.get(new_outcome, new_outcome)
    assert tripped(result) == ([f"laya-qual compare: --fail-on verdict tripped: claim report.signature: passed -> "
                                f"{verdict}"] if trips else [])


def test_fail_on_verdict_trips_on_a_removed_claim_not_on_an_added_or_better_one(pair, key):
    worse = spec(outcomes={**spec()["outcomes"], "report.signature": "failed"})
    better = spec(catalogue=(*CLAIM_IDS, "report.subjects"))
    old, new = pair(worse, better)
    assert fail_on(old, new, key, "verdict").exit_code == 0  # failed -> passed, and an added claim
    old, new = pair(better, worse)
    result = fail_on(old, new, key, "verdict")
    assert result.exit_code == 3 and tripped(result) == [
        "laya-qual compare: --fail-on verdict tripped: claim report.signature: passed -> failed",
        "laya-qual compare: --fail-on verdict tripped: claim report.subjects: not evaluated -> removed"]


@pytest.mark.parametrize("expression, ratio, trips", [
    ("bench.serve.batch:batched_over_one_by_one:-5%", 3.8, False),   # exactly 5% lower: not more than 5%
    ("bench.serve.batch:batched_over_one_by_one:-5%", 3.79, True),
    ("bench.serve.batch:batched_over_one_by_one:-5%", 4.5, False),
    ("bench.serve.batch:batched_over_one_by_one:+5%", 4.2, False),   # exactly 5% higher
    ("bench.serve.batch:batched_over_one_by_one:+5%", 4.21, True),
    (f"{BATCH}:batched_over_one_by_one:-0.25", 3.75, False),          # by test id, absolute
    (f"{BATCH}:batched_over_one_by_one:-0.25", 3.7, True),
])
def test_fail_on_a_benchmark_figure(pair, key, expression, ratio, trips):
    old, new = pair(spec(), spec(extra={**spec()["extra"], "batched_over_one_by_one": ratio}))
    result = fail_on(old, new, key, expression)
    assert result.exit_code == (3 if trips else 0), result.output
    assert len(tripped(result)) == trips
    if trips:
        assert tripped(result)[0].startswith(f"laya-qual compare: --fail-on {expression} tripped: {BATCH} "
                                             f"batched_over_one_by_one: 4 -> {ratio:g} ({ratio - 4:+.6g}")


def test_a_benchmark_threshold_across_machines_is_not_checked_unless_asked(pair, key):
    old, new = pair(spec(), spec(cores=4, extra={**spec()["extra"], "batched_over_one_by_one": 3.0}))
    expression = "bench.serve.batch:batched_over_one_by_one:-5%"
    result = fail_on(old, new, key, expression)
    assert result.exit_code == 0 and tripped(result) == []
    assert f"--fail-on {expression} not checked: {BATCH} batched_over_one_by_one: measured on different machines" \
        in result.stderr
    why = f"{BATCH} batched_over_one_by_one: measured on different machines (--across-machines compares anyway)"
    assert result.stdout.endswith(f"\n\n  THRESHOLDS\n    {expression}: not checked ({why})\n"), result.stdout
    assert fail_on(old, new, key, expression, extra=["--across-machines"]).exit_code == 3


def test_a_benchmark_figure_only_new_has_is_not_checked(pair, key):
    """A figure NEW measures and OLD did not has nothing to compare with: not checked, said why, exit 0."""
    old, new = pair(spec(), spec(extra={**spec()["extra"], "speedup": 2.0}))
    expression = "bench.serve.batch:speedup:-5%"
    result = fail_on(old, new, key, expression)
    assert result.exit_code == 0 and tripped(result) == []
    why = f"{BATCH} speedup: absent from OLD"
    assert result.stdout.endswith(f"\n\n  THRESHOLDS\n    {expression}: not checked ({why})\n"), result.stdout


def test_a_benchmark_figure_missing_from_new_trips(pair, key):
    old, new = pair(spec(), spec(extra={"median_batched_s": 0.25, "requests": 256}))
    result = fail_on(old, new, key, "bench.serve.batch:batched_over_one_by_one:-5%")
    assert result.exit_code == 3 and tripped(result)[0].endswith(
        f"{BATCH} batched_over_one_by_one: 4 in OLD, absent from NEW")


@pytest.mark.parametrize("expression, coverage, trips", [
    ("certification-coverage:-0.05", 0.7, False),    # exactly 0.05 lower
    ("certification-coverage:-0.05", 0.675, True),
    ("certification-coverage:-0.05", 0.9, False),
    ("certification-coverage:-10%", 0.675, False),   # exactly 10% of 0.75 lower
    ("certification-coverage:-10%", 0.65, True),
])
def test_fail_on_coverage(pair, key, expression, coverage, trips):
    old, new = pair(spec(), spec(tasks=[trained_task(**{"certification.coverage": coverage})]))
    result = fail_on(old, new, key, expression)
    assert result.exit_code == (3 if trips else 0)
    assert len(tripped(result)) == trips
    if trips:
        assert tripped(result)[0].startswith(f"laya-qual compare: --fail-on {expression} tripped: {HEAD} task route "
                                             f"certification.coverage: 0.75 -> {coverage:g}")
        assert tripped(result)[0].endswith(f"fell by more than {expression.split(':')[1][1:]}")


def test_fail_on_ece_rose(pair, key):
    old, new = pair(spec(), spec(tasks=[trained_task(**{"calibration.ece_after": 0.125})]))
    assert fail_on(old, new, key, "ece:+0.075").exit_code == 0  # 0.05 -> 0.125: 0.075 more, not more than that
    assert fail_on(old, new, key, "ece:+0.07").exit_code == 3


def test_fail_on_temperature_bound(pair, key):
    at_bound = trained_task(**{"calibration.outcome": "at_lower_bound", "temperature": 0.05,
                               "certification.temperature": 0.05})
    old, new = pair(spec(), spec(tasks=[at_bound]))
    result = fail_on(old, new, key, "temperature-bound", "uncertified")
    assert result.exit_code == 3 and tripped(result) == [
        f"laya-qual compare: --fail-on temperature-bound tripped: {HEAD} task route: temperature at lower bound "
        "(calibration.outcome fitted -> at_lower_bound)"]
    assert fail_on(new, old, key, "temperature-bound").exit_code == 0  # leaving a bound is no regression
    old, new = pair(spec(tasks=[at_bound]), spec(tasks=[at_bound], median=0.625))
    assert fail_on(old, new, key, "temperature-bound").exit_code == 0  # already at it in OLD: nothing new


def test_fail_on_uncertified(pair, key):
    uncertified = trained_task(**{"certification.certified": False, "certification.acted": 0,
                                  "certification.coverage": 0.0, "act_threshold": 1.0})
    old, new = pair(spec(), spec(tasks=[uncertified]))
    result = fail_on(old, new, key, "uncertified", "temperature-bound")
    assert result.exit_code == 3 and tripped(result) == [
        f"laya-qual compare: --fail-on uncertified tripped: {HEAD} task route: certified true -> false"]
    assert fail_on(new, old, key, "uncertified").exit_code == 0
    old, new = pair(spec(), spec(tasks=[trained_task(name="renamed")]))  # task route is gone from NEW
    result = fail_on(old, new, key, "uncertified", "certification-coverage:-0.05")
    assert result.exit_code == 3 and tripped(result) == [
        f"laya-qual compare: --fail-on uncertified tripped: {HEAD} task route: certified true -> absent",
        f"laya-qual compare: --fail-on certification-coverage:-0.05 tripped: {HEAD} task route "
        "certification.coverage: 0.75 in OLD, absent from NEW"]


def test_fail_on_kill_rate(pair, key):
    old, new = pair(spec(kill_rate=kill_rate(98)), spec(kill_rate=kill_rate(95)))
    assert fail_on(old, new, key, "kill-rate:-0.03").exit_code == 0  # 0.98 -> 0.95: not more than 0.03 lower
    assert fail_on(old, new, key, "kill-rate:-0.02").exit_code == 3


def test_thresholds_with_nothing_to_compare_are_not_checked(pair, key):
    old, new = pair(spec(tasks=[{"name": "route", "max_options": 4, "temperature": 1.0, "act_threshold": 0.9,
                                 "escalate_threshold": 0.6}]), spec(tasks=[{"name": "route", "max_options": 4,
                                 "temperature": 1.0, "act_threshold": 0.9, "escalate_threshold": 0.6}]))
    result = fail_on(old, new, key, "certification-coverage:-0.05", "kill-rate:-1%")
    assert result.exit_code == 0 and result.stderr.splitlines() == [
        "laya-qual compare: --fail-on certification-coverage:-0.05 not checked: no certification.coverage in "
        "either report",
        "laya-qual compare: --fail-on kill-rate:-1% not checked: no rate in either report"]


@pytest.mark.parametrize("expression", ["certification-coverage:0.05", "certification-coverage:-5x", "frobnicate",
                                        "bench.serve.batch:-5%", "coverage", ":median:-5%", "verdict:-1",
                                        "code-coverage:5"])
def test_a_malformed_threshold_is_a_usage_error_naming_it(pair, key, expression):
    old, new = pair(spec(), spec())
    result = fail_on(old, new, key, expression)
    assert result.exit_code == 2 and f"--fail-on {expression!r}: not one of" in result.output


def test_a_threshold_naming_no_benchmark_figure_is_a_usage_error(pair, key):
    old, new = pair(spec(), spec())
    result = fail_on(old, new, key, "bench.serve.batch:batched_over_one_by_onee:-5%")
    assert result.exit_code == 2 and "no benchmark of claim or test 'bench.serve.batch' has a figure " \
        "'batched_over_one_by_onee' in OLD or NEW" in result.output


# --- verification first, and its exit codes -----------------------------------------------

def one_line_error(result, *fragments):
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_a_tampered_bundle_is_exit_1_naming_it(pair, key):
    old, new = pair(spec(), spec())
    lines = new.read_text().splitlines()
    env = json.loads(lines[1])
    payload = base64.b64decode(env["payload"]).replace(b'"passed"', b'"failed"', 1)
    env["payload"] = base64.b64encode(payload).decode()
    new.write_text(lines[0] + "\n" + json.dumps(env, separators=(",", ":")) + "\n")
    one_line_error(cli("compare", old, new, "--public-key", key[1]), f"NEW bundle {new}: verification failed",
                   "signature does not verify")
    one_line_error(cli("compare", new, old, "--public-key", key[1], "--fail-on", "verdict"),
                   f"OLD bundle {new}: verification failed")
    one_line_error(cli("compare", old, old.parent / "missing.jsonl", "--public-key", key[1]),
                   "NEW bundle", "cannot read bundle")


def test_each_bundle_verifies_with_its_own_key(tmp_path, key):
    old = build(tmp_path / "old", spec(), key[0])
    new = build(tmp_path / "new", spec(median=0.625), key[2])
    one_line_error(cli("compare", old, new, "--public-key", key[1]), "NEW bundle", "not by the given key",
                   "each report may have its own key: give --old-key OLD.pub --new-key NEW.pub")
    result = cli("compare", old, new, "--old-key", key[1], "--new-key", key[3], "--json")
    assert result.exit_code == 0 and json.loads(result.output)["new"]["keyid"] == key[2].public_key.keyid
    assert cli("compare", old, new, "--new-key", key[3]).exit_code == 2  # OLD has no key
    usage = cli("compare", old, new, "--public-key", key[1], "--markdown", "--json")
    assert usage.exit_code == 2 and "exclude each other" in usage.output


# --- the heads field, as a real run writes it and verify checks it ------------------------

MINI_SUITE = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_passes():
    pass
"""


def test_a_run_records_each_artifact_head_verbatim(tmp_path, key):
    """A real pytest run with a base and two heads: `heads` lists the heads (not the base),
    each head.json's kind and task objects as the file holds them; verify accepts it."""
    base = write_artifact(tmp_path / "base", seed=5, head_kind="float32")
    synthetic = write_artifact(tmp_path / "head-b", seed=6, head_kind="int8")
    trained = tmp_path / "head-a"  # an artifact laya wrote (the run checks that first), its head.json replaced
    shutil.copytree(synthetic, trained)
    (trained / "head.json").write_text(json.dumps({"kind": "float32", "tasks": [trained_task(), {"name": "x"}]}))
    (tmp_path / "test_mini.py").write_text(MINI_SUITE)
    bundle = tmp_path / "r.intoto.jsonl"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_mini.py",
                           "--laya-report", bundle, "--laya-signing-key", key[1].with_suffix(""),
                           "--laya-base", base, "--laya-artifact", synthetic, "--laya-artifact", trained],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert cli("verify", bundle, "--public-key", key[1], "--artifact", trained).exit_code == 0
    laya = next(s for s, _ in read_statements(bundle) if s["predicateType"].endswith("qualification/v1"))
    assert laya["predicate"]["heads"] == [
        {"subject": "artifact/head-b", "kind": "int8",
         "tasks": json.loads((synthetic / "head.json").read_text())["tasks"]},
        {"subject": "artifact/head-a", "kind": "float32", "tasks": [trained_task(), {"name": "x"}]}]


def test_a_head_json_that_is_not_a_head_is_recorded_as_such(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "head.json").write_text("{not json")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "weights").write_bytes(b"x")
    subjects = [{"name": "laya-runtime"}, *(artifact_subject(tmp_path / d, "head") for d in "ab")]
    entries = heads([str(tmp_path / "a"), str(tmp_path / "b")], None, subjects)
    assert [(e["subject"], e["kind"], e["tasks"]) for e in entries] == [("artifact/a", None, []),
                                                                         ("artifact/b", None, [])]
    assert entries[0]["error"].startswith("head.json: not JSON") and entries[1]["error"].startswith(
        "head.json: cannot read it")
    assert heads([], None, subjects[:1]) == []


def test_a_head_json_changed_after_its_digest_is_refused(tmp_path):
    head = tmp_path / "head-a"
    head.mkdir()
    (head / "head.json").write_text(json.dumps({"kind": "float32", "tasks": [trained_task()]}))
    subjects = [{"name": "laya-runtime"}, artifact_subject(head, "head")]
    (head / "head.json").write_text(json.dumps({"kind": "float32", "tasks": [trained_task(temperature=2.0)]}))
    with pytest.raises(SubjectError, match="head.json: changed after its artifact was digested"):
        heads([str(head)], None, subjects)


def test_verify_refuses_heads_naming_no_artifact_subject(tmp_path, key):
    good = build(tmp_path / "good", spec(), key[0])
    tr, laya = (payload for _, payload in read_statements(good))
    statement = json.loads(laya)
    for broken in ([{"subject": "artifact/elsewhere", "kind": "float32", "tasks": []}],
                   [{"subject": HEAD, "kind": "float32", "tasks": "route"}], {"subject": HEAD}):
        edited = copy.deepcopy(statement)
        edited["predicate"]["heads"] = broken
        payload = canonical(edited)
        test_result = json.loads(tr)
        test_result["predicate"]["configuration"][0]["digest"]["sha256"] = hashlib.sha256(payload).hexdigest()
        bad = tmp_path / "bad.intoto.jsonl"
        write_bundle(bad, (canonical(test_result), payload), key[0])
        one_line_error(cli("verify", bad, "--public-key", key[1]), "statements disagree", "laya-qual heads")


# docs/report-format.md, "Which direction is worse", figure by figure (None: no better side).
DOCUMENTED_DIRECTIONS = {
    "heads": {"certification.coverage": "higher", "certification.certified": "higher",
              "certification.risk_upper_bound": "lower", "calibration.ece_before": "lower",
              "calibration.ece_after": "lower", "calibration.nll_before": "lower", "calibration.nll_after": "lower",
              "temperature": None, "calibration.outcome": None, "act_threshold": None, "escalate_threshold": None,
              "certification.target_risk": None, "certification.delta": None, "certification.acted": None,
              "certification.errors": None},
    "benchmarks": {"requests_per_s_batched": "higher", "batched_over_one_by_one": "higher", "miss_over_hit": "higher",
                   "standalone_over_shared": "higher", "speedup": "higher", "laya_over_bare": "lower",
                   "int8_over_float32": "lower", "median": "lower", "median_hit_s": "lower",
                   "kernel_update_seconds_median": "lower", "peak_rss_bytes": "lower", "peak_rss_bytes.owner0": "lower",
                   "requests": None, "load_average_1m": None, "sequence_budget": None},
    "suite": {"rate": "higher", "lowerBound": "higher", "killed": None, "total": None},
}


@pytest.mark.parametrize("section", sorted(DOCUMENTED_DIRECTIONS))
def test_every_figure_is_better_the_documented_way(section):
    from laya_qual.release.compare import TASK_FIGURES, Key, direction

    if section == "heads":
        assert sorted(DOCUMENTED_DIRECTIONS["heads"]) == sorted(TASK_FIGURES)  # every task figure has its entry
    found = {figure: direction(Key(section, "item", "task" if section == "heads" else None, figure))
             for figure in DOCUMENTED_DIRECTIONS[section]}
    assert found == DOCUMENTED_DIRECTIONS[section]
