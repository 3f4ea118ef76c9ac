"""Many requests in one forward: the one serving path that ``predict`` and
``predict_many`` share, so a request served alone is a batch of one.

Each item is planned on its own (validation, rendering, budgets): a bad item keeps
its error and the others go on. Then, under the base's gate, every token sequence
the cache does not hold is encoded, packed in one forward (docs/serving.md says why
that keeps every sequence's bits); each item is scored by its own head; and only
when every item has finished is the cache traffic replayed in item order exactly as
one-at-a-time predictions would have made it (a get per item, a put for each fresh
state). So a cancelled batch publishes nothing, and a finished one leaves the
cache's entries, order and counters as if its items had been served one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence

import torch

from laya.serving.cache import CacheKey, EncoderStateCache
from laya.serving.cancel import CancelToken, CheckFn, cancel_check
from laya.serving.config import TaskInfo
from laya.errors import Cancelled, LayaError, RequestError
from laya.serving.rendering import Rendered
from laya.serving.request import Prediction, Request

if TYPE_CHECKING:  # pragma: no cover — typing only: read by type checkers, never at run time
    from laya.serving.base import VerifiedBase

Result = Prediction | LayaError


class Scorer(Protocol):
    """What the serving path needs of a head (``laya.Head`` is one): its base, its own
    validation and rendering, and its scoring of final encoder states."""
    base: VerifiedBase

    def prepare(self, request: Request) -> tuple[TaskInfo, Rendered]: ...  # pragma: no cover — a Protocol's signature, never called

    def finish(self, states: torch.Tensor, rendered: Rendered, task: TaskInfo, check: CheckFn | None,  # pragma: no cover — a Protocol's signature, never called
               adapter_id: str | None = None) -> Prediction: ...


@dataclass(frozen=True)
class Planned:
    """One item, validated and rendered, waiting for the forward."""
    head: Scorer
    task: TaskInfo
    rendered: Rendered
    adapter_id: str | None
    key: CacheKey


def serve_requests(head: Scorer, requests: Sequence[Request], cancel: CancelToken | None) -> list[Result]:
    """Requests to one head without an adapter id or a cache (a standalone ``Model``)."""
    return serve(head.base, [plan(head, request) for request in requests], cancel_check(cancel))


def plan(head: Scorer, request: Request, adapter_id: str | None = None) -> Planned | LayaError:
    try:
        task, rendered = head.prepare(request)
    except LayaError as exc:
        return exc
    return Planned(head, task, rendered, adapter_id, (head.base.identity, rendered.token_ids))


def plan_pair(item: object, select: Callable[[str], Scorer]) -> Planned | LayaError:
    """An ``(adapter_id, Request)`` pair; ``select`` finds the head, or refuses the adapter id."""
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        return RequestError(f"expected an (adapter_id, Request) pair, got {type(item).__name__}", field="item")
    adapter_id, request = item
    try:
        head = select(adapter_id)
    except LayaError as exc:
        return exc
    return plan(head, request, adapter_id)


def serve(base: VerifiedBase, planned: Sequence[Planned | LayaError], check: CheckFn | None,
          cache: EncoderStateCache | None = None) -> list[Result]:
    """Each item's prediction or error, in order; ``Cancelled`` ends the whole batch."""
    results: list[Result | Planned] = list(planned)
    live = [(i, p) for i, p in enumerate(planned) if isinstance(p, Planned)]
    if not live:
        return results  # type: ignore[return-value]
    with base.gate.hold(check):
        base.check_unmodified()
        keys = list(dict.fromkeys(p.key for _, p in live))
        held = {k: s for k in keys if cache is not None and (s := cache.peek(k)) is not None}
        missing = [k for k in keys if k not in held]
        states = dict(held)
        if missing:
            states.update(zip(missing, base.encode_packed([k[1] for k in missing], check=check)))
        for i, p in live:
            results[i] = _finish(p, states[p.key], check)
        if cache is not None:
            _replay(cache, live, results, states)
    return results  # type: ignore[return-value]


def unwrap(result: Result) -> Prediction:
    """A single request's answer the way ``predict`` gives it: the prediction, or its error raised."""
    if isinstance(result, LayaError):
        raise result
    return result


def _finish(p: Planned, states: torch.Tensor | LayaError, check: CheckFn | None) -> Result:
    if isinstance(states, LayaError):
        return states
    try:
        return p.head.finish(states, p.rendered, p.task, check, p.adapter_id)
    except Cancelled:
        raise
    except LayaError as exc:
        return exc


def _replay(cache: EncoderStateCache, live, results, states: Mapping[CacheKey, torch.Tensor]) -> None:
    """The cache traffic of one-at-a-time predictions, in item order: a get each, and a put
    of the states after a prediction that had to encode them (a miss) finished."""
    for i, p in live:
        if cache.get(p.key) is None and isinstance(results[i], Prediction):
            cache.put(p.key, states[p.key])
