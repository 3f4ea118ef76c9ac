"""report.figures.coverage: the coverage figure `laya-qual coverage` computes from coverage.py's
data, its exclusions in place, the figure `--laya-coverage FILE` signs from a results file and
the lines `laya-qual show` prints, against a reference written from docs/coverage.md ("How a
run works", "Exclusions, each with its reason", "The results") and docs/report-format.md
(`suite.coverage`). The data are coverage.py's own (CoverageData files written for modules
described unit by unit, laya_qual.synth.figures), reported by coverage.py's command line as
a run's are."""

from __future__ import annotations

import hashlib
import json
import re
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.measure.coverage_run import contexts, exclusions, figures, package_line, rcfile
from laya_qual.measure.suite_figures import coverage, coverage_line
from laya_qual.synth import coverage_results, measured_modules, pragma_lines, render_lines, write_measured
from laya_qual.synth.figures import unit_lines

FORMAT = "laya-qual-coverage-v1"
# The installed layout (docs/coverage.md): a file belongs to the longest of these folders it is in.
PACKAGE_FOLDERS = {"laya": "laya", "laya_qual": "laya_qual", "laya_qual.suite": "laya_qual/suite",
                   "laya_qual.synth": "laya_qual/synth"}
DASHES = set("—–-")


# --- the reference ------------------------------------------------------------------------------

def package_of(path: str) -> str | None:
    inside = [name for name, folder in PACKAGE_FOLDERS.items() if path.startswith(folder + "/")]
    return max(inside, key=lambda name: len(PACKAGE_FOLDERS[name]), default=None)


def in_process(context: str) -> bool:
    """What the pytest processes themselves ran: every label but a subprocess's."""
    return not context.endswith("|subprocess")


def module_figure(module: dict, runs: list[dict]) -> dict:
    """A module's figure over ``runs``: a reasoned pragma on a unit's first line excludes the
    unit (an ``if`` with its body and its branch); an ``if`` is a branch (two arms) unless an
    arm leads into an excluded line; a run executes every unit's first line, a body when taken."""
    units, starts = module["units"], unit_lines(module)
    excluded = [u["pragma"] == "reasoned" for u in units]
    statements, branches, missing_lines, missing_branches = [0, 0], [0, 0], [], []
    n_if = 0
    for k, unit in enumerate(units):
        line, after = starts[k], starts[k + 1] if k + 1 < len(units) else -1
        taken = {r["taken"][n_if] for r in runs} if unit["kind"] == "if" else set()
        n_if += unit["kind"] == "if"
        if excluded[k]:
            continue
        ran = {line: bool(runs)} | ({line + 1: True in taken} if unit["kind"] == "if" else {})
        for number, executed in ran.items():
            statements[1] += 1
            statements[0] += executed
            if not executed:
                missing_lines.append(number)
        if unit["kind"] == "if" and (after == -1 or not excluded[k + 1]):
            for arm, target in ((True, line + 1), (False, after)):
                branches[1] += 1
                branches[0] += arm in taken
                if arm not in taken:
                    missing_branches.append([line, target])
    return {"statements": statements, "branches": branches, "missingLines": sorted(missing_lines),
            "missingBranches": sorted(missing_branches)}


def reference_files(modules: list[dict], keep=lambda context: True) -> dict:
    return {m["path"]: module_figure(m, [r for r in m["runs"] if keep(r["context"])])
            for m in modules if package_of(m["path"]) is not None}


def reference_packages(modules: list[dict]) -> dict:
    def totals(files: dict, name: str) -> dict:
        mine = [f for path, f in files.items() if package_of(path) == name]
        return {key: {"covered": sum(f[key][0] for f in mine), "total": sum(f[key][1] for f in mine)}
                for key in ("statements", "branches")}

    whole, own = reference_files(modules), reference_files(modules, in_process)
    names = {package_of(path) for path in whole}
    return {name: {"files": sum(package_of(p) == name for p in whole), **totals(whole, name),
                   "inProcessOnly": totals(own, name)} for name in names}


