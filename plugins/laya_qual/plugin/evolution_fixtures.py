"""Fixtures for the laya.evolution claims: one 3-process group per session.

Starting the group (three torch imports and a rendezvous) costs seconds, so every
test and every Hypothesis example reuses it; a job that kills it (dead rank,
timeout) makes the next job start a fresh one. Packets for the refusal and
certification claims are produced once per session and copied before tampering.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def evolution_group(request: pytest.FixtureRequest):
    """Started for `--laya-device` (on CUDA: a GPU per rank and NCCL when there are three),
    so the benchmark claim's CUDA jobs hand off as a CUDA run would; CPU jobs run on it too."""
    from laya.evolution.group import Group

    group = Group(3, device=request.config.getoption("laya_device"), timeout_s=120.0)
    try:
        # Started here rather than by the first job: a start that fails is the fixture's error in
        # every test that needs the group, and the ranks it keeps are the fixture's, serving all
        # of them (a coverage measurement labels what they run with the fixture, not one test).
        group.start()
        yield group
    finally:
        group.close()


class EvolutionWorkspaces:
    """Prepared workspaces under one session directory, packets produced on request."""

    def __init__(self, root: Path, group):
        self.root, self.group = root, group
        self._produced: dict[str, object] = {}

    def fresh(self, exp, **kwargs):
        from laya.evolution.workspace import prepare

        return prepare(exp, Path(tempfile.mkdtemp(dir=self.root)), **kwargs)

    def produced(self, layout: str):
        """A tiny-config workspace of the given layout whose packets exist (cached per session)."""
        if layout not in self._produced:
            from laya.evolution.kernel import produce
            from laya.evolution.layouts import Layout
            from laya.evolution.workspace import Experiment

            ws = self.fresh(Experiment(layout=Layout(layout)))
            self.group.run(produce, ws)
            self._produced[layout] = ws
        return self._produced[layout]


@pytest.fixture(scope="session")
def evolution_workspaces(tmp_path_factory, evolution_group) -> EvolutionWorkspaces:
    return EvolutionWorkspaces(tmp_path_factory.mktemp("laya-evolution"), evolution_group)
