"""Side-by-side figures of the distributed kernel and the feature learner, from one run.

Shared by scripts/bench_evolution.py, scripts/gpu-probe.sh and the
`bench.learner.speedup` claim so all three report the same figures the same way.
(The script's `--profile`, which times the pieces of one update, is the script's own.)
Both arms keep per-update snapshots and are compared bitwise (every update, then
the serialized final tail), so every figure comes from a run that was exact.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

from safetensors.torch import save as st_save

from laya.artifact.binding import sha256

from .accounting import flop_model, projection
from .check import ArmsResult, run_arms
from .group import Group
from .kernel import LEARNER
from .layouts import Layout
from .placement import require_device
from .parent import CONFIGS
from .workspace import Experiment, prepare


def machine_load() -> dict:
    """What else the machine was doing: its 1, 5 and 15 minute load averages and the CPUs
    this process may run on. Wall-clock ratios between arms that share those CPUs move
    with the load, so every figure carries it."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"load_average": [round(x, 2) for x in os.getloadavg()], "cpus": cpus}


def handoff_seconds(kernel: list[dict]) -> list[float]:
    """Per update, the learner rank's wait for its streams minus the owners' compute for them:
    the cost of the hand-offs themselves (sends, receives, copies, scheduling)."""
    owner_a, owner_b, learner = kernel[0]["compute_seconds"], kernel[1]["compute_seconds"], kernel[LEARNER]
    return [wait - a - b for wait, a, b in zip(learner["request_seconds"], owner_a, owner_b, strict=True)]


def _final_tail_digest(records: list[dict]) -> str:
    """sha256 of the last update's tail parameters serialized as safetensors."""
    return sha256(st_save({k: v.contiguous() for k, v in records[-1]["params"].items()}))


def bench(config_name: str, layout: str, *, group: Group, updates: int, microbatch: int, microbatches: int,
          device: str, certify: bool = True, timeout_s: float = 3600) -> dict:
    """Run both arms on a fresh workspace and report: the kernel's on ``group``, a 3-rank group
    (its start-up is not part of any figure, but its peak RSS covers everything it ran before);
    the learner's always in a fresh process.
    """
    require_device(device)
    exp = Experiment(config=CONFIGS[config_name], layout=Layout(layout), updates=updates,
                     microbatch=microbatch, microbatches=microbatches, device=device)
    load_before = machine_load()
    with tempfile.TemporaryDirectory(prefix="laya-bench-") as root, \
            Group(1, device=device, timeout_s=timeout_s) as local:
        result = run_arms(group, prepare(exp, Path(root)), certify=certify, learner_group=local,
                          timeout_s=timeout_s)
        baseline = [i["rss"] for i in group.start_info] + [local.start_info[0]["rss"]]
    return figures_of(result, exp, config_name=config_name, baseline_rss=baseline,
                      machine={"before": load_before, "after": machine_load()})


def figures_of(result: ArmsResult, exp: Experiment, *, config_name: str, baseline_rss: list[int],
               machine: dict) -> dict:
    """Every figure of one side-by-side run, derived from what its ranks recorded alone.

    `baseline_rss` is each process's resident bytes after start (owners, kernel learner
    rank, feature learner); `machine` the load before and after (machine_load).
    """
    kernel, learner = result.kernel[LEARNER], result.learner
    updates = exp.updates
    tails = [_final_tail_digest(kernel["records"]), _final_tail_digest(learner["records"])]
    # the first update of each arm includes one-off allocator warm-up; report medians
    figures = {
        "config": config_name, "layout": exp.layout.name, "device": exp.device, "updates": updates,
        "microbatch": exp.microbatch, "microbatches": exp.microbatches,
        "compared_updates": len(result.rows),
        "mismatches": [(r["update"], r["differences"][:4]) for r in result.rows if not r["equal"]],
        "final_tail_sha256": tails, "final_tail_equal": tails[0] == tails[1],
        "production_seconds": result.production[LEARNER]["seconds"],
        "production_bytes_sent": sum(r["bytes_sent"] for r in result.production),
        "kernel_update_seconds_median": statistics.median(kernel["update_seconds"]),
        "learner_update_seconds_median": statistics.median(learner["update_seconds"]),
        "kernel_update_seconds": kernel["update_seconds"], "learner_update_seconds": learner["update_seconds"],
        "learner_packet_load_seconds": learner["load_seconds"],
        "kernel_bytes_sent_per_update": sum(r["bytes_sent"] for r in result.kernel) // updates,  # the same every update
        "handoff_device": kernel["handoff_device"],  # cuda: GPU to GPU over NCCL; cpu: CPU copies over gloo
        "peak_rss_bytes": {"owner0": result.kernel[0]["peak_rss"], "owner1": result.kernel[1]["peak_rss"],
                           "kernel_learner_rank": kernel["peak_rss"], "feature_learner": learner["peak_rss"]},
        "baseline_rss_bytes": {"owner0": baseline_rss[0], "owner1": baseline_rss[1],
                               "kernel_learner_rank": baseline_rss[2], "feature_learner": baseline_rss[3]},
        "peak_device_bytes": {"owner0": result.kernel[0]["peak_device"], "owner1": result.kernel[1]["peak_device"],
                              "kernel_learner_rank": kernel["peak_device"], "feature_learner": learner["peak_device"]},
        "learner_bytes": learner["learner_bytes"], "parent_bytes": learner["parent_bytes"],
        "packet_storage": projection(exp.config, exp.layout, batches=exp.microbatches, microbatch=exp.microbatch),
        "flop_model": flop_model(exp.config, exp.layout),
    }
    figures["equal"] = (figures["compared_updates"] == updates and not figures["mismatches"]
                        and figures["final_tail_equal"])
    figures["speedup"] = figures["kernel_update_seconds_median"] / figures["learner_update_seconds_median"]
    handoff = statistics.median(handoff_seconds(result.kernel))
    owners = [statistics.median(result.kernel[r]["compute_seconds"]) for r in (0, 1)]
    local_update = figures["learner_update_seconds_median"]
    figures |= {
        "machine": machine,
        # CPU seconds each kernel rank used during the updates, next to the wall time they took:
        # on a quiet machine with a core per rank the pipeline's CPU adds up to about the wall time.
        "kernel_cpu_seconds": [r["cpu_seconds"] for r in result.kernel],
        "kernel_wall_seconds": result.kernel[LEARNER]["seconds"],
        "learner_cpu_seconds": learner["cpu_seconds"], "learner_wall_seconds": sum(learner["update_seconds"]),
        "owner_compute_seconds_median": owners,
        "handoff_seconds_median": handoff,
        # If compute scaled exactly with FLOPs, a kernel update would take limit x a learner update
        # plus the hand-offs, which only the kernel pays.
        "limit_with_handoff": figures["flop_model"]["limit"] + handoff / local_update,
        # The same limit from measured times: a kernel update is at least the owners' prefix compute,
        # the hand-offs and the step the learner also does; the learner does only the step.
        "limit_measured": (sum(owners) + handoff + local_update) / local_update,
    }
    return figures
