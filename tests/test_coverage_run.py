"""laya-qual coverage (laya_qual.measure.coverage_run) and the suite.coverage figure it signs
into a report (laya_qual.measure.suite_figures.coverage): the parts that can be checked without
a whole-suite run."""

from __future__ import annotations

import inspect
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import coverage as coverage_py
import pytest

from laya_qual.measure import coverage_run
from laya_qual.measure.coverage_run import (CONTEXT_MODULE, CONTEXT_PLUGIN, combine, contexts, exclusions, figures,
                                    pytest_args, rcfile, relocate)
from laya_qual.measure.mutation import MutationError, build_root, code_digests
from laya_qual.measure.suite_figures import coverage

PRAGMA = "# pragma" ": no cover"  # spelled apart: this file is no measured package, but stay safe
BRANCH = "# pragma" ": no branch"


def top_level_env(*, measured: bool = False, **extra: str) -> dict[str, str]:
    """This environment as a user's shell gives it: no xdist worker or pytest options, and no
    coverage measurement unless ``measured`` (then a command is measured where this test is)."""
    dropped = ("PYTEST_XDIST_", "PYTEST_ADDOPTS") + (() if measured else ("COVERAGE_PROCESS_",))
    return {k: v for k, v in os.environ.items() if not k.startswith(dropped)} | extra


def test_a_pragma_needs_a_written_reason():
    text = "\n".join([
        f"x = 1  {PRAGMA} — the em dash form",
        f"y = 2  {PRAGMA} - a hyphen works too",
        f"if z:  {BRANCH} -- always true here",
        f"w = 3  {PRAGMA}",
        f"v = 4  {PRAGMA} —   ",
        f"u = 5  {PRAGMA}: a colon is no dash",
        "#pragma:no cover",
        "t = 'pragma: no mutate'  # another tool's pragma is none of ours",
        f"s = 6  {PRAGMA} — a reason that",
        "    # goes on below",
        "r = 7  # not a comment-only line: no part of it",
        f"q = 8  {PRAGMA} --",
    ])
    found, unexplained = exclusions([("laya/x.py", text)])
    assert found == [
        {"file": "laya/x.py", "line": 1, "kind": "no cover", "reason": "the em dash form"},
        {"file": "laya/x.py", "line": 2, "kind": "no cover", "reason": "a hyphen works too"},
        {"file": "laya/x.py", "line": 3, "kind": "no branch", "reason": "always true here"},
        {"file": "laya/x.py", "line": 9, "kind": "no cover", "reason": "a reason that goes on below"}]
    assert unexplained == ["laya/x.py:4", "laya/x.py:5", "laya/x.py:6", "laya/x.py:7", "laya/x.py:12"]


def test_the_measured_packages_carry_no_unexplained_pragma():
    from laya_qual.measure.mutation import LAYOUT, installed_layout

    layout = installed_layout()
    files = [(f"{LAYOUT[name]}/{p.relative_to(layout[name]).as_posix()}", p.read_text(encoding="utf-8"))
             for name in layout for p in sorted(layout[name].rglob("*.py")) if "__pycache__" not in p.parts]
    assert exclusions(files)[1] == []


