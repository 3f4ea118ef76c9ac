"""Serving benchmarks, measured side by side in one run (ratios and medians; these
machines are noisy, so read ratios, not absolute times). The arms are the suite's
benchmark claims' own (laya_qual.bench.serving_bench), on a larger encoder.

1. Adapters.predict with a warm cache (hit) vs a cold one (miss).
2. Adapters.predict (miss) vs a bare torch forward of the same encoder and head.
3. Resident memory of N heads on one shared base vs N standalone models
   (each arm in a fresh process; RSS delta over the loads).

    python scripts/bench_serving.py [--hidden 256] [--layers 4] [--heads 16] [--rounds 200]

4. With --batch, instead: a fixed mixed-length request set served one by one
   (Adapters.predict), in batches (Adapters.predict_many, arrival order), where
   transformers is installed by BertModel (float32, sdpa, dynamic padding) on the same base
   and batches, and where the `onnx` extra is installed by that model exported to ONNX
   Runtime; each peer also batching as sentence-transformers does (requests sorted by
   length, longest first, then batches of --batch-size, states put back in request order:
   the `_sorted` arms, the peer at its best); requests/s of each and the ratios (the claim
   bench.serve.batch's arms). Every batched prediction must be bitwise the one-by-one one,
   and every peer's states laya's within 1e-4, else it exits 1. Synthetic float32, int8
   and transformer heads are written on --base (a base-only artifact, e.g. from
   `laya base import`), else on a synthetic base of --hidden/--layers. Every arm runs
   with --threads intra-op threads. --mix short|long draws the rendered lengths from
   1..64 or 64..216 tokens (default: 1 up to the sequence budget).

   Also the limit (laya_qual.bench.serving_limit): the useful-token FLOPs (the encoder's GEMMs
   and attention on the requests' own tokens), the one-thread float32 GEMM rate at the
   encoder's shapes (4,096 rows, laya's oneDNN kernel and F.linear, timed as two more arms
   of the same interleaved rounds), and laya's batched time over FLOPs / rate.

    python scripts/bench_serving.py --batch [--base DIR] [--requests 256] [--batch-size 32]
        [--sequence-budget 256] [--mix short|long] [--threads 1] [--rounds 5] [--seed 0]
        [--profile] [--busy-loops N] [--timed ARM,...]

   --profile adds where the time goes: torch.profiler's top ops (self CPU time) for the
   first batch served by each torch arm, and cProfile's laya functions (cumulative time)
   over one whole pass of the batched arm: the per-request work outside the encoder. --busy-loops N runs N CPU-bound processes
   (`while True: pass`) while the arms are timed, and stops them after: the figures of a
   machine another job loads. --timed times only the named arms (the one-by-one
   predictions are still computed once, for the bitwise check).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def write_heads(root: Path, n: int, hidden: int, layers: int) -> list[Path]:
    from laya_qual.synth import write_artifact

    config = dict(hidden_size=hidden, num_layers=layers, num_heads=max(1, hidden // 64),
                  intermediate_size=4 * hidden, vocab_words=2000, max_positions=256, sequence_budget=256)
    return [write_artifact(root / f"h{i}", seed=100 + i, head_kind="float32", base_seed=1, **config) for i in range(n)]


def memory_arm(how: str, dirs: list[str]) -> int:
    """Runs in a fresh interpreter: RSS growth from loading the heads one way (torch included)."""
    before = rss_bytes()
    from laya_qual.bench.serving_bench import load_heads

    heads = load_heads(how, {f"h{i}": d for i, d in enumerate(dirs)})
    after = rss_bytes()
    assert heads
    return after - before


def timing(dirs: list[Path], rounds: int) -> dict[str, float]:
    """Cache miss, cache hit and the bare torch forward, interleaved in one side-by-side run."""
    import torch

    import laya
    from laya_qual.bench.benchmarking import side_by_side
    from laya_qual.bench.serving_bench import cache_arms, overhead_arms

    torch.set_num_threads(1)
    request = laya.Request("answer", "which of these words names a colour that the sky has at noon",
                           ("blue", "green", "a large red brick", "none of them"))
    cache, _ = cache_arms(dirs[0], request)
    overhead, tokens = overhead_arms(dirs[0], request)
    return side_by_side({**cache, "bare": overhead["bare"]}, rounds) | {"tokens": tokens}


def batch(args: argparse.Namespace, root: Path) -> dict:
    """The batch arms on three synthetic heads (one of each kind) sharing one base."""
    import torch

    import laya
    from laya_qual.bench.benchmarking import side_by_side
    from laya_qual.bench.serving_bench import MIXES, ArmsDisagree, batch_arms, missing_peers
    from laya_qual.bench.serving_limit import gemm_arms, useful_flops
    from laya_qual.synth import write_artifact

    torch.set_num_threads(args.threads)
    shape = {} if args.base else dict(hidden_size=args.hidden, num_layers=args.layers, num_heads=max(1, args.hidden // 64),
                                      intermediate_size=4 * args.hidden, vocab_words=2000, max_positions=512)
    dirs = {kind: write_artifact(root / kind, seed=7, head_kind=kind, base_seed=1, base_dir=args.base,
                                 sequence_budget=args.sequence_budget, **shape)
            for kind in ("float32", "int8", "transformer")}
    load_before = os.getloadavg()
    try:
        arms, work = batch_arms(dirs, requests=args.requests, batch_size=args.batch_size, seed=args.seed,
                                targets=MIXES.get(args.mix))
    except ArmsDisagree as exc:
        sys.exit(f"bench_serving: the arms disagree: {exc}")
    config = laya.load_artifact_base(dirs["float32"], args.base).config
    gemms, gemm_flops = gemm_arms(config)
    timed = {name: arm for name, arm in arms.items() if args.timed is None or name in args.timed} | gemms
    with busy_loops(args.busy_loops):
        load_timed = os.getloadavg()
        medians = side_by_side(timed, args.rounds)
        load_after = os.getloadavg()
    if args.profile:
        profile_first_batch(dirs, work.batch_size, args.seed, MIXES.get(args.mix))
        profile_python(arms["batched"])
    lengths = sorted(map(len, work.token_ids))
    gemm_seconds = {name: medians.pop(name) for name in gemms}
    per_second = {name: len(work.items) / seconds for name, seconds in medians.items()}
    missing = missing_peers("cpu")
    flops = useful_flops(config, list(map(len, work.token_ids)))
    rate = max(gemm_flops / seconds for seconds in gemm_seconds.values())  # the faster kernel: the machine's
    limit = flops / rate
    return {
        "config": {"base": str(args.base or f"synthetic hidden {args.hidden}, layers {args.layers}"),
                   "requests": len(work.items), "batch_size": work.batch_size, "sequence_budget": args.sequence_budget,
                   "mix": args.mix or "1 to the budget", "threads": args.threads, "rounds": args.rounds,
                   "seed": args.seed, "tokens": sum(lengths),
                   "length_min_median_max": [lengths[0], statistics.median(lengths), lengths[-1]],
                   "length_mean": sum(lengths) / len(lengths), "busy_loops": args.busy_loops},
        "load_average_before_timed_after": [list(load_before), list(load_timed), list(load_after)],
        "rows": work.rows(),
        "median_seconds": medians,
        "requests_per_second": per_second,
        "batched_over_one_by_one": ratio(per_second, "batched", "one_by_one"),
        # the peers: batched laya's time over theirs (below 1: laya is faster), or why not measured
        "batched_time_over": {peer: (medians["batched"] / medians[peer] if peer in medians and "batched" in medians
                                     else f"not measured: {missing.get(peer.removesuffix('_sorted'), 'not timed (--timed)')}")
                              for peer in PEERS},
        "limit": {"useful_flops": flops, "gemm_flops": gemm_flops, "gemm_median_seconds": gemm_seconds,
                  "gemm_gflops_one_thread": {name: gemm_flops / s / 1e9 for name, s in gemm_seconds.items()},
                  "limit_seconds_one_thread": limit,
                  "batched_over_limit_one_thread": medians["batched"] / limit if "batched" in medians else None,
                  "batched_over_limit_per_thread": (medians["batched"] / (limit / args.threads)
                                                    if "batched" in medians else None)},
    }


def ratio(per_second: dict[str, float], a: str, b: str) -> float | None:
    return per_second[a] / per_second[b] if a in per_second and b in per_second else None


@contextlib.contextmanager
def busy_loops(n: int):
    """``n`` CPU-bound processes for the duration, each stopped (by its own pid) afterwards."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def profile_first_batch(dirs: dict[str, Path], batch_size: int, seed: int, targets: tuple[int, int] | None) -> None:
    """Top ops of the first batch through each arm (built again on just that batch)."""
    from torch.profiler import ProfilerActivity, profile

    from laya_qual.bench.serving_bench import batch_arms

    arms, _ = batch_arms(dirs, requests=batch_size, batch_size=batch_size, seed=seed, targets=targets)  # the same first items
    for name, arm in arms.items():
        if name.startswith("onnxruntime"):
            continue  # its kernels run outside torch, where torch.profiler does not see
        arm()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            arm()
        print(f"\n{name}: first batch ({batch_size} requests), top ops by self CPU time")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))


