"""Writing a trained head as an artifact-v1 directory that attaches to its base.

The five base files are copied byte for byte from the base artifact the features
came from (after checking its pins against the base in hand), so the export
shares that base by construction; the export is then attached with
``load_artifact_with_base`` before it is reported written.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import torch
from safetensors.torch import save as save_safetensors

from laya.artifact.manifest import BASE_ROLES, MAX_JSON_BYTES, read_artifact_files, write_artifact_files
from laya.serving.base import VerifiedBase
from laya.artifact.binding import canonical_json
from laya.serving.config import Calibration, Certification
from laya.errors import ArtifactError
from laya.serving.loading import Head, check_base_pins, load_artifact_with_base
from laya.training.quantize import quantize_int8
from laya.training.head_training import LinearHead

EXPORT_KINDS = ("float32", "int8")
HEAD_FILES = {"head_config": "head.json", "head_weights": "head.safetensors"}


def head_tensors(head: LinearHead, kind: str) -> dict[str, torch.Tensor]:
    """The head-weights tensors of ``kind``; int8 is quantized from the float32 readout."""
    if kind not in EXPORT_KINDS:
        raise ValueError(f"export kind must be one of {EXPORT_KINDS}, got {kind!r}")
    tensors = {"readout.bias": head.bias.detach().to(torch.float32).contiguous()}
    if kind == "int8":
        q, scale = quantize_int8(head.weight.detach())
        tensors.update({"readout.weight_int8": q.contiguous(), "readout.weight_scale": scale.contiguous()})
    else:
        tensors["readout.weight"] = head.weight.detach().to(torch.float32).contiguous()
    return tensors


def task_entry(name: str, max_options: int, temperature: float, act_threshold: float,
               calibration: Calibration | None, certification: Certification | None) -> dict[str, Any]:
    """One head.json task; an uncertified task is written with act_threshold 1.0 (parsed as never-act)."""
    entry: dict[str, Any] = {"name": name, "max_options": max_options, "temperature": temperature,
                             "act_threshold": act_threshold, "escalate_threshold": 1.0}
    if calibration is not None:
        entry["calibration"] = asdict(calibration)
    if certification is not None:
        entry["certification"] = asdict(certification)
    return entry


def export_head(out_dir: str | os.PathLike, *, base_dir: str | os.PathLike, base: VerifiedBase, kind: str,
                tensors: dict[str, torch.Tensor], tasks: Sequence[dict[str, Any]], sequence_budget: int,
                option_budget: int) -> Head:
    """Write the artifact and return it attached to ``base`` (which proves it attaches)."""
    base_files = read_artifact_files(base_dir, require_head=False)
    check_base_pins(base_files, base)
    config = {"kind": kind, "sequence_budget": sequence_budget, "option_budget": option_budget,
              "head_layers": 0, "head_attention_heads": 0, "head_intermediate_size": 0, "tasks": list(tasks)}
    files = {role: (base_files[role].path, base_files[role].data) for role in BASE_ROLES}
    files["head_config"] = (HEAD_FILES["head_config"], canonical_json(config))
    if len(files["head_config"][1]) > MAX_JSON_BYTES:  # refused before anything is written, not on loading it
        raise ArtifactError(f"would be {len(files['head_config'][1])} bytes for {len(tasks)} task(s), over the "
                            f"{MAX_JSON_BYTES}-byte limit (docs/artifact-v1.md, Limits)",
                            file=HEAD_FILES["head_config"])
    files["head_weights"] = (HEAD_FILES["head_weights"], save_safetensors(tensors))
    written = write_artifact_files(Path(out_dir), files)
    return load_artifact_with_base(written, base)
