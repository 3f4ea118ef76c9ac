"""Feature packets: prefix features of one exact microbatch, on disk, bound to everything that made them.

A packet directory holds features.safetensors (one tensor per stream) and binding.json.
Reading verifies the feature bytes against the bound digest, then compares every
binding field with what the reader expects (laya.artifact.binding.require) and refuses, naming
the first differing field, on any difference. A digest only says which bytes these
are; audit.py says who made them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from laya.artifact.atomic import new_directory
from laya.artifact.binding import (canonical_json, json_digest, numeric_profile, read_hashed, require, sha256, state_digest,
                          tensor_digest)
from laya.errors import FeaturePacketError

from .data import Microbatch
from .workspace import Workspace

FORMAT = "laya-feature-packet-v1"
# Bound to the reader's own inputs, compared in this order; then the digest of the feature bytes.
INPUTS = ("parent", "tokenizer", "token_ids", "padding", "numeric_profile", "cut_layer", "layout", "labels",
          "objective_weights", "head_state")
FIELDS = INPUTS + ("features",)
FEATURES_FILE, BINDING_FILE = "features.safetensors", "binding.json"


def expected_binding(ws: Workspace, mb: Microbatch, *, tokenizer_digest: str, head_state: dict) -> dict:
    """Every binding field except the feature digest, as the caller's own inputs determine it."""
    return {
        "parent": ws.parent_digest,
        "tokenizer": tokenizer_digest,
        "token_ids": mb.token_ids_digest(),
        "padding": json_digest(mb.padding()),
        "numeric_profile": numeric_profile(ws.exp.device),
        "cut_layer": ws.exp.cut,
        "layout": ws.exp.layout.describe(),
        "labels": tensor_digest(mb.labels),
        "objective_weights": {"token_weights": tensor_digest(mb.weights),
                              "retention": float(ws.exp.retention).hex()},
        "head_state": state_digest(head_state),
    }


def write_packet(directory: Path, binding: dict, streams: dict[str, torch.Tensor]) -> str:
    """Write features and manifest; returns the packet digest (digest of the full binding).

    The packet directory appears whole or not at all (laya.artifact.atomic: built beside it, synced,
    renamed), so a learner reading shared storage never finds features without their
    binding, and an existing packet is refused (OutputExists), never overwritten."""
    data = st_save({k: v.cpu().contiguous() for k, v in streams.items()})  # streams may arrive on a GPU
    full = dict(binding, features=sha256(data))
    manifest = {"format": FORMAT, "binding": full,
                "streams": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in streams.items()}}
    with new_directory(directory) as building:
        (building / FEATURES_FILE).write_bytes(data)
        (building / BINDING_FILE).write_bytes(canonical_json(manifest))
    return json_digest(full)


def read_manifest(directory: Path) -> dict:
    path = Path(directory) / BINDING_FILE
    try:
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise FeaturePacketError(f"cannot read packet manifest: {e}", file=str(path)) from e
    if manifest.get("format") != FORMAT or set(manifest.get("binding", {})) != set(FIELDS):
        raise FeaturePacketError("not a laya-feature-packet-v1 manifest", file=str(path))
    return manifest


def read_packet(directory: Path, expected: dict, streams: tuple[str, ...]) -> tuple[dict[str, torch.Tensor], dict]:
    """Load a packet's streams, refusing on the first differing binding field (all are listed)."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    binding = manifest["binding"]
    feature_file = directory / FEATURES_FILE
    data, digest = read_hashed(feature_file)
    if digest != binding["features"]:
        raise FeaturePacketError("feature bytes do not match the bound digest", field="features", file=str(feature_file))
    require(INPUTS, expected, binding, lambda first, differing: FeaturePacketError(
        f"packet was made for different inputs; differing fields: {differing} "
        f"(packet {binding[first]!r}, expected {expected[first]!r})", field=first, file=str(directory / BINDING_FILE)))
    tensors = st_load(data)
    if set(tensors) != set(streams):
        raise FeaturePacketError(f"streams {sorted(tensors)} but the layout needs {sorted(streams)}",
                                 field="layout", file=str(feature_file))
    # fresh torch-owned memory, exactly like a receive buffer on the distributed path
    return {k: torch.empty_like(v).copy_(v) for k, v in tensors.items()}, binding
