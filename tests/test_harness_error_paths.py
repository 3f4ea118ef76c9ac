"""The harness modules' error paths and rare branches: the pytest plugin's refusals (run in
process on small projects) and the helpers' refusals, each naming what it refuses.

Every check here is of a documented or plainly intended consequence: the exit status
and the one line that names the file, option or test, or the exact value returned.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import hypothesis.core
import pytest
import torch  # in-process runs that qualify import torch; pytester would unload and re-import it

pytest_plugins = ("pytester",)

CLAIMED = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_claimed():
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """In-process runs of a one-test project: not xdist workers, no signing key from outside,
    Hypothesis' global seed and torch's thread count put back afterwards."""
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")] + ["LAYA_QUAL_SIGNING_KEY"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hypothesis.core, "global_force_seed", hypothesis.core.global_force_seed)
    threads = torch.get_num_threads()
    pytester.makepyfile(test_claimed=CLAIMED)
    yield pytester
    torch.set_num_threads(threads)


def usage_error(result: pytest.RunResult, message: str) -> None:
    """pytest refused the run (exit 4) with exactly ``ERROR: message`` on stderr."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert f"ERROR: {message}" in result.stderr.lines, result.stderr.str()


# --- the plugin: options, ini keys, collection rules -----------------------------------------

def test_an_ini_path_key_takes_one_path(project):
    """laya_base (like laya_report) names one path: two are refused naming the key and the count."""
    project.makeini("[pytest]\nlaya_base = a b\n")
    usage_error(project.runpytest_inprocess("-p", "laya_qual"), "ini key laya_base takes one path, got 2")


def test_an_unregistered_hypothesis_profile_is_refused(project):
    """--laya-profile must name a registered Hypothesis profile."""
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-profile", "no-such-profile"),
                "--laya-profile no-such-profile: no such Hypothesis profile is registered")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without CUDA")
def test_device_cuda_without_cuda_is_refused(project):
    """--laya-device cuda on a machine where torch sees no CUDA device stops the qualification run."""
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", "e.json",
                                            "--laya-device", "cuda"),
                "--laya-device cuda: torch sees no CUDA device on this machine")
    assert not (project.path / "e.json").exists()


def test_qualify_with_paths_collects_the_suite_next_to_them(project):
    """--laya-qualify with paths on the command line adds the installed suite after them."""
    from laya_qual.plugin.hooks import suite_dir

    config = project.parseconfigure("-p", "laya_qual", "--laya-qualify", "test_claimed.py")
    assert config.args == ["test_claimed.py", str(suite_dir())]


def test_an_unknown_claim_id_is_refused_naming_the_test(project):
    """A test claiming an id the catalogue lacks stops the run at collection, naming test and id."""
    project.makepyfile(test_unknown="""
import pytest

@pytest.mark.laya_claim("no.such.claim")
def test_unknown():
    pass
""")
    result = project.runpytest_inprocess("-p", "laya_qual")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.str().strip().splitlines()[-2:] == [
        "ERROR: laya_qual claim rules broken:",
        "  test_unknown.py::test_unknown: unknown claim id(s) ['no.such.claim'] (see laya_qual.claims)"]


def test_a_once_per_level_outside_the_levels_is_refused(project):
    """laya_once_per takes artifact, base-kind or base: anything else fails the test's collection, named."""
    project.makepyfile(test_level="""
import pytest

@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.laya_once_per("sometimes")
def test_level(qualified_artifact):
    pass
""")
    result = project.runpytest_inprocess("-p", "laya_qual")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["E   pytest.UsageError: test_level.py::test_level: laya_once_per('sometimes'): "
                                 "not one of ('artifact', 'base-kind', 'base')"])


def test_qualified_heads_are_the_given_artifacts(project):
    """With --laya-artifact, qualified_heads is each given directory, named artifact<i>-<dir name>."""
    for name in ("first", "second"):
        (project.path / name).mkdir()
    project.makepyfile(test_heads="""
import json

def test_heads(qualified_heads):
    with open("heads.json", "w") as f:
        json.dump([(name, str(path)) for name, path in qualified_heads], f)
""")
    result = project.runpytest_inprocess("-p", "laya_qual", "--laya-artifact", "first", "--laya-artifact", "second",
                                         "test_heads.py")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert json.loads((project.path / "heads.json").read_text()) == [
        ["artifact0-first", str((project.path / "first").resolve())],
        ["artifact1-second", str((project.path / "second").resolve())]]


