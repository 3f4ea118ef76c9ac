"""Encoder-state cache claims: exact keys, bounded LRU eviction, copies, bypass.

Byte accounting is checked against the documented formula (docs/decisions.md), written
out here rather than imported: an entry of n tokens with float32 states [n, hidden]
costs 4 * n * hidden + 512 + 8 * n bytes, and an entry larger than the whole budget is
skipped (one exactly equal to it is kept).
"""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import laya
from laya.serving.cache import EncoderStateCache
from laya_qual.suite import cache_oracle
from laya_qual.synth import requests_for, texts

IDENTITY = "base-identity"
token_sequences = st.lists(st.integers(0, 50), min_size=1, max_size=12).map(tuple)


HIDDEN = 4


def states_for(ids: tuple[int, ...], hidden: int = HIDDEN) -> torch.Tensor:
    """Distinct, recognisable states for each sequence."""
    return torch.tensor(ids, dtype=torch.float32)[:, None].repeat(1, hidden) + 0.5


def documented_bytes(tokens: int, hidden: int = HIDDEN) -> int:
    return cache_oracle.documented_bytes(tokens, hidden)


@pytest.mark.laya_claim("cache.keys.exact")
@given(ids=token_sequences, position=st.integers(0, 11), shift=st.integers(1, 50), extra=st.integers(0, 50))
def test_keys_are_exact_sequences(ids, position, shift, extra):
    cache = EncoderStateCache(1 << 20)
    cache.put((IDENTITY, ids), states_for(ids))
    changed = list(ids)
    changed[position % len(ids)] = (changed[position % len(ids)] + shift) % 51  # differs by construction
    assert cache.get((IDENTITY, tuple(changed))) is None
    assert cache.get((IDENTITY, ids[:-1])) is None  # a prefix never hits
    assert cache.get((IDENTITY, ids + (extra,))) is None  # nor does an extension
    assert cache.get(("another-base", ids)) is None
    assert torch.equal(cache.get((IDENTITY, ids)), states_for(ids))


def one_part_changed(request: laya.Request, part: str, word: str, which: int) -> laya.Request:
    """``request`` with exactly one part of its rendering changed (a word appended, or the
    state added or dropped): the token sequence differs by construction."""
    if part == "question":
        return laya.Request(request.task, f"{request.question} {word}", request.options, request.state)
    if part == "option":
        options = list(request.options)
        options[which % len(options)] += f" {word}"
        return laya.Request(request.task, request.question, tuple(options), request.state)
    state = word if request.state is None else (None if which % 2 else f"{request.state} {word}")
    return laya.Request(request.task, request.question, request.options, state)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("cache.keys.exact")
@given(data=st.data())
def test_every_part_of_the_sequence_is_in_the_key(qualified_artifact, qualified_model, data):
    """A change in the question, any one option or the state misses; the same request
    hits and serves exactly the uncached prediction."""
    model = qualified_model
    request = data.draw(requests_for(model, max_words=2))
    variants = [one_part_changed(request, part, data.draw(texts(model, max_words=1)), data.draw(st.integers(0, 7)))
                for part in ("question", "option", "state")]
    adapters = laya.open_adapters({"h": qualified_artifact}, base=model.base, cache_bytes=1 << 24)
    for r in [request, *variants]:
        assert adapters.predict("h", r).probabilities == model.predict(r).probabilities
    stats = adapters.cache_stats()
    assert (stats.hits, stats.misses, stats.entries) == (0, 4, 4), stats
    for r in [request, *variants]:
        assert adapters.predict("h", r).probabilities == model.predict(r).probabilities
    assert adapters.cache_stats().hits == 4