def profile_python(arm) -> None:
    """laya's own functions over one pass of ``arm``, by cumulative time (cProfile)."""
    profiler = cProfile.Profile()
    profiler.runcall(arm)
    print("\nbatched: one whole pass, laya's functions by cumulative time (cProfile)")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"/laya/", 25)


def print_batch(f: dict) -> None:
    c = f["config"]
    print(f"base: {c['base']}; {c['requests']} requests ({c['tokens']} tokens, lengths min/median/max "
          f"{'/'.join(map(str, c['length_min_median_max']))}, mean {c['length_mean']:.1f}; mix {c['mix']}) in batches of {c['batch_size']}, {c['threads']} thread(s), "
          f"{c['rounds']} interleaved rounds, {c['busy_loops']} busy loop(s) alongside")
    print("load average before: {:.2f} {:.2f} {:.2f}, when timing started: {:.2f} {:.2f} {:.2f}, "
          "after: {:.2f} {:.2f} {:.2f}".format(*sum(f["load_average_before_timed_after"], [])))
    for name, rate in f["requests_per_second"].items():
        print(f"{name:<19} median {f['median_seconds'][name]:8.3f} s   {rate:9.1f} requests/s")
    if f["batched_over_one_by_one"] is not None:
        print(f"batched / one_by_one throughput = {f['batched_over_one_by_one']:.2f}x")
    print("every batched prediction bitwise the one-by-one one; every peer's states laya's within 1e-4")
    for peer, value in f["batched_time_over"].items():
        print(f"time of batched / {peer:<19} = " + (f"{value:.3f}" if isinstance(value, float) else value))
    r, lim = f["rows"], f["limit"]
    print(f"rows a pass computes: {r['tokens']} tokens; laya packs {r['laya_packed']} "
          f"({r['laya_packed'] / r['tokens']:.3f}x); padded peers {r['padded_arrival']} in arrival order "
          f"({r['padded_arrival'] / r['tokens']:.3f}x), {r['padded_sorted']} sorted ({r['padded_sorted'] / r['tokens']:.3f}x)")
    rates = ", ".join(f"{name} {value:.1f}" for name, value in lim["gemm_gflops_one_thread"].items())
    print(f"useful-token FLOPs {lim['useful_flops'] / 1e9:.1f} GFLOP; one-thread float32 GEMM rate at the encoder's "
          f"shapes ({lim['gemm_flops'] / 1e9:.2f} GFLOP a call, 4096 rows): {rates} GFLOP/s; limit at one thread "
          f"{lim['limit_seconds_one_thread']:.3f} s")
    if lim["batched_over_limit_one_thread"] is not None:
        print(f"time of batched / the one-thread limit = {lim['batched_over_limit_one_thread']:.3f}"
              + (f"; / the limit on {c['threads']} threads at the one-thread rate each = "
                 f"{lim['batched_over_limit_per_thread']:.3f}" if c["threads"] > 1 else ""))


