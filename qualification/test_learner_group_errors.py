"""learner.group.errors: how the worker group ends, or keeps going, on the errors of docs/evolution.md,
"Failure handling" and "Faults of the 3-process group" other than the ones learner.group.bounded
and learner.group.faults cover (a death, a hang mid-job).

Oracle: the documented outcome of each fault, with blame checked against the rank the fault was
armed on, and the operating system's view of the workers (each worker's pid no longer answers
kill(pid, 0), zombies included; no child process left; the private directory removed). Faults
are real: an exception raised in one rank's job; a gloo receive that times out on a group whose
operations wait 0.5 s, while the peer answers or waits in a barrier on it; an error object that
cannot be pickled; a spawn that fails after the first worker started; a start deadline that
passes while the worker still imports torch; the orchestrator's end of a worker's pipe closing.
Groups of 1 and 2 ranks keep the cost to one or two torch imports per start.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from multiprocessing import resource_tracker
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from laya.errors import DistributedError
from laya.evolution.group import COMM_GRACE_S, DUMP_WAIT_S, Group, waited_on, waiting_on
from laya_qual.suite.test_learner_group import SHUTDOWN_S, children, gone


def raises_on_rank_1(rank: int) -> int:
    if rank == 1:
        raise ValueError("not this rank's input")
    return rank


def recv_unanswered(rank: int) -> int:
    """Rank 1 waits to receive from rank 0, on a group whose operations give up after 0.5 s; rank 0
    never sends and answers at once."""
    quick = dist.new_group(timeout=timedelta(seconds=0.5))
    if rank == 1:
        with waiting_on("receive from rank 0"):
            dist.recv(torch.zeros(1), src=0, group=quick)
    return rank


def recv_while_the_peer_waits(rank: int) -> int:
    """As recv_unanswered, but rank 0 waits for rank 1 in a barrier of the group's own (60 s)."""
    quick = dist.new_group(timeout=timedelta(seconds=0.5))
    if rank == 1:
        with waiting_on("receive from rank 0"):
            dist.recv(torch.zeros(1), src=0, group=quick)
    else:
        dist.barrier()
    return rank


def both_waits_fail(rank: int) -> int:
    """Each rank waits to receive from the other, which never sends: rank 1 on a group whose
    operations give up after 0.5 s, rank 0 on one that gives up after 1.5 s. Both lose their
    peers, rank 1 first, within COMM_GRACE_S of each other."""
    quick, slower = dist.new_group(timeout=timedelta(seconds=0.5)), dist.new_group(timeout=timedelta(seconds=1.5))
    with waiting_on(f"receive from rank {1 - rank}"):
        dist.recv(torch.zeros(1), src=1 - rank, group=quick if rank == 1 else slower)
    return rank


class Unpicklable(Exception):
    def __init__(self):
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def raise_unpicklable(rank: int) -> None:
    raise Unpicklable()


def in_a_process_group(rank: int) -> bool:
    return dist.is_initialized()


def leave_slowly(rank: int, mark: str) -> None:
    """Registers an exit handler that takes a second, then leaves a mark: only a worker that
    ends by itself runs it to its end (SIGTERM's default action ends a process at once)."""
    def finish() -> None:
        time.sleep(1.0)
        Path(mark).write_text(str(os.getpid()))
    atexit.register(finish)


class Mark:
    """Startup hook: leaves a file named for the rank, so the test sees that it ran first."""

    def __init__(self, directory: Path):
        self.directory = directory

    def __call__(self, rank: int) -> None:
        (self.directory / f"rank{rank}").write_text(str(os.getpid()))


class Quiet:
    """Startup hook that does nothing."""

    def __call__(self, rank: int) -> None:
        pass


class ShippedOnce:
    """A startup hook that can be shipped to one worker only: pickling it again fails, as a spawn
    that fails part-way (no memory, the process limit) does, after the first worker started
    (whose pid it records then)."""

    def __init__(self):
        self.before, self.started = {p.pid for p in mp.active_children()}, []

    def __reduce__(self):
        self.started = sorted({p.pid for p in mp.active_children()} - self.before)
        if self.started:
            raise OSError("injected: the second worker cannot be spawned")
        return Quiet, ()


@pytest.fixture
def private_tmp(tmp_path):
    """Where the group makes its private directory during the test, away from others' runs."""
    saved, tempfile.tempdir = tempfile.tempdir, str(tmp_path)
    try:
        yield tmp_path
    finally:
        tempfile.tempdir = saved


@pytest.fixture(scope="module")
def pair():
    group = Group(2, timeout_s=60.0)
    try:
        yield group
    finally:
        group.close()


