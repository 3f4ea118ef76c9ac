"""Benchmark claims for serving. Speed is measured, never asserted: each test checks
the arms agree, then records medians and ratios measured side by side in one run.
Under xdist or --benchmark-disable they are not measured, and the report says the
claims were not evaluated. The arms themselves are laya_qual.bench.serving_bench, which
scripts/bench_serving.py runs too."""

from __future__ import annotations

import os
import statistics

import pytest
import torch

import laya
from laya_qual.bench.benchmarking import side_by_side, unique_tensor_bytes
from laya_qual.plugin.fixtures import heads_by_base
from laya_qual.bench.serving_bench import (batch_arms, cache_arms, head_arms, load_heads, missing_peers, overhead_arms,
                                     weight_bytes)

ROUNDS = 30
PEERS = ("transformers", "onnxruntime")  # each timed in arrival order and length-sorted (the peer at its best)
BATCH_ROUNDS = 3  # each round serves the whole request set through every arm
CONFIG = dict(hidden_size=128, num_layers=4, num_heads=2, intermediate_size=512, vocab_words=400,
              max_positions=256, sequence_budget=256)
REQUEST = laya.Request("answer", "which of these words names the colour of a clear sky at noon in summer",
                       ("blue", "green", "a large red brick wall", "none of the above"))


@pytest.fixture(scope="module")
def bench_heads(artifact_factory):
    return {kind: artifact_factory(seed=21, head_kind=kind, base_seed=9, **CONFIG) for kind in ("float32", "int8")}


def record(benchmark, medians: dict[str, float], **ratios: float) -> None:
    benchmark.extra_info.update({f"median_{k}_s": v for k, v in medians.items()})
    benchmark.extra_info.update({k: round(v, 4) for k, v in ratios.items()})


@pytest.mark.laya_claim("bench.cache.hit-vs-miss")
def test_cache_hit_vs_miss(benchmark, bench_heads, laya_device):
    arms, warm = cache_arms(bench_heads["float32"], REQUEST, laya_device)
    medians = side_by_side(arms, ROUNDS, device=laya_device)
    record(benchmark, medians, miss_over_hit=medians["miss"] / medians["hit"])
    benchmark.extra_info["timed"] = "one Adapters.predict of one request with a warm cache (the hit arm)"
    benchmark.pedantic(arms["hit"], rounds=ROUNDS, warmup_rounds=1)
    assert warm.cache_stats().misses == 1


@pytest.mark.laya_claim("bench.runtime.overhead")
def test_runtime_overhead_over_bare_torch(benchmark, bench_heads, laya_device):
    arms, tokens = overhead_arms(bench_heads["float32"], REQUEST, laya_device)
    medians = side_by_side(arms, ROUNDS, device=laya_device)
    record(benchmark, medians, laya_over_bare=medians["laya"] / medians["bare"], tokens=tokens)
    benchmark.extra_info["timed"] = "one Adapters.predict of one request (the laya arm)"
    benchmark.pedantic(arms["laya"], rounds=ROUNDS, warmup_rounds=1)


@pytest.mark.laya_claim("bench.int8.cost")
def test_int8_vs_float32_head(benchmark, bench_heads, laya_device):
    arms = head_arms(bench_heads, REQUEST, laya_device)  # float32 first: its predict warms the cache
    medians = side_by_side(arms, ROUNDS, device=laya_device)
    record(benchmark, medians, int8_over_float32=medians["int8"] / medians["float32"])
    benchmark.extra_info["timed"] = "one Adapters.predict of one request on the int8 head (the int8 arm)"
    benchmark.pedantic(arms["int8"], rounds=ROUNDS, warmup_rounds=1)


@pytest.mark.laya_claim("bench.memory.shared-heads")
@pytest.mark.parametrize("heads", [16])
def test_memory_of_shared_heads(benchmark, artifact_factory, heads):
    dirs = {f"h{i}": artifact_factory(seed=100 + i, head_kind="float32", base_seed=9, **CONFIG) for i in range(heads)}
    on_one_base = load_heads("shared", dirs)
    shared, standalone = weight_bytes(on_one_base), weight_bytes(load_heads("standalone", dirs))
    base = on_one_base[0].base
    base_bytes = unique_tensor_bytes(base.weight_tensors().values())
    assert shared < standalone and standalone - shared == (heads - 1) * base_bytes
    benchmark.extra_info.update(heads=heads, shared_weight_bytes=shared, standalone_weight_bytes=standalone,
                                standalone_over_shared=round(standalone / shared, 3),
                                timed=f"one laya.open_adapters of {heads} heads on one shared base")
    benchmark.pedantic(laya.open_adapters, args=(dirs,), kwargs={"base": base}, rounds=3)


@pytest.mark.laya_claim("bench.serve.batch")
def test_batched_vs_one_by_one_vs_transformers(benchmark, qualified_heads, qualified_base_dir, laya_device):
    dirs = heads_by_base(qualified_heads, qualified_base_dir)[0]  # the first base's heads, mixed in every batch
    load_before = os.getloadavg()  # ratios of arms sharing busy CPUs move with the load
    arms, work = batch_arms(dirs, base_dir=qualified_base_dir, device=laya_device)  # refuses a batched bit off
    # every peer is measured, in arrival order and length-sorted, unless missing_peers gives the reason it is not
    missing = missing_peers(laya_device)
    assert set(arms) == {"one_by_one", "batched"} | {f"{peer}{order}" for peer in PEERS if peer not in missing
                                                    for order in ("", "_sorted")}
    for peer in set(arms) - {"one_by_one", "batched"}:  # what is timed encodes every item, in request order
        assert [len(states) for states in arms[peer]()] == list(map(len, work.token_ids))
    medians = side_by_side(arms, BATCH_ROUNDS, device=laya_device)
    per_second = {name: len(work.items) / seconds for name, seconds in medians.items()}
    ratios = {"batched_over_one_by_one": per_second["batched"] / per_second["one_by_one"]}
    for peer in set(arms) - {"one_by_one", "batched"}:  # throughput ratios: above 1, laya is faster
        ratios[f"batched_over_{peer}"] = per_second["batched"] / per_second[peer]
    benchmark.extra_info.update({f"batched_over_{peer}{order}": f"not measured: {why}"
                                 for peer, why in missing.items() for order in ("", "_sorted")})
    record(benchmark, medians, **ratios)
    lengths = sorted(map(len, work.token_ids))
    benchmark.extra_info.update({f"requests_per_s_{k}": round(v, 2) for k, v in per_second.items()})
    benchmark.extra_info.update(
        heads=",".join(sorted(dirs)), batch_size=work.batch_size, requests=len(work.items), tokens=sum(lengths),
        **{f"rows_{k}": v for k, v in work.rows().items() if k != "tokens"},
        length_min=lengths[0], length_median=statistics.median(lengths), length_max=lengths[-1],
        load_average_1m_before=round(load_before[0], 2), load_average_1m_after=round(os.getloadavg()[0], 2),
        intra_op_threads=torch.get_num_threads(),
        timed=f"one predict_many call per batch of {work.batch_size} over all {len(work.items)} requests, in "
              "arrival order (the batched arm)")
    benchmark.pedantic(arms["batched"], rounds=BATCH_ROUNDS)
