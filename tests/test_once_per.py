"""Base-level claims run once per base, kind-level ones once per base and head kind,
head claims once per head (docs/decisions.md, "Many heads on one base"): which artifact
each level's tests run on, read from the artifacts' own manifests and head.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laya_qual.plugin.fixtures import heads_by_base, representatives
from laya_qual.synth import write_artifact

pytest_plugins = ("pytester",)


@pytest.fixture(scope="module")
def heads(tmp_path_factory) -> dict[str, str]:
    """Two bases; on the first, two float32 heads and an int8 head; on the second, one float32."""
    root = tmp_path_factory.mktemp("heads")
    recipe = {"a": (1, "float32", 1), "b": (2, "int8", 1), "c": (3, "float32", 1), "d": (4, "float32", 2)}
    return {name: str(write_artifact(root / name, seed=seed, head_kind=kind, base_seed=base))
            for name, (seed, kind, base) in recipe.items()}


def chosen(pytester: pytest.Pytester, level: str, *dirs: str) -> list[str]:
    config = pytester.parseconfigure("-p", "laya_qual", *[a for d in dirs for a in ("--laya-artifact", d)])
    return [test_id for _, test_id in representatives(config, level)]


def test_each_level_runs_on_the_first_artifact_of_its_group(pytester, heads):
    every = [heads[n] for n in "abcd"]
    assert chosen(pytester, "artifact", *every) == ["artifact0-a", "artifact1-b", "artifact2-c", "artifact3-d"]
    assert chosen(pytester, "base-kind", *every) == ["artifact0-a", "artifact1-b", "artifact3-d"]
    assert chosen(pytester, "base", *every) == ["artifact0-a", "artifact3-d"]
    assert chosen(pytester, "base", heads["d"], heads["c"], heads["b"]) == ["artifact0-d", "artifact1-c"]


def test_the_synthetic_default_is_one_base_with_one_head_per_kind(pytester):
    assert chosen(pytester, "base-kind") == ["synthetic-float32", "synthetic-int8", "synthetic-transformer"]
    assert chosen(pytester, "base") == ["synthetic-float32"]


def test_an_unreadable_artifact_is_its_own_group(pytester, heads, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    headless = tmp_path / "headless"
    headless.mkdir()
    manifest = json.loads((Path(heads["a"]) / "manifest.json").read_text())
    manifest["files"] = [f for f in manifest["files"] if f["role"] != "head_config"]
    (headless / "manifest.json").write_text(json.dumps(manifest))
    # a broken artifact is never represented by another: the test runs on it, and fails there
    assert chosen(pytester, "base", heads["a"], str(broken)) == ["artifact0-a", "artifact1-broken"]
    assert chosen(pytester, "base", str(broken), str(headless), str(tmp_path / "missing")) == [
        "artifact0-broken", "artifact1-headless", "artifact2-missing"]  # each unreadable one alone
    assert chosen(pytester, "base-kind", heads["a"], str(headless)) == ["artifact0-a", "artifact1-headless"]


def test_heads_are_grouped_by_the_pins_of_their_base(heads):
    pairs = [(n, heads[n]) for n in "abcd"]
    groups = heads_by_base(pairs, None)
    assert [sorted(g) for g in groups] == [["a", "b", "c"], ["d"]]
    assert [sorted(g) for g in heads_by_base(pairs, heads["a"])] == [["a", "b", "c", "d"]]  # --laya-base: one


@pytest.mark.slow
def test_the_plan_lists_a_base_level_test_once_per_base(pytester, heads):
    plan = pytester.path / "plan.json"
    args = [a for n in "abcd" for a in ("--laya-artifact", heads[n])]
    pytester.runpytest_subprocess("-p", "laya_qual", "--laya-qualify", *args, "--laya-plan", str(plan),
                                  "-k", "test_pins or test_gate or test_shared")
    listed = json.loads(plan.read_text())["tests"]

    def artifacts(name: str) -> set:
        return {t["artifact"] for t in listed if f"::{name}[" in t["test"]}

    assert artifacts("test_every_base_pin_is_enforced") == {"artifact0-a", "artifact3-d"}
    assert artifacts("test_cancel_while_waiting_for_the_gate") == {"artifact0-a", "artifact1-b", "artifact3-d"}
    assert artifacts("test_qualified_artifact_parity") == {"artifact0-a", "artifact1-b", "artifact2-c", "artifact3-d"}
    assert {t["level"] for t in listed if "test_every_base_pin" in t["test"]} == {"base"}
    # a user artifact's tests are named after it (index and directory), which --laya-claims,
    # -k and the progress lines go by
    pins = sorted(t["test"].rpartition("[")[2] for t in listed if "test_every_base_pin" in t["test"])
    assert pins[0] == "artifact0-a-encoder_config]" and pins[-1] == "artifact3-d-tokenizer]"