def stopped(group: Group, job) -> tuple[DistributedError, float]:
    """The DistributedError group.run(job) raises and the seconds the job took, every worker of the
    group gone afterwards. The group is first asked a small job, which starts it afresh when an
    earlier job stopped it."""
    assert group.run(in_a_process_group) == [True] * group.world_size
    pids = [info["pid"] for info in group.start_info]
    started = time.monotonic()
    with pytest.raises(DistributedError) as raised:
        group.run(job)
    seconds = time.monotonic() - started
    assert all(gone(pid) for pid in pids) and not group.alive, pids
    return raised.value, seconds


@pytest.mark.laya_claim("learner.group.errors")
def test_a_rank_that_raises_in_a_collective_job_stops_the_group(pair):
    err, _ = stopped(pair, raises_on_rank_1)
    phase = f"{raises_on_rank_1.__module__}.raises_on_rank_1 on ranks [0, 1]"
    assert str(err) == (f"{phase}: rank 1 raised ValueError: not this rank's input; "
                        "all processes of the group were stopped")
    assert (err.phase, err.ranks) == (phase, (1,))
    cause = err.__cause__
    assert isinstance(cause, ValueError) and "traceback in rank 1:" in cause.__notes__[-1]
    assert 'raise ValueError("not this rank\'s input")' in cause.__notes__[-1]  # the worker's own traceback
    # the group restarts on the next run: fresh workers, as many as before, and no stopped one kept
    assert pair.run(in_a_process_group) == [True, True] and pair.alive and len(pair.start_info) == 2


@pytest.mark.laya_claim("learner.group.errors")
@pytest.mark.parametrize("job", [recv_unanswered, recv_while_the_peer_waits], ids=["peer-answers", "peer-waits"])
def test_the_rank_whose_wait_fails_is_named_not_the_peer_it_left_waiting(pair, job):
    """When rank 0 waits on rank 1 in turn, the group waits COMM_GRACE_S for another cause, then
    reads rank 0's stack: waiting in torch.distributed, so rank 1's failed wait is the cause."""
    err, seconds = stopped(pair, job)
    phase = f"{job.__module__}.{job.__qualname__} on ranks [0, 1]"
    assert str(err).startswith(f"{phase}: rank 1 lost its peers (while waiting to receive from rank 0): "), str(err)
    assert str(err).endswith("; all processes of the group were stopped") and err.ranks == (1,)
    note = err.__cause__.__notes__[-1]  # the failed wait's own traceback, from rank 1
    assert note.startswith("traceback in rank 1:\n") and f", in {job.__name__}\n" in note, note
    if job is recv_while_the_peer_waits:
        assert seconds > 0.5 + COMM_GRACE_S


@pytest.mark.laya_claim("learner.group.errors")
def test_an_error_that_cannot_be_pickled_arrives_by_name_and_the_group_stays(evolution_group):
    with pytest.raises(DistributedError) as raised:
        evolution_group.run(raise_unpicklable, ranks=[2])
    assert str(raised.value) == "rank 2: Unpicklable('holds a lock')"
    assert evolution_group.run(in_a_process_group) == [True] * 3


@pytest.mark.laya_claim("learner.group.errors")
def test_a_spawn_that_fails_part_way_leaves_nothing(private_tmp):
    hook = ShippedOnce()
    group = Group(3, startup=hook)
    with pytest.raises(OSError, match="injected: the second worker cannot be spawned"):
        group.start()
    assert len(hook.started) == 1 and gone(hook.started[0])  # the first worker was started, then stopped
    assert not group.alive and list(private_tmp.iterdir()) == []


@pytest.mark.laya_claim("learner.group.errors")
def test_a_group_whose_private_directory_was_removed_under_it_still_closes(private_tmp):
    """A temporary-files cleaner may remove the private directory of a long-lived group: closing
    the group still stops its worker, without an error."""
    group = Group(1, timeout_s=60.0)
    group.start()
    [private] = private_tmp.iterdir()
    shutil.rmtree(private)
    group.close()
    assert gone(group.start_info[0]["pid"]) and not group.alive and list(private_tmp.iterdir()) == []


@pytest.mark.laya_claim("learner.group.errors")
def test_a_graceful_close_lets_each_worker_end_by_itself(private_tmp, tmp_path_factory):
    """close() asks each worker to leave and waits for it (up to 5 s) before stopping it: a
    worker's own exit handlers run to their end, and it is gone when close() returns."""
    mark = tmp_path_factory.mktemp("marks") / "exited"
    group = Group(1, timeout_s=60.0)
    group.run(leave_slowly, str(mark))
    pid = group.start_info[0]["pid"]
    group.close()
    assert mark.read_text() == str(pid) and gone(pid) and list(private_tmp.iterdir()) == []


