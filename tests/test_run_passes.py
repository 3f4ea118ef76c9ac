"""Every report records the Hypothesis seed it ran with, and its reproduce command
replays the same examples with the same selection; the evidence of two passes merges
only when they ran with the same options."""

from __future__ import annotations

import base64
import json
import os
import shlex

import hypothesis.core
import pytest
import torch  # noqa: F401  in-process report runs import torch; pytester would unload and re-import it, which torch does not survive

from laya_qual.report.model import LAYA_TYPE
from laya_qual.report.signing import keygen, load_public_key
from laya_qual.report.verify import verify_bundle

pytest_plugins = ("pytester",)

PROPERTY = """
import json
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.laya_claim("report.verdicts")
@settings(database=None, max_examples=15)
@given(st.lists(st.integers(), max_size=5))
def test_property(xs):
    with open("seen.jsonl", "a") as f:
        f.write(json.dumps(xs) + "\\n")

@pytest.mark.laya_claim("report.signature")
def test_not_selected():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """In-process runs (no torch import per run): not xdist workers, and the global
    seed Hypothesis' plugin sets is put back afterwards."""
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")] + ["LAYA_QUAL_SIGNING_KEY"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hypothesis.core, "global_force_seed", hypothesis.core.global_force_seed)
    pytester.makepyfile(test_prop=PROPERTY)
    return pytester


def laya_predicate(bundle) -> dict:
    for line in bundle.read_text().splitlines():
        statement = json.loads(base64.b64decode(json.loads(line)["payload"]))
        if statement["predicateType"] == LAYA_TYPE:
            return statement["predicate"]
    raise AssertionError("no laya-qual statement")


def test_seed_is_chosen_recorded_and_the_reproduce_command_replays_the_run(project):
    bundle = project.path / "r.intoto.jsonl"
    # the report option (left out of the command) comes before the selection (kept)
    project.runpytest_inprocess("-p", "laya_qual", "--laya-report", str(bundle), "-k", "property").assert_outcomes(
        passed=1, deselected=1)
    predicate = laya_predicate(bundle)
    seed = predicate["hypothesis"]["seed"]
    assert seed.isdigit()
    [evidence] = [e for c in predicate["claims"] for e in c["evidence"]]
    assert evidence["hypothesis"]["seed"] == seed
    command = shlex.split(predicate["hypothesis"]["reproduce"])
    assert command[:3] == ["python", "-m", "pytest"]
    assert command[3:7] == ["-p", "laya_qual", "-k", "property"]
    assert "--laya-report" not in command and f"--hypothesis-seed {seed}" in predicate["hypothesis"]["reproduce"]
    first = (project.path / "seen.jsonl").read_text()
    (project.path / "seen.jsonl").unlink()
    project.runpytest_inprocess(*command[3:]).assert_outcomes(passed=1, deselected=1)  # -k kept
    assert (project.path / "seen.jsonl").read_text() == first


def test_passes_with_different_options_do_not_merge(project):
    evidence = project.path / "first.json"
    project.runpytest_inprocess("-p", "laya_qual", "--hypothesis-seed", "1", "--laya-evidence-out", str(evidence))
    result = project.runpytest_inprocess("-p", "laya_qual", "--hypothesis-seed", "2", "--laya-evidence-in",
                                          str(evidence), "--laya-report", "r.intoto.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*earlier pass ran with different seed*"])


def test_report_path_from_the_ini_file(project):
    project.makeini("[pytest]\nlaya_report = from-ini.intoto.jsonl\n")
    project.runpytest_inprocess("-p", "laya_qual", "-k", "not_selected").assert_outcomes(passed=1, deselected=1)
    assert laya_predicate(project.path / "from-ini.intoto.jsonl")["claims"]


def test_an_unsigned_report_records_a_null_keyid_and_no_development_key(project):
    """docs/report-format.md (F-report.signing): `keyid` null when unsigned, `developmentKey` a boolean."""
    project.runpytest_inprocess("-p", "laya_qual", "-k", "not_selected", "--laya-report", "u.intoto.jsonl")
    assert laya_predicate(project.path / "u.intoto.jsonl")["signing"] == {"keyid": None, "developmentKey": False}


