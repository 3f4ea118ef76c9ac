"""The 3-process group never hangs: a rank that dies, raises or hangs ends in DistributedError naming
the phase and the rank, within a stated bound, every process reaped and nothing left behind.

Oracle: what the operating system says, not what the group reports. Every worker records its own
pid (``os.getpid()`` in a startup hook) in a directory of the test's, and this process's children
are polled from /proc while the cell runs; afterwards every such pid must be gone from the process
table (a zombie still answers ``kill(pid, 0)``, so unreaped counts as left), this process must have
no child it did not have before, and the temporary directory the group made its private directory
in must be empty. Faults are real: an exception raised inside the real
phase, a process really stuck in ``time.sleep`` and deaf to SIGTERM (so the shutdown must
go on to SIGKILL), a real SIGKILL; they are armed in one worker only
(``Faulty`` patches that worker's own ``kernel.run_blocks`` at its second prefix computation, so the
fault strikes mid-phase with point-to-point traffic under way; ``Startup`` fires before the
rendezvous). Blame is checked against the rank the fault was armed on, and the bound against the
group's stated timeouts plus its documented grace, dump and shutdown allowances.

tests/evolution/test_group_faults.py runs all nine phase x fault cells (about 10 s of CPU each);
the suite keeps the two hang cells the seeded defects need.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import tempfile
import threading
import time
from multiprocessing import resource_tracker
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import laya.evolution.kernel as kernel
from laya.errors import DistributedError
from laya.evolution.group import Group
from laya.evolution.kernel import produce, run_kernel
from laya.evolution.learner import learn
from laya.evolution.workspace import Experiment

FAULTY_RANK = 1
PHASES = {"rendezvous": None, "produce": produce, "run_kernel": run_kernel}
FAULTS = ("raises", "hangs", "killed")
HANG_S = 3600            # a hung rank sleeps this long: far past every bound below
JOB_TIMEOUT_S = 2.0      # the hang cells' job timeout, passed explicitly
RENDEZVOUS_TIMEOUT_S = 2.0
GLOO_TIMEOUT_S = 0.5     # below the rendezvous timeout: the waiting ranks' own timeouts fire first
SHUTDOWN_S = 10.0        # terminate, join up to 5 s, then kill: the documented stop allowance, doubled
FAST_S = 15.0            # a raise or a death is seen at once; this only absorbs a loaded machine


def fire(fault: str, log: Path) -> None:
    """Raise, hang or die, after writing when (CLOCK_MONOTONIC is one clock for every process)."""
    (log / "fault").write_text(repr(time.monotonic()))
    if fault == "raises":
        raise RuntimeError("injected fault")
    if fault == "hangs":  # deaf to SIGTERM as well, like a rank stuck in C code: only SIGKILL stops it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(HANG_S)
    if fault == "killed":
        os.kill(os.getpid(), signal.SIGKILL)


class Startup:
    """Per-rank startup hook: records the worker's own pid, rank and arrival, waits until all three
    have arrived (so a slow torch import is never mistaken for a hang), then on FAULTY_RANK fires."""

    def __init__(self, log: Path, fault: str | None = None):
        self.log, self.fault = Path(log), fault

    def __call__(self, rank: int) -> None:
        mine = self.log / f"{os.getpid()}.pid"
        mine.write_text(f"{rank} nan")
        deadline = time.monotonic() + 120
        while len(list(self.log.glob("*.pid"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        mine.write_text(f"{rank} {time.monotonic()!r}")  # when it goes on to the rendezvous
        if rank == FAULTY_RANK and self.fault is not None:
            fire(self.fault, self.log)


class Faulty:
    """The real phase function; on FAULTY_RANK the fault fires at its second prefix computation.

    Named like the function it wraps (functools.update_wrapper), as a wrapped function is: the
    group names the phase by the job's qualified name. Pickled by class, so it reaches the worker.
    """

    def __init__(self, fn, fault: str, log: Path):
        functools.update_wrapper(self, fn)
        self.fault, self.log = fault, Path(log)

    def __call__(self, rank: int, *args, **kwargs):
        if rank == FAULTY_RANK:
            real, calls = kernel.run_blocks, []

            def run_blocks(*a, **k):
                calls.append(1)
                if len(calls) == 2:
                    fire(self.fault, self.log)
                return real(*a, **k)

            kernel.run_blocks = run_blocks
        return self.__wrapped__(rank, *args, **kwargs)


def rank_sum(rank: int) -> list[float]:
    """A small collective job with a known answer: all_reduce of rank + 1 over the group."""
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
    return t.tolist()


def children() -> set[int]:
    """Pids whose parent is this process, zombies included (/proc/self/task/*/children)."""
    found = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:  # a thread that ended meanwhile
            pass
    return found


class ChildWatch:
    """Every child process of this one seen while the block runs, polled every 10 ms: workers
    stopped before they could record themselves (a start that fails early) are seen too."""

    def __enter__(self) -> "ChildWatch":
        self.before, self.seen, self._stop = children(), set(), threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.seen |= children()
            self._stop.wait(0.01)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.seen = (self.seen | children()) - self.before


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def recorded(log: Path) -> dict[int, tuple[int, float]]:
    """pid -> (rank, when it reached the rendezvous), as each worker wrote it."""
    return {int(p.stem): (int(p.read_text().split()[0]), float(p.read_text().split()[1])) for p in log.glob("*.pid")}


def bound_s(phase: str, fault: str) -> float:
    """The stated bound, counted from when it starts: the fault (raise, death), the job's start (job
    hang) or the first rank reaching the rendezvous (rendezvous hang); each ends with the shutdown."""
    if fault != "hangs":
        return FAST_S
    missed = RENDEZVOUS_TIMEOUT_S if phase == "rendezvous" else JOB_TIMEOUT_S
    return missed + 2.0 + 1.0 + SHUTDOWN_S  # + COMM_GRACE_S and DUMP_WAIT_S as documented


def fault_cell(phase: str, fault: str, ws, work: Path, gloo_timeout_s: float = GLOO_TIMEOUT_S) -> dict:
    """Fault one rank in one phase; check error, bound, reaping and cleanup; returns the figures.
    gloo_timeout_s is the rendezvous cell's timeout for every gloo operation and the store."""
    cell = f"{phase}-{fault}-{gloo_timeout_s:g}"
    log, tmp = work / f"log-{cell}", work / f"tmp-{cell}"
    log.mkdir()
    tmp.mkdir()
    resource_tracker.ensure_running()  # multiprocessing's own helper, started once and kept: not a leak
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp)  # the group's private directory is made here, away from others' runs
    try:
        with ChildWatch() as watch:
            if phase == "rendezvous":
                group = Group(3, timeout_s=gloo_timeout_s, rendezvous_timeout_s=RENDEZVOUS_TIMEOUT_S,
                              start_timeout_s=120.0, startup=Startup(log, fault))
                with pytest.raises(DistributedError) as info:
                    group.start()
            else:
                group = Group(3, timeout_s=60.0, startup=Startup(log))
                assert group.run(rank_sum) == [[6.0]] * 3  # a fresh group after the previous cell works
                # packets are never overwritten: each run of a phase writes into a directory of its own
                if fault == "hangs":  # unfaulted first, so the short job timeout is not spent on imports
                    group.run(PHASES[phase], ws.with_(packet_dir=work / f"warm-{phase}-{fault}"))
                job_start = time.monotonic()
                with pytest.raises(DistributedError) as info:
                    group.run(Faulty(PHASES[phase], fault, log), ws.with_(packet_dir=work / f"packets-{phase}-{fault}"),
                              timeout_s=JOB_TIMEOUT_S if fault == "hangs" else 60.0)
            ended = time.monotonic()
    finally:
        tempfile.tempdir = saved
    err, workers = info.value, recorded(log)
    left = [pid for pid in watch.seen | set(workers) if not gone(pid)]
    assert len(watch.seen) >= 3 and set(workers) <= watch.seen, (watch.seen, workers)
    assert sorted(rank for rank, _ in workers.values()) == [0, 1, 2], workers
    assert not left, f"processes left: {left}"
    assert not children() - watch.before, f"new child processes: {children() - watch.before}"
    assert not list(tmp.iterdir()), f"left in the temporary directory: {list(tmp.iterdir())}"
    assert err.ranks == (FAULTY_RANK,), str(err)
    assert f"rank {FAULTY_RANK} " in str(err), str(err)
    assert err.phase == (phase if phase == "rendezvous" else f"laya.evolution.kernel.{phase} on ranks [0, 1, 2]")
    assert str(err).startswith(f"{err.phase}: "), str(err)
    expected = {"raises": "raised RuntimeError: injected fault", "killed": "died (exit code -9)",
                "hangs": "gave no answer"}[fault]
    assert expected in str(err), str(err)
    if fault != "hangs":
        since = float((log / "fault").read_text())
    elif phase == "rendezvous":
        since = min(when for rank, when in workers.values() if rank != FAULTY_RANK)
        assert "in fire (test_learner_group.py:" in str(err), str(err)  # where the hung rank was
    else:
        since = job_start
        assert "in fire (test_learner_group.py:" in str(err), str(err)
    assert ended - since < bound_s(phase, fault), f"{ended - since:.1f} s"
    return {"phase": phase, "fault": fault, "error": type(err).__name__, "message": str(err),
            "seconds": ended - since, "left": len(left)}


@pytest.fixture(scope="module")
def long_workspace(evolution_workspaces):
    """A kernel job that runs for several seconds (many updates), so it can be interrupted."""
    return evolution_workspaces.fresh(Experiment(updates=4000))


@pytest.mark.laya_claim("learner.group.bounded")
def test_dead_rank_raises_and_stops_the_group(long_workspace):
    with Group(3, timeout_s=60.0) as group:
        pids = [info["pid"] for info in group.start_info]
        killer = threading.Timer(1.0, os.kill, (pids[1], signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        with pytest.raises(DistributedError, match=r"rank 1 died \(exit code -9\)"):
            group.run(run_kernel, long_workspace, snapshots=False)
        assert time.monotonic() - started < 30
        assert all(gone(pid) for pid in pids)


@pytest.mark.laya_claim("learner.group.bounded")
def test_late_job_raises_and_stops_the_worker(evolution_workspaces):
    ws = evolution_workspaces.produced("appended")
    late = ws.with_(exp=dataclasses.replace(ws.exp, updates=1_000_000))
    with Group(1, timeout_s=60.0) as group:
        started = time.monotonic()
        with pytest.raises(DistributedError, match=r"rank 0 gave no answer within 1.5 s"):
            group.run(learn, late, snapshots=False, ranks=[0], timeout_s=1.5)
        assert time.monotonic() - started < 15
        assert gone(group.start_info[0]["pid"])


@pytest.mark.laya_claim("learner.group.faults")
def test_hung_rank_is_named_and_nothing_is_left(evolution_workspaces, tmp_path):
    """The two hang cells the seeded defects need: before the rendezvous the waiting ranks' own
    store timeouts fire first and must not be blamed; in feature production the others are still
    blocked in gloo at the deadline, and only the stack dumps tell the hung rank from them. The
    second cell's fresh group answering rank_sum is the first cell's recovery check."""
    fault_cell("rendezvous", "hangs", None, tmp_path)
    fault_cell("produce", "hangs", evolution_workspaces.fresh(Experiment()), tmp_path)


@pytest.mark.laya_claim("learner.group.faults")
def test_a_rank_that_never_joins_is_bounded_by_the_rendezvous_timeout(tmp_path):
    """With gloo's own timeout far away (60 s), only the group's rendezvous bound can stop a rank
    that hangs before joining: every rank must have joined within rendezvous_timeout_s of the
    first reaching the rendezvous (not start_timeout_s, 120 s here)."""
    cell = fault_cell("rendezvous", "hangs", None, tmp_path, gloo_timeout_s=60.0)
    assert f"within {RENDEZVOUS_TIMEOUT_S:g} s of the first rank reaching the rendezvous" in cell["message"], cell


DUMP = """Thread 0x00007f0000000002 (most recent call first):
  File "/lib/threading.py", line 320 in wait
  File "/lib/queue.py", line 171 in get

Thread 0x00007f0000000001 (most recent call first):
  File "/x/kernel.py", line 88 in recv
  File "/x/kernel.py", line 140 in produce
"""


@pytest.mark.laya_claim("learner.group.faults")
def test_a_hung_ranks_place_is_its_serving_threads_innermost_frame_or_else_the_oldest_threads():
    """Where a hung rank is (from its faulthandler dump, as Python writes it: threads
    newest first, frames innermost first): the innermost frame of the thread that runs
    the worker's _serve; when a deep stack was cut before _serve, the last thread's."""
    from laya.evolution.group import _innermost

    assert _innermost(DUMP) == {"file": "/x/kernel.py", "line": "88", "name": "recv"}
    serving = DUMP.replace('line 140 in produce', 'line 140 in produce\n  File "/x/group.py", line 9 in _serve')
    first_serving = serving.split("\n\n")[1] + "\n\n" + DUMP.split("\n\n")[0]
    assert _innermost(first_serving) == {"file": "/x/kernel.py", "line": "88", "name": "recv"}
    assert _innermost("Fatal Python error: Aborted\n") is None
