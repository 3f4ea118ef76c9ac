"""The phase x fault cells of the 3-process group that the suite's claim learner.group.faults does
not run (it runs the two hang cells before and after the rendezvous): a rank that raises, hangs or
is SIGKILLed at the rendezvous, in feature production or in the kernel's updates ends in
DistributedError naming the phase and the rank, within the stated bound, every worker reaped,
nothing left in the private directory. The oracle and the fault injection are the suite's
(laya_qual.suite.test_learner_group). Every job-phase cell starts with a new group answering a
collective job, which is the recovery check for whatever cell ran before it on the machine; each
cell prints its row of the fault table (pytest -s).
"""

from __future__ import annotations

import pytest

from laya.evolution.workspace import Experiment, prepare
from laya_qual.suite.test_learner_group import FAULTS, PHASES, fault_cell

IN_THE_SUITE = {("rendezvous", "hangs"), ("produce", "hangs")}
CELLS = [(phase, fault) for phase in PHASES for fault in FAULTS if (phase, fault) not in IN_THE_SUITE]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return prepare(Experiment(), tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
@pytest.mark.parametrize("phase, fault", CELLS, ids=[f"{p}-{f}" for p, f in CELLS])
def test_fault_cell(phase, fault, workspace, tmp_path):
    row = fault_cell(phase, fault, workspace, tmp_path)
    head = row["message"].split("; all processes")[0]
    print(f"\n| {phase} | {fault} | {row['error']}: {head} | {row['seconds']:.2f} s | {row['left']} |")
