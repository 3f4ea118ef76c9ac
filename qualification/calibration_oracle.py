"""A reference for calibration written from docs/artifact-v1.md, independent of the runtime.

The numbers come straight from the artifact's bytes (manifest -> head.json,
head.safetensors), not from the runtime's parsed config; linear-head scores are
recomputed in float64; the decision rule is the documented one. Encoder states
are an input here (the forward has its own claims).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load as load_safetensors


def pinned_bytes(directory: str | Path, role: str) -> bytes:
    """The bytes of the file the manifest lists for ``role``."""
    manifest = json.loads((Path(directory) / "manifest.json").read_bytes())
    entry = next(e for e in manifest["files"] if e["role"] == role)
    return (Path(directory) / entry["path"]).read_bytes()


@dataclass(frozen=True)
class TaskNumbers:
    index: int
    temperature: float
    act_threshold: float
    escalate_threshold: float
    never_acts: bool  # an uncertified trained task escalates everything


def task_numbers(directory: str | Path, name: str) -> TaskNumbers:
    tasks = json.loads(pinned_bytes(directory, "head_config"))["tasks"]
    index = next(i for i, t in enumerate(tasks) if t["name"] == name)
    task = tasks[index]
    certification = task.get("certification")
    return TaskNumbers(index, task["temperature"], task["act_threshold"], task["escalate_threshold"],
                       certification is not None and not certification["certified"])


def expected_decision(probabilities: Sequence[float], numbers: TaskNumbers) -> str:
    """`act` iff top >= act_threshold and runner-up < escalate_threshold (artifact-v1)."""
    if numbers.never_acts:
        return "escalate"
    top, runner_up = sorted(probabilities, reverse=True)[:2]
    return "act" if top >= numbers.act_threshold and runner_up < numbers.escalate_threshold else "escalate"


def readout_row(directory: str | Path, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Readout row ``index`` in float64, an int8 row dequantized by hand (q * scale)."""
    tensors = load_safetensors(pinned_bytes(directory, "head_weights"))
    if "readout.weight_int8" in tensors:
        weight = tensors["readout.weight_int8"][index].double() * tensors["readout.weight_scale"][index].double()
    else:
        weight = tensors["readout.weight"][index].double()
    return weight, tensors["readout.bias"][index].double()


def reference_probabilities(marker_states: torch.Tensor, directory: str | Path, numbers: TaskNumbers) -> torch.Tensor:
    """softmax(scores / temperature) in float64 for a linear head, from the marker states."""
    weight, bias = readout_row(directory, numbers.index)
    scores = marker_states.double() @ weight + bias
    z = scores / numbers.temperature
    e = (z - z.max()).exp()
    return e / e.sum()