def test_the_measured_sources_are_read_as_utf8_whatever_the_locale(tmp_path):
    """package_files reads each measured ``*.py`` file (``__pycache__`` left out) as the UTF-8
    Python source is, even where the locale's encoding is ASCII (a POSIX locale, neither
    coerced nor in UTF-8 mode): a pragma's reason after an em dash, a "Σ" in a docstring."""
    sources = {"laya/sub/a.py": f'"""Σ of the heads."""\nx = 1  {PRAGMA} — never reached\n',
               "laya_qual/b.py": "y = 'µs'\n", "laya/__pycache__/c.py": "z = 'cached'\n"}
    for rel, text in sources.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(text.encode("utf-8"))
    script = ("import codecs, json, locale, sys\n"
              "assert codecs.lookup(locale.getpreferredencoding(False)).name == 'ascii'\n"
              "from pathlib import Path\nfrom laya_qual.measure.coverage_run import package_files\n"
              "print(json.dumps(package_files(Path(sys.argv[1]))))")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, timeout=60,
                          env=top_level_env(LC_ALL="POSIX", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode(errors="replace")
    read = [tuple(pair) for pair in json.loads(proc.stdout)]
    assert read == [(rel, sources[rel]) for rel in ("laya/sub/a.py", "laya_qual/b.py")]
    assert exclusions(read)[0] == [{"file": "laya/sub/a.py", "line": 2, "kind": "no cover", "reason": "never reached"}]


MODULE = f'''
def f(x):
    if x > 0:
        return "positive"
    return "not positive"


def only_in_a_subprocess(x):
    if x:
        return 1
    return 0  {PRAGMA} — the subprocess always passes a true x


def never():  {PRAGMA}
    return 2
'''

TESTS = '''
import subprocess
import sys

import laya.m


def test_in_process():
    assert laya.m.f(1) == "positive"


def test_in_a_subprocess():
    out = subprocess.run([sys.executable, "-c", "import laya.m; print(laya.m.only_in_a_subprocess(1))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
'''


def measured_layout(tmp_path: Path, module: str, tests: str, *, returncode: int = 0) -> tuple[Path, Path, Path]:
    """``(root, data file, rc file)``: a throwaway layout (laya/m.py holding ``module``,
    laya_qual/, test_t.py holding ``tests``) whose tests ran the way laya-qual coverage runs
    the suite (pytest exiting with ``returncode``), the data combined."""
    root = tmp_path / "root"
    (root / "laya").mkdir(parents=True)
    (root / "laya_qual").mkdir()
    (root / "laya" / "__init__.py").write_text("")
    (root / "laya" / "m.py").write_text(module)
    (root / "laya_qual" / "__init__.py").write_text("")
    (root / "test_t.py").write_text(tests)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / f"{CONTEXT_MODULE}.py").write_text(CONTEXT_PLUGIN)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_file, rc = data_dir / ".coverage", tmp_path / "coveragerc"
    rc.write_text(rcfile(data_file, root))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "test_t.py", *pytest_args(rc)], cwd=root, capture_output=True, text=True,
                          env=top_level_env(PYTHONPATH=str(root)))
    assert proc.returncode == returncode, proc.stdout + proc.stderr
    combine(rc, data_dir, data_file)
    return root, data_file, rc


@pytest.mark.slow
def test_subprocess_data_is_combined_and_labelled_with_its_test(tmp_path):
    """A throwaway layout (laya/, laya_qual/) measured the way laya-qual coverage measures
    the suite: what only a subprocess executes is counted, under the test that started it;
    a reasoned pragma excludes its line, a bare one does not."""
    root, data_file, rc = measured_layout(tmp_path, MODULE, TESTS)
    packages, files = figures(rc, data_file, root)
    m = files["laya/m.py"]
    lines = MODULE.splitlines()
    subprocess_only = next(i for i, line in enumerate(lines, 1) if "return 1" in line)
    assert subprocess_only not in m["missingLines"]
    assert next(i for i, line in enumerate(lines, 1) if "return 0" in line) not in m["missingLines"]  # excluded
    assert next(i for i, line in enumerate(lines, 1) if "return 2" in line) in m["missingLines"]  # bare pragma
    assert m["missingBranches"] == [[3, 5]]  # f(x) never saw x <= 0; the excluded arm is no branch
    assert packages["laya"]["branches"] == {"covered": 1, "total": 2}  # the excluded arm leaves no branch
    assert packages["laya"]["files"] == 2
    assert sorted(files) == ["laya/__init__.py", "laya/m.py", "laya_qual/__init__.py"]
    assert packages["laya"]["statements"]["covered"] - packages["laya"]["inProcessOnly"]["statements"]["covered"] == 2
    from coverage import CoverageData

    kept = tmp_path / "kept.coverage"
    stale = CoverageData(basename=str(kept))  # what an earlier run left at the same path is replaced, not added to
    stale.add_lines({"laya/stale.py": [1]})
    stale.write()
    relocate(data_file, root, kept)
    data = CoverageData(basename=str(kept))
    data.read()
    assert sorted(data.measured_files()) == ["laya/__init__.py", "laya/m.py", "laya_qual/__init__.py"]
    assert data.contexts_by_lineno("laya/m.py")[subprocess_only] == ["test_t.py::test_in_a_subprocess|subprocess"]
    assert contexts(kept) == {"tests": 2, "testsWithSubprocesses": 1}


OUTER_CHILD = """
import shutil, sys
from pathlib import Path
from laya_qual.measure.coverage_run import combine, figures
root, data_file, rc, pieces = map(Path, sys.argv[1:])
figures(rc, data_file, root)
shutil.copy(data_file, pieces / ".coverage.piece")
combine(rc, pieces, pieces / ".coverage")
"""


