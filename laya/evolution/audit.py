"""Certification: audit a packet's features against the committed parent and input.

A feature digest only names bytes. The audit recomputes the prefix for the
packet's microbatch in one process from the committed parent file, requires
bitwise-equal streams, and then writes a certificate binding the feature digest,
parent digest and input digest. Learners that require certification refuse
packets without a matching certificate, and name its digest in every update.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from laya.artifact.atomic import write_file
from laya.artifact.binding import canonical_json, json_digest, read_hashed, require, sha256
from laya.errors import FeaturePacketError

from .numerics import use_device
from .packets import expected_binding, read_packet
from .parent import HEAD_NAMES, read_parent
from .prefix import full_prefix
from .workspace import Workspace, read_tokenizer_digest

CERT_FILE = "certificate.json"
FORMAT = "laya-feature-certificate-v1"
CERTIFIED = ("packet", "features", "parent", "input", "format")  # what a certificate binds, compared in this order


def audit(rank: int, ws: Workspace, indices) -> dict[int, str]:
    """Recompute each microbatch's prefix on the independent single-process path; certify or refuse.

    Returns {microbatch index: certificate digest}.
    """
    device = use_device(ws.exp.device)
    cfg, state, parent_digest = read_parent(ws.parent_file)
    if parent_digest != ws.parent_digest:
        raise FeaturePacketError("the parent file is not the committed parent", field="parent", file=str(ws.parent_file))
    return {i: _certify(ws, i, cfg, state, parent_digest, device) for i in indices}


def _certify(ws: Workspace, index: int, cfg, state: dict, parent_digest: str, device: torch.device) -> str:
    directory = ws.packet(index)
    mb = ws.microbatches[index]
    expected = expected_binding(ws, mb, tokenizer_digest=read_tokenizer_digest(ws.tokenizer_file),
                                head_state={k: state[k] for k in HEAD_NAMES})
    streams, binding = read_packet(directory, expected, ws.exp.layout.streams)
    recomputed = full_prefix(cfg, state, ws.exp.cut, mb.input_ids, "reference" in streams, device)
    for name, tensor in recomputed.items():
        if not torch.equal(tensor, streams[name]):
            raise FeaturePacketError(f"stream {name!r} is not what the committed parent computes for this input",
                                     field="features", file=str(directory))
    certificate = {"format": FORMAT, "packet": json_digest(binding), "features": binding["features"],
                   "parent": parent_digest, "input": mb.input_digest(), "auditor": "single-process prefix recompute"}
    data = canonical_json(certificate)
    write_file(directory / CERT_FILE, data, replace=True)  # whole or not at all; a re-audit replaces it
    return sha256(data)


def check_certificate(directory: Path, binding: dict, input_digest: str) -> str:
    """The certificate digest for this packet, or a refusal naming field 'certificate'."""
    path = Path(directory) / CERT_FILE
    if not path.exists():
        raise FeaturePacketError("packet is not certified", field="certificate", file=str(path))
    data, digest = read_hashed(path)
    cert = json.loads(data)
    claims = {"packet": json_digest(binding), "features": binding["features"], "parent": binding["parent"],
              "input": input_digest, "format": FORMAT}
    require(CERTIFIED, claims, cert, lambda _, wrong: FeaturePacketError(
        f"certificate does not match this packet: {[k for k in wrong if k != 'format'] or ['format']}",
        field="certificate", file=str(path)))
    return digest
