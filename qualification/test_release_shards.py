"""`--laya-shard K/N`'s assignment against a reference greedy written from
docs/report-format.md ("Sharded runs"): a partition of the selection, the same for the
same inputs, pinned tests where they are pinned, the rest longest first onto the least
loaded shard (ties: the lower shard; equal estimates in test id order), a test never
timed counted as the median of the timed ones, 1 s each without any."""

from __future__ import annotations

import json
import os

import hypothesis.core
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.plugin.shards import assign

pytest_plugins = ("pytester",)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def reference_assign(tests: list[str], durations: dict[str, float], count: int, pinned: dict[str, int]) -> dict:
    timed = [durations[t] for t in tests if t in durations]
    untimed = median(timed) if timed else 1.0
    estimate = {t: durations.get(t, untimed) for t in tests}
    load = {k: 0.0 for k in range(1, count + 1)}
    out = {}
    for test in sorted(pinned):
        out[test] = pinned[test]
        load[pinned[test]] += estimate[test]
    for test in sorted((t for t in tests if t not in pinned), key=lambda t: (-estimate[t], t)):
        least = min(load.values())
        shard = min(k for k in load if load[k] == least)
        out[test] = shard
        load[shard] += estimate[test]
    return out


names = st.lists(st.text("ab:/[]", min_size=1, max_size=5), unique=True, max_size=25)
# quarter seconds: every sum of estimates is exact, so a tie is a tie
seconds = st.integers(0, 40).map(lambda q: q / 4)


@settings(max_examples=150, deadline=None)
@given(tests=names, data=st.data(), count=st.integers(1, 6))
@example(tests=["b", "a"], data=None, count=2)  # equal estimates: "a" first, onto shard 1
@example(tests=["a", "b", "c"], data=None, count=3)  # all untimed: 1 s each, one per shard
@pytest.mark.laya_claim("release.shards")
def test_assignment_is_the_documented_partition(tests, data, count):
    if data is None:
        durations, pinned = {}, {}
    else:
        durations = data.draw(st.dictionaries(st.sampled_from(tests), seconds) if tests else st.just({}))
        durations.update(data.draw(st.dictionaries(st.text("xyz", min_size=1), seconds, max_size=3)))  # not selected
        pinned = data.draw(st.dictionaries(st.sampled_from(tests), st.integers(1, count), max_size=3)
                           if tests else st.just({}))
    assigned = assign(tests, dict(durations), count, pinned=dict(pinned))
    assert sorted(assigned) == sorted(tests)  # every selected test exactly once
    assert set(assigned.values()) <= set(range(1, count + 1))
    assert all(assigned[t] == k for t, k in pinned.items())
    assert assigned == reference_assign(tests, durations, count, pinned)
    assert assign(tests[::-1], dict(durations), count, pinned=dict(pinned)) == assigned  # order-free, stable


@pytest.mark.laya_claim("release.shards")
def test_two_equal_tests_and_a_benchmark_split_as_documented():
    """Untimed tests count 1 s; the benchmark pinned to shard 1 loads it first, so of two
    equal tests the first by id goes to shard 2 and the second to shard 1 (tie: the lower)."""
    tests = ["t::a", "t::b", "t::bench"]
    assert assign(tests, {}, 2, pinned={"t::bench": 1}) == {"t::bench": 1, "t::a": 2, "t::b": 1}
    # timed: 3 s and 1 s; the untimed one counts as their median, 2 s
    assert assign(tests, {"t::a": 3.0, "t::b": 1.0}, 2) == {"t::a": 1, "t::bench": 2, "t::b": 2}


PROJECT = """
import pytest

@pytest.mark.laya_claim("report.verdicts")
@pytest.mark.parametrize("n", range(4))
def test_param(n):
    pass

@pytest.mark.laya_claim("report.verdicts")
def test_z_bench(benchmark):
    benchmark(sum, [1, 2])
"""


@pytest.mark.laya_claim("release.shards")
def test_a_sharded_run_keeps_its_part_and_pins_the_benchmark(pytester, monkeypatch):
    """The real plugin: each shard's evidence lists the reference greedy's part of the
    selection for the recorded durations, the benchmark on shard 1."""
    for var in [v for v in os.environ if v.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(var)  # the inner run is a run of its own, not this worker's
    monkeypatch.setattr(hypothesis.core, "global_force_seed", hypothesis.core.global_force_seed)
    pytester.makepyfile(test_project=PROJECT)
    ids = [f"test_project.py::test_param[{n}]" for n in range(4)]
    durations = dict(zip(ids, (4.0, 1.0, 2.0, 3.0)))
    (pytester.path / "durations.json").write_text(json.dumps(
        {"format": "laya-qual-durations/v1", "tests": durations}))
    parts = {}
    for k in (1, 2):
        out = pytester.path / f"shard-{k}.json"
        pytester.runpytest_inprocess("-p", "laya_qual", "--hypothesis-seed", "5", "--laya-shard", f"{k}/2",
                                     "--laya-durations", "durations.json", "--laya-evidence-out", str(out),
                                     "-p", "no:randomly", "-p", "no:cacheprovider")
        evidence = json.loads(out.read_text())
        parts[k] = evidence["selection"]["shard"]["tests"]
        assert sorted(r["test"] for r in evidence["records"]) == parts[k]
    bench = "test_project.py::test_z_bench"
    expected = reference_assign([*ids, bench], durations, 2, {bench: 1})
    assert parts == {k: sorted(t for t, s in expected.items() if s == k) for k in (1, 2)}
