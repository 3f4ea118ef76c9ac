"""`python -m laya.evolution.run check`: one rank of the 3-rank check, started by torchrun.

    torchrun --nproc-per-node 3 -m laya.evolution.run check --layout appended --workdir DIR

Each process torchrun starts is one rank: it pins its threads, takes its device
(--device cuda: the node's LOCAL_RANK-th GPU when the node has one per process, else
cuda:0; laya.evolution.placement), joins the process group through env:// (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, set by torchrun; gloo, plus NCCL on CUDA), and runs
`check.run_arms` itself, with `Ranks` in place of the in-process `Group`: the same jobs,
in the same order, on the same ranks. Rank 0 prepares the workspace in --workdir and
sends it to the others, which must see the same files at the same path (shared
storage across nodes). The learner rank prints what `laya evolve check` prints.
Exit status: 0 bitwise equal, 1 any difference, 2 a named error.
"""

from __future__ import annotations

import atexit
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

import click
import torch.distributed as dist

from laya.artifact.binding import sha256
from laya.errors import DistributedError, LayaError

from .check import run_arms
from .cli import check_experiment, check_options, report_check
from .group import raised_waiting_on_peers, waited_on
from .kernel import LEARNER
from .numerics import pin_threads
from .placement import backend, place
from .workspace import prepare

WORLD = 3  # owner 0, owner 1, learner (kernel.OWNER_A, OWNER_B, LEARNER)
_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _phase(fn, ranks: list[int]) -> str:
    module = sys.modules[fn.__module__].__spec__  # this module runs as __main__ under torchrun -m
    return f"{module.name if module else fn.__module__}.{fn.__qualname__} on ranks {ranks}"


class Ranks:
    """This process's rank of a torchrun-launched group, with `Group.run`'s signature.

    run(fn, ...) calls fn(rank, ...) here when this rank is in `ranks` and returns every
    chosen rank's result, in order, on every rank (as the Group hands them to its
    orchestrator). A job on one rank sends the others its result or its error, so every
    rank raises the same DistributedError naming the job and the rank. A rank that raises
    in a job on several ranks raises here at once; its process then exits, which ends its
    peers' waits with a communication error. Every wait for a peer is a gloo operation,
    bounded by the process group's timeout (given at init; `timeout_s` is not per job here).
    """

    def __init__(self, rank: int):
        self.rank = rank

    def run(self, fn, *args, ranks=None, timeout_s: float | None = None, **kwargs) -> list:
        ranks = list(range(WORLD)) if ranks is None else list(ranks)
        phase = _phase(fn, ranks)
        if len(ranks) == 1:
            return [self._alone(fn, args, kwargs, ranks[0], phase)]
        try:
            mine = fn(self.rank, *args, **kwargs) if self.rank in ranks else None
            every = [None] * WORLD
            dist.all_gather_object(every, mine)
        except Exception as e:
            raise self._failed(phase, e) from e
        return [every[r] for r in ranks]

    def _alone(self, fn, args, kwargs, owner: int, phase: str):
        reply, error = [None], None
        if self.rank == owner:
            try:
                reply = [("ok", fn(self.rank, *args, **kwargs))]
            except Exception as e:
                error = e
                reply = [("err", f"{type(e).__name__}: {e}")]
        try:
            dist.broadcast_object_list(reply, src=owner)
        except Exception as e:
            raise self._failed(phase, e) from e
        status, value = reply[0]
        if status == "err":
            raise DistributedError(f"{phase}: rank {owner} raised {value}", phase=phase, ranks=[owner]) from error
        return value

    def _failed(self, phase: str, error: Exception) -> DistributedError:
        """This rank's own error, or its wait on a peer that failed (a vanished peer, a timeout)."""
        what = (f"lost its peers{waited_on(error)}, a peer's process or connection ended or --timeout-s "
                "passed: " if raised_waiting_on_peers(error) else "raised ")
        return DistributedError(f"{phase}: rank {self.rank} {what}{type(error).__name__}: {error}",
                                phase=phase, ranks=[self.rank])


