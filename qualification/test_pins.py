"""Pin claims: a head attaches only to the base it was made for; every base pin and the depth pin is enforced, naming the pin."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.artifact.manifest import read_artifact_files
from laya.artifact.binding import canonical_json
from laya.errors import PinMismatch
from laya_qual.synth import clone_artifact, replace_pinned_file, seeds


def _edit_json(data: bytes, **changes) -> bytes:
    return canonical_json({**json.loads(data), **changes})


def _perturb_weights(data: bytes, where: float) -> bytes:
    tensors = load_safetensors(bytes(data))  # PinnedFile.data is the bytearray the tensors view
    name = sorted(tensors)[int(where * len(tensors))]
    flat = tensors[name].flatten().clone()
    flat[int(where * flat.numel()) % flat.numel()] += 1e-3
    tensors[name] = flat.view(tensors[name].shape)
    return save_safetensors(tensors)


def _swap_markers(data: bytes, where: float) -> bytes:
    special = json.loads(data)
    markers = special["option_markers"]
    i = int(where * (len(markers) - 1))
    markers[i], markers[i + 1] = markers[i + 1], markers[i]
    return canonical_json(special)


def _tokenizer_without_lowercasing(data: bytes, where: float) -> bytes:
    tokenizer = json.loads(data)
    if tokenizer.get("normalizer") and "lowercase" in tokenizer["normalizer"]:
        tokenizer["normalizer"]["lowercase"] = not tokenizer["normalizer"]["lowercase"]
    else:
        tokenizer["normalizer"] = {"type": "Lowercase"}
    return json.dumps(tokenizer).encode()


PIN_EDITS = {
    "encoder_config": ("encoder_config", lambda data, where: _edit_json(
        data, layer_norm_eps=json.loads(data)["layer_norm_eps"] * (2 + where))),
    "encoder_weights": ("encoder_weights", _perturb_weights),
    "tokenizer": ("tokenizer", _tokenizer_without_lowercasing),
    "special_tokens": ("special_tokens", _swap_markers),
    "sequence_format": ("sequence_format", lambda data, where: _edit_json(
        data, state_position={"after_options": "after_question"}.get(json.loads(data)["state_position"], "after_options"))),
}


@pytest.mark.laya_once_per("base")
@pytest.mark.parametrize("pin", [pytest.param(p, marks=pytest.mark.laya_claim(f"pins.refuse.{p}")) for p in sorted(PIN_EDITS)])
@given(where=st.floats(0, 1, exclude_max=True))
def test_every_base_pin_is_enforced(tmp_path_factory, qualified_artifact, qualified_base_dir, pin, where):
    """Same dimensions, one pinned base file different: refused, naming that pin."""
    base = laya.load_artifact_base(qualified_artifact, qualified_base_dir)
    directory = clone_artifact(qualified_artifact, tmp_path_factory.mktemp("pin") / "head")
    role, edit = PIN_EDITS[pin]
    original = read_artifact_files(directory)[role]
    replace_pinned_file(directory, role, edit(original.data, where))
    with pytest.raises(PinMismatch) as refused:
        laya.load_artifact_with_base(directory, base)
    assert refused.value.pin == pin and refused.value.file == original.path
    laya.load_artifact(directory)  # the edited artifact is itself consistent: only sharing is refused


@pytest.mark.laya_claim("pins.refuse.depth")
@given(seed=seeds(), depth=st.integers(1, 3))
def test_depth_pin_is_enforced(artifact_factory, seed, depth):
    base = laya.load_artifact_base(artifact_factory(seed=seed, head_kind="float32", num_layers=depth))
    deeper = artifact_factory(seed=seed, head_kind="float32", num_layers=depth + 1)
    with pytest.raises(PinMismatch) as refused:
        laya.load_artifact_with_base(deeper, base)
    assert refused.value.pin == "depth"
