"""Every binding field of a feature packet is enforced: change one, and the learner refuses naming it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from laya.artifact.binding import tensor_digest
from laya.errors import FeaturePacketError
from laya.evolution.data import make_tokenizer
from laya.evolution.kernel import LEARNER
from laya.evolution.layouts import Layout
from laya.evolution.learner import learn
from laya.evolution.packets import expected_binding, write_packet
from laya.evolution.parent import init_parent, write_parent
from laya.evolution.prefix import full_prefix
from laya.evolution.workspace import read_tokenizer_digest


def _copy(ws, root: Path):
    """The workspace with a private copy of its packets, safe to tamper with."""
    target = Path(tempfile.mkdtemp(dir=root)) / "packets"
    shutil.copytree(ws.packet_dir, target)
    return ws.with_(packet_dir=target)


def _refused(group, ws) -> FeaturePacketError:
    with pytest.raises(FeaturePacketError) as info:
        group.run(learn, ws, snapshots=False, ranks=[LEARNER])
    return info.value


def _assert_only(err: FeaturePacketError, field: str) -> None:
    assert err.field == field, str(err)
    # the file that holds the refused field: the features themselves, or the packet's binding
    assert Path(err.file).name == ("features.safetensors" if field == "features" else "binding.json"), err.file
    if field != "features":
        assert f"differing fields: [{field!r}]" in str(err), str(err)


def _replace_mb(ws, index: int, **changes):
    mbs = list(ws.microbatches)
    mbs[index] = dataclasses.replace(mbs[index], **changes)
    return ws.with_(microbatches=tuple(mbs))


def _edit_manifest(directory: Path, field: str, value) -> None:
    path = directory / "binding.json"
    manifest = json.loads(path.read_text())
    manifest["binding"][field] = value
    path.write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def base(evolution_group, evolution_workspaces):
    """Produced packets for both layouts, and proof that unmodified they are accepted."""
    produced = {name: evolution_workspaces.produced(name) for name in ("appended", "fixed-tail")}
    for ws in produced.values():
        result = evolution_group.run(learn, ws, snapshots=False, ranks=[LEARNER])[0]
        assert len(result["records"]) == 8
    return produced


@pytest.mark.laya_claim("learner.rejects.parent")
def test_other_parent_refused(evolution_group, evolution_workspaces, base, tmp_path):
    ws = base["fixed-tail"]
    other = write_parent(tmp_path / "other.safetensors", ws.exp.config, init_parent(ws.exp.config, seed=99))
    _assert_only(_refused(evolution_group, ws.with_(parent_digest=other)), "parent")


@pytest.mark.laya_claim("learner.rejects.tokenizer")
def test_other_tokenizer_refused(evolution_group, base, tmp_path):
    ws = base["fixed-tail"]
    lowercasing = make_tokenizer(ws.exp.config.vocab, lowercase=True)  # same ids for these texts
    (tmp_path / "tokenizer.json").write_text(lowercasing.to_str())
    _assert_only(_refused(evolution_group, ws.with_(tokenizer_file=tmp_path / "tokenizer.json")), "tokenizer")


@pytest.mark.laya_claim("learner.rejects.token-ids")
def test_one_token_changed_refused(evolution_group, base):
    ws = base["fixed-tail"]
    ids = ws.microbatches[1].input_ids.clone()
    ids[0, 0] = 2 + (ids[0, 0] - 1) % (ws.exp.config.vocab - 2)  # first token: no label depends on it
    assert not torch.equal(ids, ws.microbatches[1].input_ids)
    _assert_only(_refused(evolution_group, _replace_mb(ws, 1, input_ids=ids)), "token_ids")


@pytest.mark.laya_claim("learner.rejects.token-ids")
def test_the_last_token_of_a_padded_row_changed_is_a_token_not_padding(evolution_group, base):
    """The padding starts right after a row's last token: changing that token is refused
    naming token_ids alone (labels are bound separately and left as they were)."""
    ws = base["fixed-tail"]
    index, row, n = next((i, r, n) for i, mb in enumerate(ws.microbatches) for r, n in enumerate(mb.lengths)
                         if n < ws.exp.config.seq_len)
    ids = ws.microbatches[index].input_ids.clone()
    ids[row, n - 1] = 2 + (ids[row, n - 1] - 1) % (ws.exp.config.vocab - 2)
    assert not torch.equal(ids, ws.microbatches[index].input_ids)
    _assert_only(_refused(evolution_group, _replace_mb(ws, index, input_ids=ids)), "token_ids")


@pytest.mark.laya_claim("learner.rejects.padding")
def test_one_padding_token_changed_refused(evolution_group, base):
    ws = base["fixed-tail"]
    index, row = next((i, r) for i, mb in enumerate(ws.microbatches) for r, n in enumerate(mb.lengths)
                      if n < ws.exp.config.seq_len)
    ids = ws.microbatches[index].input_ids.clone()
    ids[row, -1] = 1  # one pad cell becomes [UNK]
    _assert_only(_refused(evolution_group, _replace_mb(ws, index, input_ids=ids)), "padding")


@pytest.mark.laya_claim("learner.rejects.numeric-profile")
def test_other_numeric_profile_refused(evolution_group, evolution_workspaces, base):
    ws = _copy(base["fixed-tail"], evolution_workspaces.root)
    manifest = json.loads((ws.packet(2) / "binding.json").read_text())
    profile = dict(manifest["binding"]["numeric_profile"], intra_op_threads=2)
    _edit_manifest(ws.packet(2), "numeric_profile", profile)  # as if produced with two threads
    _assert_only(_refused(evolution_group, ws), "numeric_profile")


@pytest.mark.laya_claim("learner.rejects.numeric-profile")
def test_packet_made_with_two_threads_refused(evolution_group, evolution_workspaces, base):
    """Produced for real under two intra-op threads (not an edited manifest), so a profile that
    does not read the live process is caught too."""
    ws = _copy(base["fixed-tail"], evolution_workspaces.root)
    mb, before = ws.microbatches[2], torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        binding = expected_binding(ws, mb, tokenizer_digest=read_tokenizer_digest(ws.tokenizer_file),
                                   head_state=load_file(ws.head_file))
        streams = full_prefix(ws.exp.config, load_file(ws.parent_file), ws.exp.cut, mb.input_ids, True)
    finally:
        torch.set_num_threads(before)
    live = {"intra_op_threads": 2, "inter_op_threads": torch.get_num_interop_threads(), "torch": torch.__version__}
    assert {k: binding["numeric_profile"][k] for k in live} == live, binding["numeric_profile"]
    shutil.rmtree(ws.packet(2))
    write_packet(ws.packet(2), binding, streams)
    _assert_only(_refused(evolution_group, ws), "numeric_profile")


@pytest.mark.laya_claim("learner.rejects.numeric-profile")
def test_packet_made_without_the_exactness_settings_refused(evolution_group, evolution_workspaces, base):
    """Produced for real with TF32 matmuls allowed, deterministic algorithms on and another cuBLAS
    workspace (what a GPU producer without laya's use_device would have): the live profile
    records each, and the learner, which runs with laya's settings, refuses the packet."""
    ws = _copy(base["fixed-tail"], evolution_workspaces.root)
    mb = ws.microbatches[2]
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled(),
             os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.use_deterministic_algorithms(True)
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"
    try:
        binding = expected_binding(ws, mb, tokenizer_digest=read_tokenizer_digest(ws.tokenizer_file),
                                   head_state=load_file(ws.head_file))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.use_deterministic_algorithms(saved[1])
        if saved[2] is None:
            del os.environ["CUBLAS_WORKSPACE_CONFIG"]
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved[2]
    live = {"matmul_tf32": True, "deterministic_algorithms": True, "cublas_workspace_config": ":16:8"}
    assert {k: binding["numeric_profile"][k] for k in live} == live, binding["numeric_profile"]
    streams = full_prefix(ws.exp.config, load_file(ws.parent_file), ws.exp.cut, mb.input_ids, True)
    shutil.rmtree(ws.packet(2))
    write_packet(ws.packet(2), binding, streams)
    _assert_only(_refused(evolution_group, ws), "numeric_profile")


@pytest.mark.laya_claim("learner.rejects.cut-layer")
def test_other_cut_layer_refused(evolution_group, base):
    ws = base["appended"]
    depth = ws.exp.config.depth
    other = ws.with_(exp=dataclasses.replace(ws.exp, layout=Layout("appended", cut=depth - 1)))
    _assert_only(_refused(evolution_group, other), "cut_layer")


@pytest.mark.laya_claim("learner.rejects.layout")
def test_other_layout_refused(evolution_group, base):
    ws = base["appended"]
    other = ws.with_(exp=dataclasses.replace(ws.exp, layout=Layout("appended", tail_blocks=1)))
    _assert_only(_refused(evolution_group, other), "layout")


@pytest.mark.laya_claim("learner.rejects.labels")
def test_shifted_labels_refused(evolution_group, base):
    ws = base["fixed-tail"]
    shifted = torch.roll(ws.microbatches[0].labels, shifts=1, dims=1)
    _assert_only(_refused(evolution_group, _replace_mb(ws, 0, labels=shifted)), "labels")


@pytest.mark.laya_claim("learner.rejects.objective-weights")
def test_other_objective_weights_refused(evolution_group, evolution_workspaces, base):
    ws = base["fixed-tail"]
    retention = ws.with_(exp=dataclasses.replace(ws.exp, retention_weight=0.25))
    _assert_only(_refused(evolution_group, retention), "objective_weights")
    weights = ws.microbatches[3].weights.clone()
    weights[0, 0] += 0.25
    _assert_only(_refused(evolution_group, _replace_mb(ws, 3, weights=weights)), "objective_weights")
    # weights that define no loss: all 0 (0/0, NaN) or one negative. Each packet is re-bound to
    # those weights, so nothing but the objective itself is wrong.
    negative = ws.microbatches[3].weights.clone()
    negative[0, 0] = -0.5
    for bad, says in ((torch.zeros_like(weights), "every token weight is 0"), (negative, "must be finite and >= 0")):
        copy = _copy(ws, evolution_workspaces.root)
        bound = json.loads((copy.packet(3) / "binding.json").read_text())["binding"]["objective_weights"]
        _edit_manifest(copy.packet(3), "objective_weights", dict(bound, token_weights=tensor_digest(bad)))
        err = _refused(evolution_group, _replace_mb(copy, 3, weights=bad))
        assert err.field == "objective_weights" and says in str(err), str(err)


@pytest.mark.laya_claim("learner.rejects.head-state")
def test_other_head_replica_refused(evolution_group, base, tmp_path):
    ws = base["fixed-tail"]
    head = load_file(ws.head_file)
    head["norm.weight"][0] += 1e-3
    save_file(head, tmp_path / "head.safetensors")
    _assert_only(_refused(evolution_group, ws.with_(head_file=tmp_path / "head.safetensors")), "head_state")


@pytest.mark.laya_claim("learner.rejects.features")
def test_flipped_feature_byte_refused(evolution_group, evolution_workspaces, base):
    ws = _copy(base["fixed-tail"], evolution_workspaces.root)
    path = ws.packet(0) / "features.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # inside the last tensor's bytes
    path.write_bytes(bytes(data))
    _assert_only(_refused(evolution_group, ws), "features")