@pytest.mark.slow
def test_combining_and_reporting_leave_a_measurement_this_process_is_under_whole(tmp_path):
    """Combining and reporting run coverage.py's command line in processes of their own: a
    coverage.Coverage object made in the process would make coverage.py drop what a
    measurement it runs under (patch = subprocess: a user's own run, or the project's
    tests under a mutation baseline measuring `laya-qual coverage`) had collected there."""
    root, data_file, rc = measured_layout(tmp_path, MODULE, TESTS)
    outer, pieces = tmp_path / "outer", tmp_path / "pieces"
    outer.mkdir()
    pieces.mkdir()
    (outer / "rc").write_text(f"[run]\nparallel = True\npatch = subprocess\ndata_file = {outer / '.coverage'}\n"
                              "source = laya_qual\n")
    (outer / "driver.py").write_text(
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {OUTER_CHILD!r}, *sys.argv[1:]], check=True)\n")
    run = subprocess.run([sys.executable, "-m", "coverage", "run", f"--rcfile={outer / 'rc'}", str(outer / "driver.py"),
                          str(root), str(data_file), str(rc), str(pieces)],
                         capture_output=True, text=True, env=top_level_env(), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (pieces / ".coverage").is_file()
    subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={outer / 'rc'}", "-q"], check=True,
                   env=top_level_env(), cwd=tmp_path)
    from coverage import CoverageData

    data = CoverageData(basename=str(outer / ".coverage"))
    data.read()
    [measured] = [f for f in data.measured_files() if f.endswith("laya_qual/measure/coverage_run.py")]
    source, first = inspect.getsourcelines(figures)
    assert first + len(source) - 1 in data.lines(measured)  # figures' return: only the child ran it


def test_the_tests_a_data_file_labels_are_counted_by_node_id(tmp_path):
    """A label is `<node id>|<where>`: a test is counted once whatever it ran in, a node id
    may itself hold a "|" (a parameter), and a fixture's shared label is no test."""
    from coverage import CoverageData

    data = CoverageData(basename=str(tmp_path / ".coverage"))
    for context, line in [("t.py::a|run", 1), ("t.py::b[x|y]|run", 2), ("t.py::b[x|y]|subprocess", 3),
                          ("t.py::c|run", 4), ("t.py::c|subprocess", 6), ("shared:server|run", 5)]:
        data.set_context(context)
        data.add_lines({str(tmp_path / "m.py"): [line]})
    data.write()
    assert contexts(tmp_path / ".coverage") == {"tests": 3, "testsWithSubprocesses": 2}


SHARED_MODULE = """
def prepare():
    return "prepared"


def serve(line):
    return line.upper()


def per_test():
    return "mine"
"""

SHARED_TESTS = '''
import subprocess
import sys

import pytest

import laya.m

SERVER = "import sys, laya.m\\nfor line in sys.stdin:\\n    print(laya.m.serve(line.strip()), flush=True)"


@pytest.fixture(scope="session")
def server():
    assert laya.m.prepare() == "prepared"
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield proc
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def ask(server, word):
    server.stdin.write(word + "\\n")
    server.stdin.flush()
    return server.stdout.readline().strip()


def test_first_user(server):
    assert ask(server, "a") == "A"


def test_second_user(server):
    assert ask(server, "b") == "B"


def test_no_user():
    assert laya.m.per_test() == "mine"
'''


@pytest.mark.slow
def test_what_a_shared_fixture_runs_belongs_to_every_test_that_uses_it(tmp_path):
    """A session fixture's setup, and the process it keeps for the session, run once, under
    whichever test came first; a mutant there changes what every user of the fixture gets,
    so every user is one of its covering tests (and no other test is)."""
    from laya_qual.measure.mutant_run import covering_tests

    root, data_file, _ = measured_layout(tmp_path, SHARED_MODULE, SHARED_TESTS)
    lines = covering_tests(data_file, root)["laya/m.py"]
    users = {"test_t.py::test_first_user", "test_t.py::test_second_user"}
    assert lines[3] == users  # prepare(), in the test process, while the fixture was set up
    assert lines[7] == users  # serve(), in the process the fixture keeps
    assert lines[11] == {"test_t.py::test_no_user"}
    assert contexts(data_file) == {"tests": 1, "testsWithSubprocesses": 0}  # a fixture is no test


RUNS_TESTS = """
import unittest


class Inherited:  # a Hypothesis state machine's TestCase gets runTest from Hypothesis's module
    def runTest(self):
        pass


class TestMachine(Inherited, unittest.TestCase):
    pass


class TestGroup:
    def test_in_a_class(self):
        pass


def test_red():
    assert False


def test_green():
    pass
"""


