"""A reusable group of worker processes: a process group (gloo; NCCL too on GPUs), or a single local worker.

Each worker pins its threads before any torch work, joins the group through a
file:// rendezvous in a fresh private directory (no guessed ports), then runs jobs
sent to it. Jobs and replies travel as torch.save bytes (tensors inline, no shared
memory). Every wait is bounded; a rank that dies, errs in a collective job, or
does not answer in time makes the group shut down all its processes, remove the
private directory and raise DistributedError naming the phase and the rank.

Blame goes to the cause, not to the ranks it left waiting: a communication error (one
raised inside torch.distributed: a vanished peer, a gloo or store timeout) waits
COMM_GRACE_S for a death or a rank's own error to explain it, and a missed
deadline names the pending ranks that were not blocked in torch.distributed, read
from a stack dump each worker writes on SIGUSR1 (faulthandler).
"""

from __future__ import annotations

import faulthandler
import io
import multiprocessing as mp
import os
import re
import resource
import shutil
import signal
import tempfile
import time
import traceback
import weakref
from contextlib import contextmanager
from datetime import timedelta
from multiprocessing.connection import wait

import torch
import torch.distributed as dist

from laya.errors import DistributedError

from .numerics import pin_threads
from .placement import backend, place

RENDEZVOUS = "rendezvous"
COMM_GRACE_S = 2.0   # how long a rank's communication error waits for its cause (a death, a raise)
DUMP_WAIT_S = 1.0    # how long a missed deadline waits for the pending ranks' stack dumps
_WAITING = "while waiting to "
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)')


def _dumps(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _loads(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=False)  # our own workers' replies only


def peak_rss_bytes() -> int:
    """Peak resident bytes of this process's own address space (VmHWM).

    ru_maxrss is not used where /proc exists: Linux carries it across fork and exec,
    so a spawned worker would report its orchestrator's peak as its own.
    """
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
    except (OSError, StopIteration):  # pragma: no cover — platform guard: no /proc VmHWM (not Linux)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _stack_file(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank{rank}.stack")


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks}"


def _waiting_in_torch_distributed(filename: str) -> bool:
    return f"{os.sep}torch{os.sep}distributed{os.sep}" in filename


def raised_waiting_on_peers(error: BaseException) -> bool:
    """Whether ``error`` came from inside torch.distributed, i.e. while this rank waited on
    its peers (a vanished peer, a timeout) rather than from its own work."""
    frames = traceback.extract_tb(error.__traceback__)
    return isinstance(error, dist.DistError) or bool(frames and _waiting_in_torch_distributed(frames[-1].filename))


@contextmanager
def waiting_on(what: str):
    """Note on an error raised inside the block which peer this rank was waiting for
    ("send to rank 1"), so a timeout names the peer it waited on; the error itself, its
    type and its traceback are kept (it is still a communication error)."""
    try:
        yield
    except Exception as e:
        e.add_note(f"{_WAITING}{what}")
        raise


def waited_on(error: BaseException) -> str:
    """The wait `waiting_on` noted on `error`, as " (while waiting to send to rank 1)"; else empty."""
    return "".join(f" ({note})" for note in getattr(error, "__notes__", ()) if note.startswith(_WAITING))


def _send_error(conn, rank: int, error: BaseException) -> None:
    """Reply ("err", error, traceback, communication): communication when it was raised inside
    torch.distributed, i.e. while this rank waited on its peers (a vanished peer, a timeout)."""
    comm = raised_waiting_on_peers(error)
    tb = traceback.format_exc()
    try:
        payload = _dumps(("err", error, tb, comm))
    except Exception:  # an unpicklable error still has to arrive as a clear one
        payload = _dumps(("err", DistributedError(f"rank {rank}: {error!r}"), tb, comm))
    conn.send_bytes(payload)


