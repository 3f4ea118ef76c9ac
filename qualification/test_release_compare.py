"""`laya-qual compare --fail-on` on real signed bundles, against a reference evaluator
written from docs/report-format.md ("--fail-on thresholds"), and compare's exit codes
(docs/laya-qual-cli.md) through the real command line, with --json and without."""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.cli import main
from laya_qual.release.compare import ThresholdError, compare, parse_threshold
from laya_qual.report.signing import keygen, load_public_key, load_signer
from laya_qual.report.verify import verify_bundle
from laya_qual.synth.reports import BATCH, CLAIM_IDS, code_coverage, report_spec, signed_report, trained_task

# --fail-on name -> where the figure lives in a report_spec (docs/report-format.md's table)
TASK_FIGURES = {"certification-coverage": "certification.coverage",
                "risk-upper-bound": "certification.risk_upper_bound",
                "ece": "calibration.ece_after", "nll": "calibration.nll_after"}
BENCH_EXPRESSIONS = {"bench.serve.batch:batched_over_one_by_one": "batched_over_one_by_one", f"{BATCH}:median": "median"}
FIGURES = (*TASK_FIGURES, "kill-rate", "code-coverage", *BENCH_EXPRESSIONS)
KILL_TOTAL = 64  # kill rates and code coverage: K of 64


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    keygen(d / "k")
    keygen(d / "other")
    return {"signer": load_signer(d / "k"), "pub": d / "k.pub", "other": load_signer(d / "other")}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, keys):
    """bundles(spec) -> a fresh signed bundle of that spec, each in its own directory."""
    counter = itertools.count()

    def make(spec: dict, signer=None) -> Path:
        return signed_report(tmp_path_factory.mktemp(f"r{next(counter)}"), spec, signer or keys["signer"])
    return make


def spec_with(figure: str, value: float | None) -> dict:
    """A report whose watched figure is ``value`` (None: the report lacks it)."""
    if figure in TASK_FIGURES:
        return report_spec(tasks=[trained_task(**{TASK_FIGURES[figure]: value})])
    if figure == "kill-rate":
        return report_spec(kill_rate=None if value is None else {"killed": round(value * KILL_TOTAL),
                                                                   "total": KILL_TOTAL})
    if figure == "code-coverage":
        return report_spec(code_coverage=None if value is None else code_coverage(round(value * KILL_TOTAL),
                                                                                  KILL_TOTAL))
    extra = {"batched_over_one_by_one": 4.0, "median_batched_s": 0.25, "requests": 256}
    if BENCH_EXPRESSIONS[figure] == "median":
        return report_spec(median=value)
    if value is None:
        del extra["batched_over_one_by_one"]
    else:
        extra["batched_over_one_by_one"] = value
    return report_spec(extra=extra)


def reference_limit(figure: str, sign: str, n: float, percent: bool, old: float | None, new: float | None) -> str:
    """docs/report-format.md: -N trips when NEW < OLD - N, +N when NEW > OLD + N, N% of |OLD|;
    exactly N is not more than N; absent from NEW trips, absent from OLD is not checked; a
    benchmark figure in neither report is a usage error (a typo, most likely)."""
    if figure in BENCH_EXPRESSIONS and old is None and new is None:
        return "usage error"
    if old is None:
        return "not checked"
    if new is None:
        return "tripped"
    amount = abs(old) * n / 100 if percent else n
    return "tripped" if (new < old - amount if sign == "-" else new > old + amount) else "held"


def judged(bundles, keys, old_spec: dict, new_spec: dict, expressions: list[str]) -> list[str]:
    """The status of each threshold as laya-qual's comparison of two verified bundles gives it."""
    public = load_public_key(keys["pub"])
    sides = []
    for spec in (old_spec, new_spec):
        bundle = bundles(spec)
        v = verify_bundle(bundle, public)
        sides.append((str(bundle), v.keyid, v.laya))
    try:
        return [t["status"] for t in compare(*sides, [parse_threshold(e) for e in expressions], False)["thresholds"]]
    except ThresholdError:
        return ["usage error"]


# Figures on a grid of 1/64 (kill rates: K of 64), limits of 1/64 or whole percents of a
# quarter-grid |OLD|: every OLD - N and N% of |OLD| is exact, so the boundary is the boundary.
grid = st.integers(0, 64).map(lambda i: i / 64)
values = st.one_of(st.none(), grid)


