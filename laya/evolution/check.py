"""Both arms on one workspace: distributed production, the kernel, the learner, the comparison."""

from __future__ import annotations

from dataclasses import dataclass

from .audit import audit
from .compare import compare
from .group import Group
from .kernel import LEARNER, produce, run_kernel
from .learner import check_token_weights, learn
from .workspace import Workspace


@dataclass(frozen=True)
class ArmsResult:
    production: list[dict]       # per rank
    kernel: list[dict]           # per rank; kernel[LEARNER]["records"]
    learner: dict
    certificates: dict[int, str]
    rows: list[dict]

    @property
    def equal(self) -> bool:
        return all(r["equal"] for r in self.rows)


def run_arms(group: Group, ws: Workspace, *, certify: bool = True, learner_group: Group | None = None,
             timeout_s: float | None = None) -> ArmsResult:
    """Produce packets (distributed), audit them, run the kernel and the learner, compare.

    The learner runs on learner_group's only rank when given (a fresh process for
    clean memory figures), else on the group's learner rank, alone.
    """
    indices = sorted(set(ws.exp.schedule()))
    for index in indices:  # refused before any rank computes: the kernel arm would train on NaN
        check_token_weights(ws.microbatches[index].weights, index)
    production = group.run(produce, ws, timeout_s=timeout_s)
    certificates = group.run(audit, ws, indices, ranks=[0], timeout_s=timeout_s)[0] if certify else {}
    kernel = group.run(run_kernel, ws, timeout_s=timeout_s)
    where, rank = (learner_group, 0) if learner_group is not None else (group, LEARNER)
    learner = where.run(learn, ws, require_certificate=certify, ranks=[rank], timeout_s=timeout_s)[0]
    rows = compare(kernel[LEARNER]["records"], learner["records"])
    return ArmsResult(production, kernel, learner, certificates, rows)
