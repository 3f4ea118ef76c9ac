"""`laya evolve`: run both arms and compare them (check), or print storage accounting (plan)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from .accounting import PREDECESSOR_STREAM_GB, flop_model, projection, transfer
from .layouts import LAYOUTS, Layout
from .parent import CONFIGS


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


@click.group("evolve")
def evolve() -> None:
    """Frozen-feature learner: compare with the distributed kernel, account for storage."""


# Counts of updates, rows and batches: zero or fewer would compare or project nothing, and a check
# that compares nothing must not read as equal (exit 1 is reserved for a bitwise difference).
COUNT = click.IntRange(min=1)


class CheckError(click.ClickException):
    """A check that could not compare (exit 2): exit 1 is kept for a bitwise difference."""

    exit_code = 2


def check_options(command):
    """The experiment options `laya evolve check` and `python -m laya.evolution.run check` share."""
    options = [
        click.option("--layout", type=click.Choice(LAYOUTS), required=True,
                     help="the trainable tail: appended (new blocks after the frozen prefix) or fixed-tail "
                          "(the control: trainable copies of the last two blocks)"),
        click.option("--config", "config_name", type=click.Choice(sorted(CONFIGS)), default="tiny", show_default=True,
                     help="the parent decoder's shape, by name"),
        click.option("--updates", type=COUNT, default=8, show_default=True, help="optimizer updates each arm runs"),
        click.option("--microbatch", type=COUNT, default=2, show_default=True, help="rows per microbatch"),
        click.option("--microbatches", type=COUNT, default=4, show_default=True, help="distinct microbatches, cycled"),
        click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
                     help="where every rank computes; cuda: a GPU per rank over NCCL when there are enough, "
                          "else all on cuda:0 with CPU hand-offs"),
        click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="also write the figures, the per-update rows and the state digests to this JSON file"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def check_experiment(layout: str, config_name: str, updates: int, microbatch: int, microbatches: int, device: str):
    """The experiment of one check; refuses `cuda` where torch sees none, before any rank starts."""
    from laya.errors import DeviceError

    from .placement import require_device
    from .workspace import Experiment

    try:
        require_device(device)
    except DeviceError as e:
        raise click.BadParameter(str(e), param_hint="--device") from None
    return Experiment(config=CONFIGS[config_name], layout=Layout(layout), updates=updates,
                      microbatch=microbatch, microbatches=microbatches, device=device)


def report_check(result, exp, config_name: str, json_path: Path | None) -> None:
    """Print the per-update rows and the figures of one check, write them as JSON; exit 1 on any difference.

    The JSON's `state_digests` holds, per update, the digest of each arm's tail parameters and
    Adam state after it, so two runs can be compared bitwise without their snapshots.
    """
    from laya.artifact.binding import state_digest
    from .kernel import LEARNER
    from .placement import HANDOFFS

    click.echo(f"{'update':>6} {'mb':>3} {'kernel loss':>14} {'learner loss':>14} "
               f"{'kernel |g|':>14} {'learner |g|':>14}  equal")
    for r in result.rows:
        click.echo(f"{r['update']:>6} {r['microbatch']:>3} {r['kernel_loss']:>14.9g} {r['learner_loss']:>14.9g} "
                   f"{r['kernel_grad_norm']:>14.9g} {r['learner_grad_norm']:>14.9g}  "
                   f"{'yes' if r['equal'] else 'NO: ' + ', '.join(r['differences'][:3])}")
    kernel = result.kernel[LEARNER]["update_seconds"]
    local = result.learner["update_seconds"]
    figures = {
        "config": config_name, "layout": exp.layout.name, "updates": exp.updates, "equal": result.equal,
        "production_seconds": result.production[LEARNER]["seconds"],
        "kernel_update_seconds": sum(kernel) / len(kernel), "learner_update_seconds": sum(local) / len(local),
        "kernel_bytes_sent": sum(r["bytes_sent"] for r in result.kernel),
        "handoff_device": result.kernel[LEARNER]["handoff_device"],
        "production_bytes_sent": sum(r["bytes_sent"] for r in result.production),
        "learner_bytes": result.learner["learner_bytes"], "parent_bytes": result.learner["parent_bytes"],
        "flop_model": flop_model(exp.config, exp.layout), "rows": result.rows,
        "state_digests": [{arm: state_digest(flat_state(rec)) for arm, rec in (("kernel", k), ("learner", l))}
                          for k, l in zip(result.kernel[LEARNER]["records"], result.learner["records"])],
    }
    figures["speedup"] = figures["kernel_update_seconds"] / figures["learner_update_seconds"]
    click.echo(f"feature production: {figures['production_seconds']:.3f} s "
               f"({figures['production_bytes_sent']} bytes sent)")
    click.echo(f"distributed update: {figures['kernel_update_seconds'] * 1e3:.2f} ms "
               f"({figures['kernel_bytes_sent']} bytes sent over {exp.updates} updates, "
               f"{HANDOFFS[figures['handoff_device']]})")
    click.echo(f"local update:       {figures['learner_update_seconds'] * 1e3:.2f} ms")
    click.echo(f"learner {figures['learner_bytes']} bytes < parent {figures['parent_bytes']} bytes")
    click.echo(f"FLOP-model limit: {figures['flop_model']['limit']:.2f}x")
    click.echo(f"speedup: {figures['speedup']:.2f}x")
    if json_path is not None:
        json_path.write_text(json.dumps(figures, indent=2))
    if not result.equal:
        click.echo("MISMATCH: kernel and learner are not bitwise equal", err=True)
        sys.exit(1)


def flat_state(record: dict) -> dict:
    """One update's tail parameters and Adam state as one named tensor collection."""
    state = {f"param/{name}": t for name, t in record["params"].items()}
    for name, slots in record["adam"].items():
        state |= {f"adam/{name}/{key}": slots[key] for key in ("step", "exp_avg", "exp_avg_sq")}
    return state


