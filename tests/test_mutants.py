"""The automatic mutant population: every operator yields exactly the single change it
names, each mutant touches only its own bytes, and a sample is a reproducible uniform
draw from the whole population."""

from __future__ import annotations

import ast
import math
import os
import random
import re
import secrets
import time
from pathlib import Path
from collections import Counter

import pytest

from laya_qual.measure.mutants import EXCLUDED, OPERATORS, module_files, module_mutants, population, sample
from laya_qual.measure.mutation import installed_layout

SOURCE = '''"""Docstring: never mutated."""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from x import y


def f(a: int | None, b, cfg, *, key: str | bytes = "k", **rest: int | str) -> int | None:
    """Nor this one; nor the annotations, which never run under postponed evaluation."""
    if a < b and not cfg.on:
        return a + 1
    total = g(a, b, scale=2)
    total -= h["k"] + h["j"]
    print(f"{a + b}")
    return total[1:a]
'''

# What each operator must produce from SOURCE, written out by hand (the oracle).
EXPECTED = {
    "compare": {("a < b", "(a <= b)")},
    "boolean": {("a < b and not cfg.on", "(a < b or not cfg.on)")},
    "not-dropped": {("not cfg.on", "(cfg.on)")},
    "arithmetic": {("a + 1", "(a - 1)"), ('total -= h["k"] + h["j"]', "total += h['k'] + h['j']"),
                   ('h["k"] + h["j"]', "(h['k'] - h['j'])")},
    "constant": {("1", "2"), ("1", "0"), ("2", "3"), ("2", "1")},
    "statement-dropped": {("return a + 1", "pass"), ("total = g(a, b, scale=2)", "pass"),
                          ('total -= h["k"] + h["j"]', "pass"), ('print(f"{a + b}")', "pass"),
                          ("return total[1:a]", "pass")},
    "arguments-swapped": {("g(a, b, scale=2)", "(g(b, a, scale=2))")},
    "keyword-dropped": {("g(a, b, scale=2)", "(g(a, b))")},
    "slice-bound": {("1:a", "1 + 1:a"), ("1:a", "1 - 1:a"), ("1:a", "1:a + 1"), ("1:a", "1:a - 1")},
    "sibling-name": {('h["k"]', "(h['j'])"), ('h["j"]', "(h['k'])")},
}


def test_every_operator_yields_exactly_the_changes_written_out():
    mutants = module_mutants(SOURCE, "m.py")
    found = {op: {(m.original, m.replacement) for m in mutants if m.operator == op} for op in OPERATORS}
    assert found == {op: EXPECTED.get(op, set()) for op in OPERATORS}
    # the constant 1 of the slice is the one at 1:a; the return's 1 is a + 1's: both drawn
    assert Counter((m.original, m.replacement) for m in mutants if m.operator == "constant")[("1", "2")] == 2


def test_a_mutant_changes_its_span_only_and_parses():
    lines = SOURCE.splitlines(keepends=True)
    for m in module_mutants(SOURCE, "m.py"):
        mutated = m.apply(SOURCE)
        ast.parse(mutated)
        before = "".join(lines[:m.line - 1]) + lines[m.line - 1].encode()[:m.col].decode()
        after = lines[m.end_line - 1].encode()[m.end_col:].decode() + "".join(lines[m.end_line:])
        assert mutated == before + m.replacement + after


def test_non_ascii_text_before_a_mutant_keeps_its_bytes():
    source = 'x = "naïve — ok"; y = a < b\n'
    [m] = [m for m in module_mutants(source, "m.py") if m.operator == "compare"]
    assert m.apply(source) == 'x = "naïve — ok"; y = (a <= b)\n'


def test_a_file_that_moved_under_a_mutant_is_refused():
    [m] = [m for m in module_mutants(SOURCE, "m.py") if m.operator == "compare"]
    with pytest.raises(ValueError, match="m.py:10:7:compare: the file no longer holds 'a < b'"):
        m.apply(SOURCE.replace("a < b", "a > b"))


def test_keys_are_stable_when_unrelated_code_moves():
    moved = SOURCE.replace("def f(", "X = 1\n\n\ndef f(")
    assert {m.key for m in module_mutants(SOURCE, "m.py")} <= {m.key for m in module_mutants(moved, "m.py")}
    assert len({m.key for m in module_mutants(SOURCE, "m.py")}) == len(module_mutants(SOURCE, "m.py"))


@pytest.fixture(scope="module")
def whole_population():
    return population(installed_layout())


@pytest.mark.slow
def test_the_population_covers_every_module_but_the_excluded(whole_population):
    layout = installed_layout()
    files = {rel for rel, _ in module_files(layout)}
    assert {"laya/serving/cache.py", "laya/evolution/group.py", "laya_qual/plugin/assembler.py"} <= files
    assert not files & set(EXCLUDED)
    assert not any(f.startswith(("laya_qual/suite/", "laya_qual/synth/")) for f in files)
    assert {m.file for m in whole_population} <= files
    assert set(OPERATORS) == {m.operator for m in whole_population}


def test_a_sample_is_a_reproducible_uniform_draw(whole_population):
    first = sample(whole_population, 300, seed=11)
    layout = installed_layout()
    for m in first:  # every drawn mutant applies to its file and still parses
        ast.parse(m.apply(layout[m.file.split("/")[0]].joinpath(m.file.partition("/")[2]).read_text()))
    assert first == sample(whole_population, 300, seed=11)
    assert len(set(first)) == 300 and set(first) <= set(whole_population)
    assert first == random.Random(11).sample(whole_population, 300)
    assert first[:40] == sample(whole_population, 40, seed=11)  # a time-boxed run's first K: the sample of K
    assert first != sample(whole_population, 300, seed=12)
    with pytest.raises(ValueError, match="a sample of 0 from a population"):
        sample(whole_population, 0, seed=1)


