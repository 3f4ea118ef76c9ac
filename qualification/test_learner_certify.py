"""Certification: a digest names bytes; the audit establishes the committed parent made them."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from laya.errors import FeaturePacketError
from laya.evolution.audit import audit, check_certificate
from laya.evolution.kernel import LEARNER, produce
from laya.evolution.learner import learn
from laya.evolution.packets import read_manifest
from laya.evolution.parent import init_parent, write_parent


def _forge_parent_claim(packet_dir: Path, parent_digest: str) -> None:
    for manifest_path in packet_dir.glob("mb-*/binding.json"):
        manifest = json.loads(manifest_path.read_text())
        manifest["binding"]["parent"] = parent_digest
        manifest_path.write_text(json.dumps(manifest))


@pytest.mark.laya_claim("learner.certify.parent")
@pytest.mark.parametrize("block", ["first", "last"])
def test_audit_catches_features_from_another_parent(evolution_group, evolution_workspaces, tmp_path, block):
    """The first block changes both streams; the last changes only the fixed-tail reference stream."""
    ws = evolution_workspaces.fresh(evolution_workspaces.produced("fixed-tail").exp)
    evolution_group.run(produce, ws)
    indices = sorted(set(ws.exp.schedule()))
    honest = evolution_group.run(audit, ws, indices, ranks=[0])[0]
    assert sorted(honest) == indices

    # a parent that differs in one weight of one block; head and everything else equal
    state = init_parent(ws.exp.config, ws.exp.parent_seed)
    state[f"blocks.{0 if block == 'first' else ws.exp.config.depth - 1}.fc.weight"][0, 0] += 1e-2
    other_digest = write_parent(tmp_path / "other.safetensors", ws.exp.config, state)
    other = ws.with_(parent_file=tmp_path / "other.safetensors", parent_digest=other_digest,
                     packet_dir=tmp_path / "packets")
    evolution_group.run(produce, other)
    _forge_parent_claim(other.packet_dir, ws.parent_digest)
    forged = ws.with_(packet_dir=other.packet_dir)
    ours, theirs = (load_file(w.packet(0) / "features.safetensors") for w in (ws, other))
    assert torch.equal(ours["features"], theirs["features"]) == (block == "last")
    assert not torch.equal(ours["reference"], theirs["reference"])

    # the binding alone cannot tell: the forged packets pass every field check
    assert len(evolution_group.run(learn, forged, snapshots=False, ranks=[LEARNER])[0]["records"]) == 8
    with pytest.raises(FeaturePacketError) as info:
        evolution_group.run(audit, forged, indices, ranks=[0])
    assert (info.value.field, info.value.file) == ("features", str(forged.packet(indices[0]))), str(info.value)
    assert not any(other.packet_dir.glob("mb-*/certificate.json"))
    with pytest.raises(FeaturePacketError) as info:
        evolution_group.run(learn, forged, require_certificate=True, snapshots=False, ranks=[LEARNER])
    first = forged.packet(forged.exp.schedule()[0]) / "certificate.json"
    assert (info.value.field, info.value.file) == ("certificate", str(first)), str(info.value)


@pytest.mark.laya_claim("learner.certify.binding")
def test_learner_requires_matching_certificate(evolution_group, evolution_workspaces):
    base = evolution_workspaces.produced("appended")
    ws = base.with_(packet_dir=Path(tempfile.mkdtemp(dir=evolution_workspaces.root)) / "packets")
    shutil.copytree(base.packet_dir, ws.packet_dir)
    with pytest.raises(FeaturePacketError) as info:
        evolution_group.run(learn, ws, require_certificate=True, snapshots=False, ranks=[LEARNER])
    assert info.value.field == "certificate" and "not certified" in str(info.value)
    assert info.value.file == str(ws.packet(ws.exp.schedule()[0]) / "certificate.json"), str(info.value)

    certificates = evolution_group.run(audit, ws, sorted(set(ws.exp.schedule())), ranks=[0])[0]
    result = evolution_group.run(learn, ws, require_certificate=True, snapshots=False, ranks=[LEARNER])[0]
    assert [r["certificate"] for r in result["records"]] == [certificates[i] for i in ws.exp.schedule()]

    shutil.copy(ws.packet(0) / "certificate.json", ws.packet(1) / "certificate.json")  # another packet's
    with pytest.raises(FeaturePacketError) as info:
        evolution_group.run(learn, ws, require_certificate=True, snapshots=False, ranks=[LEARNER])
    assert info.value.field == "certificate" and "does not match" in str(info.value)
    assert info.value.file == str(ws.packet(1) / "certificate.json"), str(info.value)

    own = read_manifest(ws.packet(0))["binding"]
    rebound = dict(own, labels="0" * 64)  # another packet on the same features, parent and input
    with pytest.raises(FeaturePacketError) as info:
        check_certificate(ws.packet(0), rebound, ws.microbatches[0].input_digest())
    assert info.value.field == "certificate" and "packet" in str(info.value)