def _serve(rank: int, world: int, device: str, directory: str, conn, timeout_s: float, startup) -> None:
    stacks = open(_stack_file(directory, rank), "w")  # kept open: faulthandler writes to its fd
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    pin_threads()
    try:
        if startup is not None:
            startup(rank)
        place(device, rank, world)
        conn.send_bytes(_dumps(("joining", None)))
        if world > 1:
            dist.init_process_group(backend(device), init_method=f"file://{os.path.join(directory, 'rendezvous')}",
                                    rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s))
    except BaseException as e:  # noqa: BLE001 - reported to the orchestrator, which stops the group
        _send_error(conn, rank, e)
        try:
            conn.recv_bytes()  # stay until stopped: exiting now would read as the cause
        except (EOFError, OSError):  # pragma: no cover — defensive: the orchestrator stops this worker as soon as
            # it reads the error; the pipe closes first only if the orchestrator dies in between
            pass
        return
    conn.send_bytes(_dumps(("ok", {"pid": os.getpid(), "rss": peak_rss_bytes()})))
    while True:
        try:
            fn, args, kwargs = _loads(conn.recv_bytes())
        except EOFError:  # the orchestrator went away
            break
        if fn is None:
            break
        try:
            reply = ("ok", fn(rank, *args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - reported to the orchestrator, which decides
            _send_error(conn, rank, e)
            continue
        conn.send_bytes(_dumps(reply))
    if world > 1:
        dist.destroy_process_group()


def _terminate(procs: list, conns: list, tmp: str, graceful: bool) -> None:
    if graceful:
        for p, c in zip(procs, conns):
            if p.is_alive():
                try:
                    c.send_bytes(_dumps((None, (), {})))
                except OSError:  # pragma: no cover — defensive: a worker that dies between is_alive() and the send
                    pass
        for p in procs:
            p.join(timeout=5)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    for c in conns:
        c.close()
    shutil.rmtree(tmp, ignore_errors=True)


def _innermost(dump: str) -> dict | None:
    """The innermost frame of the worker's main thread in a faulthandler dump: the thread running
    _serve, or, when a deep stack was cut before reaching it, the last one listed (the oldest)."""
    threads = [[m.groupdict() for m in _FRAME.finditer(section)] for section in dump.split("\n\n")]
    threads = [frames for frames in threads if frames]
    main = [frames for frames in threads if any(f["name"] == "_serve" for f in frames)] or threads[-1:]
    return main[0][0] if main else None



class Group:
    """world_size worker processes; run(fn, ...) calls fn(rank, ...) on the chosen ranks.

    A job on several ranks is collective: the first error from any rank shuts the
    group down (the others may be blocked on it) and raises DistributedError naming
    the job and the rank. A job on one rank is local: its errors are re-raised as
    they are and the group stays up. The group restarts on the next run.

    Bounds: starting takes at most start_timeout_s; once the first rank reaches the
    rendezvous, every rank must have joined within rendezvous_timeout_s; a job
    answers within its timeout_s (default: the group's, which is also gloo's
    timeout for every operation). A failure then costs at most COMM_GRACE_S and
    DUMP_WAIT_S more, plus the shutdown (terminate, then kill after 5 s).

    device ("cpu" or "cuda") places every worker before it joins the group
    (laya.evolution.placement: on CUDA rank r takes cuda:r when there are enough GPUs,
    else all share cuda:0) and picks the backend (gloo, or cpu:gloo,cuda:nccl); jobs
    for CUDA experiments need a group started for CUDA to send GPU to GPU.

    startup, when given, is a picklable function called as startup(rank) in every
    worker before it joins the rendezvous (per-rank setup; the fault tests use it
    to make one rank raise, hang or die there).
    """

    def __init__(self, world_size: int = 3, *, device: str = "cpu", timeout_s: float = 120.0,
                 start_timeout_s: float = 180.0, rendezvous_timeout_s: float = 60.0, startup=None):
        self.world_size = world_size
        self.device = device
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.rendezvous_timeout_s = rendezvous_timeout_s
        self.startup = startup
        self._procs: list = []
        self._conns: list = []
        self._finalizer = None
        self.start_info: list[dict] = []

    @property
    def alive(self) -> bool:
        return bool(self._procs) and all(p.is_alive() for p in self._procs)

    def start(self) -> None:
        self.close()
        ctx = mp.get_context("spawn")
        tmp = self._tmp = tempfile.mkdtemp(prefix="laya-evolution-group-")
        self._finalizer = weakref.finalize(self, _terminate, self._procs, self._conns, tmp, False)
        try:
            for rank in range(self.world_size):
                ours, theirs = ctx.Pipe()
                p = ctx.Process(target=_serve, args=(rank, self.world_size, self.device, tmp, theirs, self.timeout_s,
                                                     self.startup),
                                daemon=True, name=f"laya-evolution-rank{rank}")
                self._conns.append(ours)
                p.start()
                theirs.close()
                self._procs.append(p)
        except BaseException:  # a spawn that fails (or Ctrl-C) still stops the others and removes tmp
            self.close(graceful=False)
            raise
        replies = self._collect(range(self.world_size), self.start_timeout_s, RENDEZVOUS, True)
        self.start_info = [replies[r][1] for r in range(self.world_size)]

    def run(self, fn, *args, ranks=None, timeout_s: float | None = None, **kwargs) -> list:
        """Results of fn on each rank in `ranks` (default: all), in that order."""
        if not self.alive:
            self.start()
        ranks = list(range(self.world_size)) if ranks is None else list(ranks)
        message = _dumps((fn, args, kwargs))
        for r in ranks:
            self._conns[r].send_bytes(message)
        phase = f"{fn.__module__}.{fn.__qualname__} on ranks {ranks}"
        replies = self._collect(ranks, timeout_s or self.timeout_s, phase, len(ranks) > 1)
        for r in ranks:
            if replies[r][0] == "err":
                error, tb = replies[r][1], replies[r][2]
                error.add_note(f"raised in rank {r} during {phase}:\n{tb}")
                raise error
        return [replies[r][1] for r in ranks]

    def _collect(self, ranks, timeout_s: float, phase: str, collective: bool) -> dict:
        """Every rank's reply, or the group stopped and DistributedError naming the cause."""
        start = time.monotonic()
        pending = {r: self._conns[r] for r in ranks}
        replies: dict = {}
        lost: dict = {}  # rank -> (error, traceback, when): communication errors, waiting for a cause
        joined = None    # when the first rank reached the rendezvous
        sentinels = {p.sentinel: r for r, p in enumerate(self._procs)}
        while pending:
            now = time.monotonic()
            limits = [(start + timeout_s, f"within {timeout_s:g} s")]
            if joined is not None:
                limits.append((joined + self.rendezvous_timeout_s,
                               f"within {self.rendezvous_timeout_s:g} s of the first rank reaching the rendezvous"))
            if lost:
                limits.append((min(when for _, _, when in lost.values()) + COMM_GRACE_S,
                               f"within {COMM_GRACE_S:g} s of a peer's communication error"))
            limit, bound = min(limits)
            if now >= limit:
                self._no_answer(phase, sorted(pending), bound, lost)
            ready = wait(list(pending.values()) + list(sentinels), timeout=min(limit - now, 1.0))
            for r, conn in list(pending.items()):
                if conn not in ready:
                    continue
                try:
                    reply = _loads(conn.recv_bytes())
                except (EOFError, OSError):
                    continue  # the process is gone; reported below
                if reply[0] == "joining":
                    joined = joined or time.monotonic()
                    continue
                del pending[r]
                if collective and reply[0] == "err":
                    if reply[3]:
                        lost[r] = (reply[1], reply[2], time.monotonic())
                        continue
                    self._fail(phase, [r], f"rank {r} raised {type(reply[1]).__name__}: {reply[1]}",
                               cause=reply[1], tb=reply[2])
                replies[r] = reply
            dead = [(r, p.exitcode) for r, p in enumerate(self._procs) if p.exitcode is not None]
            if dead and (pending or collective):
                r, code = dead[0]
                self._fail(phase, [r], f"rank {r} died (exit code {code})")
        if lost:
            self._lost(phase, lost)
        return replies

    def _no_answer(self, phase: str, pending: list[int], bound: str, lost: dict):
        """Stop the group after a missed deadline, blaming the pending ranks not waiting in torch.distributed."""
        where = self._where(pending)
        busy = [r for r in pending if where[r] is None or not _waiting_in_torch_distributed(where[r]["file"])]
        if not busy and lost:  # every pending rank waits on its peers: the rank whose own wait failed first
            self._lost(phase, lost)
        blamed = busy or pending
        stuck = "; ".join(f"rank {r} " + ("stack unavailable" if where[r] is None else
                                          f"in {where[r]['name']} ({os.path.basename(where[r]['file'])}:{where[r]['line']})")
                          for r in blamed)
        waiting = [r for r in pending if r not in blamed]
        also = (f"; ranks {waiting} were waiting in torch.distributed" if waiting else "") + \
               (f"; ranks {sorted(lost)} lost their peers" if lost else "")
        self._fail(phase, blamed, f"{_ranks(blamed)} gave no answer {bound} ({stuck}){also}")

    def _lost(self, phase: str, lost: dict):
        r, (error, tb, _) = min(lost.items(), key=lambda item: item[1][2])
        self._fail(phase, [r], f"rank {r} lost its peers{waited_on(error)}: {type(error).__name__}: {error}",
                   cause=error, tb=tb)

    def _where(self, ranks: list[int]) -> dict:
        """Each live rank's innermost frame, from the stack dump it writes on SIGUSR1 (once: the group then stops)."""
        asked = []
        for r in ranks:
            if self._procs[r].is_alive():  # pragma: no branch — defensive: a pending rank that dies between
                # the loop's death check and this deadline check (a race no test can time)
                try:
                    os.kill(self._procs[r].pid, signal.SIGUSR1)
                    asked.append(r)
                except OSError:  # pragma: no cover — defensive: the pid is our unreaped child; kill cannot fail
                    pass
        where = dict.fromkeys(ranks)
        deadline = time.monotonic() + DUMP_WAIT_S
        while asked and time.monotonic() < deadline:
            time.sleep(0.05)
            for r in list(asked):
                try:
                    with open(_stack_file(self._tmp, r)) as fh:
                        where[r] = _innermost(fh.read())
                except OSError:
                    pass
                if where[r] is not None:
                    asked.remove(r)
        return where

    def _fail(self, phase: str, ranks: list[int], what: str, cause=None, tb: str | None = None):
        self.close(graceful=False)
        if cause is not None and tb:
            cause.add_note(f"traceback in rank {ranks[0]}:\n{tb}")
        raise DistributedError(f"{phase}: {what}; all processes of the group were stopped",
                               phase=phase, ranks=ranks) from cause

    def close(self, graceful: bool = True) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            _terminate(self._procs, self._conns, self._tmp, graceful)
        self._procs, self._conns, self._finalizer = [], [], None

    def __enter__(self) -> "Group":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
