"""learner.rejects.manifest and learner.certify.parent-file: a packet directory that is no
laya-feature-packet-v1 packet, or a parent file that is no longer the committed one, is refused by
name before any tensor is used.

Oracle: docs/evolution.md, "Binding" and "Packets on shared storage": a packet is
`mb-NNNN/features.safetensors` (one float32 tensor per stream: `features`, plus `reference` for the
fixed-tail control) and `binding.json` (format laya-feature-packet-v1, the binding's eleven fields
listed there, stream shapes); the audit checks the parent file is the committed one first. The
binding fields below are the doc's list, written out; every packet is written byte for byte here
(safetensors and JSON), not by the runtime's writer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as st_save

from laya.errors import FeaturePacketError
from laya.evolution.audit import audit
from laya.evolution.packets import read_packet
from laya.evolution.parent import init_parent, write_parent
from laya.evolution.workspace import Experiment, prepare

INPUTS = ("parent", "tokenizer", "token_ids", "padding", "numeric_profile", "cut_layer", "layout", "labels",
          "objective_weights", "head_state")  # docs/evolution.md, Binding; then `features`
EXPECTED = {field: f"bound {field}" for field in INPUTS}
STREAM = torch.arange(24, dtype=torch.float32).reshape(1, 3, 8)


def packet(directory: Path, streams: dict, *, manifest=None, binding=EXPECTED) -> Path:
    """A packet as docs/evolution.md lays it out; `manifest` replaces binding.json's JSON value."""
    directory.mkdir()
    data = st_save(streams)
    (directory / "features.safetensors").write_bytes(data)
    if manifest is None:
        manifest = {"format": "laya-feature-packet-v1",
                    "binding": dict(binding, features=hashlib.sha256(data).hexdigest()),
                    "streams": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in streams.items()}}
    if manifest is not ...:
        (directory / "binding.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    return directory


def refused(directory: Path, streams=("features",)) -> FeaturePacketError:
    with pytest.raises(FeaturePacketError) as info:
        read_packet(directory, EXPECTED, streams)
    return info.value


@pytest.mark.laya_claim("learner.rejects.manifest")
def test_a_well_formed_packet_loads(tmp_path):
    streams, binding = read_packet(packet(tmp_path / "mb-0000", {"features": STREAM}), EXPECTED, ("features",))
    assert torch.equal(streams["features"], STREAM) and set(binding) == set(INPUTS) | {"features"}


@pytest.mark.laya_claim("learner.rejects.manifest")
@pytest.mark.parametrize("manifest, says", [
    (..., "cannot read packet manifest"),
    ("{\"format\": ", "cannot read packet manifest"),
    ({"format": "laya-feature-packet-v2", "binding": {}}, "not a laya-feature-packet-v1 manifest"),
    ("missing-field", "not a laya-feature-packet-v1 manifest"),
    ("extra-field", "not a laya-feature-packet-v1 manifest"),
], ids=["absent", "not-json", "other-format", "binding-without-a-field", "binding-with-another-field"])
def test_a_manifest_that_is_not_laya_feature_packet_v1_is_refused_naming_it(tmp_path, manifest, says):
    directory = tmp_path / "mb-0000"
    if manifest in ("missing-field", "extra-field"):
        binding = ({k: v for k, v in EXPECTED.items() if k != "labels"} if manifest == "missing-field"
                   else EXPECTED | {"producer": "rank 1"})
        packet(directory, {"features": STREAM}, binding=binding)
    else:
        packet(directory, {"features": STREAM}, manifest=manifest)
    err = refused(directory)
    assert says in str(err) and err.file == str(directory / "binding.json"), str(err)


@pytest.mark.laya_claim("learner.rejects.manifest")
@pytest.mark.parametrize("streams, wanted", [
    ({"features": STREAM, "reference": STREAM + 1}, ("features",)),  # a fixed-tail packet, appended reader
    ({"features": STREAM}, ("features", "reference")),            # an appended packet, fixed-tail reader
    ({"activations": STREAM}, ("features",)),
])
def test_streams_other_than_the_layouts_are_refused_naming_layout(tmp_path, streams, wanted):
    directory = packet(tmp_path / "mb-0000", streams)  # bound to exactly these bytes: only the streams differ
    err = refused(directory, wanted)
    assert err.field == "layout" and err.file == str(directory / "features.safetensors"), str(err)


@pytest.mark.laya_claim("learner.certify.parent-file")
def test_the_audit_refuses_a_parent_file_that_is_not_the_committed_one(tmp_path):
    ws = prepare(Experiment(updates=1, microbatches=1, microbatch=1), tmp_path / "ws")
    other = tmp_path / "other.safetensors"
    write_parent(other, ws.exp.config, init_parent(ws.exp.config, seed=ws.exp.parent_seed + 1))
    ws.parent_file.write_bytes(other.read_bytes())  # a valid parent, not the committed one
    with pytest.raises(FeaturePacketError) as info:
        audit(0, ws, [0])
    err = info.value
    assert (err.field, err.file) == ("parent", str(ws.parent_file)) and "not the committed parent" in str(err)
    assert not ws.packet_dir.exists()  # refused before reading any packet or writing a certificate
