"""`laya-qual merge` through the real command line on shard evidence written as
docs/report-format.md describes it (`laya-qual-evidence/v2`): the signed report is the
one a single run gives (verdicts by the documented rule, counts, evidence, invocation,
exit status), and shards that are not one whole run are refused by name, exit 4."""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.claims import CLAIMS
from laya_qual.cli import main
from laya_qual.report.environment import collect
from laya_qual.report.signing import keygen, load_public_key
from laya_qual.report.verify import verify_bundle

# One test per catalogued claim (so a run can pass), and two more on the first claim.
FIRST = next(iter(CLAIMS))
TESTS = [(f"laya_qual/suite/test_x.py::test_{i}", [cid]) for i, cid in enumerate(CLAIMS)]
TESTS += [(f"laya_qual/suite/test_x.py::test_more_{i}", [FIRST, *list(CLAIMS)[1:2]]) for i in range(2)]
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "unmeasured")
MODULES = ("laya_qual/suite/test_y.py", "laya_qual/suite/test_z.py")  # modules a shard may fail to collect
# docs/report-format.md, "Verdicts and the result"
FAILING = {"failed", "error", "xfailed"}
ENVIRONMENT = collect("cpu", None)  # what each runner records of itself


def shard_evidence(index: int, count: int, assigned: dict[str, int], outcomes: dict[str, str],
                   exit_status: int = 0, started: str = "2026-12-01T00:00:00Z",
                   finished: str = "2026-12-01T01:00:00Z", uncollected: tuple[str, ...] = ()) -> dict:
    """What `laya-qual run --shard index/count` writes: the run's options and context, the
    whole selection, this shard's tests and one record per test it ran."""
    mine = sorted(t for t, k in assigned.items() if k == index)
    claims = dict(TESTS)
    return {
        "format": "laya-qual-evidence/v2",
        "run": {"seed": "5", "profile": "laya-qual", "artifacts": [], "base": None, "device": "cpu",
                "shard": f"{index}/{count}"},
        "passes": [{"workers": 2, "benchmarks": "exclude", "exitStatus": exit_status, "tests": len(mine),
                    "shard": f"{index}/{count}", "runner": {"name": f"runner-{index}", "cpu": "x", "cores": 2}}],
        "reproduce": "python -m pytest -p laya_qual --hypothesis-seed 5",
        "collectionErrors": list(uncollected),
        "selection": {"tests": [t for t, _ in TESTS],
                      "shard": {"index": index, "count": count, "durationsDigest": "d" * 64, "tests": mine}},
        "context": {"hypothesis": {"seed": "5", "reproduce": "python -m pytest -p laya_qual --hypothesis-seed 5"},
                    "environment": copy.deepcopy(ENVIRONMENT),
                    "invocation": {"args": [], "workers": 2, "device": "cpu", "exitStatus": exit_status,
                                   "collectionErrors": list(uncollected), "startedOn": started, "finishedOn": finished,
                                   "shard": index},
                    "harness": {"laya_qual": "cd" * 32, "laya_qual.suite": "ef" * 32},
                    "subjects": [{"name": "laya-runtime", "digest": {"dirHash": "ab" * 32},
                                  "annotations": {"kind": "runtime"}}],
                    "heads": [], "suite": {}},
        "records": [{"test": t, "claims": claims[t], "outcome": outcomes[t], "duration": 0.5} for t in mine],
    }


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("key") / "k"
    keygen(path)
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A fresh directory per call: merge writes its bundle and durations store there."""
    counter = itertools.count()
    return lambda: tmp_path_factory.mktemp(f"merge{next(counter)}")


def write(directory: Path, docs: list[dict]) -> list[str]:
    paths = []
    for i, doc in enumerate(docs):
        paths.append(str(directory / f"shard-{i}.json"))
        Path(paths[-1]).write_text(json.dumps(doc))
    return paths


def merge_cli(paths: list[str], key: Path, out: Path, *extra: str):
    return CliRunner().invoke(main, ["merge", *paths, "--key", str(key), "--out", str(out), *extra])


def reference_verdicts(outcomes: dict[str, str]) -> dict[str, str]:
    """Per claim: failed if any of its tests failed/errored/xfailed, else passed if one passed,
    else not evaluated -- over the union of every shard's tests."""
    of = {cid: [outcomes[t] for t, claims in TESTS if cid in claims] for cid in CLAIMS}
    return {cid: "failed" if FAILING & set(o) else "passed" if "passed" in o else "not evaluated"
            for cid, o in of.items()}


