"""``laya-qual merge``: the evidence of N shards of one run (``laya-qual run --shard K/N``,
one per CI runner) into one signed report, refused unless the shards are the same
run and together ran every selected test exactly once.

Same run means the same suite and harness digests, Hypothesis seed and profile,
options, subjects, selection, durations file and environment profile (interpreter,
package versions, determinism flags, device, git commit); the runners' CPUs may differ,
and the report's environment is shard 1's, the runner that measured the benchmarks.
"""

from __future__ import annotations

import json
from pathlib import Path

from laya_qual.plugin.assembler import EVIDENCE_FORMAT

# What every shard's run options must agree on (the shard option itself differs by design).
RUN_FACTS = ("seed", "profile", "artifacts", "base", "device")
# The parts of the environment that decide what a test computes; the machine itself may differ.
ENVIRONMENT_PROFILE = ("python", "implementation", "packages", "determinism", "device", "gpu", "git")


class MergeError(Exception):
    """The shards cannot make one report; the message names the shard and what differs."""


def read_shard(path: str | Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise MergeError(f"{path}: cannot read it ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != EVIDENCE_FORMAT:
        raise MergeError(f"{path}: not a {EVIDENCE_FORMAT} file (laya-qual run --shard K/N writes one)")
    shard = (doc.get("selection") or {}).get("shard")
    if not shard:
        raise MergeError(f"{path}: the evidence of an unsharded run, not of a shard (laya-qual run --shard K/N)")
    return {**doc, "path": str(path), "label": f"shard {shard['index']}/{shard['count']} ({path})"}


def _profile(environment: dict) -> dict:
    return {k: environment.get(k) for k in ENVIRONMENT_PROFILE}


def _same_run(shards: list[dict]) -> None:
    first = shards[0]
    facts = {
        "suite and harness digests": lambda s: s["context"]["harness"],
        "options": lambda s: {k: s["run"].get(k) for k in RUN_FACTS},
        "subjects": lambda s: s["context"]["subjects"],
        "selection": lambda s: s["selection"]["tests"],
        "shard count": lambda s: s["selection"]["shard"]["count"],
        "durations file": lambda s: s["selection"]["shard"]["durationsDigest"],
        "suite figures": lambda s: s["context"]["suite"],
        "environment profile": lambda s: _profile(s["context"]["environment"]),
    }
    for shard in shards[1:]:
        for what, fact in facts.items():
            if fact(shard) != fact(first):
                raise MergeError(f"{shard['label']} is not the same run as {first['label']}: its {what} differ"
                                 + _difference(fact(first), fact(shard)))


def _difference(a, b) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
        return f" ({', '.join(f'{k}: {a.get(k)!r} vs {b.get(k)!r}' for k in keys)[:300]})"
    return ""


def _complete(shards: list[dict]) -> None:
    count = shards[0]["selection"]["shard"]["count"]
    by_index: dict[int, dict] = {}
    for shard in shards:
        index = shard["selection"]["shard"]["index"]
        if index in by_index:
            raise MergeError(f"shard {index}/{count} given twice: {by_index[index]['path']} and {shard['path']}")
        by_index[index] = shard
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in by_index]
    if missing:
        raise MergeError(f"shard {', '.join(missing)} missing: every shard of the run is needed")
    owner: dict[str, str] = {}
    for shard in shards:
        for test in shard["selection"]["shard"]["tests"]:
            if test in owner:
                raise MergeError(f"test {test} is in {owner[test]} and in {shard['label']}")
            owner[test] = shard["label"]
        assigned = set(shard["selection"]["shard"]["tests"])
        recorded = {r["test"] for r in shard["records"]}
        if recorded - assigned:
            raise MergeError(f"{shard['label']} recorded tests outside its shard: {sorted(recorded - assigned)[:3]}")
        if assigned - recorded:
            raise MergeError(f"{shard['label']} has no record of {len(assigned - recorded)} of its tests "
                             f"(e.g. {sorted(assigned - recorded)[0]}): the shard did not finish")
    unowned = sorted(set(shards[0]["selection"]["tests"]) - set(owner))
    if unowned:
        raise MergeError(f"{len(unowned)} selected test(s) in no shard (e.g. {unowned[0]})")


def merge(paths: list[str | Path]) -> tuple[list[dict], dict, list[dict]]:
    """(records, context, passes) of one report from the shards' evidence, in shard order."""
    if not paths:
        raise MergeError("no shard evidence given")
    shards = sorted((read_shard(p) for p in paths), key=lambda s: s["selection"]["shard"]["index"])
    _same_run(shards)
    _complete(shards)
    first = shards[0]
    invocations = [s["context"]["invocation"] for s in shards]
    invocation = {**first["context"]["invocation"],
                  "exitStatus": max(i["exitStatus"] for i in invocations),
                  "collectionErrors": sorted({e for i in invocations for e in i["collectionErrors"]}),
                  "startedOn": min(i["startedOn"] for i in invocations),
                  "finishedOn": max(i["finishedOn"] for i in invocations)}
    context = {**first["context"], "invocation": invocation}
    records = [r for s in shards for r in s["records"]]
    passes = [p for s in shards for p in s["passes"]]
    return records, context, passes