def _prepare(rank: int, exp, workdir: Path):
    if workdir.exists() and any(workdir.iterdir()):
        raise LayaError(f"--workdir {workdir} is not empty (each check needs a fresh workspace)")
    return prepare(exp, workdir)


def _blind(rank: int, ws) -> str | None:
    """Why this rank does not read the committed parent at the workspace's path; None when it does."""
    try:
        digest = sha256(Path(ws.parent_file).read_bytes())
    except OSError as e:
        return f"rank {rank} cannot read {ws.parent_file}: {e.strerror}"
    return None if digest == ws.parent_digest else f"rank {rank} reads another file at {ws.parent_file}"


def _launched_rank() -> int:
    missing = [name for name in _ENV if name not in os.environ]
    if missing:
        raise LayaError(f"environment {', '.join(missing)} not set: start this module with torchrun "
                        f"(torchrun --nproc-per-node {WORLD} -m laya.evolution.run check ...)")
    world = int(os.environ["WORLD_SIZE"])
    if world != WORLD:
        raise LayaError(f"WORLD_SIZE is {world}; the check needs exactly {WORLD} ranks "
                        "(owner 0, owner 1, learner), e.g. torchrun --nproc-per-node 3, "
                        "or --nnodes 2 with 2 and 1 processes")
    return int(os.environ["RANK"])


@click.group()
def main() -> None:
    """One rank of a torchrun-launched evolution check."""


@main.command()
@check_options
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="empty or new directory for the workspace; shared storage, same path, across nodes")
@click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), default=1800.0, show_default=True,
              help="gloo's timeout for every operation and the store")
def check(layout: str, config_name: str, updates: int, microbatch: int, microbatches: int, device: str,
          json_path: Path | None, workdir: Path, timeout_s: float) -> None:
    """Run both arms on the 3 ranks torchrun started; exit 1 on any bitwise difference, 2 on an error."""
    pin_threads()  # before any torch work, as every Group worker does
    try:
        rank = _launched_rank()
        exp = check_experiment(layout, config_name, updates, microbatch, microbatches, device)
        place(device, int(os.environ.get("LOCAL_RANK", rank)), int(os.environ.get("LOCAL_WORLD_SIZE", WORLD)))
        dist.init_process_group(backend(device), init_method="env://", timeout=timedelta(seconds=timeout_s))
    except (LayaError, ValueError, dist.DistError) as e:
        _fail(f"launch: {e}")
    try:
        result, exp = _check(Ranks(rank), exp, workdir.resolve())
    except (LayaError, dist.DistError) as e:  # DistError: a peer vanished or a gloo wait timed out
        _fail(f"rank {rank}: {type(e).__name__}: {e}")
    finally:
        dist.destroy_process_group()
    try:
        if rank == LEARNER:
            report_check(result, exp, config_name, json_path)  # exits 1 on any difference
        status = 0 if result.equal else 1
    except SystemExit as stop:
        status = stop.code
    _leave(status)


def _leave(status: int) -> NoReturn:
    """Exit without the interpreter's teardown, once the exit handlers have run (they
    flush and save what must be saved). With the process group destroyed, freeing torch's
    distributed objects at teardown now and then aborts a rank after its work is done
    and reported ("terminate called without an active exception", SIGABRT), which
    torchrun reports as that rank's failure."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _fail(message: str):
    print(f"laya.evolution.run: {message}", file=sys.stderr)
    sys.exit(2)


def _check(ranks: Ranks, exp, workdir: Path):
    ws = ranks.run(_prepare, exp, workdir, ranks=[0])[0]
    blind = {rank: why for rank, why in enumerate(ranks.run(_blind, ws)) if why is not None}
    if blind:
        raise DistributedError("workspace: " + "; ".join(blind.values()) + " (--workdir must be shared "
                               "storage, mounted at the same path on every node)", phase="workspace",
                               ranks=sorted(blind))
    return run_arms(ranks, ws), exp


if __name__ == "__main__":
    main()
