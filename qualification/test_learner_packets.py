"""Packets are per exact microbatch, and the learner is smaller than the parent."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from safetensors.torch import save as st_save

from laya.artifact.binding import json_digest
from laya.errors import FeaturePacketError, LayaError
from laya.evolution.data import consecutive_groups
from laya.evolution.kernel import LEARNER, produce
from laya.evolution.layouts import Layout
from laya.evolution.learner import learn, sizes
from laya.evolution.packets import FEATURES_FILE, FIELDS, read_packet, write_packet
from laya.evolution.parent import CONFIGS
from laya.evolution.workspace import Experiment


def _packet_digest(ws, index: int) -> str:
    return json_digest(json.loads((ws.packet(index) / "binding.json").read_text())["binding"])


@pytest.mark.laya_claim("learner.regroup")
def test_regrouped_examples_are_different_packets(evolution_group, evolution_workspaces):
    exp = Experiment(layout=Layout("appended"), microbatch=2, microbatches=2, updates=8)
    original = evolution_workspaces.fresh(exp)
    regrouped = evolution_workspaces.fresh(exp, groups=[(0, 2), (1, 3)])
    reordered = evolution_workspaces.fresh(exp, groups=[(1, 0), (3, 2)])
    assert original.microbatches[0].examples == consecutive_groups(2, 2)[0]
    for ws in (original, regrouped, reordered):
        evolution_group.run(produce, ws)
    digests = {name: [_packet_digest(ws, i) for i in range(2)]
               for name, ws in (("original", original), ("regrouped", regrouped), ("reordered", reordered))}
    assert len({d for ds in digests.values() for d in ds}) == 6, digests
    for other in (regrouped, reordered):  # the same examples, grouped differently, against the old packets
        with pytest.raises(FeaturePacketError) as info:
            evolution_group.run(learn, other.with_(packet_dir=original.packet_dir), snapshots=False, ranks=[LEARNER])
        assert info.value.field == "token_ids", str(info.value)


@pytest.mark.laya_claim("learner.smaller")
@pytest.mark.parametrize("layout", ["appended", "fixed-tail"])
def test_learner_is_smaller_than_parent(evolution_group, evolution_workspaces, layout):
    ws = evolution_workspaces.produced(layout)
    result = evolution_group.run(learn, ws, snapshots=False, ranks=[LEARNER])[0]
    # the reported sizes are the real tensors' bytes
    def nbytes(path):
        return sum(t.numel() * t.element_size() for t in load_file(path).values())
    assert result["learner_bytes"] == nbytes(ws.tail_file) + nbytes(ws.head_file)
    assert result["parent_bytes"] == nbytes(ws.parent_file)
    assert result["learner_bytes"] < result["parent_bytes"]
    for config in CONFIGS.values():
        exp = Experiment(config=config, layout=Layout(layout))
        size = sizes(ws.with_(exp=exp))
        assert size["learner_bytes"] < size["parent_bytes"], (config, size)


@pytest.mark.laya_claim("learner.smaller")
def test_learner_not_smaller_is_refused(evolution_group, evolution_workspaces):
    ws = evolution_workspaces.produced("appended")
    too_big = ws.with_(exp=dataclasses.replace(ws.exp, layout=Layout("appended", tail_blocks=ws.exp.config.depth + 1)))
    with pytest.raises(LayaError, match="not smaller than the parent"):
        evolution_group.run(learn, too_big, snapshots=False, ranks=[LEARNER])


@pytest.mark.laya_claim("learner.rejects.features")
def test_streams_are_parsed_from_the_bytes_that_were_hashed(tmp_path, monkeypatch):
    """A feature file that changes after it was hashed (a second read returns other,
    valid bytes) never reaches the learner: the streams are the hashed bytes'."""
    streams = {"features": torch.arange(24, dtype=torch.float32).view(1, 4, 6)}
    binding = {field: f"bound-{field}" for field in FIELDS if field != "features"}
    write_packet(tmp_path, binding, streams)
    other = st_save({"features": streams["features"] + 1})
    read_bytes, reads = Path.read_bytes, []

    def changing_read(path: Path) -> bytes:
        data = read_bytes(path)
        if path.name == FEATURES_FILE:
            reads.append(path)
            return data if len(reads) == 1 else other
        return data

    monkeypatch.setattr(Path, "read_bytes", changing_read)
    loaded, _ = read_packet(tmp_path, binding, ("features",))
    assert torch.equal(loaded["features"], streams["features"])