@settings(max_examples=40, deadline=None)
@given(figure=st.sampled_from(FIGURES), sign=st.sampled_from("-+"), old=values, new=values,
       limit=st.one_of(st.tuples(st.integers(0, 16).map(lambda i: i / 64), st.just(False)),
                       st.tuples(st.sampled_from([0, 25, 50, 75, 100]), st.just(True))))
# the boundary, exactly at the limit, both signs, absolute and relative, and just past it
@example(figure="certification-coverage", sign="-", old=0.75, new=0.70, limit=(0.05, False))  # the doc's example
@example(figure="certification-coverage", sign="-", old=0.75, new=0.675, limit=(0.05, False))
@example(figure="code-coverage", sign="-", old=1.0, new=63 / 64, limit=(1 / 64, False))
@example(figure="code-coverage", sign="-", old=1.0, new=62 / 64, limit=(1 / 64, False))
@example(figure="code-coverage", sign="+", old=None, new=0.5, limit=(0, False))
@example(figure="risk-upper-bound", sign="+", old=0.25, new=0.5, limit=(0.25, False))
@example(figure="ece", sign="+", old=0.25, new=0.5 + 1 / 64, limit=(0.25, False))
@example(figure="nll", sign="-", old=0.5, new=0.25, limit=(50, True))
@example(figure="kill-rate", sign="-", old=0.5, new=0.25 - 1 / 64, limit=(50, True))
@example(figure="bench.serve.batch:batched_over_one_by_one", sign="-", old=0.5, new=0.375, limit=(25, True))
@example(figure=f"{BATCH}:median", sign="+", old=0.5, new=0.625, limit=(25, True))
@example(figure=f"{BATCH}:median", sign="+", old=0.5, new=0.5, limit=(0, False))
@example(figure="certification-coverage", sign="-", old=0.5, new=None, limit=(0.25, False))
@example(figure="kill-rate", sign="+", old=None, new=0.5, limit=(0, False))
@pytest.mark.laya_claim("release.compare.fail-on")
def test_a_limit_trips_as_documented(bundles, keys, figure, sign, old, new, limit):
    n, percent = limit
    if figure.endswith(":median") and None in (old, new):
        old = new = 0.5  # a benchmark always has a median
    expression = f"{figure}:{sign}{n:g}{'%' * percent}"
    assert judged(bundles, keys, spec_with(figure, old), spec_with(figure, new), [expression]) == [
        reference_limit(figure, sign, n, percent, old, new)], expression


RANK = ("failed", "not evaluated", "passed")  # docs: passed > not evaluated > failed
STATES = ("passed", "failed", "skipped", None)  # a claim's one test; None: not in the catalogue
OUTCOMES = ("fitted", "at_lower_bound", "at_upper_bound", "separable", "too_few_examples", "not_better")
BOUNDS = ("at_lower_bound", "at_upper_bound")


def flag_spec(states: tuple, certified: bool | None, outcome: str) -> dict:
    present = [c for c, s in zip(CLAIM_IDS, states) if s is not None]
    return report_spec(outcomes={c: s for c, s in zip(CLAIM_IDS, states) if s is not None},
                       catalogue=(*present, CLAIM_IDS[3]),
                       tasks=[trained_task(**{"certification.certified": certified, "calibration.outcome": outcome})])


def reference_flags(old: tuple, new: tuple) -> list[str]:
    (old_states, old_certified, old_outcome), (new_states, new_certified, new_outcome) = old, new

    def verdict(state):
        return {"passed": "passed", "failed": "failed", "skipped": "not evaluated"}[state]
    verdict_trips = any(o is not None and (n is None or RANK.index(verdict(n)) < RANK.index(verdict(o)))
                        for o, n in zip(old_states, new_states))
    uncertified = old_certified is True and new_certified is not True
    bound = new_outcome in BOUNDS and old_outcome not in BOUNDS
    return ["tripped" if t else "held" for t in (verdict_trips, uncertified, bound)]


side = st.tuples(st.tuples(*[st.sampled_from(STATES)] * 3), st.sampled_from([True, False, None]),
                 st.sampled_from(OUTCOMES))


@settings(max_examples=25, deadline=None)
@given(old=side, new=side)
@example(old=(("passed", "skipped", "failed"), True, "fitted"), new=(("skipped", "skipped", "failed"), True, "fitted"))
@example(old=(("skipped", "passed", None), True, "fitted"), new=(("failed", None, "passed"), None, "at_upper_bound"))
@example(old=(("failed", "skipped", "passed"), False, "at_lower_bound"),
         new=(("skipped", "passed", "passed"), True, "at_upper_bound"))
