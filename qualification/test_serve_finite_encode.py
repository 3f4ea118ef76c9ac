"""serve.finite at its first stage: ``VerifiedBase.encode`` refuses encoder states that are
not finite (finite weights can still overflow: docs/artifact-v1.md) with NumericError naming
the stage, instead of returning them, and a sequence that never touches the overflowing row
still encodes.

Oracle: an embedding row of 3e38 written into a copy of the encoder weights (re-pinned),
whose sum with the position and type embeddings overflows float32.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import laya
from laya.errors import NumericError
from laya_qual.synth import copy_with_weights_edit

WORDS = "embeddings.word_embeddings.weight"


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=4, head_kind="float32")


@pytest.mark.laya_claim("serve.finite")
def test_encode_refuses_states_that_are_not_finite(pristine, tmp_path):
    def overflow(tensors):
        tensors[WORDS][7] = 3e38  # finite in the file; the embedding sum overflows float32

    base = laya.load_artifact_base(copy_with_weights_edit(pristine, tmp_path / "overflow", "encoder_weights",
                                                          overflow))
    with pytest.raises(NumericError) as refused:
        base.encode([2, 7, 3])
    assert refused.value.stage == "encoder states", str(refused.value)
    assert torch.isfinite(base.encode([2, 8, 3])).all()
