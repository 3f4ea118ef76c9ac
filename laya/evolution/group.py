"""A reusable group of worker processes: a gloo process group, or a single local worker.

Each worker pins its threads before any torch work, joins the group through a
file:// rendezvous in a fresh private directory (no guessed ports), then runs jobs
sent to it. Jobs and replies travel as torch.save bytes (tensors inline, no shared
memory). Every wait is bounded; a rank that dies, errs in a collective job, or
does not answer in time makes the group shut down all its processes and raise.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time
import traceback
import weakref
from datetime import timedelta
from multiprocessing.connection import wait

import torch

from laya.errors import DistributedError

from .numerics import pin_threads


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
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _serve(rank: int, world: int, init_file: str, conn, timeout_s: float) -> None:
    pin_threads()
    import torch.distributed as dist

    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout_s))
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
            reply = ("err", e, traceback.format_exc())
        try:
            payload = _dumps(reply)
        except Exception:  # an unpicklable error still has to arrive as a clear one
            payload = _dumps(("err", DistributedError(f"rank {rank}: {reply[1]!r}"), reply[-1]))
        conn.send_bytes(payload)
    if world > 1:
        dist.destroy_process_group()


def _terminate(procs: list, conns: list, tmp: str, graceful: bool) -> None:
    if graceful:
        for p, c in zip(procs, conns):
            if p.is_alive():
                try:
                    c.send_bytes(_dumps((None, (), {})))
                except OSError:
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


class Group:
    """world_size worker processes; run(fn, ...) calls fn(rank, ...) on the chosen ranks.

    A job on several ranks is collective: the first error from any rank shuts the
    group down (the others may be blocked on it). A job on one rank is local: its
    errors are re-raised and the group stays up. The group restarts on the next run.
    """

    def __init__(self, world_size: int = 3, *, timeout_s: float = 120.0, start_timeout_s: float = 180.0):
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
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
        tmp = tempfile.mkdtemp(prefix="laya-evolution-group-")
        init_file = os.path.join(tmp, "rendezvous")
        for rank in range(self.world_size):
            ours, theirs = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(rank, self.world_size, init_file, theirs, self.timeout_s),
                            daemon=True, name=f"laya-evolution-rank{rank}")
            p.start()
            theirs.close()
            self._procs.append(p)
            self._conns.append(ours)
        self._finalizer = weakref.finalize(self, _terminate, self._procs, self._conns, tmp, False)
        self._tmp = tmp
        replies = self._collect(range(self.world_size), time.monotonic() + self.start_timeout_s, "start", True)
        self.start_info = [replies[r][1] for r in range(self.world_size)]

    def run(self, fn, *args, ranks=None, timeout_s: float | None = None, **kwargs) -> list:
        """Results of fn on each rank in `ranks` (default: all), in that order."""
        if not self.alive:
            self.start()
        ranks = list(range(self.world_size)) if ranks is None else list(ranks)
        what = f"{fn.__module__}.{fn.__qualname__} on ranks {ranks}"
        message = _dumps((fn, args, kwargs))
        for r in ranks:
            self._conns[r].send_bytes(message)
        collective = len(ranks) > 1
        replies = self._collect(ranks, time.monotonic() + (timeout_s or self.timeout_s), what, collective)
        for r in ranks:
            if replies[r][0] == "err":
                self._raise(r, replies[r], what)
        return [replies[r][1] for r in ranks]

    def _collect(self, ranks, deadline: float, what: str, fail_fast: bool) -> dict:
        pending = {r: self._conns[r] for r in ranks}
        replies: dict = {}
        sentinels = {p.sentinel: r for r, p in enumerate(self._procs)}
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close(graceful=False)
                raise DistributedError(f"{what}: ranks {sorted(pending)} gave no answer in time; "
                                       "all processes of the group were stopped")
            ready = wait(list(pending.values()) + list(sentinels), timeout=min(remaining, 1.0))
            for r, conn in list(pending.items()):
                if conn in ready:
                    try:
                        replies[r] = _loads(conn.recv_bytes())
                    except (EOFError, OSError):
                        continue  # the process is gone; reported below
                    del pending[r]
                    if fail_fast and replies[r][0] == "err":
                        self.close(graceful=False)
                        self._raise(r, replies[r], what)
            dead = [(r, p.exitcode) for r, p in enumerate(self._procs) if p.exitcode is not None]
            if dead and (pending or fail_fast):
                self.close(graceful=False)
                r, code = dead[0]
                raise DistributedError(f"{what}: rank {r} died (exit code {code}); "
                                       "all processes of the group were stopped")
        return replies

    def _raise(self, rank: int, reply, what: str):
        error, tb = reply[1], reply[2]
        if isinstance(error, BaseException):
            error.add_note(f"raised in rank {rank} during {what}:\n{tb}")
            raise error
        raise DistributedError(f"rank {rank} failed during {what}:\n{tb}")

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
