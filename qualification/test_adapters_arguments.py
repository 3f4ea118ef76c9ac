"""adapters.arguments: open_adapters needs at least one adapter, each under a non-empty string
id (UnknownAdapter naming adapter_id), and a cache budget that is a non-negative int of
bytes; load_artifact_with_base needs a VerifiedBase.

Oracle: each rule as stated, on explicit examples next to an accepted neighbour.
"""

from __future__ import annotations


import pytest

import laya
from laya.errors import UnknownAdapter
from laya_qual.suite.int8_head import base, pristine  # noqa: F401 - fixtures


@pytest.mark.laya_claim("adapters.arguments")
@pytest.mark.parametrize("artifacts", [{}, {"": None}, {7: None}, {None: None}], ids=["none", "empty-id", "int-id",
                                                                                    "no-id"])
def test_adapters_need_ids_that_are_non_empty_strings(pristine, base, artifacts):
    with pytest.raises(UnknownAdapter) as refused:
        laya.open_adapters({key: pristine for key in artifacts}, base=base)
    assert refused.value.field == "adapter_id", str(refused.value)
    assert laya.open_adapters({"a": pristine}, base=base).predict(
        "a", laya.Request("answer", "q", ("x", "y"))).adapter_id == "a"


@pytest.mark.laya_claim("adapters.arguments")
@pytest.mark.parametrize("budget", [-1, True, 1.5, "1024"])
def test_a_cache_budget_is_a_non_negative_int_of_bytes(pristine, base, budget):
    with pytest.raises(ValueError, match="non-negative integer of bytes"):
        laya.open_adapters({"a": pristine}, base=base, cache_bytes=budget)
    for accepted in (0, 1):
        assert laya.open_adapters({"a": pristine}, base=base, cache_bytes=accepted).cache_stats().bytes == 0


@pytest.mark.laya_claim("adapters.arguments")
@pytest.mark.parametrize("not_a_base", ["DIR", None], ids=["a-directory", "none"])
def test_a_head_attaches_to_a_verified_base_only(pristine, base, not_a_base):
    with pytest.raises(TypeError, match="VerifiedBase"):
        laya.load_artifact_with_base(pristine, str(pristine) if not_a_base == "DIR" else not_a_base)
    assert laya.load_artifact_with_base(pristine, base).tasks
