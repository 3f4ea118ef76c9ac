"""train.export.int8: the int8 export is exactly docs/training.md's quantization rule.

Oracle: the rule re-stated in NumPy float32 (np.rint rounds half to even), applied to the
float32 readout; the export's tensors (laya.training.export.head_tensors, what `laya train --kind int8`
writes) must equal it bitwise. Readouts are drawn with rows of zeros and rows whose maximum
makes scale exactly 1, so ties at .5 occur; explicit examples pin both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from laya.training.export import head_tensors
from laya.training.head_training import LinearHead

VALUES = st.floats(-1e3, 1e3, width=32, allow_subnormal=False) | st.sampled_from([0.5, 1.5, 2.5, -2.5, 126.5])


def reference_int8(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """docs/training.md's int8 rule, row by row, in float32."""
    scale = (np.abs(weight).max(axis=1) / np.float32(127.0)).astype(np.float32)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


@st.composite
def readouts(draw) -> np.ndarray:
    """[tasks, hidden] float32 readouts; some rows zero, some with maximum 127 (scale exactly 1)."""
    tasks, hidden = draw(st.integers(1, 4)), draw(st.integers(1, 8))
    weight = draw(arrays(np.float32, (tasks, hidden), elements=VALUES))
    for row in range(tasks):
        kind = draw(st.sampled_from(["drawn", "zero", "unit scale"]))
        if kind == "zero":
            weight[row] = 0
        elif kind == "unit scale":
            weight[row, draw(st.integers(0, hidden - 1))] = draw(st.sampled_from([127.0, -127.0]))
            weight[row] = np.clip(weight[row], -127, 127)
    return weight


@pytest.mark.laya_claim("train.export.int8")
@given(weight=readouts())
@example(weight=np.array([[127.0, 2.5, 3.5, -2.5, 0.5, -0.5]], dtype=np.float32))  # ties: 2, 4, -2, 0, -0
@example(weight=np.zeros((2, 3), dtype=np.float32))  # rows of zeros: scale 1, q 0
@example(weight=np.array([[0.0, 0.0], [1e-3, -2e-3]], dtype=np.float32))
def test_an_int8_export_is_the_documented_quantization(weight):
    bias = torch.arange(weight.shape[0], dtype=torch.float32) / 3 + 0.1  # no float16 or bfloat16 holds these
    exported = head_tensors(LinearHead(tuple(f"t{i}" for i in range(len(weight))), torch.from_numpy(weight.copy()),
                                       bias), "int8")
    q, scale = reference_int8(weight)
    assert sorted(exported) == ["readout.bias", "readout.weight_int8", "readout.weight_scale"]
    assert exported["readout.weight_int8"].dtype == torch.int8
    assert exported["readout.weight_scale"].dtype == torch.float32
    assert torch.equal(exported["readout.weight_int8"], torch.from_numpy(q)), (exported["readout.weight_int8"], q)
    assert torch.equal(exported["readout.weight_scale"], torch.from_numpy(scale)), (exported, scale)
    assert torch.equal(exported["readout.bias"], bias)
