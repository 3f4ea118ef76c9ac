"""Serving benchmarks, measured side by side in one run (ratios and medians; these
machines are noisy, so read ratios, not absolute times). The arms are the suite's
benchmark claims' own (laya_qual.serving_bench), on a larger encoder.

1. Adapters.predict with a warm cache (hit) vs a cold one (miss).
2. Adapters.predict (miss) vs a bare torch forward of the same encoder and head.
3. Resident memory of N heads on one shared base vs N standalone models
   (each arm in a fresh process; RSS delta over the loads).

    python scripts/bench_serving.py [--hidden 256] [--layers 4] [--heads 16] [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
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
    from laya_qual.serving_bench import load_heads

    heads = load_heads(how, {f"h{i}": d for i, d in enumerate(dirs)})
    after = rss_bytes()
    assert heads
    return after - before


def timing(dirs: list[Path], rounds: int) -> dict[str, float]:
    """Cache miss, cache hit and the bare torch forward, interleaved in one side-by-side run."""
    import torch

    import laya
    from laya_qual.benchmarking import side_by_side
    from laya_qual.serving_bench import cache_arms, overhead_arms

    torch.set_num_threads(1)
    request = laya.Request("answer", "which of these words names a colour that the sky has at noon",
                           ("blue", "green", "a large red brick", "none of them"))
    cache, _ = cache_arms(dirs[0], request)
    overhead, tokens = overhead_arms(dirs[0], request)
    return side_by_side({**cache, "bare": overhead["bare"]}, rounds) | {"tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--memory-arm", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_arm:
        print(memory_arm(args.memory_arm[0], json.loads(args.memory_arm[1])))
        return
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
