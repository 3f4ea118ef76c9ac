"""Benchmark claims for serving. Speed is measured, never asserted: each test checks
the arms agree, then records medians and ratios measured side by side in one run.
Under xdist or --benchmark-disable they are not measured, and the report says the
claims were not evaluated."""

from __future__ import annotations

import pytest
import torch

import laya
import laya.encoder
from laya_qual.benchmarking import side_by_side, unique_tensor_bytes

ROUNDS = 30
CONFIG = dict(hidden_size=128, num_layers=4, num_heads=2, intermediate_size=512, vocab_words=400,
              max_positions=256, sequence_budget=256)
REQUEST = laya.Request("answer", "which of these words names the colour of a clear sky at noon in summer",
                       ("blue", "green", "a large red brick wall", "none of the above"))


@pytest.fixture(scope="module")
def bench_heads(artifact_factory):
    return {kind: artifact_factory(seed=21, head_kind=kind, base_seed=9, **CONFIG) for kind in ("float32", "int8")}


def on_device(directory, device: str) -> laya.VerifiedBase:
    return laya.load_artifact_base(directory, options=laya.BaseOptions(device=device))


def record(benchmark, medians: dict[str, float], **ratios: float) -> None:
    benchmark.extra_info.update({f"median_{k}_s": v for k, v in medians.items()})
    benchmark.extra_info.update({k: round(v, 4) for k, v in ratios.items()})


@pytest.mark.laya_claim("bench.cache.hit-vs-miss")
def test_cache_hit_vs_miss(benchmark, bench_heads, laya_device):
    cold = laya.open_adapters({"h": bench_heads["float32"]}, base=on_device(bench_heads["float32"], laya_device))
    warm = laya.open_adapters({"h": bench_heads["float32"]}, base=on_device(bench_heads["float32"], laya_device),
                              cache_bytes=1 << 26)
    assert warm.predict("h", REQUEST).probabilities == cold.predict("h", REQUEST).probabilities
    medians = side_by_side({"miss": lambda: cold.predict("h", REQUEST), "hit": lambda: warm.predict("h", REQUEST)},
                           ROUNDS, device=laya_device)
    record(benchmark, medians, miss_over_hit=medians["miss"] / medians["hit"])
    benchmark.pedantic(warm.predict, args=("h", REQUEST), rounds=ROUNDS, warmup_rounds=1)
    assert warm.cache_stats().misses == 1


@pytest.mark.laya_claim("bench.runtime.overhead")
def test_runtime_overhead_over_bare_torch(benchmark, bench_heads, laya_device):
    adapters = laya.open_adapters({"h": bench_heads["float32"]}, base=on_device(bench_heads["float32"], laya_device))
    head = adapters.heads["h"]
    task, rendered = head.prepare(REQUEST)
    encoder = laya.load_artifact(bench_heads["float32"]).base  # an independent copy of the same weights
    weight, bias = head.weight_tensors()["readout.weight"], head.weight_tensors()["readout.bias"]
    sep = rendered.token_ids.index(adapters.base.special.sep)
    ids = torch.tensor(rendered.token_ids, device=laya_device)
    types = torch.tensor([0 if i <= sep else 1 for i in range(len(ids))], device=laya_device)
    markers = list(rendered.marker_positions)
    module = laya.encoder.Encoder(encoder.config)
    module.load_state_dict(encoder.weight_tensors())
    module.to(laya_device)

    def bare() -> torch.Tensor:
        with torch.inference_mode():
            states = module(ids, types)
            return torch.softmax((states[markers] @ weight[task.index] + bias[task.index]) / task.temperature, 0)

    assert torch.equal(bare().cpu(), torch.tensor(adapters.predict("h", REQUEST).probabilities))
    medians = side_by_side({"laya": lambda: adapters.predict("h", REQUEST), "bare": bare}, ROUNDS, device=laya_device)
    record(benchmark, medians, laya_over_bare=medians["laya"] / medians["bare"], tokens=len(ids))
    benchmark.pedantic(adapters.predict, args=("h", REQUEST), rounds=ROUNDS, warmup_rounds=1)


@pytest.mark.laya_claim("bench.int8.cost")
def test_int8_vs_float32_head(benchmark, bench_heads, laya_device):
    base = on_device(bench_heads["float32"], laya_device)
    adapters = laya.open_adapters(bench_heads, base=base, cache_bytes=1 << 26)
    adapters.predict("float32", REQUEST)  # warm: both arms reuse the encoder states, so the head cost shows
    medians = side_by_side({kind: (lambda k=kind: adapters.predict(k, REQUEST)) for kind in bench_heads}, ROUNDS,
                           device=laya_device)
    record(benchmark, medians, int8_over_float32=medians["int8"] / medians["float32"])
    benchmark.pedantic(adapters.predict, args=("int8", REQUEST), rounds=ROUNDS, warmup_rounds=1)


@pytest.mark.laya_claim("bench.memory.shared-heads")
@pytest.mark.parametrize("heads", [16])
def test_memory_of_shared_heads(benchmark, artifact_factory, heads):
    dirs = {f"h{i}": artifact_factory(seed=100 + i, head_kind="float32", base_seed=9, **CONFIG) for i in range(heads)}
    adapters = laya.open_adapters(dirs, base=next(iter(dirs.values())))
    def tensors(head: laya.Head) -> list[torch.Tensor]:
        return [*head.base.weight_tensors().values(), *head.weight_tensors().values()]

    shared = unique_tensor_bytes([t for h in adapters.heads.values() for t in tensors(h)])
    standalone = unique_tensor_bytes([t for d in dirs.values() for t in tensors(laya.load_artifact(d))])
    base_bytes = unique_tensor_bytes(adapters.base.weight_tensors().values())
    assert shared < standalone and standalone - shared == (heads - 1) * base_bytes
    benchmark.extra_info.update(heads=heads, shared_weight_bytes=shared, standalone_weight_bytes=standalone,
                                standalone_over_shared=round(standalone / shared, 3))
    benchmark.pedantic(laya.open_adapters, args=(dirs,), kwargs={"base": adapters.base}, rounds=3)
