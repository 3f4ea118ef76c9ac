"""Scores and served probabilities of an exported readout over stored features.

Calibration and certification must judge the head the runtime will serve, bit
for bit: so they score with the runtime's own readout modules (an int8 head is
judged dequantized exactly as it serves, not as the float32 head it came from),
the same gather-then-matvec as ``HeadNetwork.scores``, and the runtime's
``calibrated`` rule. A qualification claim checks the equality end to end.
"""

from __future__ import annotations

from typing import Mapping

import torch

from laya.serving.head_network import Int8Readout, Readout


def readout(kind: str, tensors: Mapping[str, torch.Tensor]) -> Readout | Int8Readout:
    """The runtime readout module of ``kind`` holding the export tensors (``readout.*``)."""
    rows, hidden = tensors["readout.weight_int8" if kind == "int8" else "readout.weight"].shape
    module = Int8Readout(rows, hidden) if kind == "int8" else Readout(rows, hidden)
    module.requires_grad_(False)
    module.load_state_dict({k.removeprefix("readout."): v for k, v in tensors.items()}, strict=True, assign=True)
    return module


def option_scores(module: Readout | Int8Readout, markers: torch.Tensor, task_index: int) -> torch.Tensor:
    """One score per option from the stored marker states, as ``HeadNetwork.scores`` computes it."""
    weight, bias = module.row(task_index)
    with torch.inference_mode():
        return markers[list(range(markers.shape[0]))] @ weight + bias
