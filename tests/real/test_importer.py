"""The importer on tiny HF-style checkpoints: the renames it performs, and every
architecture or layout it must refuse, named by file and field."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load as load_safetensors

import laya
from laya.artifact.manifest import read_artifact_files
from laya.errors import ArtifactError
from laya.training.importer import base as base_cli
from laya.training.importer import import_bert_base


def imported_tensors(directory) -> dict[str, torch.Tensor]:
    return load_safetensors(bytes(read_artifact_files(directory, require_head=False)["encoder_weights"].data))


def tf_era_layout(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A BertForPreTraining-style file: ``bert.`` prefix, LayerNorm gamma/beta, an MLM head, bfloat16."""
    renamed = {}
    for name, tensor in tensors.items():
        if "LayerNorm" in name:
            name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
        renamed["bert." + name] = tensor.to(torch.bfloat16) if tensor.is_floating_point() else tensor
    renamed["cls.predictions.bias"] = torch.zeros(4)
    return renamed


def test_import_keeps_values_and_drops_only_pooler_and_position_ids(make_checkpoint, tmp_path):
    source_dir = make_checkpoint()
    source = load_safetensors((source_dir / "model.safetensors").read_bytes())
    out = import_bert_base(source_dir, tmp_path / "base")
    tensors = imported_tensors(out)
    assert set(source) - set(tensors) == {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids"}
    assert all(torch.equal(tensors[name], source[name]) for name in tensors)
    assert laya.load_artifact_base(out).depth == 2


def test_import_renames_prefixed_gamma_beta_layout_and_upcasts_exactly(make_checkpoint, tmp_path):
    source_dir = make_checkpoint(edit=tf_era_layout)
    source = load_safetensors((source_dir / "model.safetensors").read_bytes())
    tensors = imported_tensors(import_bert_base(source_dir, tmp_path / "base"))
    assert tensors["embeddings.LayerNorm.weight"].dtype == torch.float32
    assert torch.equal(tensors["embeddings.LayerNorm.weight"], source["bert.embeddings.LayerNorm.gamma"].float())
    assert torch.equal(tensors["encoder.layer.1.output.LayerNorm.bias"],
                       source["bert.encoder.layer.1.output.LayerNorm.beta"].float())
    assert len(tensors) == len(source) - 4  # pooler weight and bias, position_ids, cls.predictions.bias


def test_import_is_reproducible_byte_for_byte(make_checkpoint, tmp_path):
    source_dir = make_checkpoint()
    first = import_bert_base(source_dir, tmp_path / "one")
    second = import_bert_base(source_dir, tmp_path / "two")
    assert (first / "manifest.json").read_bytes() == (second / "manifest.json").read_bytes()


def rename(old: str, new: str):
    return lambda tensors: {new if name == old else name: t for name, t in tensors.items()}


REFUSALS = [
    pytest.param({"config": {"model_type": "roberta"}}, "config.json", "model_type", id="roberta"),
    pytest.param({"config": {"model_type": None}}, "config.json", "model_type", id="no-model-type"),
    pytest.param({"config": {"hidden_act": "gelu_new"}}, "config.json", "hidden_act", id="tanh-gelu"),
    pytest.param({"config": {"position_embedding_type": "relative_key"}}, "config.json", "position_embedding_type",
                 id="relative-positions"),
    pytest.param({"config": {"is_decoder": True}}, "config.json", "is_decoder", id="decoder"),
    pytest.param({"config": {"add_cross_attention": True}}, "config.json", "add_cross_attention", id="cross-attention"),
    pytest.param({"config": {"num_hidden_layers": None}}, "config.json", "num_hidden_layers", id="no-depth"),
    pytest.param({"config": {"num_attention_heads": 3}}, "config.json", "num_attention_heads", id="uneven-heads"),
    pytest.param({"config": {"layer_norm_eps": 0}}, "config.json", "layer_norm_eps", id="zero-eps"),
    pytest.param({"config": {"vocab_size": 40}}, "config.json", "vocab_size", id="tokenizer-exceeds-embeddings"),
    pytest.param({"edit": rename("encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.q.weight")},
                 "model.safetensors", "encoder.layer.0.attention.q.weight", id="misnamed-tensor"),
    pytest.param({"edit": rename("encoder.layer.1.output.dense.bias", "pooler.dense.extra")},
                 "model.safetensors", "encoder.layer.1.output.dense.bias", id="missing-tensor"),
    pytest.param({"edit": lambda t: {**t, "embeddings.word_embeddings.weight": torch.zeros(66, 8)}},
                 "model.safetensors", "embeddings.word_embeddings.weight", id="wrong-shape"),
    pytest.param({"edit": lambda t: {**t, "embeddings.LayerNorm.weight": t["embeddings.LayerNorm.weight"].double()}},
                 "model.safetensors", "embeddings.LayerNorm.weight", id="float64"),
    pytest.param({"edit": lambda t: {**t, "embeddings.position_ids": t["embeddings.position_ids"].flip(-1)}},
                 "model.safetensors", "embeddings.position_ids", id="permuted-positions"),
    pytest.param({"unused": 0}, "tokenizer.json", "model.vocab", id="no-unused-tokens"),
]


@pytest.mark.parametrize(("recipe", "file", "field"), REFUSALS)
def test_unsupported_checkpoints_are_refused_naming_file_and_field(make_checkpoint, tmp_path, recipe, file, field):
    source_dir = make_checkpoint(**recipe)
    with pytest.raises(ArtifactError) as refused:
        import_bert_base(source_dir, tmp_path / "base")
    assert (refused.value.file, refused.value.field) == (file, field), str(refused.value)
    assert not (tmp_path / "base").exists(), "a refused import must write nothing"


def test_cli_imports_and_refuses(make_checkpoint, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(base_cli, ["import", str(make_checkpoint()), str(tmp_path / "base")])
    assert ok.exit_code == 0, ok.output
    pins = json.loads((tmp_path / "base" / "manifest.json").read_text())["files"]
    assert all(entry["sha256"] in ok.output for entry in pins)
    refused = runner.invoke(base_cli, ["import", str(tmp_path / "hf"), str(tmp_path / "again"),
                                       "--option-markers", "11"])
    assert refused.exit_code != 0
    assert "tokenizer.json" in refused.output and "[unused10]" in refused.output
