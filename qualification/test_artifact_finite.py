"""artifact.finite-weights: a NaN or infinity in any float tensor of any weights file is refused at load, naming the file and the tensor."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load

import laya
from laya.errors import ArtifactError
from laya_qual.synth import copy_with_weights_edit, head_kinds, pinned_path, seeds


@pytest.mark.laya_claim("artifact.finite-weights")
@given(seed=seeds(), kind=head_kinds(), role=st.sampled_from(["encoder_weights", "head_weights"]),
       value=st.sampled_from([math.nan, math.inf, -math.inf]), data=st.data())
def test_non_finite_weights_are_refused_at_load(tmp_path_factory, artifact_factory, seed, kind, role, value, data):
    clean_dir = artifact_factory(seed=seed, head_kind=kind)
    floating = sorted(n for n, t in load((clean_dir / pinned_path(clean_dir, role)).read_bytes()).items() if t.is_floating_point())
    name = data.draw(st.sampled_from(floating), label="tensor")
    bad_dir = tmp_path_factory.mktemp("nonfinite") / "artifact"

    def set_one(tensors):
        flat = tensors[name].view(-1)
        flat[data.draw(st.integers(0, flat.numel() - 1), label="element")] = value

    copy_with_weights_edit(clean_dir, bad_dir, role, set_one)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(bad_dir)
    assert refused.value.field == name
    assert refused.value.file == pinned_path(bad_dir, role)
