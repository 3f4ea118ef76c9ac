"""The 3-process group never hangs: a dead rank or a late job ends in DistributedError, processes stopped."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import pytest

from laya.errors import DistributedError
from laya.evolution.group import Group
from laya.evolution.kernel import run_kernel
from laya.evolution.learner import learn
from laya.evolution.workspace import Experiment


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


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
        assert all(_gone(pid) for pid in pids)


@pytest.mark.laya_claim("learner.group.bounded")
def test_late_job_raises_and_stops_the_worker(evolution_workspaces):
    ws = evolution_workspaces.produced("appended")
    late = ws.with_(exp=dataclasses.replace(ws.exp, updates=1_000_000))
    with Group(1, timeout_s=60.0) as group:
        started = time.monotonic()
        with pytest.raises(DistributedError, match=r"ranks \[0\] gave no answer in time"):
            group.run(learn, late, snapshots=False, ranks=[0], timeout_s=1.5)
        assert time.monotonic() - started < 15
        assert _gone(group.start_info[0]["pid"])