def reference_contexts(modules: list[dict]) -> dict:
    """A label is ``<node id>|<where>``; a ``shared:`` label is a fixture's, no test."""
    labels = {r["context"] for m in modules for r in m["runs"] if not r["context"].startswith("shared:")}
    tests = {label.rpartition("|")[0] for label in labels}
    return {"tests": len(tests),
            "testsWithSubprocesses": len({label.rpartition("|")[0] for label in labels if not in_process(label)})}


def reference_exclusions(files: list[tuple[str, list[dict]]]) -> tuple[list[dict], list[str]]:
    """A pragma excludes when a dash and a reason follow it; its reason goes on over the
    comment-only lines right below it; any other pragma is named ``file:line``."""
    found, unexplained = [], []
    for rel, lines in files:
        for number, line in enumerate(lines, 1):
            p = line.get("pragma")
            if not p:
                continue
            dash = p["separator"].strip()
            if not (dash and set(dash) <= DASHES and p["reason"].strip()):
                unexplained.append(f"{rel}:{number}")
                continue
            words = [p["reason"].strip()]
            for below in lines[number:]:
                if "comment" not in below or below["pragma"]:
                    break
                words.append(below["comment"].strip())
            found.append({"file": rel, "line": number, "kind": f"no {p['kind']}",
                          "reason": " ".join(w for w in words if w)})
    return found, unexplained


def shown_as(text: str, covered: int, total: int) -> bool:
    """A percent to one decimal, within half its last digit of covered/total; n/a of none."""
    if total == 0:
        return text == "n/a"
    return bool(re.fullmatch(r"\d{1,3}\.\d%", text)) and abs(Fraction(text[:-1]) - Fraction(100 * covered, total)) <= Fraction(1, 20)


LINE = re.compile(r"(?P<name>\S+): statements (?P<sc>\d+)/(?P<st>\d+) \((?P<sp>[^)]+)\), "
                  r"branches (?P<bc>\d+)/(?P<bt>\d+) \((?P<bp>[^)]+)\)"
                  r"(?:; without subprocesses (?P<ip>\S+) / (?P<ib>\S+))?")


def holds_package_line(text: str, name: str, figure: dict) -> bool:
    m = LINE.fullmatch(text)
    s, b = figure["statements"], figure["branches"]
    if not m or m["name"] != name or (int(m["sc"]), int(m["st"]), int(m["bc"]), int(m["bt"])) != (
            s["covered"], s["total"], b["covered"], b["total"]):
        return False
    if not (shown_as(m["sp"], s["covered"], s["total"]) and shown_as(m["bp"], b["covered"], b["total"])):
        return False
    if "inProcessOnly" not in figure:
        return m["ip"] is None
    i = figure["inProcessOnly"]
    return m["ip"] is not None and shown_as(m["ip"], i["statements"]["covered"], i["statements"]["total"]) and \
        shown_as(m["ib"], i["branches"]["covered"], i["branches"]["total"])


# --- the figure from coverage.py's data ----------------------------------------------------------------

def module(path, units, *runs):
    return {"path": path, "folder": path.rpartition("/")[0],
            "units": [{"kind": kind, "pragma": pragma} for kind, pragma in units], "runs": list(runs)}


def run(context, *taken):
    return {"context": context, "taken": list(taken)}


NESTED = [module("laya_qual/suite/deep/m0.py", [("set", None)], run("t.py::test_a|run")),
          module("laya_qual/suiteish/m1.py", [("if", None)], run("t.py::test_a|run", True)),
          module("laya_qual/synth/m2.py", [("set", None)], run("t.py::test_a|run")),
          module("laya/serving/m3.py", [("set", None)], run("t.py::test_a|run"))]
SUBPROCESS_ONLY = [module("laya/m0.py", [("if", None), ("set", None)], run("t.py::test_b[x|y]|subprocess", True),
                          run("shared:server|subprocess", False)),
                   module("laya_qual/m1.py", [("if", None)], run("t.py::test_a|run", False),
                          run("t.py::test_a|subprocess", True))]
