"""The `laya` command line: serve JSONL predictions, inspect artifacts, and (from
their own modules) train heads, import bases and check the evolution learner."""

from __future__ import annotations

import json
import sys

import click

import laya
from laya.errors import LayaError
from laya.evolution.cli import evolve
from laya.importer import base
from laya.train_cli import train


@click.group()
@click.version_option(laya.__version__, prog_name="laya")
def main() -> None:
    """laya: many calibrated task heads on one verified, frozen, shared encoder."""


def _adapter_pairs(values: tuple[str, ...]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        adapter_id, sep, directory = value.partition("=")
        if not sep or not adapter_id or not directory:
            raise click.BadParameter(f"expected ID=DIR, got {value!r}", param_hint="--adapter")
        if adapter_id in pairs:
            raise click.BadParameter(f"adapter id {adapter_id!r} given twice", param_hint="--adapter")
        pairs[adapter_id] = directory
    return pairs


@main.command()
@click.option("--base", "base_dir", required=True, type=click.Path(file_okay=False),
              help="artifact directory whose verified encoder all adapters share")
@click.option("--adapter", "adapters", multiple=True, required=True, metavar="ID=DIR",
              help="a head artifact under an explicit id (repeatable)")
@click.option("--cache-bytes", default=0, show_default=True, type=click.IntRange(min=0),
              help="encoder-state cache budget in bytes (0 = off)")
def predict(base_dir: str, adapters: tuple[str, ...], cache_bytes: int) -> None:
    """Read JSONL requests on stdin ({"adapter", "task", "question", "options", "state"?}),
    write one JSONL result per input line on stdout, in order."""
    from laya.jsonl import predict_lines

    try:
        opened = laya.open_adapters(_adapter_pairs(adapters), base=base_dir, cache_bytes=cache_bytes)
    except LayaError as exc:
        raise click.ClickException(str(exc)) from None
    out = sys.stdout
    for result in predict_lines(opened, sys.stdin.buffer):
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        out.flush()
    stats = opened.cache_stats()
    click.echo(f"cache: {stats.hits} hits, {stats.misses} misses, {stats.evictions} evictions, "
               f"{stats.entries} entries, {stats.bytes} bytes", err=True)


@main.command()
@click.argument("artifact_dir", type=click.Path(file_okay=False))
def info(artifact_dir: str) -> None:
    """Verify an artifact and print its head kind, budgets, tasks and pins."""
    from laya.artifact import read_artifact_files

    try:
        files = read_artifact_files(artifact_dir)
        model = laya.Model(files, laya.VerifiedBase(files))  # the bytes just read, not a second read
    except LayaError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"artifact {artifact_dir}: head {model.kind}, digest {model.digest}")
    click.echo(f"  budgets: {model.config.sequence_budget} tokens, {model.config.option_budget} options")
    for task in model.tasks.values():
        click.echo(f"  task {task.name}: up to {task.max_options} options, T={task.temperature:g}, "
                   f"act>={task.act_threshold:g}, escalate if runner-up>={task.escalate_threshold:g}")
    for role, pinned in files.files.items():
        click.echo(f"  {role:16s} {pinned.sha256}  {pinned.path}")


main.add_command(base)
main.add_command(evolve)
main.add_command(train)

if __name__ == "__main__":
    main()
