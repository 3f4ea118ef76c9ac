"""The check launched by torchrun gives bitwise the results of the in-process Group.

A real `python -m torch.distributed.run --standalone --nproc-per-node 3` starts three
ranks of `laya.evolution.run` (gloo over env://, the c10d TCPStore); the reference is
`run_arms` on a `Group` in this process, on an experiment built here from the
documented defaults of `laya evolve check`. Every per-update float (both arms' loss and
gradient norm) must be the same float, and each arm's tail parameters and Adam state
after every update the same digest. About 15 s per layout (four interpreters importing
torch): the suite's claim `learner.torchrun` runs one short torchrun; these full checks of
both layouts are project tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from laya.artifact.binding import state_digest
from laya.evolution.check import run_arms
from laya.evolution.cli import flat_state
from laya.evolution.group import Group, waited_on, waiting_on
from laya.evolution.kernel import LEARNER
from laya.evolution.layouts import Layout
from laya.evolution.workspace import Experiment, prepare

FIELDS = ("update", "microbatch", "kernel_loss", "learner_loss", "kernel_grad_norm", "learner_grad_norm", "equal")


@pytest.fixture(scope="module")
def group():
    with Group(3, timeout_s=300) as g:
        yield g


def _torchrun(tmp_path, layout: str) -> dict:
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                           "-m", "laya.evolution.run", "check", "--layout", layout, "--workdir", str(tmp_path / "ws"),
                           "--json", str(out), "--timeout-s", "300"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  equal" in done.stdout and done.stdout.count("  yes") == 8, done.stdout  # the learner rank's table
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["appended", "fixed-tail"])
def test_torchrun_is_bitwise_the_in_process_group(tmp_path, group, layout):
    launched = _torchrun(tmp_path, layout)
    reference = run_arms(group, prepare(Experiment(layout=Layout(layout)), tmp_path / "reference"))
    assert reference.equal and launched["equal"] is True
    assert [[row[f] for f in FIELDS] for row in launched["rows"]] == \
           [[row[f] for f in FIELDS] for row in reference.rows]  # floats compare exactly; JSON round-trips them
    digests = [{"kernel": state_digest(flat_state(k)), "learner": state_digest(flat_state(l))}
               for k, l in zip(reference.kernel[LEARNER]["records"], reference.learner["records"])]
    assert launched["state_digests"] == digests
    assert launched["handoff_device"] == "cpu"  # CPU ranks: gloo carries the hand-offs
    assert len({d["kernel"] for d in digests}) == 8  # every update changes the state: the digests see it


LAUNCHED = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}


@pytest.mark.parametrize("env, args, says", [
    (LAUNCHED | {"WORLD_SIZE": "2"}, [], "WORLD_SIZE is 2"),
    ({}, [], "start this module with torchrun"),
    pytest.param(LAUNCHED, ["--device", "cuda"], "Invalid value for --device: device cuda: torch",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
], ids=["world-2", "no-torchrun", "no-cuda"])
@pytest.mark.slow
def test_wrong_launch_is_a_named_error(tmp_path, env, args, says):
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    done = subprocess.run([sys.executable, "-m", "laya.evolution.run", "check", "--layout", "appended",
                           "--workdir", str(tmp_path / "ws"), *args], env=clean | env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "ws").exists()  # refused before any work


def test_a_failed_wait_names_the_peer_and_keeps_the_error():
    """What a hung rank's peers print under torchrun, which has no stack-dump blame: the rank
    each was waiting on (tried by hand with a SIGSTOPped rank: docs/evolution.md, Bounds)."""
    timeout = RuntimeError("Timed out waiting 15000ms for recv operation to complete")
    with pytest.raises(RuntimeError) as raised:
        with waiting_on("receive from rank 1"):
            raise timeout
    assert raised.value is timeout and waited_on(timeout) == " (while waiting to receive from rank 1)"
    assert waited_on(RuntimeError("no wait noted")) == ""