@pytest.mark.slow
def test_a_sampled_run_kills_by_covering_tests_and_sets_equivalents_apart(tmp_path):
    """Three mutants at once against request.validation's tests alone (a partial figure):
    one its covering tests kill, filed as equivalent by mistake; one on a line no process
    executes, counted without a run, which its written reason sets apart; one in a module
    body, which goes to the whole (here: scoped) suite, every baseline test by node id."""
    from laya_qual.measure.mutant_run import SampleRun

    layout = installed_layout()
    request = module_mutants((layout["laya"] / "serving" / "request.py").read_text(), "laya/serving/request.py")
    [killable] = [m for m in request if m.original == "len(options) < 2" and m.operator == "compare"]
    packets = module_mutants((layout["laya"] / "evolution" / "packets.py").read_text(), "laya/evolution/packets.py")
    spared = [m for m in packets if m.operator == "statement-dropped"][-1]  # inside a function
    rendering = module_mutants((layout["laya"] / "serving" / "rendering.py").read_text(), "laya/serving/rendering.py")
    [roles] = [m for m in rendering if m.function == "<module>" and m.operator == "statement-dropped"
               and m.original.startswith("ROLE_FRAME")]
    reasons = {killable.key: "wrongly filed", spared.key: "request validation never writes an evolution packet"}
    run = SampleRun([killable, spared, roles], population_size=3, seed=0, hypothesis_seed=0, workers=0,
                    equivalents=reasons, tests_dir=None, timeout=None, progress=lambda _: None,
                    scope=["request.validation"], jobs=2)
    try:
        result = run.run()
    finally:
        run.close()
    first, second, third = result["mutants"]
    for record, m in zip(result["mutants"], [killable, spared, roles], strict=True):  # each record names its mutant
        assert {k: record[k] for k in ("id", "key", "operator", "file", "line", "original", "replacement")} == {
            "id": m.id, "key": m.key, "operator": m.operator, "file": m.file, "line": m.line,
            "original": m.original, "replacement": m.replacement}, record
        assert record["part"] == "runtime"
    assert first["status"] == "wrongly-equivalent" and first["killedBy"] == "suite"
    assert first["coveringTests"] > 0 and [s["stage"] for s in first["stages"]] == ["covering tests"]
    assert first["stages"][0]["firstFailure"].startswith("laya_qual/suite/test_")
    assert second["status"] == "equivalent" and second["reason"] == reasons[spared.key]
    assert second["coveringTests"] == 0 and not second["executed"]
    assert [(s["stage"], s["seconds"]) for s in second["stages"]] == [("not executed by the suite", 0.0)]
    assert third["status"] == "killed" and [s["stage"] for s in third["stages"]] == ["suite"]
    for record in result["mutants"]:  # a mutant's seconds: its stages', to a tenth (a float even when whole)
        assert isinstance(record["seconds"], float), record
        assert record["seconds"] == round(sum(s["seconds"] for s in record["stages"]), 1), record
    assert third["stages"][0]["firstFailure"].startswith("laya_qual/suite/test_")
    parts = {"runtime": {"killed": 2, "total": 2, "rate": 1.0, "lowerBound95": 0.223607},
             "harness": {"killed": 0, "total": 0, "rate": None, "lowerBound95": None}}
    assert result["summary"] | {"lowerBound95": None} == {
        "killed": 2, "total": 2, "equivalent": 1, "rate": 1.0, "lowerBound95": None, "survivors": [],
        "notExecuted": 0, "parts": parts,
        "withProjectTests": {"killed": 2, "total": 2, "rate": 1.0, "lowerBound95": 0.223607, "parts": parts},
        "killedByTestsOnly": [], "wronglyEquivalent": [killable.key], "timeouts": [], "lateEquivalents": [],
        "notReproduced": []}
    for killed in (first, third):  # each kill reproduced: green unmutated, red again with the mutant, same order
        r = killed["stages"][-1]["reproduction"]
        assert r["reproduced"] and (r["unmutated"]["outcome"], r["mutantAgain"]["outcome"]) == ("passed", "failed")
        assert r["order"][-1] == killed["stages"][-1]["firstFailure"], r
    assert result["scope"] == ["request.validation"] and result["population"] == 3