EXCLUDED = [module("laya/m0.py", [("if", None), ("set", "reasoned"), ("if", "reasoned"), ("set", "bare"),
                                  ("if", "undashed"), ("set", "dash only"), ("if", None)],
                   run("t.py::test_a|run", True, False, True, False), run("shared:server|setup", True, True, False, False))]


@pytest.mark.laya_claim("report.figures.coverage")
@settings(max_examples=8)
@given(modules=measured_modules())
@example(modules=NESTED).via("a file goes to the longest layout folder it is in, laya_qual/suiteish to laya_qual")
@example(modules=SUBPROCESS_ONLY).via("what only subprocesses ran counts, but not in inProcessOnly")
@example(modules=EXCLUDED).via("a reasoned pragma excludes its unit and the branch into it; bare, undashed or dash only none")
def test_the_figure_counts_what_the_data_records_per_package(tmp_path_factory, modules):
    tmp = tmp_path_factory.mktemp("measured")
    root, data_file, rc = tmp / "root", tmp / "data" / ".coverage", tmp / "coveragerc"
    data_file.parent.mkdir()
    write_measured(root, data_file, modules)
    rc.write_text(rcfile(data_file, root))
    packages, files = figures(rc, data_file, root)
    assert files == reference_files(modules)
    assert packages == reference_packages(modules)
    assert contexts(data_file) == reference_contexts(modules)


# --- exclusions in place ------------------------------------------------------------------------------

def code(pragma=None, kind="cover", separator=" — ", reason="a reason"):
    return {"code": "x = 1", "pragma": None if pragma is False else {"kind": kind, "separator": separator,
                                                                   "reason": reason}}


def comment(text="", pragma=None):
    return {"comment": text, "pragma": pragma}


@pytest.mark.laya_claim("report.figures.coverage")
@settings(max_examples=60)
@given(files=st.lists(pragma_lines(), min_size=1, max_size=3).map(
    lambda fs: [(f"laya/f{i}.py", lines) for i, lines in enumerate(fs)]))
@example(files=[("laya/x.py", [code(separator=" — "), code(separator=" - "), code(kind="branch", separator=" -- "),
                               code(separator="—", reason="é")])]).via("each dash form, no cover and no branch")
@example(files=[("laya/x.py", [code(reason=""), code(reason="   "), code(separator=": "), code(separator=" "),
                               code(separator=" - ", reason=""), code(separator=" -- ", reason=""), code(kind="branch", separator="-", reason=" ")])]).via(
    "no reason (a dash is none), or no dash: named, not excluded")
@example(files=[("laya/x.py", [code(reason="a reason that"), comment("goes on below"), comment(""), comment("and on"),
                               code(False), comment("no part of it"), code(), comment(pragma=code()["pragma"]),
                               comment("its own")])]).via(
    "a reason goes on over the comment-only lines below it, up to one with a pragma of its own")
@example(files=[("laya/a.py", [code(reason="")]), ("laya_qual/b.py", [code(False), code(False), code(reason="")])]).via(
    "each unexplained pragma by file and line")
def test_a_pragma_excludes_only_with_a_dash_and_a_reason(files):
    rendered = [(rel, render_lines(lines)) for rel, lines in files]
    assert exclusions(rendered) == reference_exclusions(files)


# --- the lines laya-qual show prints ------------------------------------------------------------------

def package_figure(s, b, inner=None):
    figure = {"statements": {"covered": s[0], "total": s[1]}, "branches": {"covered": b[0], "total": b[1]}}
    if inner:
        figure["inProcessOnly"] = {"statements": {"covered": inner[0][0], "total": inner[0][1]},
                                   "branches": {"covered": inner[1][0], "total": inner[1][1]}}
    return figure


@pytest.mark.laya_claim("report.figures.coverage")
@settings(max_examples=100)
@given(name=st.sampled_from(list(PACKAGE_FOLDERS)), figure=coverage_results().map(
    lambda r: next(iter(r["packages"].values()))))
