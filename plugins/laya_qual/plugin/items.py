"""What a collected test is to the plugin: the claims it vouches for, whether it is a
benchmark, and deselecting what a run does not want (as ``-k`` does).

Both the hooks and the run's selection read these, so they live apart from either.
"""

from __future__ import annotations

import pytest


def claim_ids(item: pytest.Item) -> list[str]:
    """The claim ids a test vouches for, in marker order."""
    ids: list[str] = []
    for mark in item.iter_markers("laya_claim"):
        ids.extend(mark.args)
    return ids


def is_benchmark(item: pytest.Item) -> bool:
    return "benchmark" in getattr(item, "fixturenames", ())


def keep_only(config: pytest.Config, items: list[pytest.Item], wanted) -> None:
    """Deselect (not skip) the items that are not wanted, as `-k` does."""
    dropped = [i for i in items if not wanted(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if wanted(i)]