PEERS = ("transformers", "transformers_sorted", "onnxruntime", "onnxruntime_sorted")
ARMS = ("one_by_one", "batched", *PEERS)


def arm_names(text: str) -> set[str]:
    names = set(text.split(","))
    if not names <= set(ARMS):
        raise argparse.ArgumentTypeError(f"unknown arm(s) {sorted(names - set(ARMS))}; the arms are {', '.join(ARMS)}")
    return names


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--rounds", type=positive, help="interleaved rounds (default: 200; 5 with --batch)")
    parser.add_argument("--batch", action="store_true", help="measure batched serving instead (4. above)")
    parser.add_argument("--base", type=Path, help="with --batch: the base to write the heads on")
    parser.add_argument("--requests", type=positive, default=256)
    parser.add_argument("--batch-size", type=positive, default=32)
    parser.add_argument("--sequence-budget", type=positive, default=256, help="the heads' (capped at the base's positions)")
    parser.add_argument("--mix", choices=("short", "long"), help="with --batch: rendered lengths 1..64 or 64..216")
    parser.add_argument("--threads", type=positive, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0, help="draws the request set")
    parser.add_argument("--profile", action="store_true", help="with --batch: also profile the first batch")
    parser.add_argument("--busy-loops", type=non_negative, default=0, metavar="N",
                        help="with --batch: N CPU-bound processes run while the arms are timed")
    parser.add_argument("--timed", type=arm_names, metavar="ARM,...",
                        help=f"with --batch: time only these arms ({', '.join(ARMS)})")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--memory-arm", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_arm:
        print(memory_arm(args.memory_arm[0], json.loads(args.memory_arm[1])))
        return
    if args.batch:
        args.rounds = args.rounds or 5
        from laya.errors import LayaError

        with tempfile.TemporaryDirectory() as tmp:
            try:
                figures = batch(args, Path(tmp))
            except LayaError as exc:  # e.g. --base is not a base
                sys.exit(f"bench_serving: {exc}")
        print_batch(figures)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return
    args.rounds = args.rounds or 200
    with tempfile.TemporaryDirectory() as tmp:
        dirs = write_heads(Path(tmp), args.heads, args.hidden, args.layers)
        t = timing(dirs, args.rounds)
        memory = {}
        for arm in ("shared", "standalone"):
            out = subprocess.run([sys.executable, __file__, "--memory-arm", arm, json.dumps([str(d) for d in dirs])],
                                 capture_output=True, text=True, check=True)
            memory[arm] = int(out.stdout.strip())
    figures = {
        "config": {"hidden": args.hidden, "layers": args.layers, "heads": args.heads, "rounds": args.rounds,
                   "tokens": t["tokens"]},
        "median_seconds": {k: t[k] for k in ("miss", "hit", "bare")},
        "miss_over_hit": t["miss"] / t["hit"],
        "miss_over_bare": t["miss"] / t["bare"],
        "rss_bytes": memory,
        "standalone_over_shared_memory": memory["standalone"] / max(1, memory["shared"]),
    }
    print(f"config: hidden {args.hidden}, layers {args.layers}, {t['tokens']} tokens, {args.rounds} interleaved rounds")
    print(f"Adapters.predict miss  median {t['miss'] * 1e3:8.3f} ms")
    print(f"Adapters.predict hit   median {t['hit'] * 1e3:8.3f} ms   miss/hit  = {figures['miss_over_hit']:.2f}x")
    print(f"bare torch forward     median {t['bare'] * 1e3:8.3f} ms   miss/bare = {figures['miss_over_bare']:.3f}x "
          f"(runtime overhead {100 * (figures['miss_over_bare'] - 1):.1f}%)")
    print(f"RSS for {args.heads} heads: shared {memory['shared'] / 2**20:.1f} MiB, standalone "
          f"{memory['standalone'] / 2**20:.1f} MiB, ratio {figures['standalone_over_shared_memory']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