@pytest.mark.slow
def test_each_test_run_is_recorded_by_the_node_id_pytest_takes_back(tmp_path):
    """A mutation stage names the tests it runs by node id; those of a class (a junit
    report's dotted ``classname`` cannot tell a class from a module) must come back as
    pytest takes them, with their seconds and whether they failed."""
    from laya_qual.measure.coverage_run import recorded_runs

    root, data_file, _ = measured_layout(tmp_path, MODULE, RUNS_TESTS, returncode=1)
    runs = recorded_runs(data_file.parent)
    assert sorted(runs) == ["test_t.py::TestGroup::test_in_a_class", "test_t.py::TestMachine::runTest",
                            "test_t.py::test_green", "test_t.py::test_red"]
    assert [t for t, run in sorted(runs.items()) if run["failed"]] == ["test_t.py::test_red"]
    assert all(run["seconds"] >= 0 for run in runs.values())
    again = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                            *sorted(runs)], cwd=root, capture_output=True, text=True,
                           env=top_level_env(PYTHONPATH=str(root)))
    assert again.returncode == 1 and "1 failed, 3 passed" in again.stdout, again.stdout + again.stderr


def _results(tmp_path: Path, **changes) -> Path:
    """A finished laya-qual coverage results file and its data file beside it."""
    (tmp_path / "c.coverage").write_bytes(b"coverage data stand-in")
    result = {"format": coverage_run.FORMAT, "code": code_digests(), "hypothesisSeed": 7, "maxWorkers": 2,
              "scope": [], "complete": True, "coveragePy": "7.17.5", "branch": True, "patch": ["subprocess", "_exit"],
              "benchmarks": "excluded", "contexts": {"tests": 500, "testsWithSubprocesses": 12},
              "redOnlyUnderCoverage": ["t.py::test_a_signal_in_time"],
              "dataFile": "c.coverage", "dataDigest": coverage_run.sha256(tmp_path / "c.coverage"),
              "packages": {"laya": {"files": 40, "statements": {"covered": 900, "total": 1000},
                                    "branches": {"covered": 300, "total": 400},
                                    "inProcessOnly": {"statements": {"covered": 800, "total": 1000},
                                                      "branches": {"covered": 250, "total": 400}}},
                           "laya_qual": {"files": 20, "statements": {"covered": 80, "total": 100},
                                         "branches": {"covered": 30, "total": 50}}},
              "exclusions": [{"file": "laya/a.py", "line": 3, "kind": "no cover", "reason": "defensive"}],
              "files": {}}
    result.update(changes)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(result))
    return path


