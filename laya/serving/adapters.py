"""Many heads on one verified base, selected by explicit adapter id.

``Adapters`` is immutable once opened: heads are loaded once, never added,
removed or swapped, and their calibration never moves between them. All
computation goes through the base's gate; the optional encoder-state cache
belongs to this one base and is published to only after a prediction completed.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import Mapping, Sequence

import torch

from laya.serving import batch
from laya.serving.base import VerifiedBase
from laya.serving.cache import CacheStats, EncoderStateCache
from laya.serving.cancel import CancelToken, cancel_check
from laya.errors import LayaError, UnknownAdapter
from laya.serving.loading import Head, load_artifact_base, load_artifact_with_base
from laya.serving.request import Prediction, Request


class Adapters:
    def __init__(self, heads: Mapping[str, Head], base: VerifiedBase, cache_bytes: int = 0):
        self.base = base
        self.heads: Mapping[str, Head] = MappingProxyType(dict(heads))
        self._cache = EncoderStateCache(cache_bytes) if cache_bytes else None

    @property
    def adapter_ids(self) -> tuple[str, ...]:
        return tuple(self.heads)

    def head(self, adapter_id: str) -> Head:
        if not isinstance(adapter_id, str) or adapter_id not in self.heads:
            raise UnknownAdapter(f"unknown adapter {adapter_id!r}; open adapters are {sorted(self.heads)}",
                                 field="adapter_id")
        return self.heads[adapter_id]

    def predict(self, adapter_id: str, request: Request, *, cancel: CancelToken | None = None) -> Prediction:
        return batch.unwrap(self.predict_many([(adapter_id, request)], cancel=cancel)[0])

    def predict_many(self, items: Sequence[tuple[str, Request]], *,
                     cancel: CancelToken | None = None) -> list[Prediction | LayaError]:
        """Each ``(adapter_id, request)`` item's prediction, or the error that refused it, in
        order, from one forward that uses and fills the cache as predicting the items one at
        a time would (laya.serving.batch); every prediction bitwise what ``predict`` gives it alone."""
        planned = [batch.plan_pair(item, self.head) for item in items]
        return batch.serve(self.base, planned, cancel_check(cancel), self._cache)

    def capture(self, adapter_id: str, request: Request) -> list[torch.Tensor]:
        """Instrumented pass for ``request``: every encoder layer's states. Bypasses the cache."""
        _, rendered = self.head(adapter_id).prepare(request)
        with self.base.gate.hold():
            return self.base.encode_layers(rendered.token_ids)

    def cache_stats(self) -> CacheStats:
        return self._cache.stats() if self._cache is not None else CacheStats(0, 0, 0, 0, 0)


def open_adapters(artifacts: Mapping[str, str | os.PathLike], *, base: VerifiedBase | str | os.PathLike,
                  cache_bytes: int = 0) -> Adapters:
    """Load every head once onto ``base`` (a VerifiedBase, or a directory to verify one from)."""
    if not artifacts:
        raise UnknownAdapter("open_adapters needs at least one adapter", field="adapter_id")
    for adapter_id in artifacts:
        if not isinstance(adapter_id, str) or not adapter_id:
            raise UnknownAdapter(f"adapter ids must be non-empty strings, got {adapter_id!r}", field="adapter_id")
    if not isinstance(base, VerifiedBase):
        base = load_artifact_base(base)
    heads = {adapter_id: load_artifact_with_base(directory, base) for adapter_id, directory in artifacts.items()}
    return Adapters(heads, base, cache_bytes)