def reference_result(verdicts: dict[str, str], uncollected: set[str]) -> tuple[str, int]:
    """FAILED if a claim failed or a module did not collect in any shard."""
    values = set(verdicts.values())
    result = ("FAILED" if "failed" in values or uncollected else "WARNED" if "not evaluated" in values
              else "PASSED")
    return result, {"PASSED": 0, "FAILED": 1, "WARNED": 3}[result]


@st.composite
def sharded_runs(draw):
    count = draw(st.integers(1, 4))
    assigned = {t: draw(st.integers(1, count)) for t, _ in TESTS}
    changed = draw(st.dictionaries(st.sampled_from([t for t, _ in TESTS]), st.sampled_from(OUTCOMES), max_size=4))
    outcomes = {t: changed.get(t, "passed") for t, _ in TESTS}
    hours = draw(st.permutations(range(2 * count)))
    exits = draw(st.lists(st.sampled_from([0, 1]), min_size=count, max_size=count))
    uncollected = draw(st.lists(st.lists(st.sampled_from(MODULES), unique=True, max_size=2),
                                min_size=count, max_size=count))
    return count, assigned, outcomes, hours, exits, uncollected


@settings(max_examples=12, deadline=None)
@given(run=sharded_runs())
@example(run=(2, {t: 1 + i % 2 for i, (t, _) in enumerate(TESTS)}, {t: "passed" for t, _ in TESTS}, [0, 1, 2, 3],
              [0, 0], [[], []]))
@example(run=(2, {t: 1 + i % 2 for i, (t, _) in enumerate(TESTS)}, {t: "passed" for t, _ in TESTS}, [0, 1, 2, 3],
              [0, 1], [[], [MODULES[1]]]))  # every claim passed; a module of shard 2 did not collect
@example(run=(3, {t: 3 for t, _ in TESTS}, {**{t: "passed" for t, _ in TESTS}, TESTS[-1][0]: "xfailed"},
              [5, 4, 3, 2, 1, 0], [0, 0, 1], [[], [], []]))
@example(run=(2, {t: 2 - i % 2 for i, (t, _) in enumerate(TESTS)},
              {**{t: "passed" for t, _ in TESTS}, TESTS[3][0]: "skipped"}, [3, 0, 1, 2], [1, 0],
              [MODULES, [MODULES[0]]]))
@pytest.mark.laya_claim("release.merge")
def test_merged_shards_give_the_report_of_one_run(key, workdir, run):
    count, assigned, outcomes, hours, exits, uncollected = run
    times = [f"2026-12-01T{h:02d}:00:00Z" for h in hours]
    docs = [shard_evidence(k, count, assigned, outcomes, exits[k - 1], times[2 * k - 2], times[2 * k - 1],
                           tuple(uncollected[k - 1])) for k in range(1, count + 1)]
    directory = workdir()
    out = directory / "merged.intoto.jsonl"
    result = merge_cli(write(directory, docs[::-1]), key, out)  # any order on the command line
    verdicts = reference_verdicts(outcomes)
    modules = {m for shard in uncollected for m in shard}
    expected_result, expected_exit = reference_result(verdicts, modules)
    assert result.exit_code == expected_exit, result.output
    verified = verify_bundle(out, load_public_key(Path(f"{key}.pub")))
    laya = verified.laya["predicate"]
    assert {c["id"]: c["verdict"] for c in laya["claims"]} == verdicts
    assert modules <= set(verified.test_result["predicate"]["failedTests"])
    assert laya["result"] == expected_result
    assert laya["counts"] == {v: Counter(verdicts.values())[v] for v in ("passed", "failed", "not evaluated")}
    claims = dict(TESTS)
    assert {c["id"]: sorted((e["test"], e["outcome"]) for e in c["evidence"]) for c in laya["claims"]} == {
        cid: sorted((t, outcomes[t]) for t, _ in TESTS if cid in claims[t]) for cid in CLAIMS}
    invocation = laya["invocation"]
    assert invocation["exitStatus"] == max(exits)
    assert invocation["collectionErrors"] == sorted(modules)  # every shard's, each once
    closing = result.output[result.output.index("== laya-qual verdict =="):].splitlines()
    assert [line for line in closing if line.startswith("not collected")] == (
        [f"not collected {', '.join(sorted(modules))}"] if modules else [])
    assert invocation["startedOn"] == min(times[0::2]) and invocation["finishedOn"] == max(times[1::2])
    assert invocation["shard"] == 1  # shard 1's own facts
    assert [p["shard"] for p in laya["passes"]] == [f"{k}/{count}" for k in range(1, count + 1)]


