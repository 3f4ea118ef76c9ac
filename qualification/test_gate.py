"""Gate claims: cancellation at every stage publishes nothing; concurrency equals serial."""

from __future__ import annotations

import random
import threading
import time

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import laya
from laya.errors import Cancelled
from laya_qual.synth import CancelAfter, requests_for

JOIN_SECONDS = 20


def gate_released(gate) -> bool:
    """Whether the gate is free now. The forward ran in this thread, so a gate it let go of is
    free at once: one try (Gate.POLL_SECONDS) and no more, never a wait that turns the bug
    into a hang."""
    checks = []

    def once() -> None:  # Gate.hold checks before its first try and after each failed one
        checks.append(None)
        if len(checks) > 1:
            raise TimeoutError

    try:
        with gate.hold(once):
            return True
    except TimeoutError:
        return False


def checks_in_a_forward(adapters, request) -> int:
    counter = CancelAfter(10**9)
    adapters.predict("h", request, cancel=counter)
    return counter.checked


@pytest.mark.laya_once_per("base-kind")
@pytest.mark.laya_claim("gate.cancel.no-poison")
@given(data=st.data())
def test_cancel_at_any_point_publishes_nothing(qualified_artifact, qualified_model, data):
    request = data.draw(requests_for(qualified_model))
    probe = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact)
    total = checks_in_a_forward(probe, request)  # gate entry, each encoder/head layer, the end
    assert total >= 2 + qualified_model.base.depth
    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 24)
    fire_at = data.draw(st.integers(0, total - 1))
    with pytest.raises(Cancelled):
        adapters.predict("h", request, cancel=CancelAfter(fire_at))
    assert gate_released(adapters.base.gate), f"the forward cancelled at check {fire_at} still holds the gate"
    assert adapters.cache_stats().entries == 0
    token = threading.Event()
    after = adapters.predict("h", request, cancel=token)
    token.set()  # cancelling after the forward returned changes neither the result nor the cache
    expected = qualified_model.predict(request)
    assert torch.equal(torch.tensor(after.probabilities), torch.tensor(expected.probabilities))
    assert adapters.cache_stats().entries == 1
    with pytest.raises(Cancelled):
        adapters.predict("h", request, cancel=token)  # set before: refused at the gate, even on a hit
    assert adapters.cache_stats().hits == 0
    hit = adapters.predict("h", request)
    assert adapters.cache_stats().hits == 1
    assert torch.equal(torch.tensor(hit.probabilities), torch.tensor(expected.probabilities))


@pytest.mark.laya_once_per("base-kind")
@pytest.mark.laya_claim("gate.cancel.no-poison")
@pytest.mark.parametrize("where", ["first layer", "last check"])
def test_a_forward_cancelled_inside_lets_go_of_the_gate(qualified_artifact, qualified_model, where):
    """The boundary cases the property test draws only by chance: a cancel after the gate was taken."""
    from hypothesis import find

    request = find(requests_for(qualified_model), lambda r: True)
    probe = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact)  # no cache: a full forward
    fire_at = 1 if where == "first layer" else checks_in_a_forward(probe, request) - 1
    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 24)
    with pytest.raises(Cancelled):
        adapters.predict("h", request, cancel=CancelAfter(fire_at))
    assert gate_released(adapters.base.gate), f"the forward cancelled at check {fire_at} still holds the gate"
    assert adapters.cache_stats().entries == 0


@pytest.mark.laya_once_per("base-kind")
@pytest.mark.laya_claim("gate.cancel.no-poison")
def test_cancel_while_waiting_for_the_gate(qualified_artifact, qualified_model):
    from hypothesis import find

    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 24)
    request = find(requests_for(qualified_model), lambda r: True)
    cancel, outcome = threading.Event(), []

    def waiter():
        try:
            adapters.predict("h", request, cancel=cancel)
        except Cancelled:
            outcome.append("cancelled")

    with adapters.base.gate.hold():
        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        cancel.set()
        thread.join(JOIN_SECONDS)
        assert not thread.is_alive(), "a cancelled waiter stayed blocked behind the gate"
    assert outcome == ["cancelled"]
    assert adapters.cache_stats() == laya.CacheStats(0, 0, 0, 0, 0)


@pytest.mark.laya_once_per("base-kind")
@pytest.mark.laya_claim("gate.concurrency")
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])  # shrinking a race (or a hang) only repeats it
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_concurrent_requests_with_random_cancels(qualified_artifact, qualified_model, seed, data):
    requests = [data.draw(requests_for(qualified_model)) for _ in range(4)]
    serial = {i: qualified_model.predict(r).probabilities for i, r in enumerate(requests)}
    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 24)
    rng = random.Random(seed)
    jobs = [(i % len(requests), rng.random() < 0.4, rng.randint(0, 6)) for i in range(12)]
    results: dict[int, object] = {}

    def run(job_id: int, index: int, cancels: bool, after: int) -> None:
        token = CancelAfter(after) if cancels else None
        try:
            results[job_id] = adapters.predict("h", requests[index], cancel=token).probabilities
        except Cancelled:
            results[job_id] = "cancelled"

    threads = [threading.Thread(target=run, args=(j, *job), daemon=True) for j, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_SECONDS
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"deadlock: threads still running after {JOIN_SECONDS} s"
    for job_id, (index, cancels, _) in enumerate(jobs):
        if results[job_id] != "cancelled":
            assert results[job_id] == serial[index]
        else:
            assert cancels
    stats = adapters.cache_stats()
    assert stats.entries <= len(requests) and stats.evictions == 0
    assert stats.hits + stats.misses <= len(jobs)
    for index, request in enumerate(requests):  # nothing poisoned: a serial pass over the cache agrees
        assert adapters.predict("h", request).probabilities == serial[index]
