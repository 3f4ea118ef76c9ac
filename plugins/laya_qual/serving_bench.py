"""The serving benchmarks' arms, implemented once for the suite's ``bench.*`` claims
(qualification/test_bench_serving.py) and for scripts/bench_serving.py.

Each builder loads what its arms need through laya's public API, checks that the
arms compute the same thing (timing arms that disagree measures nothing), and
returns them as named calls for ``benchmarking.side_by_side``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import torch

import laya
from laya.encoder import Encoder
from laya_qual.benchmarking import unique_tensor_bytes

Call = Callable[[], object]
Directory = str | os.PathLike
CACHE_BYTES = 1 << 26  # holds every request the benchmarks send


class ArmsDisagree(AssertionError):
    """Two arms of one benchmark compute different results."""


def load_base(directory: Directory, device: str = "cpu") -> laya.VerifiedBase:
    return laya.load_artifact_base(directory, options=laya.BaseOptions(device=device))


def cache_arms(head_dir: Directory, request: laya.Request,
               device: str = "cpu") -> tuple[dict[str, Call], laya.Adapters]:
    """``miss``: Adapters.predict without a cache; ``hit``: with a cache warmed by the
    agreement check. Also the warm adapters, whose cache stats show the hit arm hit."""
    cold = laya.open_adapters({"h": head_dir}, base=load_base(head_dir, device))
    warm = laya.open_adapters({"h": head_dir}, base=load_base(head_dir, device), cache_bytes=CACHE_BYTES)
    if warm.predict("h", request).probabilities != cold.predict("h", request).probabilities:
        raise ArmsDisagree("a cache hit and a cache miss predict differently")
    return {"miss": lambda: cold.predict("h", request), "hit": lambda: warm.predict("h", request)}, warm


def overhead_arms(head_dir: Directory, request: laya.Request, device: str = "cpu") -> tuple[dict[str, Call], int]:
    """``laya``: Adapters.predict without a cache; ``bare``: the same encoder and float32
    readout as a bare torch forward, built from an independent copy of the weights.
    Bitwise equal. Also the number of tokens the request renders to."""
    adapters = laya.open_adapters({"h": head_dir}, base=load_base(head_dir, device))
    head = adapters.heads["h"]
    task, rendered = head.prepare(request)
    encoder = laya.load_artifact(head_dir).base  # an independent copy of the same weights
    weight, bias = head.weight_tensors()["readout.weight"], head.weight_tensors()["readout.bias"]
    sep = rendered.token_ids.index(adapters.base.special.sep)
    ids = torch.tensor(rendered.token_ids, device=device)
    types = torch.tensor([0 if i <= sep else 1 for i in range(len(ids))], device=device)
    markers = list(rendered.marker_positions)
    module = Encoder(encoder.config)
    module.load_state_dict(encoder.weight_tensors())
    module.to(device)

    def bare() -> torch.Tensor:
        with torch.inference_mode():
            states = module(ids, types, [len(ids)])
            return torch.softmax((states[markers] @ weight[task.index] + bias[task.index]) / task.temperature, 0)

    if not torch.equal(bare().cpu(), torch.tensor(adapters.predict("h", request).probabilities)):
        raise ArmsDisagree("Adapters.predict and the bare torch forward differ")
    return {"laya": lambda: adapters.predict("h", request), "bare": bare}, len(ids)


def head_arms(dirs: Mapping[str, Directory], request: laya.Request, device: str = "cpu") -> dict[str, Call]:
    """Adapters.predict through each named head, all on the first head's base with a
    warm cache, so the arms differ only in the head's own cost."""
    adapters = laya.open_adapters(dirs, base=load_base(next(iter(dirs.values())), device), cache_bytes=CACHE_BYTES)
    adapters.predict(next(iter(dirs)), request)  # every arm reuses these encoder states
    return {name: (lambda n=name: adapters.predict(n, request)) for name in dirs}


def load_heads(how: str, dirs: Mapping[str, Directory]) -> list[laya.Head]:
    """The heads ``shared`` on the first one's base, or ``standalone`` (a base each)."""
    if how == "shared":
        return list(laya.open_adapters(dirs, base=next(iter(dirs.values()))).heads.values())
    if how == "standalone":
        return [laya.load_artifact(d) for d in dirs.values()]
    raise ValueError(f"load_heads: {how!r} is neither 'shared' nor 'standalone'")


def weight_bytes(heads: list[laya.Head]) -> int:
    """Distinct weight bytes the heads and their bases hold (a shared base counts once)."""
    return unique_tensor_bytes([t for h in heads for t in (*h.base.weight_tensors().values(),
                                                           *h.weight_tensors().values())])
