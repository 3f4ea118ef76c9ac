"""Side-by-side timing for benchmark claims: arms measured in interleaved rounds in
one process, so machine noise hits every arm alike; report medians and ratios."""

from __future__ import annotations

import statistics
import time
from typing import Callable, Iterable

import torch


def side_by_side(arms: dict[str, Callable[[], object]], rounds: int, *, device: str = "cpu") -> dict[str, float]:
    """Median seconds per arm over ``rounds`` interleaved rounds (after one warm-up each)."""
    samples: dict[str, list[float]] = {name: [] for name in arms}
    for fn in arms.values():
        fn()
    for _ in range(rounds):
        for name, fn in arms.items():
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def unique_tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of distinct storages: tensors sharing memory are counted once."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())
