"""What a run selected, taken at collection time: every claimed test's report id, the
artifact it runs on and how often it runs (``laya_once_per``), then ``--laya-shard``'s
part of it and ``--laya-plan``'s listing.

The controller assembles the report, but under xdist only the workers collect: each
worker hands its selection to the controller in ``workeroutput`` (all workers collect
the same tests), an in-process run keeps it in the stash.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SELECTION = pytest.StashKey[dict]()
WORKER_KEY = "laya_selection"
EVERY_HEAD = "every head"  # a test that serves every qualified head at once (qualified_heads)


def report_test_id(config: pytest.Config, nodeid: str, file: Path | str) -> str:
    """The id a report names a test by (the same on workers, the controller and every shard)."""
    from laya_qual.report.provenance import test_id
    from laya_qual.subjects import package_dir

    return test_id(nodeid, file, config.rootpath, package_dir("laya_qual.suite"))


def _artifact_ids(config: pytest.Config) -> dict:
    from laya_qual.plugin.fixtures import representatives

    return {param: test_id for param, test_id in representatives(config, "artifact")}


def describe(config: pytest.Config, item: pytest.Item, artifact_ids: dict) -> dict:
    """One test as a plan lists it: its claims, the artifact it runs on (None: not
    artifact-facing) and how often it runs, and whether it is a benchmark."""
    from laya_qual.plugin.fixtures import once_per
    from laya_qual.plugin.items import claim_ids, is_benchmark

    callspec = getattr(item, "callspec", None)
    artifact = callspec.params.get("qualified_artifact") if callspec else None
    every_head = "qualified_heads" in getattr(item, "fixturenames", ())
    return {"test": report_test_id(config, item.nodeid, item.path), "claims": claim_ids(item),
            "artifact": artifact_ids.get(artifact) if artifact else (EVERY_HEAD if every_head else None),
            "level": once_per(item) if artifact else None, "benchmark": is_benchmark(item)}


def record(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Take the selection, keep this shard's part of it, and write the plan if asked."""
    from laya_qual.plugin.items import claim_ids, keep_only
    from laya_qual.plugin.shards import ShardError, assign, parse_shard, read_durations

    artifact_ids = _artifact_ids(config)
    described = {item: describe(config, item, artifact_ids) for item in items}
    claimed = [d for d in described.values() if d["claims"]]
    chosen = {"tests": sorted(d["test"] for d in claimed), "shard": None}
    shard = config.getoption("laya_shard", None)
    try:
        durations, durations_digest = read_durations(config.getoption("laya_durations", None))
        if shard:
            index, count = parse_shard(shard)
            every = sorted({d["test"] for d in described.values()})
            benchmarks = {d["test"]: 1 for d in described.values() if d["benchmark"]}
            assigned = assign(every, durations, count, pinned=benchmarks)
            mine = {t for t, k in assigned.items() if k == index}
            chosen["shard"] = {"index": index, "count": count, "durationsDigest": durations_digest,
                               "tests": sorted(t for t in chosen["tests"] if t in mine)}
            keep_only(config, items, lambda item: described[item]["test"] in mine)
    except ShardError as e:
        raise pytest.UsageError(str(e)) from None
    plan = config.getoption("laya_plan", None)
    if plan:
        kept = [described[item] for item in items if claim_ids(item)]
        Path(plan).write_text(json.dumps({"tests": kept, "shard": chosen["shard"] and {
            k: v for k, v in chosen["shard"].items() if k != "tests"}}, indent=1) + "\n")
        keep_only(config, items, lambda item: False)
    config.stash[SELECTION] = chosen
    if hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_KEY] = chosen


def of(config: pytest.Config) -> dict | None:
    """This process's selection (an in-process run), if it collected."""
    return config.stash.get(SELECTION, None)