# --- refusals -------------------------------------------------------------------------------

ASSIGNED = {t: 1 + i % 3 for i, (t, _) in enumerate(TESTS)}
PASSING = {t: "passed" for t, _ in TESTS}


def three_shards() -> list[dict]:
    return [shard_evidence(k, 3, ASSIGNED, PASSING) for k in (1, 2, 3)]


def edited(what):
    def edit(docs):
        what(docs[2])
        return docs
    return edit


def moved_test(docs):
    """A test of shard 2 recorded and listed by shard 3 too: in two shards."""
    record = docs[1]["records"][0]
    docs[2]["records"].append(record)
    docs[2]["selection"]["shard"]["tests"].append(record["test"])
    return docs


def dropped_test(docs):
    """A test of shard 3 that no shard lists: in none."""
    docs[2]["records"].pop(0)
    docs[2]["selection"]["shard"]["tests"].pop(0)
    return docs


# (what is wrong, edit of three good shards, what the refusal names)
REFUSALS = [
    ("missing", lambda d: d[:2], r"shard 3/3 missing"),
    ("twice", lambda d: [d[0], *d], r"shard 1/3 given twice"),
    ("seed", edited(lambda e: e["run"].update(seed="6")), r"shard 3/3 .* is not the same run .*: its options differ"),
    ("subjects", edited(lambda e: e["context"]["subjects"].append({"name": "artifact/other", "digest": {}})),
     r"shard 3/3 .*: its subjects differ"),
    ("selection", edited(lambda e: e["selection"]["tests"].append("t.py::test_other")),
     r"shard 3/3 .*: its selection differ"),
    ("harness", edited(lambda e: e["context"]["harness"].update({"laya_qual.suite": "00" * 32})),
     r"shard 3/3 .*: its suite and harness digests differ"),
    ("durations", edited(lambda e: e["selection"]["shard"].update(durationsDigest="0" * 64)),
     r"shard 3/3 .*: its durations file differ"),
    *[(f"environment-{k}", edited(lambda e, k=k: e["context"]["environment"].update({k: "another"})),
       rf"shard 3/3 .*: its environment profile differ.*{k}")
      for k in ("python", "implementation", "packages", "determinism", "device", "gpu", "git")],
    ("in-two-shards", moved_test, r"test .* is in shard 2/3 .* and in shard 3/3"),
    ("in-no-shard", dropped_test, r"1 selected test\(s\) in no shard"),
    ("unfinished", edited(lambda e: e["records"].pop()), r"shard 3/3 .* has no record of 1 of its tests"),
    ("unsharded", edited(lambda e: e["selection"].update(shard=None)), r".*shard-2.json: the evidence of an unsharded run"),
    ("not-evidence", edited(lambda e: e.update(format="laya-qual-evidence/v1")), r".*shard-2.json: not a laya-qual-evidence/v2 file"),
]


@pytest.mark.parametrize("edit,named", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
@pytest.mark.laya_claim("release.merge.refusals")
def test_shards_that_are_not_one_whole_run_are_refused_by_name(key, workdir, edit, named):
    directory = workdir()
    out = directory / "merged.intoto.jsonl"
    result = merge_cli(write(directory, edit(three_shards())), key, out)
    assert result.exit_code == 4, result.output
    assert re.search(rf"merge refused: {named}", result.output), result.output
    assert not out.exists() and not (directory / ".laya-qual").exists()  # nothing written


@pytest.mark.laya_claim("release.merge.refusals")
def test_the_runners_machines_may_differ(key, workdir):
    """CPU and platform are not the environment profile: those shards are one run."""
    docs = three_shards()
    docs[2]["context"]["environment"].update(cpu={"model": "Intel Xeon", "logical_cores": 4}, platform="other")
    directory = workdir()
    assert merge_cli(write(directory, docs), key, directory / "m.intoto.jsonl").exit_code == 0


@pytest.mark.laya_claim("release.merge.refusals")
def test_an_unusable_key_is_a_usage_error_and_writes_nothing(tmp_path, key, workdir):
    directory = workdir()
    paths = write(directory, three_shards())
    mismatched = tmp_path / "mismatched"
    keygen(mismatched)
    keygen(tmp_path / "other")
    (tmp_path / "mismatched.pub").write_bytes((tmp_path / "other.pub").read_bytes())  # not its public half
    for bad in (tmp_path / "absent", mismatched):
        result = merge_cli(paths, bad, directory / "m.intoto.jsonl")
        assert result.exit_code == 2 and "--key" in result.output, result.output
        assert not (directory / "m.intoto.jsonl").exists()