@pytest.mark.slow
def test_a_sample_run_from_the_command_line_writes_its_results_and_leaves_no_copies(tmp_path, whole_population):
    """`laya-qual mutate --sample 1` end to end on one claim's tests (about half a minute):
    no equivalence file, the results (at the default path) name the draw, and the mutated
    copies are removed."""
    import json
    import os
    import subprocess
    import sys

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run([sys.executable, "-c", "from laya_qual.cli import main; main()", "mutate", "--sample", "1",
                           "--seed", "3", "--claims", "request.validation", "--hypothesis-seed", "0", "-n", "0",
                           "--no-confirm"], capture_output=True, text=True, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
                          | {"TMPDIR": str(scratch)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [out] = (tmp_path / "reports").glob("mutants-*.json")  # reports/mutants-<UTC time>.json
    result = json.loads(out.read_text())
    [drawn] = sample(whole_population, 1, seed=3)
    assert [m["id"] for m in result["mutants"]] == [drawn.id]
    assert (result["sample"], result["sampleSeed"], result["population"]) == (1, 3, len(whole_population))
    assert result["scope"] == ["request.validation"] and not result["confirmWholeSuite"]
    assert result["mutants"][0]["status"] in ("killed", "survived", "timeout")  # no reason was filed
    s = result["summary"]
    assert (f"killed {s['killed']} of 1 sampled mutants (0 equivalent set apart), population "
            f"{len(whole_population)}, sample seed 3") in proc.stdout
    part = result["mutants"][0]["part"]
    assert f"  {part}: killed {s['parts'][part]['killed']} of 1 (" in proc.stdout
    assert "survivors of their covering tests were not confirmed on the whole suite" in proc.stdout
    assert f"results: {out.relative_to(tmp_path)}" in proc.stdout
    assert list(scratch.glob("laya-mutants-*")) == [], "the mutated copies were left behind"
    said = [re.fullmatch(r"\[laya-qual mutate \d\d:\d\d:\d\d\] (.*)", line, re.S)[1]
            for line in re.split(r"\n(?=\[laya-qual mutate )", proc.stderr.strip())]
    record = result["mutants"][0]
    expected = [re.escape(f"1 of {len(whole_population)} mutants drawn with seed 3; hypothesis seed 0; copies under "
                          f"{scratch}/laya-mutants-") + r"\S+",
                re.escape("baseline: suite under coverage (a context per test, subprocesses included), -n 0"),
                rf"baseline: suite green in \d+s; {result['baseline']['tests']} tests, [1-9]\d* lines executed",
                re.escape(f"[1/1] {record['id']}: {record['status']} ({record['seconds']:.0f}s, "
                          f"{record['coveringTests']} covering tests") + r"(, never executed)?\)"]
    assert len(said) == len(expected) and all(map(re.fullmatch, expected, said)), said  # progress, in order


@pytest.mark.parametrize("args, message", [
    (["--population", "--sample", "3"], "--population --sample N needs --seed"),
    (["--sample", "3", "--seeds", "2"], "it does not take --seeds"),
    (["--sample", "3", "--only", "cache.overhead-changed"], "it does not take --only"),
    (["--seed", "3"], "--seed, --equivalents, --tests-dir, --time-box and --resume go with --sample"),
    (["--sample", "0"], "0 is not in the range x>=1"),
    (["--sample", "100000", "--seed", "1"], "--sample: a sample of 100000 from a population of "),
    (["--population", "--sample", "100000", "--seed", "1"], "--sample: a sample of 100000 from a population of "),
])
def test_sample_options_that_do_not_fit_are_usage_errors(args, message):
    from click.testing import CliRunner

    from laya_qual.cli import main

    result = CliRunner().invoke(main, ["mutate", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_population_lists_the_drawn_mutants(whole_population):
    from click.testing import CliRunner

    from laya_qual.cli import main

    result = CliRunner().invoke(main, ["mutate", "--population", "--sample", "4", "--seed", "9"])
    assert result.exit_code == 0, result.output
    assert any(line.split() == ["all", str(len(whole_population))] for line in result.output.splitlines())
    listed = [line.split("  ")[0] for line in result.output.splitlines()[-4:]]
    assert listed == [m.id for m in sample(whole_population, 4, seed=9)]


def test_a_sample_without_a_seed_draws_with_a_fresh_random_one(monkeypatch, whole_population):
    """`mutate --sample N` without --seed: a seed in [0, 2**31) drawn afresh each run (two runs
    share one with odds of 1 in 2**31), the one the mutants are drawn with and recorded."""
    from click.testing import CliRunner

    from laya_qual.measure import mutant_run
    from laya_qual.cli import main

    runs = []
    monkeypatch.setattr(mutant_run, "main", lambda **kw: runs.append(kw) or 0)
    for _ in range(2):
        assert CliRunner().invoke(main, ["mutate", "--sample", "3", "--no-confirm"]).exit_code == 0
    seeds = [run["seed"] for run in runs]
    assert seeds[0] != seeds[1] and all(0 <= s < 2**31 for s in seeds), seeds
    assert all(run["drawn"] == sample(whole_population, 3, seed=run["seed"]) for run in runs)
    monkeypatch.setattr(secrets, "randbelow", lambda bound: bound - 1)  # the top of the range drawn from
    assert CliRunner().invoke(main, ["mutate", "--sample", "3", "--no-confirm"]).exit_code == 0
    assert runs[-1]["seed"] == 2**31 - 1


def test_a_sample_hands_each_option_to_the_run_as_given(monkeypatch, tmp_path, whole_population):
    """`mutate --sample N --equivalents FILE --tests-dir DIR ...`: the sampled run gets the
    reasons file as its equivalents, the directory as its tests, and every other option as given."""
    from click.testing import CliRunner

    from laya_qual.measure import mutant_run
    from laya_qual.cli import main

    runs = []
    monkeypatch.setattr(mutant_run, "main", lambda **kw: runs.append(kw) or 0)
    reasons, tests = tmp_path / "reasons.json", tmp_path / "project-tests"
    reasons.write_text("{}")
    tests.mkdir()
    result = CliRunner().invoke(main, ["mutate", "--sample", "3", "--seed", "5", "--equivalents", str(reasons),
                                       "--tests-dir", str(tests), "--time-box", "7", "--hypothesis-seed", "11",
                                       "-n", "0", "--jobs", "2", "--timeout", "90", "--no-confirm",
                                       "--claims", "cli.help,request.validation", "--require-rate", "0.5",
                                       "--output", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    [run] = runs
    assert (run["equivalents"], run["tests_dir"], run["time_box"]) == (reasons, tests, 7.0)
    assert (run["seed"], run["hypothesis_seed"], run["workers"], run["jobs"], run["timeout"]) == (5, 11, 0, 2, 90.0)
    assert (run["confirm"], run["scope"], run["require_rate"]) == (False, ["cli.help", "request.validation"], 0.5)
    assert (run["output"], run["earlier"]) == (tmp_path / "out.json", None)
    assert run["drawn"] == sample(whole_population, 3, seed=5) and run["population_size"] == len(whole_population)


@pytest.mark.parametrize("reader, text, message", [
    ("read_equivalents", '{"laya/a.py:f:compare:x#0": "  "}', "must map each mutant key to a written reason"),
    ("read_equivalents", '["laya/a.py:f:compare:x#0"]', "must map each mutant key to a written reason"),
    ("read_equivalents", "{not json", "cannot read the equivalence reasons"),
    ("read_results", "{", "cannot read the results to resume"),
    ("read_results", '{"format": "laya-qual-mutation-v1", "mutants": []}', "not the results of a sampled mutant run"),
    ("read_results", '{"format": "laya-qual-mutant-sample-v1", "mutants": [{"key": "k"}]}',
     "a mutant record without its"),
])
def test_an_unusable_equivalence_or_results_file_is_refused_by_name(tmp_path, reader, text, message):
    """Equivalence reasons without a written reason, and results to resume that are not a
    sampled run's, are refused naming the file and what is wrong."""
    from laya_qual.measure import mutant_run
    from laya_qual.measure.mutation import MutationError

    path = tmp_path / "input.json"
    path.write_text(text)
    with pytest.raises(MutationError, match=f"{path}: {message}"):
        getattr(mutant_run, reader)(path)


def test_the_committed_equivalence_reasons_are_readable_and_name_live_mutants(whole_population):
    from pathlib import Path

    from laya_qual.measure.mutant_run import read_equivalents

    reasons = read_equivalents(Path(__file__).resolve().parents[1] / "docs" / "equivalent-mutants.json")
    assert reasons and set(reasons) <= {m.key for m in whole_population}, "a reason filed for no mutant of this code"


def test_the_projects_tests_import_the_mutated_copy_not_the_projects_own_runtime(tmp_path):
    """``python -m pytest`` puts its working directory first on sys.path: started in the
    project, the tests would import its ``laya/`` and never see a runtime mutant."""
    from laya_qual.measure.mutant_run import _run_tests_dir
    from laya_qual.measure.mutation import build_root

    root = build_root(tmp_path / "copy", installed_layout())
    init = root / "laya" / "__init__.py"
    init.write_text(init.read_text() + "\nraise ImportError('the mutated copy was imported')\n")
    tests_dir = Path(__file__).resolve().parent
    r = _run_tests_dir(root, tests_dir, 0, 600, tests=["tests/test_predict_batches.py"])
    assert r.outcome == "failed" and "the mutated copy was imported" in r.output, r.output[-2000:]


def test_a_module_level_mutant_goes_to_the_whole_suite_whatever_the_data_says():
    """The pytest processes import the harness before coverage starts in them: a module
    body's lines show only where a subprocess imported it, so they are no covering set."""
    from laya_qual.measure.mutant_run import Baseline

    source = "LIMIT = 30\n\n\ndef f(x):\n    return x < LIMIT\n"
    by_op = {(m.function, m.operator): m for m in module_mutants(source, "laya_qual/m.py")}
    module_level, in_function = by_op[("<module>", "constant")], by_op[("f", "compare")]
    seen = Baseline({"laya_qual/m.py": {1: {"t.py::a"}, 5: {"t.py::b"}}}, {}, 0.0)
    assert seen.covering(module_level) == (["t.py::a"], True, True)
    assert seen.covering(in_function) == (["t.py::b"], True, False)
    unseen = Baseline()
    assert unseen.covering(module_level) == ([], True, True)
    assert unseen.covering(in_function) == ([], False, False)


def test_what_runs_at_import_is_told_apart_from_what_runs_when_called():
    """A decorator, a default and a class body run when the module is imported, like its
    body; a function's or a method's body only when called."""
    source = ("LIMIT = 30\n\n\n@register(tries=3)\ndef f(x, cap=5):\n    return x < LIMIT\n\n\n"
              "class C:\n    SIZE = 7\n\n    def g(self, k=lambda: 2):\n        return self.SIZE + 1\n")
    mutants = module_mutants(source, "laya/m.py")
    at_import = {(m.original, m.replacement) for m in mutants if m.at_import}
    called = {(m.original, m.replacement) for m in mutants if not m.at_import}
    assert {("30", "31"), ("3", "4"), ("5", "6"), ("7", "8")} <= at_import
    assert {("x < LIMIT", "(x <= LIMIT)"), ("self.SIZE + 1", "(self.SIZE - 1)"), ("2", "3")} <= called
    assert not at_import & called


def test_covering_tests_come_fastest_first():
    """A covering run stops at its first failure, so the quickest tests go first; ties and
    tests without a time keep their name order."""
    from laya_qual.measure.mutant_run import Baseline

    (m,) = [m for m in module_mutants("def f(x):\n    return x < 3\n", "laya/m.py") if m.operator == "compare"]
    tests = {"t.py::slow", "t.py::quick", "t.py::b_untimed", "t.py::a_untimed", "t.py::middle"}
    times = {"t.py::slow": 9.0, "t.py::quick": 0.5, "t.py::middle": 2.0}
    assert Baseline({"laya/m.py": {2: tests}}, times, 0.0).covering(m)[0] == [
        "t.py::a_untimed", "t.py::b_untimed", "t.py::quick", "t.py::middle", "t.py::slow"]


@pytest.mark.parametrize("file, source", [
    ("laya_qual/m.py", "def f(x):\n    return x < 3\n"),
    ("laya_qual/m.py", "LIMIT = 3\n\n\ndef f(x):\n    return x < LIMIT\n"),  # at import: all project tests
    ("laya/m.py", "def f(x):\n    return x < 3\n"),
])
def test_the_suite_decides_first_and_the_project_tests_run_only_for_what_it_missed(file, source):
    """The headline is the shipped suite's own kills, so for every mutant, harness or runtime,
    the suite's stages come first (its covering tests, then the whole suite) and the project's
    tests last: a kill by tests/ can never stand in for one the suite would have made. Before
    2026-12-04 a harness mutant met its project tests (1 s here) before the whole suite
    (10 s), and a kill there ended it unjudged by the suite."""
    order = ["covering suite tests", "whole suite", "covering project tests"]
    from laya_qual.measure.mutant_run import Baseline, SampleRun

    (m,) = [m for m in module_mutants(source, file) if m.operator in ("compare", "constant")][:1]
    run = SampleRun.__new__(SampleRun)  # its stages alone, no copy of the packages
    run.confirm, run.tests_dir = True, Path("tests")
    run.suite = Baseline({file: {m.line: {"s.py::a"}}}, {"s.py::a": 1.0}, 10.0)
    run.tests = Baseline({file: {m.line: {"t.py::b"}}}, {"t.py::b": 1.0}, 20.0)
    ran = []
    run._covering_suite = lambda root, covering: ran.append("covering suite tests") or {"outcome": "passed"}
    run._tests = lambda root, mutant: ran.append("covering project tests") or {"outcome": "passed"}
    run._whole_suite = lambda root: ran.append("whole suite") or {"outcome": "passed"}
    plan = run._plan(Path("copy"), m)
    for _, stage in plan:
        stage()
    assert ran == order
    assert [killer for killer, _ in plan] == [{"covering suite tests": "suite", "whole suite": "suite"}.get(s, "tests/")
                                             for s in order]
    run.confirm = False  # no whole-suite confirmation of a mutant its covering tests missed
    assert len(run._plan(Path("copy"), m)) == (3 if m.at_import else 2)  # one that runs at import meets it all the same


@pytest.mark.parametrize("file, stages", [("laya_qual/m.py", 1), ("laya/m.py", 0)])
def test_a_harness_mutant_no_measured_process_executed_meets_every_project_test(file, stages):
    """A project test may run a harness line in a subprocess coverage does not follow, so a
    harness mutant that neither baseline saw executed goes to all the project's tests,
    fastest first; a runtime one, which only the suite can kill, is not run at all."""
    from laya_qual.measure.mutant_run import Baseline, SampleRun

    (m,) = [m for m in module_mutants("def f(x):\n    return x < 3\n", file) if m.operator == "compare"]
    run = SampleRun.__new__(SampleRun)
    run.confirm, run.tests_dir = True, Path("tests")
    run.suite = Baseline({}, {"s.py::a": 1.0}, 10.0)
    run.tests = Baseline({}, {"t.py::slow": 9.0, "t.py::quick": 0.5}, 20.0)
    plan = run._plan(Path("copy"), m)
    assert [killer for killer, _ in plan] == ["tests/"] * stages
    assert run._project_tests(m) == ((["t.py::quick", "t.py::slow"], True) if stages else None)


@pytest.mark.parametrize("suite_seconds, workers, timeout", [(100.0, 2, 520.0), (20.0, 0, 300.0)])
def test_covering_suite_tests_run_on_the_workers_and_budget_their_own_baseline_time_earns(
        monkeypatch, suite_seconds, workers, timeout):
    """Serially, or on the xdist workers once the covering tests took over 30 s in the suite's
    baseline (the project tests' times are no measure of them); the deadline is four times that
    plus two minutes, and at least five."""
    from laya_qual.measure import mutant_run
    from laya_qual.measure.mutant_run import Baseline, SampleRun
    from laya_qual.measure.mutation import RunResult

    calls = []
    monkeypatch.setattr(mutant_run, "run_suite", lambda root, **kw: calls.append(kw) or RunResult(
        "passed", None, 1.0, 0, ""))
    run = SampleRun.__new__(SampleRun)
    run.workers, run.timeout, run.hypothesis_seed = 2, None, 7
    run.suite = Baseline({}, {"s.py::a": suite_seconds}, suite_seconds)
    run.tests = Baseline({}, {"s.py::a": 1000.0 - suite_seconds}, 1000.0)  # the same id, timed apart
    assert run._covering_suite(Path("copy"), ["s.py::a"])["stage"] == "covering tests"
    [call] = calls
    assert (call["workers"], call["timeout"], call["tests"], call["seed"]) == (workers, timeout, ["s.py::a"], 7)


@pytest.mark.slow
def test_a_time_box_measures_the_first_drawn_mutants_and_says_so():
    """No mutant starts once the box has closed; every started one finishes; the figure is
    that of the first K drawn, which is the sample --sample K draws with the same seed."""
    drawn = sample(module_mutants("def f(x):\n    return x < 3 and x > -3\n", "laya/m.py"), 5, seed=1)
    run = _scheduling_only(drawn, time_box=TWO_STARTED)
    checkpoints = []
    run.checkpoint = checkpoints.append
    result = run.run()
    assert result["complete"] and result["sample"] == 2  # started at 0 s and 0.6 s; the box closed at 1 s
    assert [c["complete"] for c in checkpoints] == [False, False]  # one after each measured mutant
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"  # UTC to the second
    assert re.fullmatch(stamp, result["startedOn"]) and re.fullmatch(stamp, result["finishedOn"])
    assert result["startedOn"] <= result["finishedOn"] and {c["startedOn"] for c in checkpoints} == {
        result["startedOn"]}
    assert result["timeBox"] == {"minutes": round(TWO_STARTED / 60, 2), "requestedSample": 5, "closed": True}
    assert [r["key"] for r in result["mutants"]] == [m.key for m in drawn[:2]]
    assert (result["summary"]["killed"], result["summary"]["total"]) == (2, 2)
    run.time_box = None  # without a box every drawn mutant is measured
    assert run.run()["sample"] == 5


def test_the_summary_counts_each_status_and_rounds_rates_to_four_places_and_bounds_to_six():
    """docs/mutation.md: two figures, the shipped suite's kills and, apart, the suite's or the
    project tests'; K of N overall and per part, equivalents set apart, timeouts and wrong
    equivalences counted killed; rates rounded to 4 places, lower bounds (scipy's beta
    quantile) to 6."""
    from scipy.stats import beta

    from laya_qual.measure.mutant_run import summarize

    def record(key, status, part, killed_by=None, executed=True):
        return {"key": key, "status": status, "part": part, "killedBy": killed_by, "executed": executed,
                "executedByTests": executed}

    records = [record("r1", "killed", "runtime", "suite"), record("r2", "killed", "runtime", "tests/"),
               record("r3", "survived", "runtime", executed=False), record("h1", "timeout", "harness", "suite"),
               record("h2", "wrongly-equivalent", "harness", "suite"), record("h3", "survived", "harness"),
               record("r4", "equivalent", "runtime")]

    def figure(k, n):
        return {"killed": k, "total": n, "rate": round(k / n, 4),
                "lowerBound95": round(beta.ppf(0.05, k, n - k + 1), 6)}

    records.append(record("h4", "killed", "harness", "tests/"))
    assert summarize(records) == {
        **figure(3, 7), "equivalent": 1, "parts": {"runtime": figure(1, 3), "harness": figure(2, 4)},
        "withProjectTests": {**figure(5, 7), "parts": {"runtime": figure(2, 3), "harness": figure(3, 4)}},
        "survivors": ["h3", "r3"], "notExecuted": 1, "killedByTestsOnly": ["h4", "r2"], "wronglyEquivalent": ["h2"],
        "timeouts": ["h1"], "lateEquivalents": [], "notReproduced": []}
    assert summarize(records)["rate"] == 0.4286


@pytest.mark.slow
def test_a_closed_time_box_is_said_before_the_figure():
    """The summary a time-boxed run prints names the box and how many of the drawn it measured,
    so a partial figure is never read as the whole sample's."""
    from laya_qual.measure.mutant_run import summary_lines

    drawn = sample(module_mutants("def f(x):\n    return x < 3 and x > -3\n", "laya/m.py"), 5, seed=1)
    closed = _scheduling_only(drawn, time_box=TWO_STARTED).run()
    lines = summary_lines(closed)
    assert lines[:2] == [
        "the time box of 0.02 minutes closed after 2 of the 5 drawn mutants: the figure is the first 2's",
        "the shipped suite killed 2 of 2 sampled mutants (0 equivalent set apart), population 5, sample seed 1: "
        "rate 100.0%, 95% lower bound 22.4%"]
    whole = summary_lines(_scheduling_only(drawn).run())
    assert whole[0].startswith("the shipped suite killed 5 of 5 sampled mutants") and not any("time box" in line for line in whole)


def test_a_time_box_drops_what_follows_a_gap_in_the_draw():
    """Two jobs racing past the box's end can leave a drawn mutant unstarted while a later
    one ran: the figure is the first K before the gap, and the later one is dropped."""
    drawn = sample(module_mutants("def f(x):\n    return x < 3 and x > -3\n", "laya/m.py"), 5, seed=1)
    run = _scheduling_only(drawn, time_box=60)
    measured = run.run_mutant
    run.run_mutant = lambda m, index: None if index == 1 else measured(m, index)  # mutant 1 found the box closed
    result = run.run()
    assert sorted(run.ran) == [0, 2, 3, 4]
    assert result["sample"] == 1 and [r["key"] for r in result["mutants"]] == [drawn[0].key]
    assert result["timeBox"] == {"minutes": 1.0, "requestedSample": 5, "closed": True}  # the box of --time-box 1


def test_a_time_box_that_closes_before_any_mutant_starts_is_an_error_naming_it():
    from laya_qual.measure.mutation import MutationError

    drawn = sample(module_mutants("def f(x):\n    return x < 3 and x > -3\n", "laya/m.py"), 5, seed=1)
    run = _scheduling_only(drawn, time_box=30)
    run.run_mutant = lambda m, index: None  # every mutant found the box closed
    with pytest.raises(MutationError, match=r"^the time box \(0.5 minutes\) closed before any mutant started$"):
        run.run()


@pytest.mark.slow
def test_a_project_test_run_past_its_timeout_is_killed_with_its_process_group(tmp_path):
    """A mutant that makes a project test hang is a timeout, not a failure or a pass: the run
    is stopped at its budget, and the hung test's own child process goes with it."""
    from laya_qual.measure.mutant_run import _run_tests_dir

    tests = tmp_path / "project" / "tests"
    tests.mkdir(parents=True)
    (tests.parent / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    pid_file = tmp_path / "child.pid"
    (tests / "test_hangs.py").write_text(
        "import subprocess, sys, time\n\n"
        "def test_hangs():\n"
        f"    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    time.sleep(120)\n")
    (tmp_path / "root").mkdir()
    r = _run_tests_dir(tmp_path / "root", tests, 0, 8.0)
    assert (r.outcome, r.first_failure, r.returncode) == ("timeout", None, None) and 8.0 <= r.seconds < 60
    if pid_file.exists():  # the test got as far as starting its child: it is gone too
        pid = int(pid_file.read_text())
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the hung test's child {pid} outlived the timeout")



@pytest.mark.parametrize("extra, outcome, status", [
    (("-k", "green"), "passed", 0),
    (("-k", "no_such_test"), "passed", 5),          # nothing selected catches nothing
    (("-k", "green", "--no-such-option"), "failed", 4),  # a usage error is no pass
    (("-k", "red"), "failed", 1),
])
@pytest.mark.slow
def test_a_project_test_run_passes_on_status_0_or_5_only(tmp_path, extra, outcome, status):
    """pytest's exit status decides: 0 (all passed) and 5 (no test selected) pass; a failure
    (1) and a usage error (4) are failures, the latter named by its status."""
    from laya_qual.measure.mutant_run import _run_tests_dir

    tests = tmp_path / "project" / "tests"
    tests.mkdir(parents=True)
    (tests.parent / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tests / "test_two.py").write_text("def test_green():\n    pass\n\n\ndef test_red():\n    assert False\n")
    (tmp_path / "root").mkdir()
    r = _run_tests_dir(tmp_path / "root", tests, 0, 120.0, extra=extra)
    assert (r.outcome, r.returncode) == (outcome, status), r.output
    if status == 4:
        assert r.first_failure == "pytest exit status 4"

RED_UNDER_COVERAGE = """
import coverage
import laya

def test_green():
    laya.Request("t", "q", ["a", "b"])

def test_red_under_coverage():  # stands for a test timing a signal to a process coverage slows
    laya.Request("t", "q", ["a", "b"])
    assert coverage.Coverage.current() is None

def test_shard():  # harness code the scoped suite never runs
    from laya_qual.plugin.shards import parse_shard
    assert parse_shard("5/5") == (5, 5)

def test_durations_path_in_a_process_coverage_does_not_follow():
    import os, subprocess, sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    code = ("from pathlib import Path; from laya_qual.plugin.shards import default_durations; "
            "print(default_durations(Path('r')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip().startswith("r/")
"""


@pytest.mark.slow
def test_a_test_red_only_under_coverage_is_left_out_and_one_red_without_it_stops_the_run(tmp_path):
    """The baselines run under coverage. A project test red there but green run again
    without it leaves the baseline green, is named in ``leftOut`` and maps to no line (no
    mutant is run against it); a test red without coverage too stops the run. A harness
    mutant only the project's tests execute is run against those that executed it, and one
    that only a subprocess coverage does not follow executes, against all of them."""
    from laya_qual.measure.mutant_run import SampleRun
    from laya_qual.measure.mutation import BaselineRed

    shards = module_mutants((installed_layout()["laya_qual"] / "plugin" / "shards.py").read_text(), "laya_qual/plugin/shards.py")
    [bound] = [m for m in shards if m.original == "1 <= index <= count" and m.replacement == "(1 <= index < count)"]
    [unseen] = [m for m in shards if m.function == "default_durations" and m.operator == "statement-dropped"]

    tests = tmp_path / "project" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_tiny.py").write_text(RED_UNDER_COVERAGE)
    (tests.parent / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")

    said: list[str] = []

    def baseline(then=lambda run: None) -> tuple[dict, SampleRun]:
        run = SampleRun([], population_size=0, seed=0, hypothesis_seed=0, workers=0, equivalents={},
                        tests_dir=tests, timeout=None, progress=said.append, scope=["request.validation"])
        try:
            out = run.baseline()
            then(run)
            return out, run
        finally:
            run.close()

    records = []
    out, run = baseline(then=lambda run: records.extend([run.run_mutant(bound, 0), run.run_mutant(unseen, 1)]))
    assert out["testsDir"]["leftOut"] == ["tests/test_tiny.py::test_red_under_coverage"]
    assert out["leftOut"] == [] and out["subprocesses"] is True  # the suite's own: none red under coverage
    assert out["testsDir"]["tests"] == 4 and run.tests.left_out == out["testsDir"]["leftOut"]
    assert [line for line in said if "red under coverage" in line] == [
        "baseline: 1 of tests/ red under coverage; without it: passed"], said  # the user is told why
    # each baseline's seconds recorded are its own run's, as its progress line said them
    green = dict(re.fullmatch(r"baseline: (suite|tests/) green in (\d+)s; .*", line).groups()
                 for line in said if " green in " in line)
    assert abs(out["seconds"] - int(green["suite"])) <= 0.6 and out["seconds"] > 0, (out, said)
    assert abs(out["testsDir"]["seconds"] - int(green["tests/"])) <= 0.6 and out["testsDir"]["seconds"] > 0
    mapped = {t for by_line in run.tests.lines.values() for covering in by_line.values() for t in covering}
    assert "tests/test_tiny.py::test_green" in mapped and not mapped & set(out["testsDir"]["leftOut"])
    record, unseen_record = records
    assert (record["status"], record["killedBy"], record["executed"], record["executedByTests"]) == (
        "killed", "tests/", False, True)
    assert [(s["stage"], s["outcome"], s.get("tests")) for s in record["stages"]] == [
        ("not executed by the suite", "not run", None), ("tests/", "failed", 1)]
    failure = record["stages"][-1]["failure"]  # what the killing test's failure said, kept with the stage
    assert re.fullmatch(r"E +laya_qual.plugin.shards.ShardError: --laya-shard '5/5': .*\nlaya_qual/plugin/shards.py:\d+: ShardError",
                        failure), failure
    # a line only an unmeasured subprocess ran: every project test runs against it, and one kills it
    assert (unseen_record["status"], unseen_record["killedBy"], unseen_record["executed"],
            unseen_record["executedByTests"]) == ("killed", "tests/", False, False)
    assert [(s["stage"], s["outcome"], s.get("tests")) for s in unseen_record["stages"]] == [
        ("not executed by the suite", "not run", None), ("tests/", "failed", None)]
    (tests / "test_tiny.py").write_text(RED_UNDER_COVERAGE + "\ndef test_red():\n    assert False\n")
    with pytest.raises(BaselineRed, match="the unmutated tests/ is red") as red:
        baseline()
    [record] = red.value.result["baseline"]["runs"]  # what the results file then holds
    assert {k: record[k] for k in ("seed", "verdict", "of")} == {"seed": 0, "verdict": "red", "of": "tests/"}
    [failed] = record["failed"]
    assert failed.endswith("test_tiny.py::test_red") and record["seconds"] > 0


# What each scheduled-only mutant takes, and a box that closes after two of them started: the
# second starts at MUTANT_S, the third at twice that, and a loaded machine may start the first
# up to TWO_STARTED - MUTANT_S late without changing what the box measures.
MUTANT_S, TWO_STARTED = 0.6, 1.0


def _scheduling_only(drawn, time_box=None, earlier=None, equivalents=None):
    """A SampleRun whose scheduling alone runs: no copy, no baseline, no pytest; each
    mutant it runs takes MUTANT_S, is killed by the suite, and is logged in ``ran``."""
    from laya_qual.measure.mutant_run import SampleRun

    run = SampleRun.__new__(SampleRun)
    run.mutants, run.jobs, run.time_box, run.confirm, run.scope = drawn, 1, time_box, True, []
    run.digests, run.population_size, run.seed, run.hypothesis_seed, run.workers = {"runtime": "r"}, 5, 1, 7, 0
    run.earlier, run.equivalents, run.tests_dir = earlier, equivalents or {}, None
    run.baseline, run.progress, run.checkpoint = lambda: {"seconds": 1.0}, lambda message: None, lambda partial: None
    run.ran = []

    def measured(m, index):
        run.ran.append(index)
        time.sleep(MUTANT_S)
        return {"id": m.id, "key": m.key, "part": "runtime", "status": "killed", "killedBy": "suite",
                "executed": True, "executedByTests": False, "coveringTests": 1,
                "stages": [{"stage": "covering tests", "outcome": "failed", "seconds": MUTANT_S}], "seconds": MUTANT_S}

    run.run_mutant = measured
    return run


@pytest.mark.slow
def test_a_resumed_run_keeps_what_was_measured_and_runs_the_rest_in_draw_order():
    """A time-boxed run measures the first two of five; resumed, only the other three run,
    the records stay in draw order, the earlier run is recorded, and the earlier records
    are classified again under today's equivalence reasons (a reason filed since for a
    killed mutant is a wrong one)."""
    drawn = sample(module_mutants("def f(x):\n    return x < 3 and x > -3\n", "laya/m.py"), 5, seed=1)
    first = _scheduling_only(drawn, time_box=TWO_STARTED).run()
    assert first["sample"] == 2 and first["projectTests"] is False
    # a sitting in a box of its own is the same measurement: only what a mutant is run against counts
    resumed = _scheduling_only(drawn, time_box=60, earlier=first, equivalents={drawn[0].key: "filed since"})
    result = resumed.run()
    assert sorted(resumed.ran) == [2, 3, 4]
    assert [r["key"] for r in result["mutants"]] == [m.key for m in drawn]
    assert result["mutants"][0]["status"] == "wrongly-equivalent"
    assert result["mutants"][0]["reason"] == "filed since"
    assert result["summary"]["wronglyEquivalent"] == [drawn[0].key]
    assert result["sample"] == 5 and result["complete"]
    [earlier_run] = result["earlierRuns"]
    assert earlier_run == {"startedOn": first["startedOn"], "finishedOn": first["finishedOn"],
                           "wallSeconds": first["wallSeconds"], "mutantsSoFar": 2, "jobs": 1, "maxWorkers": 0,
                           "baseline": {"seconds": 1.0}}
    again = _scheduling_only(drawn, earlier=result, equivalents={drawn[0].key: "filed since"})
    again.baseline = None  # nothing left to run: not even a baseline is measured
    assert again.run()["mutants"] == result["mutants"] and again.ran == []


@pytest.mark.slow
@pytest.mark.parametrize("field, value", [("sampleSeed", 2), ("population", 6), ("hypothesisSeed", 8),
                                          ("code", {"runtime": "other"}), ("scope", ["cache.*"]),
                                          ("confirmWholeSuite", False), ("projectTests", True)])
def test_only_a_run_of_the_same_draw_measured_the_same_way_is_resumed(field, value):
    from laya_qual.measure.mutation import MutationError

    drawn = sample(module_mutants("def f(x):\n    return x < 3 and x > -3\n", "laya/m.py"), 5, seed=1)
    first = _scheduling_only(drawn, time_box=MUTANT_S - 0.1).run()  # one started
    with pytest.raises(MutationError, match=f"the earlier run's {field} is .*, this run's"):
        _scheduling_only(drawn, earlier=first | {field: value}).run()
    with pytest.raises(MutationError, match="measured 1 mutants this draw of 2 does not hold"):
        _scheduling_only(drawn[:2], earlier=first | {"mutants": first["mutants"] + [
            first["mutants"][0] | {"key": drawn[4].key}]}).run()



def test_resume_from_the_command_line_takes_its_seeds_and_writes_back(tmp_path, whole_population, monkeypatch):
    """`mutate --sample 2 --resume FILE` on a FILE that measured both drawn mutants: the
    seeds come from FILE, nothing runs (not even a baseline), the summary is printed and
    FILE is rewritten whole; a smaller --sample is refused for what FILE holds beyond it."""
    import json
    import tempfile

    from click.testing import CliRunner

    from laya_qual.cli import main
    from laya_qual.measure.mutation import code_digests

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the run copies the packages
    drawn = sample(whole_population, 2, seed=3)
    records = [{"id": m.id, "key": m.key, "part": "harness" if m.file.startswith("laya_qual/") else "runtime",
                "killedBy": "suite", "executed": True, "executedByTests": False, "coveringTests": 1,
                "stages": [{"stage": "covering tests", "outcome": "failed", "firstFailure": "t", "seconds": 1.0}],
                "seconds": 1.0, "status": "killed"} for m in drawn]
    earlier = {"format": "laya-qual-mutant-sample-v1", "code": code_digests(installed_layout()),
               "population": len(whole_population), "sampleSeed": 3, "sample": 2, "hypothesisSeed": 5,
               "scope": [], "confirmWholeSuite": True, "projectTests": False, "startedOn": "2026-12-01T00:00:00Z",
               "complete": False, "baseline": {"seconds": 1.0}, "mutants": records}
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps(earlier))
    result = CliRunner().invoke(main, ["mutate", "--sample", "2", "--resume", str(path)])
    assert result.exit_code == 0, result.output
    assert "killed 2 of 2 sampled mutants" in result.output and "sample seed 3" in result.output
    assert "] resuming: 2 of the 2 drawn measured before, 0 to run\n" in result.output
    written = json.loads(path.read_text())
    assert written["complete"] and written["hypothesisSeed"] == 5 and written["baseline"] == {"seconds": 1.0}
    assert [r["key"] for r in written["mutants"]] == [m.key for m in drawn]
    assert written["earlierRuns"][0]["startedOn"] == "2026-12-01T00:00:00Z"
    assert list(tmp_path.glob("laya-mutants-*")) == [], "the package copies were left behind"
    bound = written["summary"]["lowerBound95"]  # 0.05 ** (1 / 2): a lower bound at exactly R meets R
    for required, code in ((bound, 0), (math.nextafter(bound, 1), 1)):
        gated = CliRunner().invoke(main, ["mutate", "--sample", "2", "--resume", str(path),
                                          "--require-rate", repr(required)])
        assert gated.exit_code == code, (required, gated.output)
    assert "is below the required" in gated.output
    result = CliRunner().invoke(main, ["mutate", "--sample", "1", "--resume", str(path)])
    assert result.exit_code == 1 and "cannot resume: the earlier run measured 1 mutants" in result.output


def test_a_stage_records_its_seconds_to_a_tenth():
    from laya_qual.measure.mutant_run import _stage
    from laya_qual.measure.mutation import RunResult

    stage = _stage("covering tests", RunResult("failed", "t::x", 12.3456, 1, "output"), 4)
    assert stage == {"stage": "covering tests", "outcome": "failed", "firstFailure": "t::x",
                     "failure": None, "seconds": 12.3, "tests": 4}  # output without a failure report
    assert _stage("suite", RunResult("passed", None, 0.04, 0, "")).keys() == {"stage", "outcome", "firstFailure",
                                                                             "seconds"}


def test_a_sampled_run_gets_its_time_box_in_seconds_and_a_random_hypothesis_seed_below_2_31(tmp_path, monkeypatch):
    """`mutant_run.main` hands the run `--time-box` in seconds and, with no `--hypothesis-seed`,
    a seed drawn from [0, 2**31), as the draw's own seed is (the top of the range drawn here)."""
    import secrets

    from laya_qual.measure import mutant_run

    runs = []

    class Recorded:
        def __init__(self, drawn, **kwargs):
            runs.append(kwargs)
            self.tmp = tmp_path

        def run(self):
            record = {"key": "k", "status": "killed", "part": "runtime", "killedBy": "suite"}
            return {"population": 9, "sampleSeed": 4, "confirmWholeSuite": False,
                    "summary": mutant_run.summarize([record])}

        def close(self):
            pass

    monkeypatch.setattr(mutant_run, "SampleRun", Recorded)
    monkeypatch.setattr(secrets, "randbelow", lambda bound: bound - 1)
    assert mutant_run.main(drawn=[], population_size=9, seed=4, hypothesis_seed=None, workers=0, timeout=None,
                           equivalents=None, tests_dir=None, output=tmp_path / "out.json", require_rate=None,
                           scope=(), confirm=False, jobs=1, time_box=0.5) == 0
    [run] = runs
    assert (run["hypothesis_seed"], run["time_box"]) == (2**31 - 1, 30.0)


@pytest.mark.parametrize("mutated, unmutated, reproduced", [
    (["failed", "failed"], "passed", True),     # fails with the mutant twice, passes without it
    (["failed", "failed"], "failed", False),    # the unmutated code fails the same run: no kill of the mutant's
    (["failed", "passed"], "passed", False),    # the mutant's failure does not come again
    (["timeout", "timeout"], "passed", True),   # a timeout that reproduces is killed by timeout
])
def test_a_kill_counts_only_if_it_reproduces_in_the_same_order(tmp_path, mutated, unmutated, reproduced):
    """docs/mutation.md: a stage's kill counts only if the tests it ran, in its order, through
    the first failing one, pass on an unmutated copy and fail again with the mutant; both
    runs and the order are recorded."""
    from laya_qual.measure.mutant_run import SampleRun
    from laya_qual.measure.mutation import RunResult

    run = SampleRun.__new__(SampleRun)
    run.tmp, run.pristine = tmp_path, tmp_path / "pristine"
    (run.pristine / "laya").mkdir(parents=True)
    mutant = tmp_path / "m0"
    mutant.mkdir()
    calls, left = [], iter(mutated)

    def stage_run(at: Path, tests: list[str]) -> RunResult:
        calls.append((at.name, list(tests)))
        outcome = unmutated if at.name == "unmutated" else next(left)
        return RunResult(outcome, "t.py::b" if outcome == "failed" else None, 1.0, 1, "")

    stage = run._judged("covering tests", mutant, ["t.py::a", "t.py::b", "t.py::c"], stage_run, 3)
    through = ["t.py::a", "t.py::b"] if mutated[0] == "failed" else ["t.py::a", "t.py::b", "t.py::c"]
    assert calls == [("m0", ["t.py::a", "t.py::b", "t.py::c"]), ("unmutated", through), ("m0", through)]
    r = stage["reproduction"]
    assert r["reproduced"] is reproduced and r["order"] == through and r["tests"] == len(through)
    assert (r["unmutated"]["outcome"], r["mutantAgain"]["outcome"]) == (unmutated, mutated[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m0", "pristine"]  # the unmutated copy is gone
    record = {"key": "k", "status": "survived", "part": "runtime", "killedBy": None, "stages": [stage]}
    from laya_qual.measure.mutant_run import summarize
    assert summarize([record])["notReproduced"] == ([] if reproduced else ["k"])


def test_a_passing_stage_is_not_run_again(tmp_path):
    from laya_qual.measure.mutant_run import SampleRun
    from laya_qual.measure.mutation import RunResult

    run = SampleRun.__new__(SampleRun)
    calls = []
    stage = run._judged("suite", tmp_path, ["t.py::a"], lambda at, tests: calls.append(tests) or RunResult(
        "passed", None, 1.0, 0, ""))
    assert calls == [["t.py::a"]] and "reproduction" not in stage


def test_an_equivalence_filed_after_the_result_is_known_counts_the_mutant_survived():
    """docs/mutation.md: a reason sets a survivor apart only when it was filed before the
    mutant was measured; one new or changed when a run is resumed leaves it survived in the
    headline (``lateReason``, listed under ``lateEquivalents``); a killed one is a wrong reason."""
    from laya_qual.measure.mutant_run import _classified, summarize

    def record(key, killed_by=None, **earlier):
        return {"key": key, "part": "runtime", "killedBy": killed_by, "seconds": 1.0,
                "stages": [{"stage": "suite", "outcome": "failed" if killed_by else "passed"}], **earlier}

    reasons = {"a": "why a", "b": "why b", "c": "why c, rewritten", "d": "why d"}
    now = _classified(record("a"), reasons, measured_now=True)
    assert (now["status"], now["reason"], now["reasonFiled"]) == ("equivalent", "why a", "before")
    kept = _classified(now, reasons, measured_now=False)  # resumed: the same reason, filed before
    assert (kept["status"], kept["reasonFiled"]) == ("equivalent", "before")
    late = _classified(record("b", status="survived"), reasons, measured_now=False)
    assert (late["status"], late["lateReason"]) == ("survived", "why b") and "reason" not in late
    changed = _classified(record("c", status="equivalent", reason="why c", reasonFiled="before"), reasons,
                          measured_now=False)
    assert (changed["status"], changed["lateReason"]) == ("survived", "why c, rewritten")
    wrong = _classified(record("d", "suite"), reasons, measured_now=True)
    assert wrong["status"] == "wrongly-equivalent"
    s = summarize([now, late, changed, wrong])
    assert (s["killed"], s["total"], s["equivalent"]) == (1, 3, 1)
    assert s["lateEquivalents"] == ["b", "c"] and s["survivors"] == ["b", "c"]


def test_the_project_tests_have_their_own_digest(tmp_path):
    """The results name the tests/ that made the second figure; a resume compares it with
    the rest of the code digests, so another tests/ is refused by name."""
    from laya_qual.measure.mutant_run import tests_digest

    tests = tmp_path / "tests"
    (tests / "__pycache__").mkdir(parents=True)
    (tests / "test_a.py").write_text("def test_a():\n    pass\n")
    before = tests_digest(tests)
    (tests / "__pycache__" / "test_a.cpython-311.pyc").write_bytes(b"bytecode")
    assert tests_digest(tests) == before  # bytecode is no test
    (tests / "data").mkdir()
    (tests / "data" / "case.json").write_text("{}")
    assert tests_digest(tests) != before
