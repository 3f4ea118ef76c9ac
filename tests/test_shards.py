"""A run split over N shards (`--laya-shard K/N`, one per CI runner) and merged by
`laya-qual merge` gives the claims and verdicts of the same run unsharded; shards that
are not one whole run are refused by name."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys

import hypothesis.core
import pytest
import torch  # noqa: F401  in-process report runs import torch; pytester would unload and re-import it
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from laya_qual.cli import main as laya_qual
from laya_qual.release.merge import MergeError, merge
from laya_qual.plugin.shards import ShardError, assign, parse_shard, read_durations, write_durations
from laya_qual.report.signing import keygen

pytest_plugins = ("pytester",)

# Eight claimed tests of uneven cost, one a Hypothesis property, one failing on purpose.
PROJECT = """
import time
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.parametrize("n", range(5))
def test_param(n):
    time.sleep(0.01 * n)

@pytest.mark.laya_claim("report.signature")
@settings(database=None, max_examples=5)
@given(st.integers())
def test_property(x):
    pass

@pytest.mark.laya_claim("report.subjects")
def test_failing():
    assert False

@pytest.mark.laya_claim("report.subjects")
def test_plain():
    open("seen", "w").close()
"""
SEED = ("--hypothesis-seed", "5")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")] + ["LAYA_QUAL_SIGNING_KEY"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hypothesis.core, "global_force_seed", hypothesis.core.global_force_seed)
    pytester.makepyfile(test_project=PROJECT)
    return pytester


def shard(project: pytest.Pytester, k: int, n: int, *extra: str) -> str:
    out = str(project.path / f"shard-{k}-of-{n}{'-'.join(('', *extra))}.json")
    project.runpytest_inprocess("-p", "laya_qual", *SEED, "--laya-shard", f"{k}/{n}", "--laya-evidence-out", out,
                                *extra)
    return out


def claims_of(bundle) -> dict:
    from laya_qual.report.verify import read_statements

    [laya] = [s for s, _ in read_statements(bundle) if "qualification" in s["predicateType"]]
    return {c["id"]: (c["verdict"], sorted((e["test"], e["outcome"]) for e in c["evidence"]))
            for c in laya["predicate"]["claims"]}


@given(tests=st.lists(st.text("abc:/", min_size=1, max_size=6), unique=True, max_size=30),
       times=st.lists(st.floats(0, 100), max_size=30), count=st.integers(1, 6))
def test_every_test_lands_on_exactly_one_shard_and_the_load_is_balanced(tests, times, count):
    durations = dict(zip(tests, times))
    pinned = {tests[0]: 1} if tests else {}
    assigned = assign(tests, durations, count, pinned=pinned)
    assert sorted(assigned) == sorted(tests) and set(assigned.values()) <= set(range(1, count + 1))
    assert assign(list(reversed(tests)), dict(durations), count, pinned=pinned) == assigned  # order-free
    if tests:
        assert assigned[tests[0]] == 1
    # greedy longest-first: no shard exceeds the least loaded by more than its longest test
    known = [durations[t] for t in tests if t in durations]
    fallback = statistics.median(known) if known else 1.0  # a test never timed counts as the median
    seconds = {t: durations.get(t, fallback) for t in tests}
    load = [sum(seconds[t] for t, k in assigned.items() if k == i + 1 and t not in pinned) for i in range(count)]
    longest = max(seconds.values(), default=0.0)
    pinned_load = sum(seconds[t] for t in pinned)
    assert max(load) - min(load) <= longest + pinned_load + 1e-6


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", ""])
def test_a_malformed_shard_is_refused(text):
    with pytest.raises(ShardError, match="K/N"):
        parse_shard(text)


def test_durations_store_round_trips_and_refuses_garbage(tmp_path):
    store = tmp_path / ".laya-qual" / "durations.json"
    write_durations(store, [{"test": "a", "duration": 1.5}, {"test": "b", "duration": 0.25}])
    write_durations(store, [{"test": "b", "duration": 2.0}])
    seconds, digest = read_durations(store)
    assert seconds == {"a": 1.5, "b": 2.0} and len(digest) == 64
    # to a tenth of a millisecond, sorted by test id, one-space indent; a record without its seconds adds nothing
    write_durations(store, [{"test": "a0", "duration": 0.123456789}, {"test": "d", "duration": None}, {"test": "e"}])
    assert store.read_text() == ('{\n "format": "laya-qual-durations/v1",\n "tests": {\n  "a": 1.5,\n  "a0": 0.1235,\n'
                                 '  "b": 2.0\n }\n}\n')
    store.write_text('{"format": "something else"}')
    with pytest.raises(ShardError, match="durations.json"):
        read_durations(store)


def test_three_shards_merge_into_the_unsharded_report(project, monkeypatch):
    key = project.path / "signing-key"  # inside the project: a path argument elsewhere would move pytest's rootdir
    keygen(key)
    whole = project.path / "whole.intoto.jsonl"
    project.runpytest_inprocess("-p", "laya_qual", *SEED, "--laya-report", str(whole), "--laya-signing-key", str(key))
    shards = []
    for k in (1, 2, 3):
        monkeypatch.setenv("RUNNER_NAME", f"runner-{k}")  # what GitHub Actions sets on each runner
        shards.append(shard(project, k, 3))
    ran = [{r["test"] for r in json.loads(open(s).read())["records"]} for s in shards]
    assert all(ran) and sum(map(len, ran)) == len(set().union(*ran)) == 8  # split, each test once
    merged = project.path / "merged.intoto.jsonl"
    result = CliRunner().invoke(laya_qual, ["merge", *shards, "--key", str(key), "--out", str(merged)])
    assert result.exit_code == 1, result.output  # the project's failing test makes both reports FAILED
    assert claims_of(merged) == claims_of(whole)
    from laya_qual.report.verify import read_statements

    [laya] = [s for s, _ in read_statements(merged) if "qualification" in s["predicateType"]]
    assert [(p["shard"], p["runner"]["name"], p["runner"]["cores"]) for p in laya["predicate"]["passes"]] == [
        (f"{k}/3", f"runner-{k}", os.cpu_count()) for k in (1, 2, 3)]
    invocations = [json.loads(open(s).read())["context"]["invocation"] for s in shards]
    merged_run = laya["predicate"]["invocation"]  # the run spans its shards: the first start, the last finish
    assert merged_run["startedOn"] == min(i["startedOn"] for i in invocations)
    assert merged_run["finishedOn"] == max(i["finishedOn"] for i in invocations)
    assert merged_run["exitStatus"] == max(i["exitStatus"] for i in invocations) == 1

    def own(invocation: dict) -> dict:  # what a merge takes from one shard: shard 1's
        return {k: v for k, v in invocation.items() if k not in ("exitStatus", "collectionErrors", "startedOn",
                                                                   "finishedOn")}
    assert own(merged_run) == own(invocations[0]) != own(invocations[2])


def test_incomplete_or_foreign_shards_are_refused_by_name(project):
    one, two, three = (shard(project, k, 3) for k in (1, 2, 3))
    with pytest.raises(MergeError, match=r"shard 2/3 missing"):
        merge([one, three])
    with pytest.raises(MergeError, match=r"shard 1/3 given twice"):
        merge([one, one, two, three])
    other_seed = str(project.path / "other-seed.json")
    project.runpytest_inprocess("-p", "laya_qual", "--hypothesis-seed", "6", "--laya-shard", "2/3",
                                "--laya-evidence-out", other_seed)
    with pytest.raises(MergeError, match=r"shard 2/3 \(.*other-seed.json\) is not the same run.*options.*seed"):
        merge([one, other_seed, three])
    foreign = json.loads(open(three).read())
    foreign["context"]["harness"]["laya_qual.suite"] = "0" * 64  # as if another suite version ran it
    foreign_path = project.path / "foreign.json"
    foreign_path.write_text(json.dumps(foreign))
    with pytest.raises(MergeError, match=r"shard 3/3 .* suite and harness digests differ"):
        merge([one, two, foreign_path])
    from laya_qual.release.merge import ENVIRONMENT_PROFILE

    edits = {  # one fact of the run changed in shard 3's evidence, each refused by its own name
        "subjects": lambda e: e["context"]["subjects"].append({"name": "artifact/another"}),
        "selection": lambda e: e["selection"]["tests"].append("test_project.py::test_another"),
        "durations file": lambda e: e["selection"]["shard"].update(durationsDigest="0" * 64),
        "suite figures": lambda e: e["context"].update(suite={"traceability": {}}),
        "environment profile": lambda e: e["context"]["environment"].update({ENVIRONMENT_PROFILE[0]: "another"}),
    }
    for what, edit in edits.items():
        changed = json.loads(open(three).read())
        edit(changed)
        foreign_path.write_text(json.dumps(changed))
        with pytest.raises(MergeError, match=rf"shard 3/3 .* is not the same run .*: its {what} differ"):
            merge([one, two, foreign_path])
    unfinished = json.loads(open(two).read())
    unfinished["records"] = unfinished["records"][1:]
    unfinished_path = project.path / "unfinished.json"
    unfinished_path.write_text(json.dumps(unfinished))
    with pytest.raises(MergeError, match=r"shard 2/3 .* has no record of 1 of its tests"):
        merge([one, unfinished_path, three])
    result = CliRunner().invoke(laya_qual, ["merge", one, three, "--out", str(project.path / "x.intoto.jsonl")])
    assert result.exit_code == 4 and "shard 2/3 missing" in result.output


def test_plan_lists_the_selection_and_runs_nothing(project):
    plan = project.path / "plan.json"
    result = project.runpytest_inprocess("-p", "laya_qual", "--laya-plan", str(plan))
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED or result.parseoutcomes().get("deselected") == 8
    listed = json.loads(plan.read_text())["tests"]
    assert len(listed) == 8 and {t["artifact"] for t in listed} == {None}
    assert not (project.path / "seen").exists()


def test_progress_goes_to_stderr_per_group(project):
    result = project.runpytest_inprocess("-p", "laya_qual", *SEED, "--laya-evidence-out", "e.json")
    lines = [line for line in result.stderr.lines if line.startswith("laya_qual progress:")]
    assert lines and lines[-1].startswith("laya_qual progress: 8/8 tests") and lines[-1].endswith("(suite 8/8)")
    # times as minutes and two-digit seconds; nothing is left once every test ran
    assert re.fullmatch(r"laya_qual progress: 8/8 tests, \d+m[0-5]\ds elapsed, ~0m00s left in this pass "
                        r"\(suite 8/8\)",
                        lines[-1]), lines[-1]


def test_the_time_left_weighs_each_test_by_its_recorded_duration(pytester: pytest.Pytester):
    """Four fast tests done of five, the fifth slow when last recorded: the time left is the
    recorded seconds left (4 s, and the median 0.1 s for a test with no record) at this run's
    pace (the tests done took 3x their recorded seconds, setup and call phases summed),
    divided among the 2 workers, whatever the elapsed time (start-up, a test still running)."""
    from laya_qual.plugin.progress import Progress

    recorded = {f"laya_qual/suite/test_a.py::test_fast[{i}]": 0.1 for i in range(4)}
    recorded["laya_qual/suite/test_a.py::test_slow"] = 4.0
    write_durations(pytester.path / "durations.json", [{"test": t, "duration": s} for t, s in recorded.items()])
    progress = Progress(pytester.parseconfigure("-p", "laya_qual", "-n", "2", "--laya-durations", "durations.json"))
    nodeids = [f"qualification/test_a.py::test_fast[{i}]" for i in range(4)] + ["qualification/test_a.py::test_slow"]
    progress.expect([*nodeids, "qualification/test_b.py::test_new"])

    def phase(nodeid: str, when: str, seconds: float) -> None:
        report = pytest.TestReport(nodeid, ("test_a.py", 0, ""), {}, "passed", None, when, duration=seconds)
        progress.advance(nodeid.replace("qualification/", "laya_qual/suite/"), report)
    for nodeid in nodeids[:4]:
        phase(nodeid, "setup", 0.1)
        phase(nodeid, "call", 0.2)
        phase(nodeid, "teardown", 0.0)
    phase(nodeids[4], "setup", 30.0)  # the slow test is still running: not done, not counted
    for elapsed in (0.4, 100.0):
        line = progress.line(progress.started + elapsed)
        assert "4/6 tests" in line and "~0m06s left in this pass (recorded durations)" in line, line  # 3x(4+0.1)/2


def test_without_recorded_durations_the_time_left_waits_for_a_twentieth_and_skips_the_start(
        pytester: pytest.Pytester, monkeypatch):
    """No durations recorded (a first run): no estimate until 5 of 100 tests are done, however
    long the start-up and the first test took; then the pace since the first test finished:
    4 more tests in 8 s leave 95 tests, 190 s."""
    from laya_qual.plugin import progress as progress_module

    clock = [1000.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    progress = progress_module.Progress(pytester.parseconfigure("-p", "laya_qual"))
    nodeids = [f"qualification/test_a.py::test_t[{i}]" for i in range(100)]
    progress.expect(nodeids)

    def finish(nodeid: str, at: float) -> None:
        clock[0] = at
        report = pytest.TestReport(nodeid, ("test_a.py", 0, ""), {}, "passed", None, "teardown", duration=0.0)
        progress.advance(nodeid.replace("qualification/", "laya_qual/suite/"), report)
    finish(nodeids[0], 1039.0)  # start-up and a slow first test: 39 s
    assert "time left: estimating" in progress.line(1039.0)
    for i in range(1, 4):
        finish(nodeids[i], 1039.0 + 2 * i)
    assert "4/100 tests" in progress.line(1045.0) and "time left: estimating" in progress.line(1045.0)
    finish(nodeids[4], 1047.0)
    line = progress.line(1047.0)
    assert "5/100 tests" in line and "~3m10s left in this pass (suite 5/100)" in line, line


def test_plan_estimates_each_group_from_the_recorded_durations():
    from laya_qual.release.plan import render

    listed = [{"test": "s::a", "claims": ["x"], "artifact": None, "level": None, "benchmark": False},
              {"test": "s::b[artifact0-h]", "claims": ["y"], "artifact": "artifact0-h", "level": "base",
               "benchmark": False},
              {"test": "s::c[artifact0-h]", "claims": ["y", "z"], "artifact": "artifact0-h", "level": "artifact",
               "benchmark": False},
              {"test": "s::d[artifact1-k]", "claims": ["z"], "artifact": "artifact1-k", "level": "artifact",
               "benchmark": False},
              {"test": "s::bench", "claims": ["b"], "artifact": "every head", "level": None, "benchmark": True}]
    text = render(listed, {"s::a": 10.0, "s::b[artifact0-h]": 30.0, "s::c[artifact0-h]": 2.0, "s::bench": 50.0},
                  2, "durations.json")
    rows = [line.split() for line in text.splitlines()[2:7]]
    assert [r[0] for r in rows] == ["once", "artifact0-h", "artifact0-h", "artifact1-k", "benchmarks"]
    # an untimed test counts as the median of the timed ones (20 s)
    assert rows[3] == ["artifact1-k", "(every", "artifact)", "1", "1", "20s", "(1", "never", "timed)"]
    # 4 claims, 5 tests; the suite pass's 62 s over 2 workers plus the 50 s benchmark pass: 81 s
    assert "total: 4 claims, 5 tests, 112s of test time; about 1.4 min wall on 2 worker(s)" in text


def test_plan_groups_artifacts_in_number_order_then_every_head_then_benchmarks():
    """artifact10 comes after artifact9 (by number, not by text); within an artifact the
    levels keep their documented order; the every-head tests follow all artifacts."""
    from laya_qual.release.plan import render

    def test(name, artifact, level, benchmark=False):
        return {"test": name, "claims": [name], "artifact": artifact, "level": level, "benchmark": benchmark}

    listed = [test("s::bench", "every head", None, True), test("s::all[every head]", "every head", None),
              test("s::k[artifact10-b]", "artifact10-b", "artifact"),
              test("s::j[artifact10-b]", "artifact10-b", "base-kind"),
              test("s::i[artifact9-a]", "artifact9-a", "artifact"),
              test("s::base[artifact9-a]", "artifact9-a", "base"),
              test("s::once", None, None)]
    names = [line.split("  ")[0] for line in render(listed, {}, 1, None).splitlines()[2:9]]
    assert names == ["once per run", "artifact9-a (once per base)", "artifact9-a (every artifact)",
                     "artifact10-b (once per base and head kind)", "artifact10-b (every artifact)",
                     "every head at once", "benchmarks (one runner, in-process)"]


@pytest.mark.slow
def test_run_plan_prints_the_estimate_of_its_selection_and_runs_nothing(tmp_path, monkeypatch):
    """`laya-qual run --plan` collects what `run` would run (extra pytest arguments included),
    prints the groups and the estimate, and writes no report; it takes no run option."""
    from click.testing import CliRunner

    from laya_qual.cli import main

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "--plan", "--", "-k", "test_pae_is_dsse_v1 or TestLruEviction"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split() == ["group", "claims", "tests", "estimate"]
    assert "total: 2 claims, 2 tests, 2s of test time" in result.output
    assert "no recorded durations yet" in result.output
    assert not (tmp_path / "reports").exists()
    refused = CliRunner().invoke(main, ["run", "--plan", "--out", "r.intoto.jsonl"])
    assert refused.exit_code == 2 and "--plan runs nothing" in refused.output


@pytest.mark.slow
def test_the_ini_file_names_the_artifacts_to_qualify(tmp_path):
    """`laya_artifacts` in the ini file stands in for --laya-artifact: the suite's
    artifact-facing tests are planned on that artifact, not on the synthetic default."""
    from laya_qual.synth import write_artifact

    write_artifact(tmp_path / "h", seed=5, head_kind="float32")
    (tmp_path / "pytest.ini").write_text("[pytest]\nlaya_artifacts = h\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    subprocess.run([sys.executable, "-m", "pytest", "-p", "laya_qual", "--laya-qualify", "-q", "-p", "no:cacheprovider",
                    "--laya-plan", "plan.json"], cwd=tmp_path, env=env, capture_output=True, check=False)
    artifacts = {t["artifact"] for t in json.loads((tmp_path / "plan.json").read_text())["tests"]}
    assert artifacts - {None, "every head"} == {"artifact0-h"}


def test_progress_is_printed_at_most_once_per_interval(pytester, monkeypatch):
    """One line per EVERY_SECONDS at most, plus one as each group completes: a slow first
    test, then many quick ones, may not print a line per test once the first interval
    has passed."""
    import time

    from laya_qual.plugin import progress

    monkeypatch.setattr(progress, "EVERY_SECONDS", 0.2)
    pytester.makepyfile(test_many="""
