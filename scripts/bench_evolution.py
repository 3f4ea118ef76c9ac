"""Side-by-side benchmark: distributed incremental kernel vs feature learner, one run, one config.

Measures feature production time, distributed and local per-update times, bytes
sent, per-process peak memory (VmHWM; the learner runs in its own fresh
process) and the speedup of local over distributed updates, next to the
FLOP-model limit (laya.evolution.bench). Both arms also keep per-update snapshots
and are compared bitwise, so the figures are for runs that were exact.

    .venv/bin/python scripts/bench_evolution.py --config seed-cpu --layout appended --json bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile as torch_profile

from laya.evolution.bench import bench
from laya.evolution.group import Group
from laya.evolution.layouts import LAYOUTS, Layout, build_tail
from laya.evolution.numerics import clock, use_device
from laya.evolution.parent import CONFIGS, build_blocks, build_decoder_head, build_embed, read_parent
from laya.evolution.placement import HANDOFFS
from laya.evolution.prefix import run_blocks
from laya.evolution.tail_training import make_optimizer, train_step
from laya.evolution.workspace import Experiment, Workspace, prepare, read_tensors


def _profile_job(rank: int, ws: Workspace, rounds: int) -> dict:
    """Medians of the pieces of one update, in one pinned process: what the arms' ratio is made of."""
    device = use_device(ws.exp.device)
    cfg, state, _ = read_parent(ws.parent_file)
    owned = cfg.depth if "reference" in ws.exp.layout.streams else ws.exp.cut  # blocks the owners run per update
    embed, prefix = build_embed(cfg, state).to(device), build_blocks(cfg, state, range(owned)).to(device)
    head = build_decoder_head(cfg, read_tensors(ws.head_file)[0]).to(device)
    tail = build_tail(cfg, read_tensors(ws.tail_file)[0], ws.exp.layout.tail_blocks).to(device)
    opt, mb = make_optimizer(tail, ws.exp.adam), ws.microbatches[0]
    ids = mb.input_ids.to(device)

    def timed(fn) -> float:
        samples = []
        for _ in range(rounds):
            t0 = clock(device)
            fn()
            samples.append(clock(device) - t0)
        return statistics.median(samples)

    with torch.no_grad():
        features = run_blocks(prefix, embed(ids))
    reference = features if "reference" in ws.exp.layout.streams else None  # same shape and cost

    def step():
        return train_step(tail, head, opt, features, reference, mb, ws.exp.retention)

    @torch.no_grad()
    def prefix_forward():
        return run_blocks(prefix, embed(ids))

    @torch.no_grad()
    def head_forward():
        return head(features)

    figures = {"prefix_forward_seconds": timed(prefix_forward), "train_step_seconds": timed(step),
               "head_forward_seconds": timed(head_forward)}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        step()
    which = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"  # CPU time is launch cost on CUDA
    top = sorted(prof.key_averages(), key=lambda e: getattr(e, which), reverse=True)[:8]
    figures["train_step_top_ops"] = [(e.key, round(getattr(e, which) / 1e3, 2)) for e in top]  # ms
    return figures


def profile(config_name: str, layout: str = "appended", *, microbatch: int = 4, device: str = "cpu",
            rounds: int = 5) -> dict:
    """Where one update's time goes: prefix forward (what the learner skips) vs the update itself.
    The job runs in a Group worker, which finds it in this script (spawn re-imports it)."""
    exp = Experiment(config=CONFIGS[config_name], layout=Layout(layout), microbatch=microbatch,
                     microbatches=1, updates=1, device=device)
    with tempfile.TemporaryDirectory(prefix="laya-profile-") as root, Group(1, device=device, timeout_s=3600) as local:
        return local.run(_profile_job, prepare(exp, Path(root)), rounds)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="seed-cpu")
    parser.add_argument("--layout", choices=LAYOUTS, default="appended")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--microbatch", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--profile", action="store_true",
                        help="also time the pieces of one update in one process (prefix forward, train step, top ops)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with Group(3, device=args.device, timeout_s=3600) as group:
        figures = bench(args.config, args.layout, group=group, updates=args.updates, microbatch=args.microbatch,
                        microbatches=args.microbatches, device=args.device)
    mib = 2 ** 20
    print(f"config {figures['config']} layout {figures['layout']}: {args.updates} updates, "
          f"microbatch {args.microbatch}, device {args.device}, bitwise equal: {figures['equal']} "
          f"({figures['compared_updates']} updates compared, final tails equal: {figures['final_tail_equal']})")
    print(f"feature production: {figures['production_seconds']:.3f} s for {args.microbatches} packets "
          f"({figures['production_bytes_sent']} bytes sent)")
    print(f"distributed update: {figures['kernel_update_seconds_median'] * 1e3:.1f} ms median "
          f"({figures['kernel_bytes_sent_per_update']:.0f} bytes sent per update, "
          f"{HANDOFFS[figures['handoff_device']]})")
    print(f"local update:       {figures['learner_update_seconds_median'] * 1e3:.1f} ms median "
          f"(packets reloaded in {figures['learner_packet_load_seconds']:.3f} s)")
    for name, peak in figures["peak_rss_bytes"].items():
        print(f"peak RSS {name}: {peak / mib:.0f} MiB (after start {figures['baseline_rss_bytes'][name] / mib:.0f} MiB)")
        if figures["peak_device_bytes"][name] is not None:
            print(f"peak {args.device} memory {name}: {figures['peak_device_bytes'][name] / mib:.0f} MiB")
    print(f"learner {figures['learner_bytes']} bytes < parent {figures['parent_bytes']} bytes")
    print(f"hand-offs: {figures['handoff_seconds_median'] * 1e3:.1f} ms median per update (the learner rank's wait "
          f"minus the owners' compute, {' + '.join(f'{s * 1e3:.1f}' for s in figures['owner_compute_seconds_median'])} ms)")
    print(f"limit: {figures['limit_measured']:.2f}x from measured times (owners' compute + hand-offs + step, over "
          f"the step); FLOP model {figures['flop_model']['limit']:.2f}x, with the measured hand-offs "
          f"{figures['limit_with_handoff']:.2f}x; goal 4.7x (seed, GPU)")
    print(f"speedup: {figures['speedup']:.2f}x")
    machine = figures["machine"]
    cpu = figures["kernel_cpu_seconds"]
    print(f"load: {machine['before']['cpus']} CPUs, load average {machine['before']['load_average']} before, "
          f"{machine['after']['load_average']} after; kernel ranks used {' + '.join(f'{c:.2f}' for c in cpu)} CPU s "
          f"in {figures['kernel_wall_seconds']:.2f} s wall, the learner {figures['learner_cpu_seconds']:.2f} CPU s "
          f"in {figures['learner_wall_seconds']:.2f} s")
    if args.profile:
        figures["profile"] = profile(args.config, args.layout, microbatch=args.microbatch, device=args.device)
        print(f"profile, one process: prefix forward {figures['profile']['prefix_forward_seconds'] * 1e3:.1f} ms, "
              f"train step {figures['profile']['train_step_seconds'] * 1e3:.1f} ms "
              f"(head forward alone {figures['profile']['head_forward_seconds'] * 1e3:.1f} ms)")
        print(f"train step, top ops by self {args.device} time (ms):", figures["profile"]["train_step_top_ops"])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    raise SystemExit(0 if figures["equal"] else 1)


if __name__ == "__main__":
    main()
