"""laya-qual mutate: the defect catalogue stays valid on the current tree, the run
kills and spares as it reports, and a report carries the figure only for the code
it was measured on."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from laya_qual.claims import CLAIMS
from laya_qual.measure.defects import DEFECTS
from laya_qual.measure.mutant_run import FORMAT as SAMPLE_FORMAT
from laya_qual.measure.mutation import (FORMAT, LAYOUT, MutationError, apply_text, catalogue_digest, check_catalogue,
                                 code_digests, matches)
from laya_qual.measure.suite_figures import kill_rate

AREAS = {"artifact", "adapter", "request", "heads", "pins", "calibration", "weights", "cache", "gate", "jsonl",
         "train", "learner", "report"}


def top_level_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}


def test_a_child_run_is_top_level_and_outside_any_coverage_this_process_is_under(monkeypatch, tmp_path):
    """What a mutation or coverage run starts imports its copy first and is neither an xdist
    worker nor measured by a coverage run the harness itself is under: a measured child
    would write into that run's data, and one that wants coverage starts its own."""
    from laya_qual.measure.mutation import child_env

    for name, value in (("COVERAGE_PROCESS_CONFIG", "e30="), ("COVERAGE_PROCESS_START", "rc"),
                        ("PYTEST_XDIST_WORKER", "gw1"), ("PYTHONPATH", "elsewhere")):
        monkeypatch.setenv(name, value)
    env = child_env(tmp_path)
    assert not [k for k in env if k.startswith(("COVERAGE_PROCESS_", "PYTEST_XDIST_"))]
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path), "elsewhere"]) and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"] == os.environ["PATH"]  # the rest is inherited


def test_every_defect_applies_exactly_once_to_the_current_tree():
    check_catalogue()
    assert len(DEFECTS) >= 40
    assert AREAS <= {d.area for d in DEFECTS}
    for d in DEFECTS:
        assert any(matches([cid], d.claims) for cid in CLAIMS), f"{d.id}: its claims select no catalogued claim"


def test_a_defect_that_no_longer_applies_is_named():
    d = DEFECTS[0]
    with pytest.raises(MutationError, match=f"defect {d.id}: .* occurs 0 times"):
        apply_text(d, "")
    with pytest.raises(MutationError, match=f"defect {d.id}: .* occurs 2 times"):
        apply_text(d, d.find + d.find)
    assert apply_text(d, "a" + d.find + "b") == "a" + d.replace + "b"


def test_catalogue_digest_names_the_content():
    changed = (dataclasses.replace(DEFECTS[0], replace=DEFECTS[0].replace + " "), *DEFECTS[1:])
    assert len(catalogue_digest()) == 64 and catalogue_digest() == catalogue_digest(tuple(DEFECTS))
    assert catalogue_digest(changed) != catalogue_digest()


def test_claim_patterns():
    assert matches(["cache.copies"], ["cache"]) and matches(["cache.copies"], ["cache.copies"])
    assert matches(["learner.rejects.labels"], ["learner.rejects"]) and matches(["gate.concurrency"], ["g*"])
    assert not matches(["cache.copies"], ["cach"]) and not matches(["cache.copies"], ["cache.copies.x"])


def _results(tmp_path: Path, **changes) -> Path:
    result = {"format": FORMAT, "catalogue": {"digest": catalogue_digest(), "defects": 2, "subset": False},
              "code": code_digests(), "scope": [], "hypothesisSeeds": [7], "complete": True, "confirmWholeSuite": True,
              "summary": {"killed": 1, "total": 2, "rate": 0.5, "survivors": ["cache.overhead-changed"],
                          "probabilistic": {}, "timeouts": []}}
    for key, value in changes.items():
        result[key] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps(result))
    return path


def test_kill_rate_is_refused_for_other_code(tmp_path):
    digests = code_digests()
    kind, folded = kill_rate(_results(tmp_path), runtime=digests["runtime"], harness=digests["harness"])
    assert kind == "killRate"
    assert (folded["killed"], folded["total"], folded["catalogueDigest"]) == (1, 2, catalogue_digest())
    assert folded["survivors"] == ["cache.overhead-changed"]
    with pytest.raises(pytest.UsageError, match="measured on runtime dirHash 0+, .*rerun laya-qual mutate"):
        kill_rate(_results(tmp_path, code={**digests, "runtime": "0" * 64}), runtime=digests["runtime"],
                  harness=digests["harness"])
    with pytest.raises(pytest.UsageError, match="suite/harness"):
        kill_rate(_results(tmp_path), runtime=digests["runtime"], harness={**digests["harness"], "laya_qual": "x"})
    for partial in ({"scope": ["cache"]}, {"complete": False}):
        with pytest.raises(pytest.UsageError, match="partial or unfinished run"):
            kill_rate(_results(tmp_path, **partial), runtime=digests["runtime"], harness=digests["harness"])
    (tmp_path / "junk.json").write_text("[]")
    with pytest.raises(pytest.UsageError, match="not a laya-qual mutate results file"):
        kill_rate(tmp_path / "junk.json", runtime=digests["runtime"], harness=digests["harness"])


