"""Feature packets appear whole on (shared) storage and are never overwritten."""

from __future__ import annotations

import os
import pickle

import pytest
from safetensors.torch import load_file

from laya.errors import OutputExists
from laya.evolution.packets import BINDING_FILE, FEATURES_FILE, expected_binding, read_packet, write_packet
from laya.evolution.prefix import full_prefix
from laya.evolution.workspace import Experiment, prepare, read_tokenizer_digest


@pytest.fixture(scope="module")
def packet_inputs(tmp_path_factory):
    ws = prepare(Experiment(), tmp_path_factory.mktemp("packets"))
    mb = ws.microbatches[0]
    head = load_file(ws.head_file)
    binding = expected_binding(ws, mb, tokenizer_digest=read_tokenizer_digest(ws.tokenizer_file), head_state=head)
    streams = full_prefix(ws.exp.config, load_file(ws.parent_file), ws.exp.cut, mb.input_ids, False)
    return ws, binding, streams


def test_a_packet_is_published_whole_and_never_overwritten(packet_inputs, tmp_path):
    ws, binding, streams = packet_inputs
    target = tmp_path / "shared" / "mb-0000"
    write_packet(target, binding, streams)
    assert sorted(os.listdir(target)) == sorted([FEATURES_FILE, BINDING_FILE])
    assert os.listdir(target.parent) == ["mb-0000"]  # no temporary left beside it
    before = {name: (target / name).read_bytes() for name in os.listdir(target)}
    with pytest.raises(OutputExists) as refused:
        write_packet(target, binding, {k: v + 1 for k, v in streams.items()})
    relayed = pickle.loads(pickle.dumps(refused.value))  # as a worker's error reaches the orchestrator
    assert str(relayed) == str(refused.value) and relayed.file == str(target)
    assert {name: (target / name).read_bytes() for name in os.listdir(target)} == before
    assert os.listdir(target.parent) == ["mb-0000"]
    loaded, _ = read_packet(target, binding, ws.exp.layout.streams)
    assert all(loaded[k].equal(v) for k, v in streams.items())
