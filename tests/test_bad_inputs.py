"""Bad artifacts and requests get a LayaError naming the file/field, never a raw traceback."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.artifact.manifest import read_artifact_files
from laya.artifact.binding import canonical_json
from laya.errors import ArtifactError, DigestMismatch, LayaError, RequestError
from laya_qual.synth import replace_pinned_file, write_artifact


@pytest.fixture
def artifact(tmp_path):
    return write_artifact(tmp_path / "a", seed=1, head_kind="float32")


def edit_json(directory, role, edit):
    data = json.loads(read_artifact_files(directory)[role].data)
    edit(data)
    replace_pinned_file(directory, role, canonical_json(data))


def refused(directory, error=ArtifactError) -> LayaError:
    with pytest.raises(error) as info:
        laya.load_artifact(directory)
    return info.value


def test_truncated_safetensors_with_matching_pin(artifact):
    data = read_artifact_files(artifact)["head_weights"].data
    replace_pinned_file(artifact, "head_weights", data[: len(data) // 2])
    error = refused(artifact)
    assert error.file == "head.safetensors" and "safetensors" in str(error)


def test_invalid_json_manifest(artifact):
    (artifact / "manifest.json").write_text('{"format": "laya-artifact-v1", "files": [')
    assert refused(artifact).file == "manifest.json"


def test_invalid_json_pinned_config(artifact):
    replace_pinned_file(artifact, "encoder_config", b"{not json")
    assert refused(artifact).file == "encoder_config.json"


def test_unknown_head_kind(artifact):
    edit_json(artifact, "head_config", lambda c: c.update(kind="int4"))
    error = refused(artifact)
    assert (error.file, error.field) == ("head.json", "kind")


def test_unknown_config_field(artifact):
    edit_json(artifact, "encoder_config", lambda c: c.update(rope_theta=10000))
    error = refused(artifact)
    assert (error.file, error.field) == ("encoder_config.json", "rope_theta")


def test_wrong_dtype_tensor(artifact):
    tensors = load_safetensors(bytes(read_artifact_files(artifact)["head_weights"].data))
    tensors["readout.weight"] = tensors["readout.weight"].to(torch.float16)
    replace_pinned_file(artifact, "head_weights", save_safetensors(tensors))
    error = refused(artifact)
    assert (error.file, error.field) == ("head.safetensors", "readout.weight") and "dtype" in str(error)


def test_non_finite_weight(artifact):
    tensors = load_safetensors(bytes(read_artifact_files(artifact)["head_weights"].data))
    tensors["readout.bias"][0] = float("nan")
    replace_pinned_file(artifact, "head_weights", save_safetensors(tensors))
    assert refused(artifact).field == "readout.bias"


def test_missing_tensor(artifact):
    tensors = load_safetensors(bytes(read_artifact_files(artifact)["encoder_weights"].data))
    del tensors["encoder.layer.0.output.dense.bias"]
    replace_pinned_file(artifact, "encoder_weights", save_safetensors(tensors))
    assert refused(artifact).field == "encoder.layer.0.output.dense.bias"


def test_missing_file(artifact):
    (artifact / "tokenizer.json").unlink()
    error = refused(artifact)
    assert error.file == "tokenizer.json" and "missing" in str(error)


def test_extra_unlisted_file(artifact):
    (artifact / "notes.txt").write_text("hello")
    assert refused(artifact).file == "notes.txt"


def test_tampered_file(artifact):
    with open(artifact / "head.json", "ab") as fh:
        fh.write(b" ")
    assert refused(artifact, DigestMismatch).file == "head.json"


def test_garbage_tokenizer(artifact):
    replace_pinned_file(artifact, "tokenizer", b'{"version": "1.0", "model": 3}')
    assert refused(artifact).file == "tokenizer.json"


def test_special_id_outside_vocabulary(artifact):
    edit_json(artifact, "special_tokens", lambda s: s.update(cls=10**6))
    error = refused(artifact)
    assert (error.file, error.field) == ("special_tokens.json", "cls")


def test_base_only_artifact_is_not_a_model(tmp_path, artifact):
    base_only = tmp_path / "base"
    files = read_artifact_files(artifact)
    from laya.artifact.manifest import BASE_ROLES, write_artifact_files

    write_artifact_files(base_only, {r: (files[r].path, files[r].data) for r in BASE_ROLES})
    assert "head_config" in str(refused(base_only))
    assert laya.load_artifact_base(base_only).depth == 2


def test_missing_directory(tmp_path):
    assert "does not exist" in str(refused(tmp_path / "nowhere"))


def test_encode_refuses_bad_token_ids(artifact):
    base = laya.load_artifact_base(artifact)
    for bad, field in (([], "token_ids"), ([1, -1], "token_ids[1]"), ([10**6], "token_ids[0]"), ([1, True], "token_ids[1]")):
        with pytest.raises(RequestError) as info:
            base.encode(bad)
        assert info.value.field == field


def test_open_adapters_with_bad_ids(artifact):
    with pytest.raises(LayaError):
        laya.open_adapters({}, base=artifact)
    with pytest.raises(LayaError):
        laya.open_adapters({"": artifact}, base=artifact)


def test_cache_budget_must_be_bytes(artifact):
    with pytest.raises(ValueError):
        laya.open_adapters({"h": artifact}, base=artifact, cache_bytes=-1)


def test_write_refuses_non_empty_directory(tmp_path, artifact):
    with pytest.raises(ArtifactError):
        write_artifact(artifact, seed=2, head_kind="int8")
    shutil.rmtree(artifact)