def test_the_harness_digests_do_not_depend_on_the_layout(tmp_path):
    """A checkout keeps the suite and synth apart from laya_qual/, an install nests them
    in it: figures measured in one layout must be recognised by a run in the other. Both
    layouts are built here from whichever one this run imports."""
    import shutil

    from laya_qual.measure.mutation import build_root, installed_layout

    here = installed_layout()
    root = build_root(tmp_path / "installed", here)
    installed = {name: root / rel for name, rel in LAYOUT.items()}
    checkout = {"laya": tmp_path / "checkout" / "laya", "laya_qual": tmp_path / "checkout" / "plugins" / "laya_qual",
                "laya_qual.suite": tmp_path / "checkout" / "qualification",
                "laya_qual.synth": tmp_path / "checkout" / "fixtures"}
    others = {here["laya_qual.suite"], here["laya_qual.synth"]}
    for name, target in checkout.items():
        shutil.copytree(here[name], target, ignore=lambda d, names: [
            n for n in names if n == "__pycache__" or Path(d, n) in others])
    assert installed["laya_qual.suite"].is_relative_to(installed["laya_qual"])
    assert not checkout["laya_qual.suite"].is_relative_to(checkout["laya_qual"])
    assert code_digests(installed) == code_digests(checkout) == code_digests(here)
    (installed["laya_qual.suite"] / "test_extra.py").write_text("")  # a suite file counts for the suite alone
    changed = code_digests(installed)["harness"]
    assert changed["laya_qual"] == code_digests(checkout)["harness"]["laya_qual"]
    assert changed["laya_qual.suite"] != code_digests(checkout)["harness"]["laya_qual.suite"]
    reference = installed["laya_qual.suite"] / "laya-cli-reference.json"  # shipped data decides verdicts too
    reference.write_text(reference.read_text() + " ")
    assert code_digests(installed)["harness"]["laya_qual.suite"] != changed["laya_qual.suite"]


def _sample_results(tmp_path: Path, **changes) -> Path:
    """A finished sampled run: 3 drawn, one killed, one survived, one equivalent."""
    mutants = [{"key": "laya/a.py:f:compare:'a < b'->'(a <= b)'#0", "status": "killed", "killedBy": "suite"},
               {"key": "laya/b.py:g:constant:'1'->'2'#0", "status": "survived", "killedBy": None},
               {"key": "laya/c.py:h:constant:'0'->'1'#0", "status": "equivalent", "killedBy": None,
                "reason": "only a log line's width"}]
    parts = {"runtime": {"killed": 1, "total": 2, "rate": 0.5, "lowerBound95": 0.025321},
             "harness": {"killed": 0, "total": 0, "rate": None, "lowerBound95": None}}
    result = {"format": SAMPLE_FORMAT, "code": code_digests(), "population": 12000, "sampleSeed": 1, "sample": 3,
              "hypothesisSeed": 7, "scope": [], "complete": True, "confirmWholeSuite": False, "mutants": mutants,
              "summary": {"killed": 1, "total": 2, "equivalent": 1, "rate": 0.5, "lowerBound95": 0.025321,
                          "survivors": [mutants[1]["key"]], "killedByTestsOnly": [], "wronglyEquivalent": [],
                          "timeouts": [], "parts": parts, "notExecuted": 1,
                          "withProjectTests": {"killed": 1, "total": 2, "rate": 0.5, "lowerBound95": 0.025321,
                                               "parts": parts}}}
    result.update(changes)
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(result))
    return path


def _killed_by_tests_only(tmp_path: Path) -> Path:
    """A finished sampled run that measured the project's tests: the suite's survivor killed by tests/."""
    result = json.loads(_sample_results(tmp_path).read_text())
    result["mutants"][1] |= {"status": "killed", "killedBy": "tests/"}
    both = {"runtime": {"killed": 2, "total": 2, "rate": 1.0, "lowerBound95": 0.223607},
            "harness": {"killed": 0, "total": 0, "rate": None, "lowerBound95": None}}
    result["summary"] |= {"survivors": [], "killedByTestsOnly": [result["mutants"][1]["key"]],
                          "withProjectTests": {"killed": 2, "total": 2, "rate": 1.0, "lowerBound95": 0.223607,
                                               "parts": both}}
    path = tmp_path / "tests-only.json"
    path.write_text(json.dumps(result | {"projectTests": True}))
    return path


