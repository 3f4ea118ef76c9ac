"""Adapter-payload claims: a non-null manifest `adapter` payload is refused by every loader,
standalone and shared, with UnsupportedAdapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import laya
from laya.errors import UnsupportedAdapter
from laya_qual.synth import clone_artifact, rewrite_file

json_values = st.recursive(  # JSON values: no NaN or infinities, which strict JSON refuses first
    st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def with_adapter_payload(source: Path, destination: Path, payload) -> Path:
    """A copy of ``source`` whose manifest carries ``payload`` as its adapter."""
    directory = clone_artifact(source, destination)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["adapter"] = payload
    rewrite_file(directory / "manifest.json", json.dumps(manifest).encode())
    return directory


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("adapter.refuse.standalone")
@given(payload=json_values)
def test_non_null_adapter_is_refused(tmp_path_factory, qualified_artifact, payload):
    directory = with_adapter_payload(qualified_artifact, tmp_path_factory.mktemp("adapter") / "head", payload)
    with pytest.raises(UnsupportedAdapter, match="adapter"):
        laya.load_artifact(directory)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("adapter.refuse.shared")
@given(payload=st.dictionaries(st.text(max_size=4), st.integers(), min_size=0, max_size=2) | st.just("lora"))
def test_shared_loaders_refuse_adapter_payloads(tmp_path_factory, qualified_artifact, payload):
    directory = with_adapter_payload(qualified_artifact, tmp_path_factory.mktemp("adapter") / "head", payload)
    with pytest.raises(UnsupportedAdapter):
        laya.load_artifact_base(directory)
    base = laya.load_artifact_base(qualified_artifact)
    with pytest.raises(UnsupportedAdapter):
        laya.load_artifact_with_base(directory, base)
