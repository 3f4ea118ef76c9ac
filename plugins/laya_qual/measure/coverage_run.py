"""Branch coverage of the runtime and the harness by the qualification suite, subprocesses
included (``laya-qual coverage``).

The suite runs once, whole (``pytest -p laya_qual --laya-qualify``, benchmarks
excluded), on an isolated copy of the installed packages exactly as a mutation run's
baseline does (``laya_qual.measure.mutation``: the copy first on ``PYTHONPATH``, checked to
shadow the install), under coverage.py in branch mode through pytest-cov with one
context per test (``<node id>|setup``, ``|run``, ``|teardown``). coverage.py's
``[run] patch = subprocess`` measures every Python process the run starts: the xdist
workers, the ``laya`` and ``laya-qual`` command lines the tests run, the ranks a
process group spawns, pytest runs in a subprocess. ``patch = _exit`` saves the data of
a process that ends through ``os._exit``, and ``sigterm = True`` that of one terminated
by SIGTERM (the ranks a failing group stops). A small pytest plugin (``CONTEXT_MODULE``,
written into the copy) labels what a subprocess executes with the test that started
it (``<node id>|subprocess``), and what a fixture wider than one test runs, in process
or in the processes it keeps, with that fixture (``shared:<fixture>|...``, read as
every test that used it), so a figure per test, hence per claim, can be derived from
the data. The data files are combined, their paths made relative to the
installed layout (``laya/...``, ``laya_qual/...``, ``laya_qual/suite/...``), and kept
next to the results, whose JSON names its sha256.

The suite must be green, with one allowance: coverage slows the processes it measures, so a
test that bounds how long a signal to a process takes can fail under coverage alone. The
tests the run recorded as failed are run again without coverage; when they all pass, the
figure stands and the results name them (``redOnlyUnderCoverage``), as a mutation run's
baseline does (``leftOut``); any other red gives no figure.

Exclusions are made in place, each with its reason: a line carrying coverage.py's
no-cover pragma followed by a dash and a reason (``# pragma`` ``: no cover — why``) is
excluded (a whole block when the line opens one); the same pragma without a reason is
not excluded, and ``laya-qual coverage`` refuses to run until it has one. The
results list every exclusion (file, line, reason).

The results carry the runtime and harness digests they were measured on; the report
option ``--laya-coverage FILE`` signs them as ``suite.coverage`` only for that very code
(``laya_qual.measure.suite_figures``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from laya_qual.measure.mutation import (LAYOUT, WHOLE_RUN_TIMEOUT_S, MutationError, RunResult, build_root,
                                check_shadowing, code_digests, deliverable_sigint, installed_layout, run_suite)
from laya_qual.subjects import file_sha256

FORMAT = "laya-qual-coverage-v1"
PATCHES = ("subprocess", "_exit")
# The pytest plugin that labels subprocess data with the test that started the subprocess.
CONTEXT_MODULE = "laya_qual_cov_contexts"
SUBPROCESS = "subprocess"
# The label of what a fixture wider than one test ran (``shared:<fixture>|...``).
SHARED = "shared:"
_PRAGMA = "pragma"  # spelled apart so that this module's own lines never read as a pragma
# Any no-cover / no-branch pragma, reason or not (what the checker looks for).
ANY_PRAGMA = re.compile(r"#\s*" + _PRAGMA + r"\s*:?\s*no\s*(cover|branch)\b(.*)$", re.IGNORECASE)
# The forms coverage.py honours: the pragma, a dash (em dash, en dash or hyphens), a reason
# (which starts with neither a space nor a dash: "-- " alone is a dash and no reason), on
# one line: coverage.py 7.6+ matches these against the whole source, where "\s" would take
# a newline and a dash ending one line would exclude the next line too.
# ("[#]", not "#": in the rc file a line starting with "#" is a comment.)
_BLANK = r"[ \t]*"
EXCLUDE_LINE = r"[#]" + _BLANK + _PRAGMA + ":" + _BLANK + "no cover" + _BLANK + r"[—–-]+" + _BLANK + r"[^\s—–-]"
PARTIAL_BRANCH = r"[#]" + _BLANK + _PRAGMA + ":" + _BLANK + "no branch" + _BLANK + r"[—–-]+" + _BLANK + r"[^\s—–-]"
_REASON = re.compile(r"^\s*[—–-]+\s*([^\s—–-].*?)\s*$")

CONTEXT_PLUGIN = '''"""Loaded by laya-qual coverage runs (-p): labels what runs with the tests it runs for.