@pytest.mark.slow
def test_a_suite_test_in_both_passes_is_merged_to_its_worse_outcome(project, tmp_path_factory):
    """A shipped suite test's node id (a path to the installed suite) is not its report id
    (laya_qual/suite/...): the two passes' records must still meet as one test, the worse
    outcome winning, and the bundle must verify."""
    key = tmp_path_factory.mktemp("key") / "signing-key"
    keygen(key)
    select = ("-p", "laya_qual", "--laya-qualify", "-k", "flop_model_counts", "--hypothesis-seed", "5")
    evidence = project.path / "first.json"
    assert project.runpytest_subprocess(*select, "--laya-evidence-out", str(evidence)).parseoutcomes()["passed"] == 1
    earlier = json.loads(evidence.read_text())
    [record] = earlier["records"]
    assert record["test"].startswith("laya_qual/suite/test_learner_plan.py::") and record["outcome"] == "passed"
    record["outcome"] = "failed"  # as if the first pass had failed it
    evidence.write_text(json.dumps(earlier))
    bundle = project.path / "r.intoto.jsonl"
    result = project.runpytest_subprocess(*select, "--laya-evidence-in", str(evidence), "--laya-report", str(bundle),
                                          "--laya-signing-key", str(key))
    assert result.parseoutcomes()["passed"] == 1
    verify_bundle(bundle, load_public_key(key.with_name(key.name + ".pub")))
    predicate = laya_predicate(bundle)
    evidence_of_test = [(c["id"], e["outcome"]) for c in predicate["claims"] for e in c["evidence"]
                        if e["test"] == record["test"]]
    assert evidence_of_test == [(cid, "failed") for cid in record["claims"]]
    assert predicate["result"] == "FAILED"


def test_the_result_line_is_coloured_by_the_result(project):
    """With colour on: WARNED (claims left unevaluated) yellow, FAILED red, both bold."""
    project.makepyfile(test_failing="""
import pytest

@pytest.mark.laya_claim("report.subjects")
def test_failing():
    assert False
""")
    warned = project.runpytest_inprocess("-p", "laya_qual", "--color=yes", "-k", "property",
                                         "--laya-report", "w.intoto.jsonl")
    failed = project.runpytest_inprocess("-p", "laya_qual", "--color=yes", "--laya-report", "f.intoto.jsonl")
    yellow, red, bold = "\x1b[33m", "\x1b[31m", "\x1b[1m"
    [line] = [s for s in warned.outlines if "result WARNED" in s]
    assert yellow in line and bold in line and red not in line, repr(line)
    [line] = [s for s in failed.outlines if "result FAILED" in s]
    assert red in line and bold in line and yellow not in line, repr(line)


def test_a_passed_result_line_is_green_and_bold(project):
    """Every catalogued claim evidenced by a passing test: the report PASSED, its line green and bold."""
    from laya_qual.claims import CLAIMS

    project.makepyfile(test_all=f"""
import pytest

@pytest.mark.laya_claim(*{sorted(CLAIMS)!r})
def test_everything():
    pass
""")
    passed = project.runpytest_inprocess("-p", "laya_qual", "--color=yes", "-k", "everything",
                                         "--laya-report", "p.intoto.jsonl")
    green, yellow, red, bold = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[1m"
    [line] = [s for s in passed.outlines if "result PASSED" in s]
    assert green in line and bold in line and yellow not in line and red not in line, repr(line)


@pytest.mark.parametrize("args, loaded", [
    (["-p", "laya_qual", "-x"], True), (["-playa_qual"], True), (["-p", "no:randomly", "-x"], False),
    (["-x", "laya_qual"], False), (["-p", "xdist", "-k", "laya_qual"], False), ([], False)])
def test_the_reproduce_command_loads_the_plugin_unless_the_run_named_it_with_p(args, loaded):
    """Only `-p laya_qual` (or `-playa_qual`) loads the plugin: another -p, or laya_qual as some
    other option's value, leaves the reproduce command to add it."""
    from laya_qual.plugin.rerun import _loads_plugin

    assert _loads_plugin(args) is loaded