# --- the report assembler and the selection ---------------------------------------------------

def test_evidence_in_that_cannot_be_read_is_refused(project):
    """--laya-evidence-in of a missing file is refused naming it and the OS error."""
    missing = project.path / "missing.json"
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", "e.json",
                                            "--laya-evidence-in", str(missing)),
                f"--laya-evidence-in {missing}: cannot read it ([Errno 2] No such file or directory: '{missing}')")


def test_evidence_in_of_another_format_is_refused(project):
    """--laya-evidence-in of a JSON file that is not evidence is refused naming the format it needs."""
    from laya_qual.plugin.assembler import EVIDENCE_FORMAT

    other = project.path / "other.json"
    other.write_text('{"format": "something else"}')
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", "e.json",
                                            "--laya-evidence-in", str(other)),
                f"--laya-evidence-in {other}: not a {EVIDENCE_FORMAT} file")


def test_a_coverage_file_is_read_for_the_report(project):
    """--laya-coverage is read when the report starts: a missing results file is refused by name."""
    missing = project.path / "coverage.json"
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-report", "r.jsonl",
                                            "--laya-coverage", str(missing)),
                f"--laya-coverage {missing}: not a laya-qual coverage results file "
                f"(FileNotFoundError(2, 'No such file or directory'))")


def test_a_second_kill_rate_file_of_one_kind_is_refused(project):
    """One suite.killRate per report: a second catalogue results file is refused naming it."""
    from laya_qual.measure.mutation import FORMAT, catalogue_digest, code_digests

    results = project.path / "mutation.json"
    results.write_text(json.dumps({
        "format": FORMAT, "catalogue": {"digest": catalogue_digest(), "defects": 2, "subset": False},
        "code": code_digests(), "scope": [], "hypothesisSeeds": [7], "complete": True, "confirmWholeSuite": True,
        "summary": {"killed": 1, "total": 2, "rate": 0.5, "survivors": [], "probabilistic": {}, "timeouts": []}}))
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-report", "r.jsonl", "--laya-kill-rate",
                                            str(results), "--laya-kill-rate", str(results)),
                f"--laya-kill-rate {results}: a second suite.killRate file; give one per kind")


def test_a_collection_error_is_recorded_in_the_evidence(project):
    """A module that fails to collect is named in the evidence's collection errors."""
    project.makepyfile(test_broken="def broken(:\n")
    result = project.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", "e.json",
                                         "--continue-on-collection-errors")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=1, errors=1)
    evidence = json.loads((project.path / "e.json").read_text())
    assert evidence["context"]["invocation"]["collectionErrors"] == ["test_broken.py"]


def test_a_shard_with_an_unreadable_durations_file_is_refused(project):
    """--laya-shard balances by --laya-durations: a file that is not JSON is refused naming it (exit 4)."""
    (project.path / "durations.json").write_text("{x")
    usage_error(project.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", "e.json", "--laya-shard", "1/2",
                                            "--laya-durations", "durations.json"),
                "durations file durations.json: not a laya-qual-durations/v1 file (JSONDecodeError('Expecting "
                "property name enclosed in double quotes: line 1 column 2 (char 1)'))")


def test_progress_goes_to_stderr_without_a_capture_manager(project):
    """With pytest's capture plugin off, the progress line is printed straight to stderr."""
    result = project.runpytest_inprocess("-p", "laya_qual", "--laya-evidence-out", "e.json", "-p", "no:capture")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
    progress = [line for line in result.stderr.lines if line.startswith("laya_qual progress:")]
    assert len(progress) == 1 and progress[0].startswith("laya_qual progress: 1/1 tests, "), result.stderr.lines


# --- report, signing, merge, shards, claims, figures ------------------------------------------

def test_a_test_with_two_outcomes_is_refused():
    """The test-result lists need one outcome per test: a test with two is named with both."""
    from laya_qual.report.model import AgreementError, tests_by_outcome

    claims = [{"evidence": [{"test": "t", "outcome": "passed"}]}, {"evidence": [{"test": "t", "outcome": "failed"}]}]
    with pytest.raises(AgreementError, match=r"^test t has outcomes 'passed' and 'failed'$"):
        tests_by_outcome(claims)