- Before each test, the coverage configuration a subprocess inherits (coverage.py's patch =
  subprocess) is given the static context "<node id>|subprocess", so what a subprocess
  executes is labelled with the test that ran it.
- While a fixture wider than one test (session, package, module or class scope) is set up,
  what runs is labelled "shared:<fixture>|setup" in this process and "shared:<fixture>|subprocess"
  in the processes it starts (a process group kept for the whole session): its value serves
  every test that uses it, not only the test that happened to set it up.
- Each process writes the fixtures every test it ran used (item.fixturenames, the closure)
  to uses-<pid>.json beside the coverage data, so those labels can be read as those tests,
  and each test's seconds (every phase) and whether a phase failed to runs-<pid>.json, by
  node id: a junit report names a test by a dotted class name that cannot always be turned
  back into its node id (a class's tests: module or package?).
"""
import base64
import json
import os
from pathlib import Path

import pytest

_VAR = "COVERAGE_PROCESS_CONFIG"
SHARED = "shared:"
_uses = {}
_runs = {}
_data_dir = []


def _label_subprocesses(label):
    data = os.environ.get(_VAR)
    if data:
        config = json.loads(base64.b64decode(data.encode()).decode())
        config["context"] = label + "|subprocess"
        os.environ[_VAR] = base64.b64encode(json.dumps(config).encode()).decode()


def _coverage():
    import coverage

    return coverage.Coverage.current()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _label_subprocesses(item.nodeid)
    _uses[item.nodeid] = sorted(item.fixturenames)
    cov = _coverage()
    if cov is not None and not _data_dir:
        _data_dir.append(Path(cov.config.data_file).resolve().parent)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.scope == "function":
        yield
        return
    label = SHARED + fixturedef.argname
    inherited = os.environ.get(_VAR)
    _label_subprocesses(label)
    cov = _coverage()
    previous = cov.switch_context(label + "|setup") if cov is not None else None
    try:
        yield
    finally:
        if inherited is not None:
            os.environ[_VAR] = inherited
        if cov is not None:
            cov.switch_context(previous)


def pytest_runtest_logreport(report):
    run = _runs.setdefault(report.nodeid, {"seconds": 0.0, "failed": False})
    run["seconds"] += report.duration
    run["failed"] = run["failed"] or report.failed


def pytest_sessionfinish(session):
    if _uses and _data_dir:
        (_data_dir[0] / f"uses-{os.getpid()}.json").write_text(json.dumps(_uses))
        (_data_dir[0] / f"runs-{os.getpid()}.json").write_text(json.dumps(_runs))
'''


class CoverageError(Exception):
    """The run cannot give a meaningful coverage figure (names what and why)."""


# --- exclusions --------------------------------------------------------------------------

def exclusions(files: Iterable[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    """``(exclusions, unexplained)`` over ``(relative path, text)`` pairs: each pragma with
    its reason as ``{file, line, kind, reason}`` (a reason goes on over the comment-only
    lines right below it), and ``file:line`` of each pragma lacking one (which coverage.py
    does not honour, see ``EXCLUDE_LINE``)."""
    found, unexplained = [], []
    for rel, text in files:
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            match = ANY_PRAGMA.search(line)
            if not match:
                continue
            kind, rest = match.group(1).lower(), match.group(2)
            reason = _REASON.match(rest)
            strict = EXCLUDE_LINE if kind == "cover" else PARTIAL_BRANCH
            if not (reason and re.search(strict, line)):
                unexplained.append(f"{rel}:{number}")
                continue
            words = [reason.group(1)]
            for below in lines[number:]:
                if not below.lstrip().startswith("#") or ANY_PRAGMA.search(below):
                    break
                words.append(below.lstrip().lstrip("#").strip())
            found.append({"file": rel, "line": number, "kind": f"no {kind}", "reason": " ".join(filter(None, words))})
    return found, unexplained


def package_files(root: Path) -> list[tuple[str, str]]:
    """Every ``*.py`` file of the measured packages under an import root, as (relative path, text)."""
    return [(p.relative_to(root).as_posix(), p.read_text(encoding="utf-8"))
            for name in ("laya", "laya_qual") for p in sorted((root / name).rglob("*.py"))
            if "__pycache__" not in p.parts]


def package_of(rel: str) -> str | None:
    """The import package a relative path belongs to (the longest layout prefix)."""
    for name in sorted(LAYOUT, key=lambda n: -len(LAYOUT[n])):
        if rel.startswith(LAYOUT[name] + "/"):
            return name
    return None


# --- the run ------------------------------------------------------------------------------

def rcfile(data_file: Path, root: Path) -> str:
    return "\n".join([
        "[run]", "branch = True", "parallel = True", "sigterm = True", f"data_file = {data_file}",
        f"source =\n    {root / 'laya'}\n    {root / 'laya_qual'}", "patch =\n    " + "\n    ".join(PATCHES),
        "[report]", f"exclude_lines =\n    {EXCLUDE_LINE}", f"partial_branches =\n    {PARTIAL_BRANCH}", ""])


def pytest_args(rc: Path) -> list[str]:
    """What a pytest run needs to be measured this way: pytest-cov with a context per test
    (configuration from ``rc``, see ``rcfile``) and subprocesses labelled by ``CONTEXT_MODULE``,
    which must be importable (it is written into the import root)."""
    return ["-p", CONTEXT_MODULE, "--cov", f"--cov-config={rc}", "--cov-branch", "--cov-context=test",
            "--cov-report="]


def _coverage_command(*args: str) -> None:
    """coverage.py's own command line, in a process of its own. A ``coverage.Coverage``
    object made in this process would tell coverage.py that the process measures itself,
    and coverage.py would then drop what a measurement this process runs under (a user's
    own ``patch = subprocess`` run, the project's tests under a mutation baseline) had
    collected in it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_PROCESS_")}
    proc = subprocess.run([sys.executable, "-m", "coverage", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise CoverageError(f"coverage {args[0]} failed (exit {proc.returncode}): "
                            f"{(proc.stderr or proc.stdout).strip()[-2000:]}")


def combine(rc: Path, data_dir: Path, data_file: Path) -> None:
    """Every data file the run left (controller, workers, subprocesses) into ``data_file``."""
    leftovers = sorted(p for p in data_dir.iterdir() if p.name == data_file.name
                       or p.name.startswith(data_file.name + "."))
    if not leftovers:
        raise CoverageError(f"the run left no coverage data in {data_dir}")
    pieces = data_dir / "pieces"
    pieces.mkdir()
    for p in leftovers:  # the un-suffixed file too (pytest-cov may have combined into it)
        p.rename(pieces / f"{data_file.name}.{p.name.removeprefix(data_file.name).lstrip('.') or 'main'}")
    _coverage_command("combine", f"--rcfile={rc}", f"--data-file={data_file}", "-q", str(pieces))


def relocate(data_file: Path, root: Path, dest: Path) -> None:
    """A copy of the combined data whose paths are relative to the import root (``laya/x.py``)."""
    from coverage import CoverageData

    resolved = str(root.resolve()) + "/"
    source = CoverageData(basename=str(data_file))
    source.read()
    dest.unlink(missing_ok=True)
    out = CoverageData(basename=str(dest))
    out.update(source, map_path=lambda p: p[len(resolved):] if p.startswith(resolved) else p)
    out.write()


# Data of every context but the subprocess ones: what the pytest processes themselves
# executed (controller and xdist workers, at import time included).
IN_PROCESS = r"^(?!.*\|subprocess$)"


def _json_report(rc: Path, data_file: Path, contexts: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "coverage.json"
        _coverage_command("json", f"--rcfile={rc}", f"--data-file={data_file}", "-o", str(out), "-q",
                          "--ignore-errors", *([f"--contexts={contexts}"] if contexts else []))
        return json.loads(out.read_text())["files"]


def _by_package(report: dict, root: Path) -> dict[str, tuple[str, dict]]:
    """``{relative path: (package, summary)}`` for the files of the measured packages."""
    resolved, out = root.resolve(), {}
    for path, entry in report.items():
        full = Path(path) if Path(path).is_absolute() else Path.cwd() / path
        rel = full.resolve().relative_to(resolved).as_posix()
        if package_of(rel) is not None:
            out[rel] = (package_of(rel), entry)
    return out


def _add(total: dict, summary: dict) -> None:
    for key, covered, count in (("statements", "covered_lines", "num_statements"),
                                ("branches", "covered_branches", "num_branches")):
        figure = total.setdefault(key, {"covered": 0, "total": 0})
        figure["covered"] += summary[covered]
        figure["total"] += summary[count]


def figures(rc: Path, data_file: Path, root: Path) -> tuple[dict, dict]:
    """``(packages, files)``: statements and branches covered/total per package (and
    ``inProcessOnly``, the same without what subprocesses executed), and per file the
    same with its missed lines and branches (coverage.py's JSON report)."""
    packages: dict[str, dict] = {}
    files: dict[str, dict] = {}
    for rel, (package, entry) in sorted(_by_package(_json_report(rc, data_file), root).items()):
        s = entry["summary"]
        files[rel] = {"statements": [s["covered_lines"], s["num_statements"]],
                      "branches": [s["covered_branches"], s["num_branches"]],
                      "missingLines": entry["missing_lines"], "missingBranches": entry["missing_branches"]}
        total = packages.setdefault(package, {"files": 0})
        total["files"] += 1
        _add(total, s)
    for rel, (package, entry) in _by_package(_json_report(rc, data_file, IN_PROCESS), root).items():
        _add(packages[package].setdefault("inProcessOnly", {}), entry["summary"])
    return dict(sorted(packages.items())), files


def contexts(data_file: Path) -> dict:
    """How many tests the data labels, and how many of them started a measured subprocess."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    names = [c for c in data.measured_contexts() if c and not c.startswith(SHARED)]  # shared: a fixture's
    tests = {c.rpartition("|")[0] for c in names}
    started = {c.rpartition("|")[0] for c in names if c.endswith("|" + SUBPROCESS)}
    return {"tests": len(tests), "testsWithSubprocesses": len(started)}


def fixture_uses(data_dir: Path) -> dict[str, set[str]]:
    """Per fixture name, the node ids of the tests that used it, from the ``uses-<pid>.json``
    files the context plugin left beside the coverage data (one per test process)."""
    users: dict[str, set[str]] = {}
    for path in sorted(data_dir.glob("uses-*.json")):
        for test, fixtures in json.loads(path.read_text()).items():
            for name in fixtures:
                users.setdefault(name, set()).add(test)
    return users


def recorded_runs(data_dir: Path) -> dict[str, dict]:
    """Per node id, ``{"seconds", "failed"}`` of each test the measured processes ran, from
    the ``runs-<pid>.json`` files the context plugin left beside the coverage data."""
    runs: dict[str, dict] = {}
    for path in sorted(data_dir.glob("runs-*.json")):
        runs.update(json.loads(path.read_text()))
    return runs


def green_without_coverage(r: RunResult, runs: dict[str, dict], rerun: Callable[[list[str]], RunResult],
                           name: str, progress: Callable[[str], None]) -> tuple[RunResult, list[str]]:
    """``(result, red)`` of a run under coverage. Coverage slows the processes it measures (and
    its SIGTERM handler cannot run while a measured process is blocked in C code), so a test
    that bounds how long a signal to a process takes can be red under coverage alone. When
    every test the run recorded as failed (``runs``, from ``recorded_runs``) passes run again
    without coverage (``rerun``), the run counts as green and ``red`` names those tests (what
    they executed was measured all the same); otherwise the result is the run again's, or the
    run's own when no test recorded a failure (a collection error, a timeout): red either way."""
    red = sorted(t for t, recorded in runs.items() if recorded["failed"]) if r.outcome == "failed" else []
    if not red:
        return r, []
    again = rerun(red)
    progress(f"{len(red)} of {name} red under coverage; without it: {again.outcome}")
    return (dataclasses.replace(r, outcome="passed") if again.outcome == "passed" else again), red


sha256 = file_sha256  # of the coverage data file the results name


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def measure(*, hypothesis_seed: int, workers: int, output: Path, scope: Sequence[str] = (),
            timeout: float = WHOLE_RUN_TIMEOUT_S, progress: Callable[[str], None] = lambda m: None) -> dict:
    """Run the suite under coverage, combine, write the results and the data; return the results.
    A suite that is not green, its tests red only under coverage apart (``green_without_coverage``),
    gives no figure: CoverageError with its outcome, its first failure and the last 2000
    characters of its output."""
    import coverage

    started, t0 = _now(), time.monotonic()
    layout = installed_layout()
    digests = code_digests(layout)
    tmp = Path(tempfile.mkdtemp(prefix="laya-coverage-"))
    try:
        root = build_root(tmp / "root", layout)
        if code_digests(layout) != digests:
            raise CoverageError("the installed packages changed while they were being copied")
        found, unexplained = exclusions(package_files(root))
        if unexplained:
            raise CoverageError("no-cover pragmas without a reason (write one after a dash): "
                                + ", ".join(unexplained))
        (root / f"{CONTEXT_MODULE}.py").write_text(CONTEXT_PLUGIN)
        check_shadowing(root)
        data_dir = tmp / "data"
        data_dir.mkdir()
        data_file, rc = data_dir / ".coverage", tmp / "coveragerc"
        rc.write_text(rcfile(data_file, root))
        progress(f"suite under coverage (branches, subprocesses, a context per test), -n {workers}, "
                 f"hypothesis seed {hypothesis_seed}; copy under {tmp}")
        r = run_suite(root, seed=hypothesis_seed, workers=workers, timeout=timeout, exitfirst=False, claims=scope,
                      extra=["--laya-benchmarks", "exclude", *pytest_args(rc)])
        r, red = green_without_coverage(r, recorded_runs(data_dir), lambda tests: run_suite(
            root, seed=hypothesis_seed, workers=0, tests=tests, timeout=timeout, exitfirst=False),
            "the suite", progress)
        if r.outcome != "passed":
            tail = r.output.strip()[-2000:]
            raise CoverageError(f"the suite is not green under coverage ({r.outcome}: {r.first_failure}); "
                                f"no figure\n{tail}")
        progress(f"suite green in {r.seconds:.0f}s; combining the data files")
        combine(rc, data_dir, data_file)
        packages, files = figures(rc, data_file, root)
        kept = output.with_suffix(".coverage")
        relocate(data_file, root, kept)
        result = {"format": FORMAT, "code": digests, "hypothesisSeed": hypothesis_seed, "maxWorkers": workers,
                  "scope": list(scope), "complete": True, "startedOn": started, "finishedOn": _now(),
                  "suiteSeconds": round(r.seconds, 1), "wallSeconds": round(time.monotonic() - t0, 1),
                  "coveragePy": coverage.__version__, "branch": True, "patch": list(PATCHES),
                  "benchmarks": "excluded", "redOnlyUnderCoverage": red, "contexts": contexts(kept),
                  "dataFile": kept.name, "dataDigest": sha256(kept),
                  "packages": packages, "exclusions": found, "files": files}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    output.write_text(json.dumps(result, indent=1) + "\n")
    return result


def percent(covered: int, total: int) -> str:
    return f"{covered / total:.1%}" if total else "n/a"


def package_line(name: str, figure: dict) -> str:
    s, b = figure["statements"], figure["branches"]
    line = (f"{name}: statements {s['covered']}/{s['total']} ({percent(s['covered'], s['total'])}), "
            f"branches {b['covered']}/{b['total']} ({percent(b['covered'], b['total'])})")
    if "inProcessOnly" in figure:
        s, b = figure["inProcessOnly"]["statements"], figure["inProcessOnly"]["branches"]
        line += (f"; without subprocesses {percent(s['covered'], s['total'])} / "
                 f"{percent(b['covered'], b['total'])}")
    return line


def main(*, hypothesis_seed: int | None, workers: int, output: Path | None, scope: Sequence[str] = (),
         timeout: float | None = None) -> int:
    """``laya-qual coverage``: measure, write, print the figures and the most-missed runtime files."""
    import secrets

    deliverable_sigint()
    seed = secrets.randbelow(2**31) if hypothesis_seed is None else hypothesis_seed
    output = output or Path("reports") / f"coverage-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(hypothesis_seed=seed, workers=workers, output=output, scope=scope,
                         timeout=timeout or WHOLE_RUN_TIMEOUT_S, progress=lambda m: print(
                             f"[laya-qual coverage {datetime.now():%H:%M:%S}] {m}", file=sys.stderr, flush=True))
    except MutationError as e:
        raise CoverageError(str(e)) from None
    for name, figure in result["packages"].items():
        print(package_line(name, figure))
    runtime = [(f, v) for f, v in result["files"].items() if package_of(f) == "laya"]
    worst = sorted(runtime, key=lambda fv: (fv[1]["branches"][0] - fv[1]["branches"][1], fv[0]))[:8]
    for f, v in worst:
        if v["branches"][1] > v["branches"][0]:
            print(f"  {f}: {v['branches'][1] - v['branches'][0]} branches missed")
    if result["redOnlyUnderCoverage"]:
        print(f"red only under coverage (green run again without it): {', '.join(result['redOnlyUnderCoverage'])}")
    print(f"{len(result['exclusions'])} exclusions; {result['contexts']['tests']} tests, "
          f"{result['contexts']['testsWithSubprocesses']} of them with measured subprocesses; "
          f"suite {result['suiteSeconds']:.0f}s, {result['wallSeconds']:.0f}s in all")
    print(f"results: {output}\ndata:    {output.with_suffix('.coverage')} (sha256 {result['dataDigest'][:16]})")
    return 0
