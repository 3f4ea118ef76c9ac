"""The learner benchmark claim: the distributed kernel and the feature learner side by
side in one run. The arms must be bitwise equal; speed is recorded, never asserted.
The fixture times the whole side-by-side run once; the per-update medians over the
schedule's 8 updates (4 microbatches, each used twice) are in extra_info."""

from __future__ import annotations

import hashlib
import statistics
import time

import pytest
from hypothesis import given
from safetensors.torch import save as safetensors_bytes

from laya.evolution.accounting import flop_model, projection
from laya.evolution.bench import bench, figures_of, handoff_seconds
from laya.evolution.check import ArmsResult
from laya.evolution.layouts import Layout
from laya.evolution.parent import CONFIGS
from laya.evolution.workspace import Experiment
from laya_qual.synth import arms_records

CONFIG, LAYOUT, UPDATES, MICROBATCH, MICROBATCHES = "seed-small", "appended", 8, 2, 4
PREDECESSOR_SPEEDUP = 4.7  # the predecessor design's GPU figure, the goal it set (recorded as seed_speedup)
RECORDED = ("device", "config", "layout", "updates", "microbatch", "production_seconds", "production_bytes_sent",
            "kernel_update_seconds_median", "learner_update_seconds_median", "kernel_update_seconds",
            "learner_update_seconds", "kernel_bytes_sent_per_update", "peak_rss_bytes", "baseline_rss_bytes",
            "peak_device_bytes",
            "learner_bytes", "parent_bytes", "final_tail_sha256", "machine", "kernel_cpu_seconds",
            "kernel_wall_seconds", "learner_cpu_seconds", "learner_wall_seconds", "owner_compute_seconds_median",
            "handoff_seconds_median")


@pytest.mark.laya_claim("bench.learner.speedup")
def test_learner_speedup_side_by_side(benchmark, evolution_group, laya_device):
    started = time.monotonic()
    figures = benchmark.pedantic(
        bench, args=(CONFIG, LAYOUT),
        kwargs=dict(updates=UPDATES, microbatch=MICROBATCH, microbatches=MICROBATCHES, device=laya_device,
                    certify=False, group=evolution_group, timeout_s=600),
        rounds=1, iterations=1)
    elapsed = time.monotonic() - started
    assert figures["compared_updates"] == UPDATES
    # every duration is a part of this one run (a start taken from another clock would not be)
    assert 0 < figures["production_seconds"] < elapsed and 0 < figures["kernel_wall_seconds"] < elapsed, figures
    assert not figures["mismatches"], f"kernel and learner differ: {figures['mismatches']}"
    assert figures["final_tail_equal"], figures["final_tail_sha256"]
    assert figures["equal"] is True  # every update compared, none differing, the same final tail
    # each owner's prefix compute per update is a part of the kernel's wall time
    assert all(0 < s < figures["kernel_wall_seconds"] for s in figures["owner_compute_seconds_median"]), figures
    # every update of each arm took time, and the parts fit in their wholes: the kernel's updates
    # in its wall time, the learner's packet load and updates in this run
    kernel_updates, local_updates = figures["kernel_update_seconds"], figures["learner_update_seconds"]
    assert all(s > 0 for s in kernel_updates + local_updates) and figures["learner_packet_load_seconds"] > 0, figures
    assert sum(kernel_updates) <= figures["kernel_wall_seconds"], figures
    assert figures["learner_wall_seconds"] == sum(local_updates), figures
    assert figures["learner_packet_load_seconds"] + figures["learner_wall_seconds"] < elapsed, figures
    assert all(s > 0 for s in figures["kernel_cpu_seconds"]) and figures["learner_cpu_seconds"] > 0, figures
    # Each process's memory after start is its own: ranks 0 and 1 are the owners, rank 2 the
    # kernel's learner rank (docs/evolution.md), as the group recorded them when it started; the
    # feature learner is a process of its own, started by bench.
    started = [info["rss"] for info in evolution_group.start_info]
    baseline = figures["baseline_rss_bytes"]
    assert [baseline[name] for name in ("owner0", "owner1", "kernel_learner_rank")] == started, (baseline, started)
    assert sorted(baseline) == ["feature_learner", "kernel_learner_rank", "owner0", "owner1"], baseline
    assert isinstance(baseline["feature_learner"], int) and baseline["feature_learner"] > 0, baseline
    # Peak resident bytes (VmHWM) never fall below the same process's at start; GPU memory is
    # null on the CPU (docs/benchmarks.md).
    peak = figures["peak_rss_bytes"]
    assert sorted(peak) == sorted(baseline) and all(isinstance(peak[k], int) and peak[k] >= baseline[k]
                                                    for k in peak), (peak, baseline)
    assert sorted(figures["peak_device_bytes"]) == sorted(baseline)
    assert all((v is None) == (laya_device == "cpu") for v in figures["peak_device_bytes"].values()), figures
    # The derived figures follow from the recorded parts as docs/benchmarks.md defines them:
    # medians over the updates, speedup = distributed over local, and the two limits.
    kernel, local = figures["kernel_update_seconds_median"], figures["learner_update_seconds_median"]
    assert kernel == statistics.median(figures["kernel_update_seconds"]), figures
    assert local == statistics.median(figures["learner_update_seconds"]), figures
    assert figures["speedup"] == kernel / local
    handoff = figures["handoff_seconds_median"]
    assert figures["limit_with_handoff"] == figures["flop_model"]["limit"] + handoff / local
    assert figures["limit_measured"] == (sum(figures["owner_compute_seconds_median"]) + handoff + local) / local
    benchmark.extra_info.update({k: figures[k] for k in RECORDED})
    benchmark.extra_info.update(speedup=round(figures["speedup"], 4),
                                flop_model_limit=round(figures["flop_model"]["limit"], 4),
                                limit_with_handoff=round(figures["limit_with_handoff"], 4),
                                limit_measured=round(figures["limit_measured"], 4),
                                seed_speedup=PREDECESSOR_SPEEDUP,
                                timed=f"the whole side-by-side run: feature production, then the kernel and the "
                                      f"feature learner each through {UPDATES} updates")


