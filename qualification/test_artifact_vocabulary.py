"""artifact.vocabulary: docs/artifact-v1.md's encoder_config ``vocab_size`` is at least the
tokenizer's size (added tokens included), and every special token id is in the tokenizer's
vocabulary.

Oracle: the tokenizer's size read here with the ``tokenizers`` library from the pinned
bytes; the edits are made in the files' wire form (JSON text, a re-saved safetensors file
whose embedding rows match the new vocab_size), re-pinned, so each copy breaks that one rule
and its neighbour (vocab_size equal to the tokenizer's size; ids embedded but not tokens)
loads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

import laya
from laya.errors import ArtifactError
from laya_qual.synth import copy_with_weights_edit, pinned_path, replace_pinned_file

WORDS = "embeddings.word_embeddings.weight"


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=4, head_kind="float32")


def pinned_json(directory: Path, role: str) -> dict:
    return json.loads((directory / pinned_path(directory, role)).read_bytes())


def tokenizer_size(directory: Path) -> int:
    return Tokenizer.from_str((directory / pinned_path(directory, "tokenizer")).read_text()).get_vocab_size(
        with_added_tokens=True)


def with_vocab_size(pristine: Path, destination: Path, vocab_size: int) -> Path:
    """A copy whose encoder embeds ``vocab_size`` ids: config and embedding rows changed together."""
    def resize(tensors):
        rows = tensors[WORDS]
        extra = torch.zeros(max(0, vocab_size - rows.shape[0]), rows.shape[1])
        tensors[WORDS] = torch.cat([rows[:vocab_size], extra]).contiguous()

    copy_with_weights_edit(pristine, destination, "encoder_weights", resize)
    config = {**pinned_json(pristine, "encoder_config"), "vocab_size": vocab_size}
    replace_pinned_file(destination, "encoder_config", json.dumps(config).encode())
    return destination


@pytest.mark.laya_claim("artifact.vocabulary")
def test_vocab_size_must_cover_the_tokenizer(pristine, tmp_path):
    size = tokenizer_size(pristine)
    assert laya.load_artifact(with_vocab_size(pristine, tmp_path / "equal", size)).tasks  # the boundary loads
    below = with_vocab_size(pristine, tmp_path / "below", size - 1)
    special = pinned_json(below, "special_tokens")
    assert max(special["cls"], special["sep"], special["pad"], special["state"], *special["option_markers"]) \
        < size - 1  # no other rule breaks
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(below)
    assert refused.value.file == pinned_path(below, "tokenizer"), str(refused.value)


@pytest.mark.laya_claim("artifact.vocabulary")
@pytest.mark.parametrize("field", ["cls", "state", "option_markers[1]"])
def test_a_special_token_outside_the_tokenizers_vocabulary_is_refused(pristine, tmp_path, field):
    size = tokenizer_size(pristine)
    directory = with_vocab_size(pristine, tmp_path / "wider", size + 4)  # ids size.. are embedded, not tokens
    assert laya.load_artifact(directory).tasks
    special = pinned_json(directory, "special_tokens")
    if field.startswith("option_markers"):
        special["option_markers"][1] = size + 2
    else:
        special[field] = size + 2
    replace_pinned_file(directory, "special_tokens", json.dumps(special).encode())
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, "special_tokens"), field), \
        str(refused.value)


@pytest.mark.laya_claim("artifact.vocabulary")
@pytest.mark.parametrize("field", ["cls", "pad", "option_markers[0]"])
def test_a_special_token_id_at_vocab_size_is_refused_as_out_of_range(pristine, tmp_path, field):
    """Ids below vocab_size (docs/artifact-v1.md): the first id past the embedding matrix is
    refused by that rule itself, which says the bound, not only as a missing vocabulary token."""
    vocab_size = pinned_json(pristine, "encoder_config")["vocab_size"]
    special = pinned_json(pristine, "special_tokens")
    if field.startswith("option_markers"):
        special["option_markers"][0] = vocab_size
        said = f"{vocab_size} is not a token id below {vocab_size}"
    else:
        special[field] = vocab_size
        said = f"{vocab_size} is outside [0, {vocab_size - 1}]"
    directory = shutil.copytree(pristine, tmp_path / "past")
    replace_pinned_file(directory, "special_tokens", json.dumps(special).encode())
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, "special_tokens"), field)
    assert said in str(refused.value), str(refused.value)