def test_an_unknown_outcome_is_refused():
    """An outcome outside the documented ones is refused naming the test and the outcome."""
    from laya_qual.report.model import AgreementError, tests_by_outcome

    with pytest.raises(AgreementError, match=r"^test t has unknown outcome 'someday'$"):
        tests_by_outcome([{"evidence": [{"test": "t", "outcome": "someday"}]}])


def _bound(predicate: dict) -> tuple[dict, dict, bytes]:
    """(test-result, laya-qual statement, payload) whose only fault is in ``predicate``."""
    import hashlib

    from laya_qual.report.model import PREDICATE_DESCRIPTOR

    payload = json.dumps({"predicate": predicate}).encode()
    test_result = {"subject": [], "predicate": {"configuration": [
        {"name": PREDICATE_DESCRIPTOR, "digest": {"sha256": hashlib.sha256(payload).hexdigest()}}]}}
    return test_result, {"subject": [], "predicate": predicate}, payload


@pytest.mark.parametrize("predicate, message", [
    ({"claims": []}, "laya-qual predicate has no claims list"),
    ({"claims": [{"id": "a.b", "verdict": "passed", "evidence": {}}]}, "claim a.b: evidence is not a list"),
])
def test_agreement_needs_claims_with_evidence_lists(predicate, message):
    """verify's agreement rules: a predicate without claims, or a claim whose evidence is no list, is refused."""
    from laya_qual.report.model import AgreementError, check_agreement

    with pytest.raises(AgreementError) as refused:
        check_agreement(*_bound(predicate))
    assert str(refused.value) == message


def test_an_envelope_whose_payload_type_is_not_a_string_is_refused(tmp_path):
    """open_envelope checks the envelope's shape before any signature."""
    from laya_qual.report.signing import SigningError, keygen, load_public_key, open_envelope

    keygen(tmp_path / "k")
    with pytest.raises(SigningError, match=r"^payloadType is not a string$"):
        open_envelope({"payload": "", "payloadType": 5, "signatures": []}, load_public_key(tmp_path / "k.pub"))


@pytest.mark.parametrize("duration", ["-1.0", "NaN"])
def test_a_negative_or_nan_duration_is_refused(tmp_path, duration):
    """The durations store's seconds are numbers >= 0; anything else refuses the file, named."""
    from laya_qual.plugin.shards import DURATIONS_FORMAT, ShardError, read_durations

    path = tmp_path / "durations.json"
    path.write_text(f'{{"format": "{DURATIONS_FORMAT}", "tests": {{"a": 1.0, "b": {duration}}}}}')
    with pytest.raises(ShardError) as refused:
        read_durations(path)
    assert str(refused.value) == f"durations file {path}: a duration is negative or not a number"


def test_a_claim_id_catalogued_twice_is_refused():
    """The catalogue refuses duplicate ids, naming them."""
    from laya_qual.claims import Claim, _catalogue

    with pytest.raises(ValueError, match=r"^claim ids catalogued twice: \['a\.b'\]$"):
        _catalogue(Claim("a.b", "one"), Claim("a.c", "two"), Claim("a.b", "three"))


def test_a_kill_rate_file_of_another_format_is_refused(tmp_path):
    """A results file whose format is neither mutate's nor the sample's is not a kill rate."""
    from laya_qual.measure.suite_figures import kill_rate

    path = tmp_path / "results.json"
    path.write_text('{"summary": {}, "code": {}, "format": "laya-qual-something-v1"}')
    with pytest.raises(pytest.UsageError) as refused:
        kill_rate(path, runtime="r", harness={})
    assert str(refused.value) == f"--laya-kill-rate {path}: not a laya-qual mutate results file (KeyError('format'))"


def test_a_traceability_map_of_another_format_is_refused(tmp_path):
    """load_map reads only its own format, named with the format found."""
    from laya_qual.measure.traceability import FORMAT, load_map

    path = tmp_path / "map.json"
    path.write_text('{"format": "v0", "ids": {}}')
    with pytest.raises(ValueError) as refused:
        load_map(path)
    assert str(refused.value) == f"{path}: format is 'v0', expected {FORMAT!r}"


def test_a_traceability_entry_without_text_is_a_problem(tmp_path):
    """Every map entry needs a text: a blank one is reported by its id."""
    from laya_qual.measure.traceability import check

    (tmp_path / "doc.md").write_text('A rule <a id="R-one"></a>.\n')
    trace = {"ids": {"R-one": {"doc": "doc.md", "kind": "rule", "text": "  ",
                               "gap": "no test holds this rule yet, for a reason"}}}
    assert check(tmp_path, trace, tmp_path) == ["R-one: no text"]