def test_a_sampled_run_folds_in_with_its_equivalents_and_a_wrong_reason_is_refused(tmp_path):
    digests = code_digests()
    kind, folded = kill_rate(_sample_results(tmp_path), runtime=digests["runtime"], harness=digests["harness"])
    assert kind == "mutantSample"
    assert folded == {"killed": 1, "total": 2, "population": 12000, "sample": 3, "sampleSeed": 1,
                      "hypothesisSeed": 7, "confidence": 0.95, "lowerBound": 0.025321,
                      "survivors": ["laya/b.py:g:constant:'1'->'2'#0"], "killedByTestsOnly": [],
                      "parts": json.loads(_sample_results(tmp_path).read_text())["summary"]["parts"],
                      "notExecuted": 1, "survivorsConfirmedOnWholeSuite": False, "projectTestsMeasured": False,
                      "withProjectTests": json.loads(_sample_results(tmp_path).read_text())["summary"]["withProjectTests"],
                      "equivalents": {"laya/c.py:h:constant:'0'->'1'#0": "only a log line's width"}}
    older = json.loads(_sample_results(tmp_path).read_text())["summary"]
    del older["withProjectTests"]  # one figure, the suite's and the project tests' kills together
    with pytest.raises(pytest.UsageError, match="does not separate the shipped suite's kills from the project tests'"):
        kill_rate(_sample_results(tmp_path, summary=older), runtime=digests["runtime"], harness=digests["harness"])
    wrong = _sample_results(tmp_path, summary={**json.loads(_sample_results(tmp_path).read_text())["summary"],
                                               "wronglyEquivalent": ["laya/a.py:x"]})
    with pytest.raises(pytest.UsageError, match="the suite kills mutants filed as equivalent .laya/a.py:x."):
        kill_rate(wrong, runtime=digests["runtime"], harness=digests["harness"])
    with pytest.raises(pytest.UsageError, match="partial or unfinished run"):
        kill_rate(_sample_results(tmp_path, scope=["cache"]), runtime=digests["runtime"], harness=digests["harness"])


MINI = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_verdicts():
    pass

@pytest.mark.laya_claim("cache.copies")
def test_copies():
    pass
"""


@pytest.mark.slow
def test_report_carries_the_kill_rate_and_claims_select(tmp_path):
    from laya_qual.cli import main
    from click.testing import CliRunner

    (tmp_path / "test_mini.py").write_text(MINI)
    assert CliRunner().invoke(main, ["keygen", str(tmp_path / "key")]).exit_code == 0
    bundle = tmp_path / "r.intoto.jsonl"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_mini.py", "-n", "0",
                           "--laya-claims", "report", "--laya-report", bundle, "--laya-signing-key",
                           tmp_path / "key", "--laya-kill-rate", _results(tmp_path),
                           "--laya-kill-rate", _killed_by_tests_only(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, env=top_level_env())
    assert proc.returncode == 0 and "1 passed, 1 deselected" in proc.stdout, proc.stdout + proc.stderr
    shown = CliRunner().invoke(main, ["show", str(bundle), "--public-key", str(tmp_path / "key.pub")])
    assert shown.exit_code == 0, shown.output
    assert f"killrate  1/2 seeded defects killed (catalogue sha256:{catalogue_digest()[:16]})" in shown.output
    assert "survivors cache.overhead-changed" in shown.output
    headline = ("the shipped suite killed 1/2 sampled mutants, 95% lower bound 2.5% (3 of 12000 drawn with seed 1; "
                "1 equivalent, 0 survived everything)")
    second = ("with the project's tests/ (not shipped, not what a user runs): 2/2 killed, lower bound 22.4% "
              "(runtime 2/2); 1 by tests/ only")
    assert f"mutants   {headline}\n            runtime: 1/2 killed, lower bound 2.5%\n            {second}\n" \
        in shown.output
    md = CliRunner().invoke(main, ["show", str(bundle), "--markdown"])
    assert f"The{headline[3:]}, drawn without choice (docs/mutation.md)." in md.output and f"A second figure, {second}." in md.output, md.output
    html = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["show", str(bundle), "--html", str(html)]).exit_code == 0
    assert f"Sampled mutants: {headline}.<br>A second figure, {second}." in html.read_text()


@pytest.mark.slow
def test_mutate_kills_and_spares_on_a_tiny_selection(tmp_path):
    """Two defects against request.validation alone, in-process workers (about half a minute)."""
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, "-c", "from laya_qual.cli import main; main()", "mutate",
                           "--claims", "request.validation", "--only", "request.single-option",
                           "--only", "cache.overhead-changed", "--hypothesis-seed", "0", "-n", "0",
                           "--no-confirm", "--output", out, "--require-rate", "0.9"],
                          capture_output=True, text=True, env=top_level_env(), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 1 of 2 is below the required rate
    assert "kill rate 50.0% is below the required 90.0%" in proc.stderr
    assert "baseline seed 0: green" in proc.stderr
    result = json.loads(out.read_text())
    status = {d["id"]: d for d in result["defects"]}
    assert status["request.single-option"]["status"] == "killed"
    assert "test_request.py::" in status["request.single-option"]["firstFailure"]
    assert status["cache.overhead-changed"]["status"] == "survived"
    assert result["summary"]["survivors"] == ["cache.overhead-changed"]
    assert result["code"] == code_digests() and result["scope"] == ["request.validation"]
    assert "all               1     2   50.0%" in proc.stdout


def test_a_run_started_with_sigint_ignored_gives_its_children_sigint_back():
    """A shell without job control starts `cmd &` with SIGINT ignored, and every process it
    starts inherits that; the measured runs must not (a test interrupting a child would hang)."""
    probe = ("import signal, subprocess, sys\n"
             "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
             "from laya_qual.measure.mutation import deliverable_sigint\n"
             "deliverable_sigint()\n"
             "child = 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'\n"
             "print(subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout.strip())\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True", out.stderr


FAILING = """
import os