import time
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_a_slow_first():
    time.sleep(0.25)

@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.parametrize("n", range(50))
def test_quick(n):
    pass
""")
    start = time.monotonic()
    result = pytester.runpytest_inprocess("-p", "laya_qual", *SEED, "-p", "no:randomly",
                                          "--laya-evidence-out", "e.json")
    elapsed = time.monotonic() - start
    lines = [line for line in result.stderr.lines if line.startswith("laya_qual progress:")]
    assert lines and lines[-1].startswith("laya_qual progress: 51/51 tests")
    assert len(lines) <= elapsed / 0.2 + 2, (len(lines), elapsed)


def test_a_report_before_the_collection_is_known_is_not_counted(pytestconfig, monkeypatch):
    """Under xdist the controller learns the collection from its workers: a test report
    arriving before that counts nothing and prints no "1/0 tests" line."""
    from laya_qual.plugin import progress

    monkeypatch.setattr(progress, "EVERY_SECONDS", 0.0)
    printed = []
    counter = progress.Progress(pytestconfig)
    monkeypatch.setattr(counter, "_print", lambda line, column=True: printed.append(line))
    report = pytest.TestReport("t.py::test_x", ("t.py", 0, "test_x"), {}, "passed", None, "teardown")
    counter.advance("t.py::test_x", report)
    assert (counter.done, printed) == ({}, [])
    counter.expect(["t.py::test_x"])
    counter.advance("t.py::test_x", report)
    assert counter.done == {"suite": 1} and printed == []  # the last test's line waits for the loop's end
    counter.finish()
    assert printed[0].startswith("laya_qual progress: 1/1 tests")


def test_every_workers_collection_is_counted_once(pytestconfig, monkeypatch):
    """Each xdist worker reports the same collection: only the first one seen sets the totals."""
    from laya_qual.plugin import progress

    monkeypatch.setattr(progress, "EVERY_SECONDS", 0.0)
    printed = []
    counter = progress.Progress(pytestconfig)
    monkeypatch.setattr(counter, "_print", lambda line, column=True: printed.append(line))
    for _worker in range(2):
        counter.expect(["t.py::test_x", "t.py::test_y"])
    counter.advance("t.py::test_x", pytest.TestReport("t.py::test_x", ("t.py", 0, "test_x"), {}, "passed", None,
                                                      "teardown"))
    assert printed[0].startswith("laya_qual progress: 1/2 tests"), printed


@pytest.mark.slow
def test_run_shard_exits_0_once_its_evidence_is_complete(tmp_path, monkeypatch):
    """`laya-qual run --shard 2/2` (not the benchmark shard) through the command line: exit 0 with
    its evidence written, though its selection ran no test; docs/laya-qual-cli.md's exit status."""
    monkeypatch.chdir(tmp_path)
    for var in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(var)
    out = tmp_path / "shard-2.json"
    result = CliRunner().invoke(laya_qual, ["run", "--shard", "2/2", "--workers", "0", "--out", str(out), "--",
                                            "-k", "no_test_is_called_this", "-q", *SEED])
    assert result.exit_code == 0, result.output
    assert f"shard evidence: {out} (unsigned;" in result.output
    evidence = json.loads(out.read_text())
    assert evidence["selection"]["shard"]["index"] == 2 and evidence["records"] == []


BENCHMARK_PROJECT = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
def test_a():
    pass

@pytest.mark.laya_claim("report.verdicts")
def test_z_bench(benchmark):
    benchmark(sum, [1, 2])
"""


def test_a_benchmark_test_runs_on_shard_1_wherever_balancing_would_put_it(pytester, monkeypatch):
    """docs/ci.md: the benchmark tests always run on shard 1. Unpinned, balancing two tests of
    equal estimate would put the second by name, the benchmark, on shard 2."""
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(test_project=BENCHMARK_PROJECT)
    chosen = {}
    for k in (1, 2):
        out = pytester.path / f"shard-{k}.json"
        ran = pytester.runpytest_inprocess("-p", "laya_qual", *SEED, "--laya-shard", f"{k}/2", "--laya-evidence-out",
                                           out)
        ran.stdout.fnmatch_lines([f"laya_qual evidence: {out} (unsigned partial, for --laya-evidence-in)"])
        chosen[k] = json.loads(out.read_text())["selection"]["shard"]["tests"]
    assert chosen == {1: ["test_project.py::test_z_bench"], 2: ["test_project.py::test_a"]}
