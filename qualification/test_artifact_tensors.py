"""artifact.tensors: docs/artifact-v1.md loading rule 4 ("tensor files must hold exactly the
expected tensor names, dtypes and shapes"): an extra tensor or one of another dtype or shape,
in the encoder's or the head's weights file, re-saved with safetensors and re-pinned, is refused
with ArtifactError naming the file and the tensor; the file re-saved unchanged loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import laya
from laya.errors import ArtifactError
from laya_qual.synth import copy_with_weights_edit, pinned_path


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
