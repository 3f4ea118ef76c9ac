"""artifact.tensors: docs/artifact-v1.md loading rule 4 ("tensor files must hold exactly the
expected tensor names, dtypes and shapes"): an extra tensor or one of another dtype or shape,
in the encoder's or the head's weights file, re-saved with safetensors and re-pinned, is refused
with ArtifactError naming the file and the tensor; the file re-saved unchanged loads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import laya
from laya.errors import ArtifactError
from laya_qual.synth import copy_with_weights_edit, pinned_path, replace_pinned_file


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=6, head_kind="int8")


def add_tensor(tensors):
    tensors["extra.weight"] = torch.zeros(2)


def first_float32(tensors) -> str:
    return sorted(n for n, t in tensors.items() if t.dtype == torch.float32)[0]


def widen_first(tensors):
    name = first_float32(tensors)
    tensors[name] = tensors[name].double()


def lengthen_first(tensors):
    """One more row (its first, repeated): the dtype right, the shape not the config's."""
    name = first_float32(tensors)
    tensors[name] = torch.cat([tensors[name], tensors[name][:1]])


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("edit, tensor", [(add_tensor, lambda t: "extra.weight"), (widen_first, first_float32),
                                          (lengthen_first, first_float32)],
                         ids=["extra-tensor", "float64", "another-shape"])
def test_a_weights_file_with_another_tensor_is_refused_naming_it(pristine, tmp_path, role, edit, tensor):
    from safetensors.torch import load as load_safetensors

    original = load_safetensors((pristine / pinned_path(pristine, role)).read_bytes())
    directory = copy_with_weights_edit(pristine, tmp_path / "edited", role, edit)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, role), tensor(original)), \
        str(refused.value)
    assert laya.load_artifact(copy_with_weights_edit(pristine, tmp_path / "same", role, lambda t: None)).tasks


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("removed, says", [(1, "tensor missing"), (2, "tensor missing (and 1 more)")])
def test_a_weights_file_missing_tensors_is_refused_naming_the_first(pristine, tmp_path, role, removed, says):
    from safetensors.torch import load as load_safetensors

    names = sorted(load_safetensors((pristine / pinned_path(pristine, role)).read_bytes()))

    def remove(tensors):
        for name in names[:removed]:
            del tensors[name]

    directory = copy_with_weights_edit(pristine, tmp_path / "edited", role, remove)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, role), names[0])
    assert str(refused.value) == f"file {pinned_path(directory, role)}, field {names[0]}: {says}"


def header_of(data: bytes) -> tuple[dict, bytes]:
    """A safetensors file's header object and its tensor bytes (the format: an 8-byte
    little-endian header length, the header's JSON, then the data)."""
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + length]), data[8 + length:]


def with_header_text(text: str, body: bytes) -> bytes:
    encoded = text.encode()
    return len(encoded).to_bytes(8, "little") + encoded + body


def entry_text(entry: dict) -> str:
    return json.dumps(entry, separators=(",", ":"))


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("where", ["name", "entry-key"])
def test_a_header_listing_a_name_twice_is_refused_naming_the_tensor(pristine, tmp_path, role, where):
    """Two entries for one name (the first pointing at another tensor's bytes of the same
    dtype and shape where there is one): safetensors keeps the last, another reader may keep
    the first, so the pinned bytes would not say which tensor they hold. Likewise an entry
    listing its dtype twice. Each is refused, naming the tensor; before, the last won."""
    header, body = header_of((pristine / pinned_path(pristine, role)).read_bytes())
    names = sorted(n for n in header if n != "__metadata__")
    name = names[0]
    twin = next((n for n in names[1:] if {k: header[n][k] for k in ("dtype", "shape")}
                 == {k: header[name][k] for k in ("dtype", "shape")}), name)
    if where == "name":
        entries = [f'"{name}":{entry_text(header[twin])}'] + [f'"{n}":{entry_text(e)}' for n, e in header.items()]
    else:
        entries = [f'"{n}":' + (entry_text(e) if n != name else
                                '{"dtype":"F64",' + entry_text(e)[1:]) for n, e in header.items()]
    directory = tmp_path / "edited"
    shutil.copytree(pristine, directory)
    replace_pinned_file(directory, role, with_header_text("{" + ",".join(entries) + "}", body))
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, role), name), str(refused.value)
    assert ("listed twice" if where == "name" else "key 'dtype' twice") in str(refused.value)
