"""run_arms refuses a microbatch whose token weights define no objective before any work."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from laya.errors import FeaturePacketError
from laya.evolution.check import run_arms
from laya.evolution.workspace import Experiment, prepare


@pytest.mark.parametrize("fill", [0.0, -1.0, float("nan")], ids=["all-zero", "negative", "nan"])
def test_weights_without_an_objective_are_refused_before_any_rank_computes(tmp_path, fill):
    ws = prepare(Experiment(), tmp_path)
    index = ws.exp.schedule()[-1]
    microbatches = list(ws.microbatches)
    microbatches[index] = dataclasses.replace(microbatches[index],
                                              weights=torch.full_like(microbatches[index].weights, fill))
    with pytest.raises(FeaturePacketError) as refused:  # no group: any work would fail otherwise
        run_arms(None, ws.with_(microbatches=tuple(microbatches)))
    assert refused.value.field == "objective_weights" and f"microbatch {index}" in str(refused.value)