@example(name="laya", figure=package_figure((2, 3), (0, 0))).via("66.67% is 66.7% (rounded, not cut); none is n/a")
@example(name="laya", figure=package_figure((1, 6), (5, 6), ((0, 3), (1, 3)))).via("16.7%, 83.3%; 0.0% / 33.3%")
@example(name="laya_qual", figure=package_figure((3626, 3660), (815, 816))).via("99.1% and 99.9%")
@example(name="laya", figure=package_figure((0, 1), (1, 1), ((0, 0), (999, 1000)))).via("0.0%, 100.0%; n/a / 99.9%")
def test_show_prints_each_package_with_its_percent_to_one_decimal(name, figure):
    assert holds_package_line(package_line(name, figure), name, figure), package_line(name, figure)


@pytest.mark.laya_claim("report.figures.coverage")
@settings(max_examples=30)
@given(results=coverage_results(), digest=st.text("0123456789abcdef", min_size=64, max_size=64))
def test_show_prints_the_signed_figure_line_by_line(results, digest):
    signed = {"packages": results["packages"], "dataDigest": digest, "tests": results["contexts"]["tests"],
              "testsWithSubprocesses": results["contexts"]["testsWithSubprocesses"],
              "exclusions": results["exclusions"], "redOnlyUnderCoverage": results.get("redOnlyUnderCoverage", [])}
    lines = coverage_line({"suite": {"coverage": signed}})
    n = len(signed["packages"])
    for text, (name, figure) in zip(lines[:n], signed["packages"].items()):
        assert text.startswith("  coverage  ") and holds_package_line(text.removeprefix("  coverage  "), name, figure)
    assert f"{signed['tests']} tests ({signed['testsWithSubprocesses']} with subprocesses), " \
           f"{len(signed['exclusions'])} exclusions with reasons; data sha256:{digest[:16]}" in lines[n]
    red = signed["redOnlyUnderCoverage"]
    assert lines[n + 1:] == ([f"            red only under coverage (green without it): {', '.join(red)}"] if red else [])
    assert coverage_line({"suite": {}}) == [] and coverage_line({}) == []


# --- the figure a report signs ----------------------------------------------------------------------

RUNTIME, HARNESS = "ab" * 32, {"laya_qual": "cd" * 32, "laya_qual.suite": "ef" * 32}


def write_data(path, lines) -> bytes:
    from coverage import CoverageData

    data = CoverageData(basename=str(path))
    data.set_context("t.py::test_a|run")
    data.add_lines({"laya/m.py": sorted(lines)})
    data.write()
    return path.read_bytes()


def results_file(folder, results: dict, lines=frozenset({1, 2}), **changes):
    """A results file of ``results`` measured on this code, its data file beside it."""
    data = folder / "c.coverage"
    content = write_data(data, lines)
    whole = {**results, "format": FORMAT, "code": {"runtime": RUNTIME, "harness": HARNESS}, "dataFile": data.name,
             "dataDigest": hashlib.sha256(content).hexdigest(), **changes}
    path = folder / "c.json"
    path.write_text(json.dumps(whole))
    return path


def signed_reference(results: dict, digest: str) -> dict:
    """docs/report-format.md, `suite.coverage`: the packages' statements and branches (and
    inProcessOnly), the data's digest, the run's settings, the test counts, the tests red only
    under coverage (none when the results predate the allowance) and every exclusion."""
    return {"packages": {name: {k: v for k, v in figure.items() if k != "files"}
                         for name, figure in results["packages"].items()},
            "dataDigest": digest, "hypothesisSeed": results["hypothesisSeed"], "coveragePy": results["coveragePy"],
            "branch": True, "patch": ["subprocess", "_exit"], "benchmarks": "excluded",
            "tests": results["contexts"]["tests"], "testsWithSubprocesses": results["contexts"]["testsWithSubprocesses"],
            "redOnlyUnderCoverage": results.get("redOnlyUnderCoverage", []),
            "exclusions": [{k: e[k] for k in ("file", "line", "kind", "reason")} for e in results["exclusions"]]}


