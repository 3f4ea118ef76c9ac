"""The `laya` command line: serve JSONL predictions, inspect artifacts, and (from
their own modules) train heads, import bases and check the evolution learner."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
from importlib import import_module

import click

import laya
from laya.errors import LayaError
from laya.interrupts import Interrupted, SignalExit
from laya.serving.jsonl import DEFAULT_BATCH_SIZE

# Exit status of `laya predict` when some lines failed (their error objects are in the output).
EXIT_LINES_FAILED = 3


class LazyGroup(click.Group):
    """Subcommands whose modules import torch are imported when they run, not to list
    them, so `laya --help` and `laya --version` answer without importing torch.
    Each lazy entry carries its help text (a test keeps it equal to the command's)."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            return getattr(import_module(self.lazy[name][0]), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        listed = {name: click.Command(name, help=self.lazy[name][1]) if name in self.lazy
                  else click.Group.get_command(self, ctx, name) for name in names}
        rows = [(name, command.get_short_help_str(limit)) for name, command in listed.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


LAZY_COMMANDS = {
    "base": ("laya.training.importer", "Laya bases."),
    "evolve": ("laya.evolution.cli", "Frozen-feature learner: compare with the distributed kernel, account for storage."),
    "train": ("laya.training.train_cli", "Train, calibrate, certify and export one head; print a summary."),
}


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(laya.__version__, "--version", "-V", prog_name="laya")
@click.pass_context
def main(ctx: click.Context) -> None:
    """laya: many calibrated task heads on one verified, frozen, shared encoder."""
    # Every subcommand: SIGINT/SIGTERM unwind (temporary outputs removed) and exit 130/143.
    ctx.obj = ctx.with_resource(SignalExit())


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
@click.option("--batch-size", default=DEFAULT_BATCH_SIZE, show_default=True, type=click.IntRange(min=1),
              help="most lines served by one encoder forward; fewer when no more input has arrived "
                   "(1 = one line at a time); the default gets most of batching's throughput while a "
                   "chunk's memory and latency stay small")
@click.option("--allow-errors", is_flag=True,
              help=f"exit 0 even when some lines failed (default: exit {EXIT_LINES_FAILED})")
def predict(base_dir: str, adapters: tuple[str, ...], cache_bytes: int, batch_size: int,
            allow_errors: bool) -> None:
    """Read JSONL requests on stdin ({"adapter", "task", "question", "options", "state"?}),
    write one JSONL result per input line on stdout, in order.

    A line that fails gets an error object on its output line and the run goes on; at
    the end two lines go to stderr, "cache: H hits, M misses, E evictions, N entries, B
    bytes" (the cache's counters after the run, all 0 without one) and "lines: L, failed:
    F", and the exit status is 3 if any line failed (unless --allow-errors), 1 if the
    adapters could not be opened or the results could not be written (a full disk, a
    closed pipe: one Error line saying how many lines were written).

    Lines are served in chunks of up to --batch-size, one forward each; a chunk never
    waits for a line that has not arrived. Each chunk's result lines are written and
    flushed together once it is served. SIGINT or SIGTERM stop the run with exit status
    130 or 143; the output then holds exactly the chunks finished before the signal,
    each line complete: a signal that comes while a chunk is being computed stops the
    run before any of its lines is written, one that comes while they are being written
    waits until the last is flushed."""
    from laya.serving.jsonl import encode_results, predict_chunks

    ctx = click.get_current_context()
    signals = ctx.find_object(SignalExit)  # main's: every subcommand runs under it
    try:
        opened = laya.open_adapters(_adapter_pairs(adapters), base=base_dir, cache_bytes=cache_bytes)
    except LayaError as exc:
        raise click.ClickException(str(exc)) from None
    out = sys.stdout.buffer
    lines = failed = 0
    try:
        for chunk in predict_chunks(opened, sys.stdin.buffer, batch_size):
            data = encode_results(chunk)
            with signals.deferred():  # a signal arriving mid-write waits for the chunk's last line
                _write_all(out, data, lines)
                lines += len(chunk)
                failed += sum("error" in result for result in chunk)
    except Interrupted as stop:
        click.echo(f"lines: {lines}, failed: {failed}; interrupted by {signal.Signals(stop.signum).name}", err=True)
        raise
    stats = opened.cache_stats()
    click.echo(f"cache: {stats.hits} hits, {stats.misses} misses, {stats.evictions} evictions, "
               f"{stats.entries} entries, {stats.bytes} bytes", err=True)
    click.echo(f"lines: {lines}, failed: {failed}", err=True)
    if failed and not allow_errors:
        sys.exit(EXIT_LINES_FAILED)


def _write_all(out, data: bytes, lines: int) -> None:
    """Write and flush one chunk's lines; an OS error (a full disk, a closed pipe) is one
    `Error:` line, and stdout is pointed at the null device so nothing at exit tries the
    failed write again (and prints a second error)."""
    try:
        rest = memoryview(data)
        while rest:  # a signal handled in a blocking write ends it early: write() returns the part written
            rest = rest[out.write(rest):]
        out.flush()
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):  # a stream without a descriptor has nothing to retry
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, out.fileno())
            os.close(null)
        raise click.ClickException(f"cannot write the results ({exc.strerror or exc}); the first {lines} "
                                   "lines were written") from None


def _written_act_threshold(served: float) -> float:
    """head.json's act threshold: an uncertified task is written with 1.0 and served with
    +inf (docs/artifact-v1.md), which JSON cannot carry."""
    return 1.0 if served == math.inf else served


@main.command()
@click.argument("artifact_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="one JSON object (two-space indents) instead of text")
def info(artifact_dir: str, as_json: bool) -> None:
    """Verify an artifact and print its head kind, budgets, tasks and pins.

    As text: a line for the artifact (head kind, digest), one for the budgets, one per task
    (options, temperature, act and escalate thresholds as served) and one per pinned file
    (role, sha256, path)."""
    from laya.artifact.manifest import read_artifact_files

    try:
        files = read_artifact_files(artifact_dir)
        model = laya.Model(files, laya.VerifiedBase(files))  # the bytes just read, not a second read
    except LayaError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({
            "artifact": artifact_dir, "head": model.kind, "digest": model.digest,
            "budgets": {"sequence": model.config.sequence_budget, "options": model.config.option_budget},
            "tasks": [{"name": t.name, "maxOptions": t.max_options, "temperature": t.temperature,
                       "actThreshold": _written_act_threshold(t.act_threshold),
                       "escalateThreshold": t.escalate_threshold}
                      for t in model.tasks.values()],
            "files": [{"role": role, "path": str(p.path), "sha256": p.sha256} for role, p in files.files.items()],
        }, indent=2))
        return
    click.echo(f"artifact {artifact_dir}: head {model.kind}, digest {model.digest}")
    click.echo(f"  budgets: {model.config.sequence_budget} tokens, {model.config.option_budget} options")
    for task in model.tasks.values():
        click.echo(f"  task {task.name}: up to {task.max_options} options, T={task.temperature:g}, "
                   f"act>={task.act_threshold:g}, escalate if runner-up>={task.escalate_threshold:g}")
    for role, pinned in files.files.items():
        click.echo(f"  {role:16s} {pinned.sha256}  {pinned.path}")

if __name__ == "__main__":
    main()