# --- subjects and environment -----------------------------------------------------------------

def _git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str]:
    """A git checkout with one committed directory ``tracked`` and nothing else: (root, HEAD)."""
    root = tmp_path / "repo"
    (root / "tracked").mkdir(parents=True)
    (root / "tracked" / "a.py").write_text("a = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "one")
    return root, _git(root, "rev-parse", "HEAD")


def test_a_clean_tracked_directory_has_a_commit(repo):
    """clean_git_commit and git_commit give HEAD for a tracked directory of a clean checkout."""
    from laya_qual.report.environment import git_commit
    from laya_qual.subjects import clean_git_commit

    root, head = repo
    assert clean_git_commit(root / "tracked") == head
    assert git_commit(root / "tracked") == {"commit": head, "dirty": False}


def test_an_untracked_or_changed_directory_has_no_clean_commit(repo):
    """Untracked sources, or local changes under the directory, give no commit; git_commit says dirty."""
    from laya_qual.report.environment import git_commit
    from laya_qual.subjects import clean_git_commit

    root, head = repo
    (root / "untracked").mkdir()
    (root / "untracked" / "b.py").write_text("b = 2\n")
    assert clean_git_commit(root / "untracked") is None
    assert git_commit(root / "untracked") is None
    (root / "tracked" / "a.py").write_text("a = 2\n")
    assert clean_git_commit(root / "tracked") is None
    assert git_commit(root / "tracked") == {"commit": head, "dirty": True}


def test_artifact_digests_skip_pycache(tmp_path):
    """Byte-code caches are not part of an artifact's digest."""
    from laya_qual.subjects import artifact_digest

    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"cache")
    (tmp_path / "head.json").write_text("{}")
    assert list(artifact_digest(tmp_path)[1]) == ["head.json"]


@pytest.mark.parametrize("name", ["a\\b", "a\nb"])
def test_a_file_name_with_a_backslash_or_newline_is_refused(tmp_path, name):
    """sha256sum escapes such names, so no portable digest line exists: refused naming the file."""
    from laya_qual.subjects import SubjectError, artifact_digest

    (tmp_path / name).write_text("x")
    with pytest.raises(SubjectError) as refused:
        artifact_digest(tmp_path)
    said = f"{tmp_path / name!r}: a newline or backslash in a file name is not digested (refused)"
    assert str(refused.value) == said and "\n" not in said  # one line, even for a name with a newline


def test_an_empty_artifact_directory_is_refused(tmp_path):
    """An artifact with no file has nothing to vouch for."""
    from laya_qual.subjects import SubjectError, artifact_digest

    with pytest.raises(SubjectError) as refused:
        artifact_digest(tmp_path)
    assert str(refused.value) == f"{tmp_path}: no files to digest"


def test_package_dir_of_no_package_is_none():
    """Neither a name that does not import nor a plain module is a package directory."""
    import laya_qual
    from laya_qual.subjects import package_dir

    assert package_dir("laya_qual_no_such_package") is None
    assert package_dir("json.decoder") is None
    assert package_dir("laya_qual") == Path(laya_qual.__file__).parent


def test_a_head_json_that_is_not_a_head_gives_an_entry_with_the_reason(tmp_path):
    """A head.json whose kind is not a string: kind null, no tasks, and why."""
    from laya_qual.subjects import artifact_subject, head_entry

    (tmp_path / "head.json").write_text('{"kind": 1, "tasks": []}')
    subject = artifact_subject(tmp_path, "head")
    assert head_entry(tmp_path, subject) == {
        "subject": subject["name"], "kind": None, "tasks": [],
        "error": "head.json: not an object with a string kind and a list of task objects"}


def test_an_uninstalled_distribution_has_no_version():
    """The environment records None for a package that is not installed."""
    from laya_qual.report.environment import _version

    assert _version("laya-qual-no-such-distribution") is None


# --- provenance, coverage run, mutation helpers, serving bench --------------------------------

def test_a_test_id_without_a_suite_directory_is_its_node_id(tmp_path):
    """With no suite directory (or no file), a node id is kept as it is."""
    from laya_qual.report.provenance import test_id

    assert test_id("test_x.py::test_a", "test_x.py", tmp_path, None) == "test_x.py::test_a"
    assert test_id("test_x.py::test_a", "", tmp_path, tmp_path) == "test_x.py::test_a"


