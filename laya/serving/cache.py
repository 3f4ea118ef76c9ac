"""The optional encoder-state cache: exact token sequences to final encoder states.

Byte-budgeted LRU. It stores a copy and returns a copy, so no caller can edit a
cached entry; an entry larger than the whole budget is skipped. Keys are the
base's numeric identity plus every token id in order: two sequences share an
entry only if they are the same sequence (no prefix reuse).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

# Conservative per-entry overhead on top of the state bytes: the key tuple
# (8 bytes a token id plus the tuple itself), the tensor object and bookkeeping.
ENTRY_OVERHEAD_BYTES = 512
KEY_BYTES_PER_TOKEN = 8

CacheKey = tuple[str, tuple[int, ...]]


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int


def entry_bytes(key: CacheKey, states: torch.Tensor) -> int:
    return states.numel() * states.element_size() + ENTRY_OVERHEAD_BYTES + KEY_BYTES_PER_TOKEN * len(key[1])


class EncoderStateCache:
    def __init__(self, budget_bytes: int):
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
            raise ValueError(f"cache budget must be a non-negative integer of bytes, got {budget_bytes!r}")
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[CacheKey, tuple[torch.Tensor, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = self._bytes = 0

    def get(self, key: CacheKey) -> torch.Tensor | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0].clone()

    def peek(self, key: CacheKey) -> torch.Tensor | None:
        """A copy of the entry, if held, without counting a lookup or refreshing its recency:
        a batch looks ahead with it, then replays the gets one-at-a-time serving makes."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry[0].clone()

    def put(self, key: CacheKey, states: torch.Tensor) -> None:
        size = entry_bytes(key, states)
        if size > self.budget_bytes:
            return
        copy = states.detach().clone()
        with self._lock:
            if key in self._entries:
                self._bytes -= self._entries.pop(key)[1]
            while self._bytes + size > self.budget_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted
                self._evictions += 1
            self._entries[key] = (copy, size)
            self._bytes += size

    def keys(self) -> list[CacheKey]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._entries)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, len(self._entries), self._bytes)
