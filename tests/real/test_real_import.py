"""Importing the real all-MiniLM-L6-v2 checkpoint: what the base holds and how it is pinned."""

from __future__ import annotations

import hashlib
import json

import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors

from laya.artifact.manifest import BASE_ROLES, read_artifact_files


def test_base_is_the_checkpoint_renamed_nowhere_and_untouched(imported_dir, checkpoint_dir, checkpoint_tensors):
    files = read_artifact_files(imported_dir, require_head=False)
    assert set(files.files) == set(BASE_ROLES)  # no head role
    assert files["tokenizer"].data == (checkpoint_dir / "tokenizer.json").read_bytes()
    tensors = load_safetensors(bytes(files["encoder_weights"].data))
    assert set(checkpoint_tensors) - set(tensors) == {"pooler.dense.weight", "pooler.dense.bias",
                                                      "embeddings.position_ids"}
    for name, tensor in tensors.items():  # this checkpoint already uses BertModel's names
        assert tensor.dtype == torch.float32 and torch.equal(tensor, checkpoint_tensors[name]), name


def test_encoder_config_and_special_tokens_come_from_the_checkpoint(imported_dir, checkpoint_dir, checkpoint_tokenizer):
    files = read_artifact_files(imported_dir, require_head=False)
    hf = json.loads((checkpoint_dir / "config.json").read_text())
    config = json.loads(files["encoder_config"].data)
    assert config == {key: hf[key] for key in config}
    special = json.loads(files["special_tokens"].data)
    token = checkpoint_tokenizer.id_to_token
    assert [token(special[k]) for k in ("cls", "sep", "pad", "state")] == ["[CLS]", "[SEP]", "[PAD]", "[unused0]"]
    assert [token(i) for i in special["option_markers"]] == [f"[unused{i}]" for i in range(1, 9)]
    # Markers are unreachable from text: the pre-tokenizer splits "[unused1]" into pieces.
    assert special["option_markers"][0] not in checkpoint_tokenizer.encode("[unused1]", add_special_tokens=False).ids


def test_pins_are_the_written_bytes_and_name_the_source(imported_dir, real_base, checkpoint_dir):
    manifest = json.loads((imported_dir / "manifest.json").read_text())
    for entry in manifest["files"]:
        digest = hashlib.sha256((imported_dir / entry["path"]).read_bytes()).hexdigest()
        assert entry["sha256"] == digest == real_base.pins[entry["role"]]
    with safe_open(imported_dir / "encoder.safetensors", "pt") as weights:
        provenance = json.loads(weights.metadata()["laya.provenance"])
    for name in ("config.json", "model.safetensors"):
        assert provenance[f"{name} sha256"] == hashlib.sha256((checkpoint_dir / name).read_bytes()).hexdigest()
