"""serve.batch.*: many requests in one forward, each served bitwise as it is alone.

What is under test is batching, not the forward. The oracle for a batched item is the
same request predicted alone, on a separately loaded base with the cache off: that
path's numbers are what the forward.reference.* claims check against an independent
float64 reference, so a batched prediction equal to it bitwise inherits that check.

- Encoder: any list of token sequences encoded packed must give each sequence exactly
  the states it gets encoded alone. Lengths 1 to 48, the shortest drawn on purpose
  (explicit examples): a GEMM over a handful of rows is where CPU kernels change a row's
  bits with the row count, so a packing that does not fix the row count is caught there.
- Predictions: any mix of heads, requests (duplicates included), cache budgets (off,
  below the working set so entries are evicted along the batch, above it) and batch
  sizes. The cache must end as predicting the same items one at a time leaves it: its
  counters equal those of ``ReferenceLRU``, the documented LRU written out here (the
  runtime's one-at-a-time path is itself a batch of one, so it cannot be the oracle),
  before and after every item is asked again.
- Cancellation: a token that fires at any of the batch's checks (counted on a twin),
  and errors: items refused for reasons fixed by how they were built, never by asking
  the runtime.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st

import laya
from laya.errors import BudgetExceeded, Cancelled, RequestError, UnknownAdapter
from laya.serving.encoder import row_quantum
from laya_qual.plugin.fixtures import heads_by_base
from laya_qual.suite.cache_oracle import documented_bytes
from laya_qual.synth import CancelAfter, over_budget_requests, requests_for

MAX_LENGTH = 48


@pytest.fixture(scope="module")
def groups(qualified_heads, qualified_base_dir) -> list[dict[str, Path]]:
    return heads_by_base(qualified_heads, qualified_base_dir)


@pytest.fixture(scope="module")
def alone(groups, qualified_base_dir) -> list[laya.Adapters]:
    """Per group, the reference: the same heads on a separately loaded base, cache off."""
    return [open_group(dirs, qualified_base_dir) for dirs in groups]


def open_group(dirs: dict[str, Path], base_dir: Path | None, cache_bytes: int = 0) -> laya.Adapters:
    base = laya.load_artifact_base(next(iter(dirs.values())), base_dir)
    return laya.open_adapters(dirs, base=base, cache_bytes=cache_bytes)


def same(got: laya.Prediction, want: laya.Prediction) -> bool:
    return (torch.equal(torch.tensor(got.probabilities), torch.tensor(want.probabilities))
            and (got.task, got.decision, got.adapter_id, got.head_digest)
            == (want.task, want.decision, want.adapter_id, want.head_digest))


class ReferenceLRU:
    """The cache as documented, written out here: a lookup per prediction, then, on a miss,
    the entry stored (unless larger than the whole budget) after evicting least recently used
    entries until it fits. Its counters are what the runtime's cache must report."""

    def __init__(self, budget: int, hidden: int):
        self.budget, self.hidden = budget, hidden
        self.entries: dict[tuple[int, ...], int] = {}  # insertion order = recency order
        self.hits = self.misses = self.evictions = 0

    def serve(self, token_ids: tuple[int, ...]) -> None:
        if token_ids in self.entries:
            self.hits += 1
            self.entries[token_ids] = self.entries.pop(token_ids)
            return
        self.misses += 1
        size = documented_bytes(len(token_ids), self.hidden)
        if size > self.budget:
            return
        while sum(self.entries.values()) + size > self.budget:
            del self.entries[next(iter(self.entries))]
            self.evictions += 1
        self.entries[token_ids] = size

    def stats(self) -> laya.CacheStats:
        return laya.CacheStats(self.hits, self.misses, self.evictions, len(self.entries), sum(self.entries.values()))


@st.composite
def items_for(draw, adapters: laya.Adapters, max_size: int = 16) -> list[tuple[str, laya.Request]]:
    """(adapter id, request) pairs over every head, with repeats."""
    ids = sorted(adapters.heads)
    pair = st.sampled_from(ids).flatmap(lambda a: requests_for(adapters.heads[a]).map(lambda r: (a, r)))
    drawn = draw(st.lists(pair, min_size=1, max_size=max_size), label="items")
    repeats = draw(st.lists(st.sampled_from(drawn), max_size=4), label="repeats")
    return draw(st.permutations(drawn + repeats), label="order")


