"""Side-by-side benchmark: distributed incremental kernel vs feature learner, one run, one config.

Measures feature production time, distributed and local per-update times, bytes
sent, per-process peak memory (ru_maxrss; the learner runs in its own fresh
process) and the speedup of local over distributed updates, next to the
FLOP-model limit. Both arms also keep per-update snapshots and are compared
bitwise, so the figures are for runs that were exact.

    .venv/bin/python scripts/bench_evolution.py --config seed-cpu --layout appended --json bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from laya.evolution.accounting import flop_model, projection
from laya.evolution.check import run_arms
from laya.evolution.group import Group
from laya.evolution.kernel import LEARNER
from laya.evolution.layouts import LAYOUTS, Layout
from laya.evolution.parent import CONFIGS
from laya.evolution.workspace import Experiment, prepare


def bench(config_name: str, layout: str, updates: int, microbatch: int, microbatches: int) -> dict:
    exp = Experiment(config=CONFIGS[config_name], layout=Layout(layout), updates=updates,
                     microbatch=microbatch, microbatches=microbatches)
    with tempfile.TemporaryDirectory(prefix="laya-bench-") as root, \
            Group(3, timeout_s=3600) as group, Group(1, timeout_s=3600) as local:
        result = run_arms(group, prepare(exp, Path(root)), learner_group=local, timeout_s=3600)
        baseline = [i["rss"] for i in group.start_info] + [local.start_info[0]["rss"]]
    kernel, learner = result.kernel[LEARNER]["update_seconds"], result.learner["update_seconds"]
    # the first update of each arm includes one-off allocator warm-up; report medians
    figures = {
        "config": config_name, "layout": layout, "updates": updates, "microbatch": microbatch,
        "microbatches": microbatches, "equal": result.equal,
        "production_seconds": result.production[LEARNER]["seconds"],
        "production_bytes_sent": sum(r["bytes_sent"] for r in result.production),
        "kernel_update_seconds_median": statistics.median(kernel),
        "learner_update_seconds_median": statistics.median(learner),
        "kernel_update_seconds": kernel, "learner_update_seconds": learner,
        "learner_packet_load_seconds": result.learner["load_seconds"],
        "kernel_bytes_sent_per_update": sum(r["bytes_sent"] for r in result.kernel) / updates,
        "peak_rss_bytes": {"owner0": result.kernel[0]["peak_rss"], "owner1": result.kernel[1]["peak_rss"],
                           "kernel_learner_rank": result.kernel[LEARNER]["peak_rss"],
                           "feature_learner": result.learner["peak_rss"]},
        "baseline_rss_bytes": {"owner0": baseline[0], "owner1": baseline[1], "kernel_learner_rank": baseline[2],
                               "feature_learner": baseline[3]},
        "learner_bytes": result.learner["learner_bytes"], "parent_bytes": result.learner["parent_bytes"],
        "packet_storage": projection(exp.config, exp.layout, batches=microbatches, microbatch=microbatch),
        "flop_model": flop_model(exp.config, exp.layout),
    }
    figures["speedup"] = figures["kernel_update_seconds_median"] / figures["learner_update_seconds_median"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="seed-cpu")
    parser.add_argument("--layout", choices=LAYOUTS, default="appended")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--microbatch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures = bench(args.config, args.layout, args.updates, args.microbatch, args.microbatches)
    mib = 2 ** 20
    print(f"config {figures['config']} layout {figures['layout']}: {args.updates} updates, "
          f"microbatch {args.microbatch}, bitwise equal: {figures['equal']}")
    print(f"feature production: {figures['production_seconds']:.3f} s for {args.microbatches} packets "
          f"({figures['production_bytes_sent']} bytes sent)")
    print(f"distributed update: {figures['kernel_update_seconds_median'] * 1e3:.1f} ms median "
          f"({figures['kernel_bytes_sent_per_update']:.0f} bytes sent per update)")
    print(f"local update:       {figures['learner_update_seconds_median'] * 1e3:.1f} ms median "
          f"(packets reloaded in {figures['learner_packet_load_seconds']:.3f} s)")
    for name, peak in figures["peak_rss_bytes"].items():
        print(f"peak RSS {name}: {peak / mib:.0f} MiB (after start {figures['baseline_rss_bytes'][name] / mib:.0f} MiB)")
    print(f"learner {figures['learner_bytes']} bytes < parent {figures['parent_bytes']} bytes")
    print(f"FLOP-model limit: {figures['flop_model']['limit']:.2f}x; goal 4.7x (seed, GPU)")
    print(f"speedup: {figures['speedup']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    raise SystemExit(0 if figures["equal"] else 1)


if __name__ == "__main__":
    main()
