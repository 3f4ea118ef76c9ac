"""``laya-qual run --plan``: what a run would do, before paying for it -- per artifact and
for the base, the claims and tests that would run and how long they took last time."""

from __future__ import annotations

import re
from collections import defaultdict

from laya_qual.plugin.selection import EVERY_HEAD
from laya_qual.plugin.shards import estimates

SUITE = "once per run"
LEVEL_NAMES = {"base": "once per base", "base-kind": "once per base and head kind", "artifact": "every artifact"}


def _row(name: str, tests: list[dict], seconds: dict[str, float], known: set[str]) -> tuple:
    claims = {c for t in tests for c in t["claims"]}
    estimated = sum(seconds[t["test"]] for t in tests)
    unknown = sum(t["test"] not in known for t in tests)
    return name, len(claims), len(tests), estimated, unknown


def _group(test: dict) -> tuple:
    """(order, name): the suite first, then the base, each artifact (its kind-level tests,
    then its own), every head at once, benchmarks."""
    if test["benchmark"]:
        return (4,), "benchmarks (one runner, in-process)"
    if test["artifact"] is None:
        return (0,), SUITE
    if test["artifact"] == EVERY_HEAD:
        return (3,), f"{EVERY_HEAD} at once"
    level = test["level"]
    position = re.match(r"artifact(\d+)-", test["artifact"])  # artifact10 after artifact9
    artifact = (int(position.group(1)) if position else -1, test["artifact"])
    order = (1,) if level == "base" else (2, artifact, list(LEVEL_NAMES).index(level))
    return order, f"{test['artifact']} ({LEVEL_NAMES[level]})"


def rows(tests: list[dict], durations: dict[str, float]) -> list[tuple]:
    """(group, claims, tests, estimated seconds, tests without a recorded duration)."""
    seconds = estimates([t["test"] for t in tests], durations)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for t in tests:
        groups[_group(t)].append(t)
    return [_row(name, groups[key], seconds, set(durations)) for key in sorted(groups) for name in [key[1]]]


def render(tests: list[dict], durations: dict[str, float], workers: int, source: str | None) -> str:
    """The plan as a table, with the estimated wall time of the suite pass on ``workers``
    xdist workers plus the in-process benchmark pass."""
    table = rows(tests, durations)
    width = max([len(r[0]) for r in table] + [5])
    lines = [f"{'group':<{width}}  claims  tests  estimate", f"{'-' * width}  ------  -----  --------"]
    for name, claims, count, seconds, unknown in table:
        note = f"  ({unknown} never timed)" if unknown and durations else ""
        lines.append(f"{name:<{width}}  {claims:>6}  {count:>5}  {seconds:>7.0f}s{note}")
    bench = sum(r[3] for r in table if r[0].startswith("benchmarks"))
    suite = sum(r[3] for r in table) - bench
    claims = len({c for t in tests for c in t["claims"]})
    wall = suite / max(workers, 1) + bench
    lines += ["", f"total: {claims} claims, {len(tests)} tests, {suite + bench:.0f}s of test time; about "
                  f"{wall / 60:.1f} min wall on {max(workers, 1)} worker(s) plus start-up"]
    lines.append(f"estimates from {source}" if source else
                 "no recorded durations yet (every test counted as 1 s): an unsharded `laya-qual run` records them")
    return "\n".join(lines) + "\n"