@evolve.command()
@check_options
@click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), default=1800.0, show_default=True,
              help="each job's deadline, and gloo's timeout for every operation and the store")
def check(layout: str, config_name: str, updates: int, microbatch: int, microbatches: int, device: str,
          json_path: Path | None, timeout_s: float) -> None:
    """Run the distributed kernel and the feature learner; exit 1 on any bitwise difference,
    2 on an error (a rank that died or missed its deadline)."""
    from laya.errors import LayaError

    from .check import run_arms
    from .group import Group
    from .workspace import prepare

    exp = check_experiment(layout, config_name, updates, microbatch, microbatches, device)
    try:
        with tempfile.TemporaryDirectory(prefix="laya-evolve-") as root, \
                Group(3, device=device, timeout_s=timeout_s) as group:
            result = run_arms(group, prepare(exp, Path(root)))
    except LayaError as exc:
        raise CheckError(str(exc)) from None
    report_check(result, exp, config_name, json_path)


@evolve.command()
@click.option("--config", "config_name", type=click.Choice(sorted(CONFIGS)), default="parent-1.7b", show_default=True,
              help="the parent decoder's shape, by name")
@click.option("--batches", type=COUNT, default=128, show_default=True,
              help="batches in the schedule, a feature packet each")
@click.option("--microbatch", type=COUNT, default=8, show_default=True, help="rows per batch")
@click.option("--updates", type=COUNT, default=None, help="updates the schedule runs  [default: --batches, one pass]")
def plan(config_name: str, batches: int, microbatch: int, updates: int | None) -> None:
    """Storage for feature packets over a schedule (per packet, per stream, in total) and the bytes each
    arm sends, with what crosses between nodes when the owners and the learner are on different nodes."""
    config, updates = CONFIGS[config_name], batches if updates is None else updates
    for name in LAYOUTS:
        p = projection(config, Layout(name), batches=batches, microbatch=microbatch)
        click.echo(f"{name}: {len(p['streams'])} stream(s) {'+'.join(p['streams'])}; per packet "
                   f"{p['packet_stream_bytes']} bytes/stream, {p['packet_bytes']} bytes")
        click.echo(f"  {batches} batches x {microbatch} x {config.seq_len} x {config.width} x 4 = "
                   f"{_gb(p['stream_bytes'])} per stream; total {_gb(p['total_bytes'])} before metadata; "
                   f"read-only head replica {_gb(p['head_replica_bytes'])}")
        t = transfer(config, Layout(name), batches=batches, microbatch=microbatch, updates=updates)
        one, kernel, learner = t["per_request"], t["kernel"], t["learner"]
        click.echo(f"  per request: ids {one['ids']} + activations {one['activations']} + streams {one['streams']} "
                   f"= {one['request']} bytes sent, {one['between_nodes']} between nodes (owners | learner)")
        click.echo(f"  {updates} updates: kernel sends {kernel['sent']} bytes ({_gb(kernel['sent'])}), "
                   f"{kernel['between_nodes']} between nodes; learner's arm: production sends {learner['sent']} "
                   f"bytes ({_gb(learner['sent'])}), {learner['between_nodes']} between nodes, packets written "
                   f"once and read once by the learner: {learner['packets_written']} bytes each way")
    if config_name == "parent-1.7b" and batches == 128:
        ours = projection(config, Layout("appended"), batches=batches, microbatch=microbatch)["stream_bytes"]
        positions = PREDECESSOR_STREAM_GB * 1e9 / (batches * config.width * 4)
        click.echo(f"seed: one FP32 stream for the 128-batch schedule occupies {PREDECESSOR_STREAM_GB} GB; "
                   f"this projection: {_gb(ours)} ({microbatch} x {config.seq_len} positions per batch); "
                   f"the seed's figure corresponds to {positions:.0f} positions per batch at width {config.width}")