@pytest.mark.laya_claim("bench.learner.speedup")
def test_the_handoff_is_the_learner_wait_less_both_owners_compute():
    """docs/benchmarks.md: per update, the learner rank's wait for its streams minus the two
    owners' compute for them (binary fractions: exact)."""
    kernel = [{"compute_seconds": [0.5, 0.25]}, {"compute_seconds": [0.125, 0.0625]},
              {"request_seconds": [1.0, 0.5]}]
    assert handoff_seconds(kernel) == [0.375, 0.1875]
    with pytest.raises(ValueError):  # a rank that timed another number of updates is no figure
        handoff_seconds([*kernel[:2], {"request_seconds": [1.0]}])


def _tail_sha256(records: list[dict]) -> str:
    params = records[-1]["params"]
    return hashlib.sha256(safetensors_bytes({k: v.contiguous() for k, v in params.items()})).hexdigest()


@pytest.mark.laya_claim("bench.learner.speedup")
@given(arms_records(updates=UPDATES))
def test_every_figure_follows_from_the_ranks_records(records):
    """docs/benchmarks.md's figures, each from the rank and field it names, on records in which
    every rank's every value differs and the arms may differ: at compared updates, in the final
    tail, or in how many updates were compared."""
    exp = Experiment(config=CONFIGS[CONFIG], layout=Layout(LAYOUT), updates=UPDATES, microbatch=MICROBATCH,
                     microbatches=MICROBATCHES)
    result = ArmsResult(production=records["production"], kernel=records["kernel"], learner=records["learner"],
                        certificates={}, rows=records["rows"])
    machine = {"before": {"load_average": [0.5, 0.25, 0.125], "cpus": 2},
               "after": {"load_average": [1.5, 0.75, 0.25], "cpus": 2}}
    figures = figures_of(result, exp, config_name=CONFIG, baseline_rss=[11, 12, 13, 14], machine=machine)
    (owner0, owner1, rank), learner = records["kernel"], records["learner"]
    per_process = {"owner0": owner0, "owner1": owner1, "kernel_learner_rank": rank, "feature_learner": learner}
    tails = [_tail_sha256(rank["records"]), _tail_sha256(learner["records"])]
    mismatches = [(r["update"], r["differences"][:4]) for r in records["rows"] if r["differences"]]
    kernel_median = statistics.median(rank["update_seconds"])
    local_median = statistics.median(learner["update_seconds"])
    handoff = statistics.median(wait - a - b for wait, a, b in zip(
        rank["request_seconds"], owner0["compute_seconds"], owner1["compute_seconds"]))
    owners = [statistics.median(owner0["compute_seconds"]), statistics.median(owner1["compute_seconds"])]
    expected = {
        "config": CONFIG, "layout": LAYOUT, "device": "cpu", "updates": UPDATES, "microbatch": MICROBATCH,
        "microbatches": MICROBATCHES, "compared_updates": len(records["rows"]), "mismatches": mismatches,
        "final_tail_sha256": tails, "final_tail_equal": tails[0] == tails[1],
        "equal": len(records["rows"]) == UPDATES and not mismatches and tails[0] == tails[1],
        "production_seconds": records["production"][2]["seconds"],
        "production_bytes_sent": sum(p["bytes_sent"] for p in records["production"]),
        "kernel_update_seconds": rank["update_seconds"], "learner_update_seconds": learner["update_seconds"],
        "kernel_update_seconds_median": kernel_median, "learner_update_seconds_median": local_median,
        "speedup": kernel_median / local_median, "learner_packet_load_seconds": learner["load_seconds"],
        "kernel_bytes_sent_per_update": (owner0["bytes_sent"] + owner1["bytes_sent"] + rank["bytes_sent"]) // UPDATES,
        "handoff_device": rank["handoff_device"],
        "peak_rss_bytes": {name: p["peak_rss"] for name, p in per_process.items()},
        "baseline_rss_bytes": {"owner0": 11, "owner1": 12, "kernel_learner_rank": 13, "feature_learner": 14},
        "peak_device_bytes": {name: p["peak_device"] for name, p in per_process.items()},
        "learner_bytes": learner["learner_bytes"], "parent_bytes": learner["parent_bytes"],
        "packet_storage": projection(exp.config, exp.layout, batches=MICROBATCHES, microbatch=MICROBATCH),
        "flop_model": flop_model(exp.config, exp.layout), "machine": machine,
        "kernel_cpu_seconds": [owner0["cpu_seconds"], owner1["cpu_seconds"], rank["cpu_seconds"]],
        "kernel_wall_seconds": rank["seconds"], "learner_cpu_seconds": learner["cpu_seconds"],
        "learner_wall_seconds": sum(learner["update_seconds"]), "owner_compute_seconds_median": owners,
        "handoff_seconds_median": handoff,
        "limit_with_handoff": flop_model(exp.config, exp.layout)["limit"] + handoff / local_median,
        "limit_measured": (owners[0] + owners[1] + handoff + local_median) / local_median,
    }
    assert figures == expected
