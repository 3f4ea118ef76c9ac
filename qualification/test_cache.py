"""Encoder-state cache claims: exact keys, bounded LRU eviction, copies, bypass."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import laya
from laya.cache import EncoderStateCache, entry_bytes
from laya_qual.synth import requests_for

IDENTITY = "base-identity"
token_sequences = st.lists(st.integers(0, 50), min_size=1, max_size=12).map(tuple)


def states_for(ids: tuple[int, ...], hidden: int = 4) -> torch.Tensor:
    """Distinct, recognisable states for each sequence."""
    return torch.tensor(ids, dtype=torch.float32)[:, None].repeat(1, hidden) + 0.5


@pytest.mark.laya_claim("cache.keys.exact")
@given(ids=token_sequences, position=st.integers(0, 11), other=st.integers(0, 50), extra=st.integers(0, 50))
def test_keys_are_exact_sequences(ids, position, other, extra):
    cache = EncoderStateCache(1 << 20)
    cache.put((IDENTITY, ids), states_for(ids))
    changed = list(ids)
    changed[position % len(ids)] = other
    changed = tuple(changed)
    if changed != ids:
        assert cache.get((IDENTITY, changed)) is None
    assert cache.get((IDENTITY, ids[:-1])) is None  # a prefix never hits
    assert cache.get((IDENTITY, ids + (extra,))) is None  # nor does an extension
    assert cache.get(("another-base", ids)) is None
    assert torch.equal(cache.get((IDENTITY, ids)), states_for(ids))


@pytest.mark.laya_claim("cache.keys.exact")
@given(data=st.data())
def test_requests_differing_in_one_token_do_not_share(qualified_artifact, qualified_model, data):
    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 24)
    request = data.draw(requests_for(qualified_model))
    variant = laya.Request(request.task, request.question + " " + data.draw(st.sampled_from(["a", "b", "z"])),
                           request.options, request.state)
    adapters.predict("h", request)
    adapters.predict("h", variant)
    stats = adapters.cache_stats()
    assert (stats.hits, stats.misses, stats.entries) == (0, 2, 2)
    adapters.predict("h", variant)
    assert adapters.cache_stats().hits == 1


class LruCacheMachine(RuleBasedStateMachine):
    """The cache against a reference LRU model, over random puts and gets."""

    @initialize(budget=st.integers(0, 800) | st.integers(1500, 6000))  # none fit, or several
    def start(self, budget):
        self.cache = EncoderStateCache(budget)
        self.model: OrderedDict[tuple, int] = OrderedDict()
        self.hits = self.misses = self.evictions = 0

    @rule(ids=token_sequences)
    def put(self, ids):
        key = (IDENTITY, ids)
        size = entry_bytes(key, states_for(ids))
        self.cache.put(key, states_for(ids))
        if size > self.cache.budget_bytes:
            return
        self.model.pop(key, None)
        while sum(self.model.values()) + size > self.cache.budget_bytes:
            self.model.popitem(last=False)
            self.evictions += 1
        self.model[key] = size

    @rule(ids=token_sequences)
    def get(self, ids):
        key = (IDENTITY, ids)
        got = self.cache.get(key)
        if key in self.model:
            self.model.move_to_end(key)
            self.hits += 1
            assert torch.equal(got, states_for(ids))
        else:
            self.misses += 1
            assert got is None

    @precondition(lambda self: hasattr(self, "model") and self.model)
    @rule(data=st.data())
    def get_existing(self, data):
        self.get(data.draw(st.sampled_from(list(self.model)))[1])

    @invariant()
    def matches_reference(self):
        if not hasattr(self, "model"):
            return
        stats = self.cache.stats()
        assert stats.bytes <= self.cache.budget_bytes
        assert self.cache.keys() == list(self.model)
        assert (stats.hits, stats.misses, stats.evictions, stats.entries, stats.bytes) == (
            self.hits, self.misses, self.evictions, len(self.model), sum(self.model.values()))


TestLruEviction = pytest.mark.laya_claim("cache.eviction")(LruCacheMachine.TestCase)
TestLruEviction.settings = settings(max_examples=40, stateful_step_count=25)


@pytest.mark.laya_claim("cache.copies")
@given(ids=token_sequences, scale=st.floats(-10, 10).filter(lambda x: x != 1.0))
def test_cache_holds_copies(ids, scale):
    cache = EncoderStateCache(1 << 20)
    inserted = states_for(ids)
    cache.put((IDENTITY, ids), inserted)
    inserted.mul_(scale).add_(1.0)
    returned = cache.get((IDENTITY, ids))
    assert torch.equal(returned, states_for(ids))
    returned.mul_(scale).add_(1.0)
    assert torch.equal(cache.get((IDENTITY, ids)), states_for(ids))


@pytest.mark.laya_claim("cache.bypass")
@given(data=st.data())
def test_capture_bypasses_the_cache(qualified_artifact, qualified_model, data):
    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 24)
    request = data.draw(requests_for(qualified_model))
    layers = adapters.capture("h", request)
    assert len(layers) == adapters.base.depth + 1
    assert adapters.cache_stats() == laya.CacheStats(0, 0, 0, 0, 0)
    adapters.predict("h", request)
    stats = adapters.cache_stats()
    assert (stats.hits, stats.misses, stats.entries) == (0, 1, 1)  # capture published nothing
    adapters.capture("h", request)
    assert adapters.cache_stats() == stats  # and read nothing
    rendered = adapters.base.render(request)
    assert torch.equal(layers[-1], adapters.base.encode(rendered.token_ids))