@pytest.mark.laya_claim("release.compare.fail-on")
def test_verdict_uncertified_and_temperature_bound_trip_as_documented(bundles, keys, old, new):
    assert judged(bundles, keys, flag_spec(*old), flag_spec(*new),
                  ["verdict", "uncertified", "temperature-bound"]) == reference_flags(old, new)


# --- exit codes ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pairs(bundles, keys):
    """OLD and four NEWs: the same figures, coverage fallen by 0.25, tampered, another signer."""
    old = bundles(report_spec())
    same = bundles(report_spec())
    fallen = bundles(report_spec(tasks=[trained_task(**{"certification.coverage": 0.5})]))
    tampered = bundles(report_spec())
    lines = tampered.read_text().splitlines()
    envelope = json.loads(lines[1])
    envelope["payload"] = base64.b64encode(base64.b64decode(envelope["payload"]).replace(
        b'"passed"', b'"failed"', 1)).decode()
    tampered.write_text(lines[0] + "\n" + json.dumps(envelope, separators=(",", ":")) + "\n")
    other = bundles(report_spec(), keys["other"])
    return {"old": old, "same": same, "fallen": fallen, "tampered": tampered, "other": other}


# (NEW, --fail-on, documented exit status)
EXITS = [("same", "certification-coverage:-0.05", 0), ("fallen", "certification-coverage:-0.25", 0),
         ("fallen", "certification-coverage:-0.05", 3), ("fallen", "verdict", 0), ("tampered", "verdict", 1),
         ("other", "verdict", 1), ("same", "certification-coverage:0.05", 2), ("same", "certification-coverage", 2),
         ("same", "coverage:-0.05", 2), ("same", "verdict", 0)]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("new,expression,status", EXITS, ids=[f"{n}-{e}" for n, e, _ in EXITS])
@pytest.mark.laya_claim("release.compare.exit")
def test_compare_exits_as_documented_and_json_agrees(pairs, keys, new, expression, status, as_json):
    args = ["compare", str(pairs["old"]), str(pairs[new]), "--public-key", str(keys["pub"]),
            "--fail-on", expression, *(["--json"] if as_json else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == status, result.output
    tripped = [line for line in result.stderr.splitlines() if line.startswith(f"laya-qual compare: --fail-on "
                                                                                f"{expression} tripped: ")]
    assert bool(tripped) == (status == 3)
    if not as_json or status in (1, 2):
        if status in (1, 2):
            assert result.stdout == ""  # nothing compared, no object that could be read as a verdict
        return
    report = json.loads(result.stdout)
    assert result.stdout == json.dumps(report, indent=1, sort_keys=True) + "\n"
    assert set(report) == {"old", "new", "sameMachine", "acrossMachines", "rows", "thresholds"}
    [threshold] = report["thresholds"]
    assert threshold["expression"] == expression
    assert (threshold["status"] == "tripped") == (status == 3) and len(threshold["tripped"]) == len(tripped)


@pytest.mark.parametrize("limit", ["-0.05", "+1%"])
@pytest.mark.laya_claim("release.compare.exit")
def test_a_bare_coverage_threshold_is_refused_naming_both_coverages(pairs, keys, limit):
    """Two figures are called coverage: a gate must say which one it watches (docs/report-format.md)."""
    result = CliRunner().invoke(main, ["compare", str(pairs["old"]), str(pairs["fallen"]), "--public-key",
                                       str(keys["pub"]), "--fail-on", f"coverage:{limit}"])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--fail-on 'coverage:{limit}': 'coverage' names two figures; say which: certification-coverage:LIMIT " \
        "(a task's certification.coverage) or code-coverage:LIMIT" in result.stderr


@pytest.mark.laya_claim("release.compare.exit")
def test_the_installed_command_exits_3_when_a_threshold_trips(pairs, keys):
    """The same through a real process: the exit status a CI step sees."""
    run = subprocess.run([sys.executable, "-c", "from laya_qual.cli import main; main()", "compare",
                          str(pairs["old"]), str(pairs["fallen"]), "--public-key", str(keys["pub"]),
                          "--fail-on", "certification-coverage:-0.05", "--fail-on", "verdict", "--json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 3, run.stderr
    statuses = [t["status"] for t in json.loads(run.stdout)["thresholds"]]
    assert statuses == ["tripped", "held"]
    assert ("laya-qual compare: --fail-on certification-coverage:-0.05 tripped: artifact/head-a task route"
            in run.stderr)