@pytest.mark.laya_claim("learner.group.errors")
def test_a_group_whose_worker_died_between_jobs_still_closes_gracefully(private_tmp, tmp_path_factory):
    """A worker may die between jobs (here killed from outside the group): close() raises nothing,
    still lets the living worker end by itself, and leaves no process and no private directory."""
    mark = tmp_path_factory.mktemp("marks") / "exited"
    group = Group(2, timeout_s=60.0)
    group.run(leave_slowly, str(mark), ranks=[1])
    dead, living = (group.start_info[rank]["pid"] for rank in (0, 1))
    os.kill(dead, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    while group.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not group.alive, "the killed worker still runs"
    group.close()
    assert mark.read_text() == str(living), "the living worker did not end by itself"
    assert gone(dead) and gone(living) and list(private_tmp.iterdir()) == []


@pytest.mark.laya_claim("learner.group.errors")
def test_when_every_rank_lost_its_peers_the_first_to_lose_them_is_named(pair):
    """Only communication errors arrive, no death and no rank's own error: the rank whose
    wait failed first is named (rank 1 here, not the lowest rank), with its own traceback."""
    err, _ = stopped(pair, both_waits_fail)
    phase = f"{both_waits_fail.__module__}.both_waits_fail on ranks [0, 1]"
    assert str(err).startswith(f"{phase}: rank 1 lost its peers (while waiting to receive from rank 0): "), str(err)
    assert err.ranks == (1,) and err.__cause__.__notes__[-1].startswith("traceback in rank 1:\n")


@pytest.mark.laya_claim("learner.group.errors")
def test_a_group_dropped_without_closing_stops_its_workers_when_collected(private_tmp):
    """A group its owner drops without closing it (docs/evolution.md: a `weakref.finalize`
    stops them on garbage collection): its workers are stopped and its private directory removed."""
    group = Group(2, timeout_s=60.0)
    group.start()
    pids = [info["pid"] for info in group.start_info]
    assert len(pids) == 2 and not any(gone(pid) for pid in pids)
    del group
    gc.collect()
    assert [gone(pid) for pid in pids] == [True, True] and list(private_tmp.iterdir()) == []


LONE_ORCHESTRATOR = """
import os, sys
from pathlib import Path
from laya.evolution.group import Group
from laya_qual.suite.test_learner_group_errors import Mark, in_a_process_group
group = Group(1, startup=Mark(Path(sys.argv[1])))
print(group.run(in_a_process_group), flush=True)
os._exit(0)  # dies without closing the group: no finalizer, nothing stops the worker
"""


def ended(pid: int) -> bool:
    """Gone, or a zombie no parent reaps (an orphan's parent may be a PID 1 that never waits)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.laya_claim("learner.group.errors")
def test_a_lone_worker_needs_no_process_group_and_exits_when_its_orchestrator_goes(tmp_path):
    """An orchestrator that dies leaves its worker's pipe closed, and the worker ends by
    itself."""
    marks, scratch, output = tmp_path / "marks", tmp_path / "tmp", tmp_path / "output"
    marks.mkdir()
    scratch.mkdir()
    with output.open("w") as out:  # a file, not a pipe the worker would inherit and hold open
        done = subprocess.run([sys.executable, "-c", LONE_ORCHESTRATOR, str(marks)], stdout=out,
                              stderr=subprocess.STDOUT, timeout=120, env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 0 and output.read_text().strip() == "[False]", output.read_text()
    worker = int((marks / "rank0").read_text())  # the startup hook ran in the worker
    deadline = time.monotonic() + SHUTDOWN_S
    while not ended(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not ended(worker):
        os.kill(worker, signal.SIGKILL)  # leave no process behind, then fail
        pytest.fail(f"worker {worker} still ran {SHUTDOWN_S} s after its orchestrator died")


@pytest.mark.laya_claim("learner.group.errors")
def test_a_start_past_its_deadline_names_the_rank_with_no_stack(private_tmp):
    """The worker is still importing torch at 0.05 s, before it can dump a stack: none is read, and
    the rank is named as not answering all the same."""
    resource_tracker.ensure_running()  # multiprocessing's own helper, started once and kept: not a leak
    before = children()
    group = Group(1, start_timeout_s=0.05)
    started = time.monotonic()
    with pytest.raises(DistributedError) as raised:
        group.start()
    assert str(raised.value) == ("rendezvous: rank 0 gave no answer within 0.05 s (rank 0 stack unavailable); "
                                 "all processes of the group were stopped")
    assert raised.value.ranks == (0,)
    assert time.monotonic() - started < 0.05 + DUMP_WAIT_S + SHUTDOWN_S
    assert children() <= before and list(private_tmp.iterdir()) == []


@pytest.mark.laya_claim("learner.group.errors")
def test_a_failed_wait_keeps_its_error_and_notes_the_peer():
    timeout = RuntimeError("Timed out waiting 500ms for recv operation to complete")
    with pytest.raises(RuntimeError) as raised:
        with waiting_on("receive from rank 1"):
            raise timeout
    assert raised.value is timeout and waited_on(timeout) == " (while waiting to receive from rank 1)"
    assert waited_on(RuntimeError("no wait noted")) == ""