import pytest


def test_passes():
    pass


def test_lists():
    assert [1, 2] == [1, 3], "lists differ"


def test_crashes():
    os._exit(3)


@pytest.fixture
def broken():
    raise OSError("no such device")


def test_needs_broken(broken):
    pass


def test_long():
    assert "x" * 2000 == "y"
"""


def failing_run(tmp_path: Path, test: str, *options: str) -> str:
    """The output of a real pytest run of one test of FAILING, as a mutation stage runs it (-q -rfE)."""
    (tmp_path / "test_failing.py").write_text(FAILING)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:randomly", "-p",
                           "no:cacheprovider", *options, f"test_failing.py::{test}"],
                          cwd=tmp_path, capture_output=True, text=True, env=top_level_env()).stdout


@pytest.mark.parametrize("test, workers, said", [
    ("test_lists", 0, r"E +AssertionError: lists differ\nE +assert \[1, 2\] == \[1, 3\]\n(E .*\n)*"
                      r"test_failing.py:12: AssertionError"),
    ("test_needs_broken", 0, r"E +OSError: no such device\ntest_failing.py:\d+: OSError"),
    ("test_crashes", 2, r"worker 'gw\d' crashed while running 'test_failing.py::test_crashes'"),
    ("test_passes", 0, None),
])
@pytest.mark.slow
def test_a_stage_keeps_what_its_first_failure_said(tmp_path, test, workers, said):
    """failure_excerpt reads a real pytest run's report of its first failure: an assertion's
    E lines and where it was raised; a fixture's error (the ERRORS section) likewise; an xdist
    worker that crashed, the line xdist writes for it; a green run, nothing."""
    from laya_qual.measure.mutation import failure_excerpt

    output = failing_run(tmp_path, test, "-n", str(workers))
    excerpt = failure_excerpt(output)
    if said is None:
        assert excerpt is None, output
    else:
        assert excerpt is not None and re.fullmatch(said, excerpt), (excerpt, output)


def test_a_long_failure_is_kept_to_its_first_characters(tmp_path):
    from laya_qual.measure.mutation import EXCERPT_CHARS, failure_excerpt

    excerpt = failure_excerpt(failing_run(tmp_path, "test_long", "-vv", "-n", "0"))
    assert len(excerpt) == EXCERPT_CHARS and excerpt.endswith("…") and excerpt.startswith("E       AssertionError")


def test_the_failures_are_read_from_the_short_summary_alone():
    """A test that runs pytest inside itself prints that run's FAILED lines into its own
    captured output; only the outer run's short summary names what failed."""
    from laya_qual.measure.mutation import failures

    output = ("F.\n=== FAILURES ===\n___ test_outer ___\n----- Captured stdout call -----\n"
              "FAILED inner.py::test_seeded - assert 1 == 2\n"
              "=========================== short test summary info ============================\n"
              "FAILED laya_qual/suite/test_a.py::test_outer - AssertionError\n"
              "ERROR laya_qual/suite/test_b.py::test_setup - OSError\n1 failed, 1 error\n")
    assert failures(output) == ["laya_qual/suite/test_a.py::test_outer", "laya_qual/suite/test_b.py::test_setup"]
    assert failures("FAILED t.py::x - no summary header (-q without -r)\n") == ["t.py::x"]