@pytest.mark.laya_claim("report.figures.coverage")
@settings(max_examples=20)
@given(results=coverage_results(), lines=st.frozensets(st.integers(1, 200), min_size=1, max_size=20))
def test_the_signed_figure_is_the_files_figure(tmp_path_factory, results, lines):
    path = results_file(tmp_path_factory.mktemp("coverage"), results, lines)
    digest = hashlib.sha256((path.parent / "c.coverage").read_bytes()).hexdigest()
    assert coverage(path, runtime=RUNTIME, harness=HARNESS) == signed_reference(results, digest)


@pytest.mark.laya_claim("report.figures.coverage")
@settings(max_examples=10)
@given(position=st.integers(0, 2**20), bit=st.integers(0, 7))
def test_any_changed_byte_of_the_data_file_is_refused(tmp_path_factory, position, bit):
    path = results_file(tmp_path_factory.mktemp("coverage"), BASE)
    data = path.parent / "c.coverage"
    content = bytearray(data.read_bytes())
    content[position % len(content)] ^= 1 << bit
    data.write_bytes(bytes(content))
    with pytest.raises(pytest.UsageError, match="is missing or is not the file it names") as refused:
        coverage(path, runtime=RUNTIME, harness=HARNESS)
    assert f"--laya-coverage {path}" in str(refused.value) and str(data) in str(refused.value)


BASE = {"hypothesisSeed": 7, "maxWorkers": 2, "scope": [], "complete": True, "coveragePy": "7.18.0", "branch": True,
        "patch": ["subprocess", "_exit"], "benchmarks": "excluded", "contexts": {"tests": 5, "testsWithSubprocesses": 1},
        "packages": {"laya": package_figure((9, 10), (3, 4))}, "exclusions": [], "files": {}}


@pytest.mark.laya_claim("report.figures.coverage")
@pytest.mark.parametrize("case, message", [
    ("another format", "not a laya-qual coverage results file"),
    ("no format", "not a laya-qual coverage results file"),
    ("not JSON", "not a laya-qual coverage results file"),
    ("partial", "a partial or unfinished run"),
    ("unfinished", "a partial or unfinished run"),
    ("other runtime", "measured on runtime dirHash"),
    ("other harness", "measured with suite/harness"),
    ("digest of other data", "is missing or is not the file it names"),
    ("data changed since", "is missing or is not the file it names"),
    ("data replaced by other coverage data", "is missing or is not the file it names"),
    ("data missing", "is missing or is not the file it names"),
])
def test_a_file_that_is_no_figure_of_this_code_is_refused(tmp_path, case, message):
    changes = {"another format": {"format": "laya-qual-mutation-v1"}, "no format": {"format": None},
               "partial": {"scope": ["request.validation"]}, "unfinished": {"complete": False},
               "other runtime": {"code": {"runtime": "12" * 32, "harness": HARNESS}},
               "other harness": {"code": {"runtime": RUNTIME, "harness": {**HARNESS, "laya_qual": "12" * 32}}},
               "digest of other data": {"dataDigest": hashlib.sha256(b"other data").hexdigest()}}.get(case, {})
    path = results_file(tmp_path, BASE, **changes)
    data = tmp_path / "c.coverage"
    if case == "not JSON":
        path.write_text(path.read_text()[:-1])
    elif case == "data changed since":
        data.write_bytes(data.read_bytes() + b"\0")
    elif case == "data replaced by other coverage data":
        data.unlink()
        write_data(data, {3})
    elif case == "data missing":
        data.unlink()
    with pytest.raises(pytest.UsageError, match=message) as refused:
        coverage(path, runtime=RUNTIME, harness=HARNESS)
    assert f"--laya-coverage {path}" in str(refused.value)
    if case.startswith(("digest", "data")):
        assert str(data) in str(refused.value)