def test_coverage_is_refused_unless_measured_on_this_code_whole(tmp_path):
    digests = code_digests()
    mine = {"runtime": digests["runtime"], "harness": digests["harness"]}
    figure = coverage(_results(tmp_path), **mine)
    assert figure["packages"]["laya"]["branches"] == {"covered": 300, "total": 400}
    assert figure["exclusions"][0]["reason"] == "defensive" and figure["testsWithSubprocesses"] == 12
    # the run's settings as measured, each under its own name
    assert {k: figure[k] for k in ("hypothesisSeed", "coveragePy", "branch", "patch", "benchmarks", "tests")} == {
        "hypothesisSeed": 7, "coveragePy": "7.17.5", "branch": True, "patch": ["subprocess", "_exit"],
        "benchmarks": "excluded", "tests": 500}
    assert figure["redOnlyUnderCoverage"] == ["t.py::test_a_signal_in_time"]
    older = json.loads(_results(tmp_path).read_text())  # measured before the allowance: it allowed none
    del older["redOnlyUnderCoverage"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    assert coverage(tmp_path / "older.json", **mine)["redOnlyUnderCoverage"] == []
    with pytest.raises(pytest.UsageError, match="measured on runtime dirHash 0+, .*rerun laya-qual coverage"):
        coverage(_results(tmp_path, code={**digests, "runtime": "0" * 64}), **mine)
    with pytest.raises(pytest.UsageError, match="suite/harness"):
        coverage(_results(tmp_path), runtime=digests["runtime"], harness={**digests["harness"], "laya_qual": "x"})
    for partial in ({"scope": ["request.validation"]}, {"complete": False}):
        with pytest.raises(pytest.UsageError, match="partial or unfinished run"):
            coverage(_results(tmp_path, **partial), **mine)
    with pytest.raises(pytest.UsageError, match="is missing or is not the file it names"):
        coverage(_results(tmp_path, dataDigest="0" * 64), **mine)
    path = _results(tmp_path)
    (tmp_path / "c.coverage").unlink()
    with pytest.raises(pytest.UsageError, match="is missing or is not the file it names"):
        coverage(path, **mine)
    with pytest.raises(pytest.UsageError, match="not a laya-qual coverage results file"):
        coverage(_results(tmp_path, format="laya-qual-mutation-v1"), **mine)


MINI = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_verdicts():
    pass
"""


@pytest.mark.slow
def test_report_carries_the_coverage_and_show_prints_it(tmp_path):
    from click.testing import CliRunner

    from laya_qual.cli import main

    (tmp_path / "test_mini.py").write_text(MINI)
    assert CliRunner().invoke(main, ["keygen", str(tmp_path / "key")]).exit_code == 0
    bundle = tmp_path / "r.intoto.jsonl"
    base = [sys.executable, "-m", "pytest", "-p", "laya_qual", "-q", "test_mini.py", "-n", "0",
            "--laya-claims", "report", "--laya-coverage", str(_results(tmp_path))]
    refused = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, env=top_level_env())
    assert refused.returncode == 4 and "--laya-coverage goes into a signed report" in refused.stderr
    proc = subprocess.run([*base, "--laya-report", bundle, "--laya-signing-key", tmp_path / "key"],
                          cwd=tmp_path, capture_output=True, text=True, env=top_level_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = CliRunner().invoke(main, ["show", str(bundle), "--public-key", str(tmp_path / "key.pub")])
    assert shown.exit_code == 0, shown.output
    assert ("coverage  laya: statements 900/1000 (90.0%), branches 300/400 (75.0%); without subprocesses "
            "80.0% / 62.5%") in shown.output
    assert "coverage  laya_qual: statements 80/100 (80.0%), branches 30/50 (60.0%)" in shown.output
    assert "500 tests (12 with subprocesses), 1 exclusions with reasons" in shown.output
    assert "red only under coverage (green without it): t.py::test_a_signal_in_time\n" in shown.output


def coverage_command(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`laya-qual coverage ARGS` as a user runs it, in ``cwd``; measured too where this test is
    (what it starts is not: laya-qual coverage strips COVERAGE_PROCESS_* from its children)."""
    return subprocess.run([sys.executable, "-c", "from laya_qual.cli import main; main()", "coverage", *args],
                          capture_output=True, text=True, env=top_level_env(measured=True, **env), cwd=cwd,
                          timeout=600)


@pytest.mark.slow
def test_a_partial_run_end_to_end(tmp_path):
    """laya-qual coverage --claims request.validation -n 0 on an isolated copy: the results
    name this code and the kept data file by sha256; the figure is partial, so a report
    refuses it (about 15 s)."""
    out = tmp_path / "c.json"
    measured = code_digests()
    proc = coverage_command(tmp_path, "-n", "0", "--hypothesis-seed", "0", "--claims", "request.validation",
                            "--output", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["code"] == measured and result["scope"] == ["request.validation"]
    assert result["dataDigest"] == coverage_run.sha256(tmp_path / "c.coverage")
    laya = result["packages"]["laya"]
    assert 0 < laya["branches"]["covered"] < laya["branches"]["total"]
    assert result["files"]["laya/serving/request.py"]["statements"][0] > 0
    assert {e["file"] for e in result["exclusions"]} >= {"laya/artifact/manifest.py", "laya/evolution/group.py"}
    assert "laya: statements" in proc.stdout and f"results: {out}" in proc.stdout
    missed = sorted((total - covered, name) for name, figures in result["files"].items() if name.startswith("laya/")
                    for covered, total in [figures["branches"]] if total > covered)
    worst = sorted(missed, key=lambda nf: (-nf[0], nf[1]))[:8]  # most missed first, by name among equals
    assert len(worst) == 8 and [line for line in proc.stdout.splitlines() if line.endswith(" branches missed")] == [
        f"  {name}: {n} branches missed" for n, name in worst]
    said = re.findall(r"^\[laya-qual coverage \d\d:\d\d:\d\d\] (.*)$", proc.stderr, re.M)
    assert len(said) == 2 and said[0].startswith(
        "suite under coverage (branches, subprocesses, a context per test), -n 0, hypothesis seed 0; copy under "), said
    assert re.fullmatch(r"suite green in \d+s; combining the data files", said[1]), said
    with pytest.raises(pytest.UsageError, match="partial or unfinished run"):
        coverage(out, runtime=result["code"]["runtime"], harness=result["code"]["harness"])


@pytest.mark.slow
def test_a_coverage_run_past_its_timeout_gives_no_figure(tmp_path):
    """--timeout bounds the suite's run: two seconds do not see pytest start, so the run
    is stopped, no figure is written, and the error says why."""
    out = tmp_path / "c.json"
    proc = coverage_command(tmp_path, "-n", "0", "--hypothesis-seed", "0", "--claims", "request.validation",
                            "--timeout", "2", "--output", str(out))
    assert proc.returncode != 0 and "not green under coverage (timeout" in proc.stderr, proc.stdout + proc.stderr
    assert not out.exists()


@pytest.mark.slow
def test_a_scoped_coverage_run_from_the_command_line_keeps_its_data_and_leaves_no_copy(tmp_path):
    """`laya-qual coverage --claims request.validation,cli.help` end to end (about twenty
    seconds): a partial figure of two claims' tests, what `laya --help` ran in its own
    process combined in, the data kept beside the results under the digest they name, its
    contexts those tests, and the copy removed."""
    out, scratch = tmp_path / "cov.json", tmp_path / "tmp"
    scratch.mkdir()
    proc = coverage_command(tmp_path, "--claims", "request.validation,cli.help", "-n", "0", "--hypothesis-seed", "0",
                            "--output", str(out), TMPDIR=str(scratch))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    kept = tmp_path / result["dataFile"]
    assert kept == out.with_suffix(".coverage") and result["dataDigest"] == coverage_run.sha256(kept)
    assert result["scope"] == ["request.validation", "cli.help"] and result["complete"]
    assert result["code"] == code_digests()
    assert result["contexts"]["tests"] > 0 and result["contexts"] == contexts(kept)
    laya = result["packages"]["laya"]
    assert 0 < laya["statements"]["covered"] < laya["statements"]["total"]
    assert laya["statements"]["covered"] > laya["inProcessOnly"]["statements"]["covered"]  # laya --help's process
    assert list(scratch.glob("laya-coverage-*")) == [], "the measured copy was left behind"


def _run_suite_leaving(pieces: dict[str | None, tuple[str, int]], seconds: float = 1.0):
    """A stand-in for the suite's run under coverage: green after ``seconds``, leaving one data file per
    ``{suffix: (context, line of laya/__init__.py)}`` beside the data file the rc file names
    (suffix None: the un-suffixed file pytest-cov combines into at the end of its session)."""
    from coverage import CoverageData

    from laya_qual.measure.mutation import RunResult

    def run_suite(root: Path, **kwargs) -> RunResult:
        [rc] = [Path(a.partition("=")[2]) for a in kwargs["extra"] if a.startswith("--cov-config=")]
        data_file = re.search(r"^data_file = (.*)$", rc.read_text(), re.M)[1]
        for suffix, (context, line) in pieces.items():
            data = CoverageData(basename=data_file, suffix=suffix)
            data.set_context(context)
            data.add_arcs({str(root / "laya" / "__init__.py"): {(-1, line), (line, -1)}})
            data.write()
        return RunResult("passed", None, seconds, 0, "")
    return run_suite


@pytest.mark.slow
def test_a_run_is_measured_with_every_data_file_it_left_combined(tmp_path, monkeypatch):
    """What a subprocess wrote after pytest-cov's own combining (a data file beside the
    combined one) counts too: its line, and its test as one that started a subprocess; the
    results say the run complete, when it started and finished (UTC), the suite's seconds and
    the whole measurement's (the stand-in returns at once); a green run that left no data file
    at all gives no figure and says so."""
    import ast

    import laya

    first, second = [node.lineno for node in ast.parse(Path(laya.__file__).read_text()).body][2:4]
    monkeypatch.setattr(coverage_run, "run_suite", _run_suite_leaving(
        {None: ("t.py::test_a", first), "late.1": ("t.py::test_b|subprocess", second)}, seconds=1234.54))
    result = coverage_run.measure(hypothesis_seed=0, workers=0, output=tmp_path / "c.json")
    missing = result["files"]["laya/__init__.py"]["missingLines"]
    assert first not in missing and second not in missing, missing
    assert result["contexts"] == {"tests": 2, "testsWithSubprocesses": 1}
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"  # UTC to the second
    assert result["complete"] is True and result["scope"] == [] and result["hypothesisSeed"] == 0
    assert (result["format"], result["maxWorkers"], result["coveragePy"], result["branch"], result["patch"],
            result["benchmarks"]) == ("laya-qual-coverage-v1", 0, coverage_py.__version__, True,
                                      ["subprocess", "_exit"], "excluded")
    assert re.fullmatch(stamp, result["startedOn"]) and re.fullmatch(stamp, result["finishedOn"])
    assert result["startedOn"] <= result["finishedOn"]
    assert result["suiteSeconds"] == 1234.5 and 0 <= result["wallSeconds"] < 600, result
    assert (tmp_path / "c.json").read_text() == json.dumps(result, indent=1) + "\n"  # one-space indent
    monkeypatch.setattr(coverage_run, "run_suite", _run_suite_leaving({}))
    with pytest.raises(coverage_run.CoverageError, match="^the run left no coverage data in "):
        coverage_run.measure(hypothesis_seed=0, workers=0, output=tmp_path / "none.json")
    assert not (tmp_path / "none.json").exists()


@pytest.mark.slow
def test_a_suite_red_under_coverage_gives_the_end_of_its_output(tmp_path, monkeypatch):
    """No figure, and the error ends with the last 2000 characters of the run's output (measure's docstring)."""
    from laya_qual.measure.mutation import RunResult

    output = "\n" + "".join(f"{i % 10}" for i in range(5000)) + "\n"
    red = RunResult("failed", "t.py::test_x", 1.0, 1, output)
    runs = []
    monkeypatch.setattr(coverage_run, "run_suite", lambda root, **kwargs: runs.append(kwargs) or red)
    with pytest.raises(coverage_run.CoverageError) as refused:
        coverage_run.measure(hypothesis_seed=3, workers=2, output=tmp_path / "c.json", scope=["cli.*"], timeout=60.0)
    [run] = runs  # the whole suite (no -x), its benchmarks excluded, as asked
    assert (run["seed"], run["workers"], run["timeout"], run["exitfirst"], run["claims"]) == (3, 2, 60.0, False,
                                                                                           ["cli.*"])
    assert run["extra"][:2] == ["--laya-benchmarks", "exclude"]
    head, _, tail = str(refused.value).partition("\n")
    assert head == "the suite is not green under coverage (failed: t.py::test_x); no figure"
    assert tail == output.strip()[-2000:]
    assert not (tmp_path / "c.json").exists()


def _red_under_coverage_then(again: str, calls: list[dict]):
    """A stand-in for the suite: under coverage it leaves a data file and records
    ``t.py::test_signal`` failed (as the context plugin does) and ``t.py::test_other`` passed,
    and fails; run again on named tests it gives ``again``."""
    from laya_qual.measure.mutation import RunResult

    leave = _run_suite_leaving({None: ("t.py::test_signal|run", 1)})

    def run_suite(root: Path, **kwargs) -> RunResult:
        calls.append(kwargs)
        if kwargs.get("tests"):
            return RunResult(again, None if again == "passed" else kwargs["tests"][0], 2.0, 0, "rerun output")
        leave(root, **kwargs)
        [rc] = [Path(a.partition("=")[2]) for a in kwargs["extra"] if a.startswith("--cov-config=")]
        data_dir = Path(re.search(r"^data_file = (.*)$", rc.read_text(), re.M)[1]).parent
        (data_dir / "runs-1.json").write_text(json.dumps({"t.py::test_signal": {"seconds": 17.2, "failed": True},
                                                          "t.py::test_other": {"seconds": 1.0, "failed": False}}))
        return RunResult("failed", "t.py::test_signal", 20.0, 1, "red under coverage")
    return run_suite


@pytest.mark.slow
@pytest.mark.parametrize("again", ["passed", "failed"])
def test_a_test_red_only_under_coverage_is_named_and_one_red_without_it_gives_no_figure(tmp_path, monkeypatch,
                                                                                       again):
    """The tests a run under coverage recorded as failed are run again without it (the
    same Hypothesis seed, in one process, those tests alone): green, the figure stands and
    the results name them; red there too, no figure, naming the failure of the run again."""
    calls, said = [], []
    monkeypatch.setattr(coverage_run, "run_suite", _red_under_coverage_then(again, calls))
    out = tmp_path / "c.json"
    if again == "failed":
        with pytest.raises(coverage_run.CoverageError) as refused:
            coverage_run.measure(hypothesis_seed=5, workers=2, output=out, progress=said.append)
        assert str(refused.value).startswith("the suite is not green under coverage (failed: t.py::test_signal); "
                                             "no figure\nrerun output"), str(refused.value)
        assert not out.exists()
    else:
        result = coverage_run.measure(hypothesis_seed=5, workers=2, output=out, progress=said.append)
        assert result["redOnlyUnderCoverage"] == ["t.py::test_signal"]
        assert json.loads(out.read_text())["redOnlyUnderCoverage"] == ["t.py::test_signal"]
        assert result["suiteSeconds"] == 20.0  # the measured run's, not the run again's
    first, rerun = calls
    assert "--cov-branch" in first["extra"] and not first.get("tests")
    assert (rerun["tests"], rerun["seed"], rerun["workers"], rerun["exitfirst"], rerun.get("extra", ())) == (
        ["t.py::test_signal"], 5, 0, False, ())
    assert f"1 of the suite red under coverage; without it: {again}" in said


def test_the_coverage_command_makes_the_folders_of_its_output(tmp_path, monkeypatch):
    """`laya-qual coverage --output` into folders that do not exist yet: they are made; its progress
    lines go to stderr, stamped; without --hypothesis-seed the seed is drawn from [0, 2**31)."""
    from click.testing import CliRunner

    from laya_qual.cli import main

    runs = []

    def measure(*, output: Path, progress, **kwargs) -> dict:
        runs.append(kwargs)
        progress("a step")
        output.write_text("{}\n")
        return {"packages": {}, "files": {}, "exclusions": [], "contexts": {"tests": 0, "testsWithSubprocesses": 0},
                "suiteSeconds": 1.0, "wallSeconds": 2.0, "dataDigest": "0" * 64,
                "redOnlyUnderCoverage": ["t.py::test_a_signal_in_time"]}

    monkeypatch.setattr(coverage_run, "measure", measure)
    out = tmp_path / "a" / "b" / "c.json"
    result = CliRunner().invoke(main, ["coverage", "-n", "0", "--hypothesis-seed", "0", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == "{}\n" and f"results: {out}" in result.output
    assert re.search(r"^\[laya-qual coverage \d\d:\d\d:\d\d\] a step$", result.stderr, re.M)  # progress on stderr
    assert "a step" not in result.stdout
    assert "red only under coverage (green run again without it): t.py::test_a_signal_in_time\n" in result.stdout
    monkeypatch.setattr(secrets, "randbelow", lambda bound: bound - 1)  # no --hypothesis-seed: one from [0, 2**31)
    assert CliRunner().invoke(main, ["coverage", "-n", "0", "--output", str(out)]).exit_code == 0
    assert [run["hypothesis_seed"] for run in runs] == [0, 2**31 - 1]


def test_a_pragma_without_its_reason_stops_the_run_before_the_suite(tmp_path, monkeypatch):
    """`laya-qual coverage` refuses to run while a measured source holds a pragma without a
    reason, naming each by file and line; the suite never starts and no results are written."""
    sources = [("laya/a.py", f"x = 1  {PRAGMA}\n"), ("laya/b.py", f"y = 2  {PRAGMA} — a reason\n"),
               ("laya_qual/c.py", f"\n\nif z:  {BRANCH}\n")]
    monkeypatch.setattr(coverage_run, "package_files", lambda root: sources)
    monkeypatch.setattr(coverage_run, "run_suite", lambda *a, **kw: pytest.fail("the suite ran"))
    with pytest.raises(coverage_run.CoverageError) as refused:
        coverage_run.measure(hypothesis_seed=0, workers=0, output=tmp_path / "c.json")
    assert str(refused.value) == ("no-cover pragmas without a reason (write one after a dash): "
                                  "laya/a.py:1, laya_qual/c.py:3")
    assert not (tmp_path / "c.json").exists()


@pytest.mark.slow
def test_a_copy_the_install_shadows_stops_the_run_before_the_suite(tmp_path, monkeypatch):
    """The suite must measure the copy it made: when a child would import a package from
    elsewhere (here the copy lacks `laya`, so the install answers), the run stops naming that
    package's file, before the suite starts."""
    def build_without_laya(dest, layout):
        root = build_root(dest, layout)
        shutil.rmtree(root / "laya")
        return root

    monkeypatch.setattr(coverage_run, "build_root", build_without_laya)
    monkeypatch.setattr(coverage_run, "run_suite", lambda *a, **kw: pytest.fail("the suite ran"))
    with pytest.raises(MutationError, match=r"the isolated copy does not shadow the install: \{'laya': '"):
        coverage_run.measure(hypothesis_seed=0, workers=0, output=tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()