@pytest.mark.laya_claim("serve.batch.exact")
@given(data=st.data())
def test_packed_sequences_encode_as_alone(groups, alone, data):
    base = data.draw(st.sampled_from(alone), label="group").base
    vocab = base.config.vocab_size
    sequence = st.lists(st.integers(0, vocab - 1), min_size=1, max_size=min(MAX_LENGTH, base.config.max_position_embeddings))
    sequences = data.draw(st.lists(sequence, min_size=1, max_size=10), label="sequences")
    lengths = sorted(map(len, sequences))
    event(f"{len(sequences)} sequences packed")
    event(f"shortest {lengths[0]} tokens" if lengths[0] < 12 else "shortest >= 12 tokens")
    quantum = row_quantum(base.options.device)
    event(f"rows fill whole {quantum}-row blocks" if all(n % quantum == 0 for n in lengths) else f"rows padded to {quantum}-row blocks")
    packed = base.encode_packed(sequences)
    for ids, states in zip(sequences, packed, strict=True):
        assert torch.equal(states, base.encode(ids)), f"a sequence of {len(ids)} tokens packed with {len(sequences) - 1} others"


@pytest.mark.laya_claim("serve.batch.exact")
@pytest.mark.parametrize("lengths", [(1, 2, 3), (2, 40), (15, 1), (16, 17), (3, 5, 7, 9, 11), (4, 5, 1), (8, 9, 12, 13)],
                         ids=lambda lengths: "-".join(map(str, lengths)))
def test_short_sequences_encode_as_alone(alone, lengths):
    """The boundary cases drawn on purpose: a handful of rows, and the row quanta's edges
    (oneDNN's 4 rows on a CPU, torch's own ops' 16 elsewhere)."""
    base = alone[0].base
    generator = torch.Generator().manual_seed(sum(lengths))
    sequences = [torch.randint(0, base.config.vocab_size, (n,), generator=generator).tolist() for n in lengths]
    for ids, states in zip(sequences, base.encode_packed(sequences), strict=True):
        assert torch.equal(states, base.encode(ids)), f"{len(ids)} tokens packed with lengths {lengths}"


