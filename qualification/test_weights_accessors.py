"""weights.immutable through the documented accessors: the tensors ``weight_tensors()``
hands out (the base's and a head's; "read them, never write them") are the served ones, so
a write through them is detected at the next prediction, which raises LayaError
(docs/decisions.md, "Immutability").
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import laya
from laya.errors import LayaError


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=4, head_kind="float32")


@pytest.mark.laya_claim("weights.immutable")
@pytest.mark.parametrize("target", ["base", "head"])
def test_a_write_through_weight_tensors_is_detected(pristine, tmp_path, target):
    directory = Path(shutil.copytree(pristine, tmp_path / "artifact"))
    model = laya.load_artifact(directory)
    request = laya.Request(sorted(model.tasks)[0], "is it", ("yes", "no"))
    model.predict(request)
    tensors = (model.base if target == "base" else model).weight_tensors()
    assert tensors, "no tensors handed out"
    with torch.no_grad():
        next(iter(tensors.values())).add_(0.0)
    with pytest.raises(LayaError, match="modified in place"):
        model.predict(request)