def test_package_files_are_the_measured_packages_sources(tmp_path):
    """package_files: every *.py of laya and laya_qual under the root, sorted, byte-code caches left out."""
    from laya_qual.measure.coverage_run import package_files, package_of

    for rel, text in {"laya/a.py": "a", "laya/__pycache__/c.py": "cached", "laya_qual/b.py": "b",
                      "other/d.py": "d", "laya/e.txt": "e"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert package_files(tmp_path) == [("laya/a.py", "a"), ("laya_qual/b.py", "b")]
    assert package_of("other/d.py") is None
    # the longest layout prefix wins: the suite and the strategies are packages of their own
    assert [package_of(rel) for rel in ("laya/a.py", "laya_qual/b.py", "laya_qual/suite/test_c.py",
                                        "laya_qual/synth/d.py")] == ["laya", "laya_qual", "laya_qual.suite",
                                                                     "laya_qual.synth"]


def test_combining_a_run_that_left_no_data_is_refused(tmp_path):
    """A coverage run that left no data file is refused naming the directory."""
    from laya_qual.measure.coverage_run import CoverageError, combine

    with pytest.raises(CoverageError) as refused:
        combine(tmp_path / "coveragerc", tmp_path, tmp_path / ".coverage")
    assert str(refused.value) == f"the run left no coverage data in {tmp_path}"


def test_a_data_file_coverage_py_cannot_combine_is_refused_with_its_words(tmp_path):
    """coverage.py's own command combines; when it fails, its exit status and its message
    are in the refusal, not a traceback."""
    from laya_qual.measure.coverage_run import CoverageError, combine

    (tmp_path / ".coverage.broken").write_text("not a coverage data file")
    (tmp_path / "coveragerc").write_text("[run]\nbranch = True\n")
    with pytest.raises(CoverageError) as refused:
        combine(tmp_path / "coveragerc", tmp_path, tmp_path / ".coverage")
    assert re.fullmatch(r"coverage combine failed \(exit 1\): .*(\n.*)*", str(refused.value))
    assert "Couldn't use data file" in str(refused.value) and ".coverage.broken" in str(refused.value)
    assert "\\n" not in str(refused.value)  # its words as text, not a bytes object's repr


def test_coverage_run_times_are_utc_seconds():
    """The results' timestamps are UTC to the second, ISO 8601 with a Z."""
    import re

    from laya_qual.measure.coverage_run import _now

    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", _now())


def test_covering_tests_leave_out_files_outside_the_copy(tmp_path):
    """Lines measured in files outside the measured copy (the interpreter's, a plugin's) belong to no mutant."""
    from coverage import CoverageData

    from laya_qual.measure.mutant_run import covering_tests

    root = tmp_path / "root"
    (root / "laya").mkdir(parents=True)
    (root / "laya" / "m.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "elsewhere.py").write_text("c = 3\n")
    data_file = tmp_path / "data" / ".coverage"
    data_file.parent.mkdir()
    data = CoverageData(basename=str(data_file))
    data.set_context("t.py::test_a|run")
    data.add_lines({str(tmp_path / "elsewhere.py"): [1], str(root / "laya" / "m.py"): [1, 2]})
    data.write()
    assert covering_tests(data_file, root) == {"laya/m.py": {1: {"t.py::test_a"}, 2: {"t.py::test_a"}}}


def _defect(**changes):
    from laya_qual.measure.defects import Defect

    fields = {"id": "x.one", "area": "x", "claims": ("x.a",), "file": "laya/errors.py",
              "find": "class LayaError", "replace": "class LayaErr", "why": "a test defect"}
    return Defect(**{**fields, **changes})


@pytest.mark.parametrize("defects, message", [
    ([_defect(), _defect()], "defect x.one: id listed twice"),
    ([_defect(replace="class LayaError")], "defect x.one: changes nothing or names no claims"),
    ([_defect(claims=())], "defect x.one: changes nothing or names no claims"),
])
def test_a_malformed_catalogue_is_refused_naming_the_defect(defects, message):
    """check_catalogue: ids unique, every defect changes its file and names claims."""
    from laya_qual.measure.mutation import MutationError, check_catalogue, installed_layout

    with pytest.raises(MutationError) as refused:
        check_catalogue(defects, installed_layout())
    assert str(refused.value) == message


def test_a_defect_in_a_missing_file_is_refused():
    """A defect naming a file that is not in the installed tree is refused with the path looked at."""
    from laya_qual.measure.mutation import MutationError, check_catalogue, installed_layout

    layout = installed_layout()
    with pytest.raises(MutationError) as refused:
        check_catalogue([_defect(file="laya/no_such_module.py")], layout)
    path = layout["laya"] / "no_such_module.py"
    assert str(refused.value) == f"defect x.one: no file laya/no_such_module.py ({path})"


def test_a_defect_outside_the_layout_is_refused():
    """A catalogue path outside every package prefix is refused, listing the prefixes."""
    from laya_qual.measure.mutation import LAYOUT, MutationError, _source, installed_layout

    with pytest.raises(MutationError) as refused:
        _source(installed_layout(), "elsewhere/x.py")
    assert str(refused.value) == f"elsewhere/x.py: not under any of {sorted(LAYOUT.values())}"


def test_a_defect_selects_its_claims_then_its_area():
    """A defect's run selects its claims and its area, each once, in that order."""
    from laya_qual.measure.mutation import _selection

    assert _selection(_defect(claims=("x.a", "x.b", "x.a"), area="x")) == ["x.a", "x.b", "x"]


def test_a_no_mutate_line_and_an_unchanged_tree_give_no_mutant():
    """The population leaves out lines marked `pragma: no mutate` and replacements that change nothing."""
    from laya_qual.measure.mutants import module_mutants

    marked = [(m.line, m.operator) for m in module_mutants("x = 1  # pragma: no mutate\ny = 2\n", "m.py")]
    assert marked == [(2, "statement-dropped"), (2, "constant"), (2, "constant")]
    same_keys = [m.operator for m in module_mutants('x = {"a": 1, "a": 2}\n', "m.py")]
    assert "sibling-name" not in same_keys
    assert "sibling-name" in [m.operator for m in module_mutants('x = {"a": 1, "b": 2}\n', "m.py")]


def test_load_heads_refuses_an_unknown_way():
    """load_heads loads heads shared or standalone, nothing else."""
    from laya_qual.bench.serving_bench import load_heads

    with pytest.raises(ValueError, match=r"^load_heads: 'both' is neither 'shared' nor 'standalone'$"):
        load_heads("both", {})


def test_onnx_runtime_is_a_cpu_only_peer():
    """With every peer installed, a non-CPU device leaves out only the ONNX Runtime arm, saying why."""
    import importlib.util

    from laya_qual.bench.serving_bench import ONNX_PACKAGES, missing_peers

    if not all(importlib.util.find_spec(n) for n in ("transformers", *ONNX_PACKAGES)):
        pytest.skip("a peer package is not installed here")
    assert missing_peers("cuda") == {"onnxruntime": "the arm runs ONNX Runtime's CPU provider only"}
    assert missing_peers("cpu") == {}


def test_a_served_error_is_raised():
    """_served passes a prediction through and raises a LayaError the server answered with."""
    from laya.errors import LayaError
    from laya_qual.bench.serving_bench import _served

    error = LayaError("refused")
    with pytest.raises(LayaError) as raised:
        _served(error)
    assert raised.value is error


def test_keygen_refuses_a_key_file_that_appears_after_its_check(tmp_path, monkeypatch):
    """A key created by someone else between keygen's check and its write (the window
    held open here) is refused by name, never overwritten, and no .pub is left behind."""
    from laya_qual.report import signing

    (tmp_path / "key").write_text("someone else's key")
    monkeypatch.setattr(signing.os.path, "lexists", lambda path: False)  # the check ran before it appeared
    with pytest.raises(signing.SigningError, match=r"key: already exists \(refusing to overwrite a key\)$"):
        signing.keygen(tmp_path / "key")
    assert (tmp_path / "key").read_text() == "someone else's key"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]


def test_fresh_evolution_workspaces_live_under_the_session_directory(tmp_path):
    """Every workspace the suite's evolution fixtures prepare lies under their directory
    (pytest's temporary one), so nothing is left in the system's temporary folder."""
    from laya.evolution.workspace import Experiment
    from laya_qual.plugin.evolution_fixtures import EvolutionWorkspaces

    first, second = (EvolutionWorkspaces(tmp_path, group=None).fresh(Experiment()) for _ in range(2))
    assert tmp_path in first.parent_file.parents and tmp_path in second.parent_file.parents
    assert first.parent_file.parent != second.parent_file.parent  # each one a directory of its own