@pytest.mark.laya_claim("cache.keys.exact")
@given(data=st.data())
def test_key_is_the_sequence_not_the_task_or_head(artifact_factory, load_model, data):
    """The states are the encoder's, before any head: the same rendering hits across the
    tasks of a head and across heads on one base, and each head still serves its own
    uncached prediction."""
    first = artifact_factory(seed=7, head_kind="float32", base_seed=1)
    second = artifact_factory(seed=8, head_kind="transformer", base_seed=1)
    adapters = laya.open_adapters({"a": first, "b": second}, base=load_model(first).base, cache_bytes=1 << 24)
    request = data.draw(requests_for(adapters.heads["a"], max_words=2))
    n = len(request.options)
    tasks = [t for t, info in sorted(adapters.heads["a"].tasks.items()) if info.max_options >= n]
    served = [(a, laya.Request(t, request.question, request.options, request.state)) for a in ("a", "b") for t in tasks]
    for adapter_id, r in served:
        expected = load_model(first if adapter_id == "a" else second).predict(r)
        assert adapters.predict(adapter_id, r).probabilities == expected.probabilities
    stats = adapters.cache_stats()
    assert (stats.misses, stats.hits, stats.entries) == (1, len(served) - 1, 1), stats


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
        size = documented_bytes(len(ids))
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


def budget_case(name: str) -> tuple[int, list[int], list[int]]:
    """(budget, token counts put in order, token counts expected cached in LRU order)."""
    one, two = documented_bytes(5), documented_bytes(7)
    return {
        "entry equals budget: kept": (one, [5], [5]),
        "entry one byte over budget: skipped": (one - 1, [5], []),
        "two entries exactly fill the budget": (one + two, [5, 7], [5, 7]),
        "one byte short of two entries: first evicted": (one + two - 1, [5, 7], [7]),
        "third entry evicts the least recent": (one + two, [5, 7, 5], [7, 5]),
    }[name]


@pytest.mark.laya_claim("cache.eviction")
@pytest.mark.parametrize("case", ["entry equals budget: kept", "entry one byte over budget: skipped",
                                  "two entries exactly fill the budget", "one byte short of two entries: first evicted",
                                  "third entry evicts the least recent"])
def test_budget_boundaries(case):
    budget, puts, cached = budget_case(case)
    cache = EncoderStateCache(budget)
    for i, n in enumerate(puts):
        ids = tuple(range(i, i + n))
        cache.put((IDENTITY, ids), states_for(ids))
    keys = [len(k[1]) for k in cache.keys()]
    stats = cache.stats()
    assert keys == cached and stats.bytes == sum(documented_bytes(n) for n in cached), (stats, keys)
    assert stats.evictions == len(puts) - len(cached) - (documented_bytes(puts[0]) > budget)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("cache.eviction")
def test_served_entry_exactly_at_the_budget_is_kept(qualified_artifact, qualified_model):
    """Through Adapters, with the budget set from the documented formula for a real request:
    exactly its size keeps it (the repeat hits), one byte less skips it."""
    words = sorted(t for t in qualified_model.base.tokenizer.get_vocab() if t.isalpha() and len(t) > 2)
    request = laya.Request(sorted(qualified_model.tasks)[0], " ".join(words[:3]), (words[3], words[4]), words[5])
    size = documented_bytes(len(qualified_model.base.render(request).token_ids), qualified_model.base.hidden_size)
    for budget, hits in ((size, 1), (size - 1, 0)):
        adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_model.base, cache_bytes=budget)
        adapters.predict("h", request)
        adapters.predict("h", request)
        stats = adapters.cache_stats()
        assert (stats.hits, stats.entries, stats.bytes) == (hits, hits, size * hits), (budget, stats)


@pytest.mark.laya_claim("cache.copies")
@given(ids=token_sequences, offset=st.floats(1, 10))
def test_cache_holds_copies(ids, offset):
    """Edits add at least 1 to every state, so they change the tensor by construction."""
    cache = EncoderStateCache(1 << 20)
    inserted = states_for(ids)
    cache.put((IDENTITY, ids), inserted)
    inserted.add_(offset)
    returned = cache.get((IDENTITY, ids))
    assert torch.equal(returned, states_for(ids))
    returned.add_(offset)
    again = cache.get((IDENTITY, ids))
    assert torch.equal(again, states_for(ids))
    assert again.untyped_storage().data_ptr() != returned.untyped_storage().data_ptr()


@pytest.mark.laya_once_per("base")
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
    uncached = laya.open_adapters({"h": qualified_artifact}, base=adapters.base)  # no cache: nothing counted
    uncached.predict("h", request)
    uncached.predict("h", request)
    uncached.capture("h", request)
    assert uncached.cache_stats() == laya.CacheStats(0, 0, 0, 0, 0)