@pytest.mark.laya_claim("serve.batch.exact")
@pytest.mark.parametrize("budget", ["off", "below", "above"])  # each in every run, not by luck
@given(data=st.data())
def test_a_batch_serves_every_item_as_if_alone(groups, alone, qualified_base_dir, data, budget):
    index = data.draw(st.integers(0, len(groups) - 1), label="group")
    reference = alone[index]
    items = data.draw(items_for(reference), label="batch")
    hidden = reference.base.hidden_size
    working_set = sum(documented_bytes(len(reference.base.render(r).token_ids), hidden) for r in {r for _, r in items})
    cache_bytes = {"off": 0, "below": working_set // 2, "above": 2 * working_set}[budget]
    warm = data.draw(st.lists(st.sampled_from(items), max_size=3), label="served before the batch")
    batched, one_at_a_time = (open_group(groups[index], qualified_base_dir, cache_bytes) for _ in range(2))
    for adapters in (batched, one_at_a_time):
        for adapter_id, request in warm:
            adapters.predict(adapter_id, request)

    event(f"batch of {len(items)}")
    event(f"cache {budget}")
    event(f"{len({a for a, _ in items})} heads in the batch")
    results = batched.predict_many(items)
    expected = [one_at_a_time.predict(a, r) for a, r in items]

    assert len(results) == len(items)
    for (adapter_id, request), got, want in zip(items, results, expected):
        assert isinstance(got, laya.Prediction), got
        assert same(got, reference.predict(adapter_id, request)), (adapter_id, request)
        assert same(got, want)
    if cache_bytes:
        lru = ReferenceLRU(cache_bytes, hidden)
        for _, request in warm + items:
            lru.serve(tuple(reference.base.render(request).token_ids))
        assert batched.cache_stats() == lru.stats() == one_at_a_time.cache_stats()
        for adapter_id, request in items:  # what each holds: the same hits and misses when asked again
            batched.predict(adapter_id, request)
            lru.serve(tuple(reference.base.render(request).token_ids))
        assert batched.cache_stats() == lru.stats()


@pytest.mark.laya_once_per("base-kind")
@pytest.mark.laya_claim("serve.batch.exact")
@given(data=st.data())
def test_a_standalone_model_batch_serves_every_request_as_if_alone(qualified_model, data):
    requests = data.draw(st.lists(requests_for(qualified_model), min_size=1, max_size=8), label="requests")
    for request, got in zip(requests, qualified_model.predict_many(requests), strict=True):
        assert isinstance(got, laya.Prediction), got
        assert same(got, qualified_model.predict(request))


@pytest.mark.laya_claim("serve.batch.cancel")
@given(data=st.data())
def test_a_cancelled_batch_publishes_nothing(groups, alone, qualified_base_dir, data):
    index = data.draw(st.integers(0, len(groups) - 1), label="group")
    items = data.draw(items_for(alone[index], max_size=8), label="batch")
    others = [item for item in items if item != items[0]]  # the first item is never warm: the batch encodes
    warm = data.draw(st.lists(st.sampled_from(others), max_size=2) if others else st.just([]), label="warm")
    cancelled, twin = (open_group(groups[index], qualified_base_dir, 1 << 24) for _ in range(2))
    for adapters in (cancelled, twin):
        for adapter_id, request in warm:
            adapters.predict(adapter_id, request)
    counter = CancelAfter(10**9)  # never fires: counts the checks the batch makes
    twin_results = twin.predict_many(items, cancel=counter)
    after_twin = twin.cache_stats()
    drawn = data.draw(st.integers(0, counter.checked - 1), label="fires at check")
    before = cancelled.cache_stats()

    for fire_at in sorted({drawn, counter.checked - 1}):  # and always the last: in the last item's head
        with pytest.raises(Cancelled):
            cancelled.predict_many(items, cancel=CancelAfter(fire_at))
        assert cancelled.cache_stats() == before, f"cancelled at check {fire_at} of {counter.checked}"
    results = cancelled.predict_many(items)
    assert cancelled.cache_stats() == after_twin
    for got, want in zip(results, twin_results, strict=True):
        assert same(got, want)


@pytest.mark.laya_claim("serve.batch.errors")
@given(data=st.data())
def test_bad_items_get_their_own_error(alone, data):
    adapters = data.draw(st.sampled_from(alone), label="group")
    good = data.draw(items_for(adapters, max_size=6), label="good items")
    adapter_id = data.draw(st.sampled_from(sorted(adapters.heads)), label="adapter")
    head = adapters.heads[adapter_id]
    request = good[0][1]
    bad = {  # item -> (error type, field): fixed by how the item was built
        "not a pair": (request, RequestError, "item"),
        "a triple": ((adapter_id, request, None), RequestError, "item"),
        "unknown adapter": (("no-such-adapter", request), UnknownAdapter, "adapter_id"),
        "not a Request": ((adapter_id, {"task": request.task}), RequestError, None),
        "unknown task": ((adapter_id, laya.Request("no-such-task", "q", ["a", "b"])), RequestError, "task"),
        "over budget": ((adapter_id, data.draw(over_budget_requests(head), label="over budget")), BudgetExceeded, None),
    }
    chosen = sorted(bad) + data.draw(st.lists(st.sampled_from(sorted(bad)), max_size=3), label="more bad items")
    order = data.draw(st.permutations([("good", item) for item in good] + [("bad", name) for name in chosen]), label="order")
    items = [item if kind == "good" else bad[item][0] for kind, item in order]

    results = adapters.predict_many(items)

    assert len(results) == len(items)
    for (kind, what), item, got in zip(order, items, results):
        if kind == "good":
            assert isinstance(got, laya.Prediction) and same(got, adapters.predict(*item)), (item, got)
            continue
        _, error, field = bad[what]
        assert type(got) is error, (what, got)
        if field is not None:
            assert got.field == field, (what, got)
        if what not in ("not a pair", "a triple"):  # predict takes the pair apart itself
            with pytest.raises(error) as alone_error:
                adapters.predict(*item)
            assert str(alone_error.value) == str(got)

    # Nothing left to compute: the errors come back at once, without the gate or a check
    # of the token, so a token that has fired does not turn them into Cancelled.
    fired = CancelAfter(0)
    only_bad = adapters.predict_many([bad[what][0] for kind, what in order if kind == "bad"], cancel=fired)
    assert fired.checked == 0
    assert [(type(e), str(e)) for e in only_bad] == [
        (type(got), str(got)) for (kind, _), got in zip(order, results) if kind == "bad"]
