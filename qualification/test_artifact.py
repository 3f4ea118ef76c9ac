"""artifact-v1 claims: round trip, tamper refusal, path rules, adapter refusal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import laya
from laya.artifact import MANIFEST, ROLES
from laya.errors import ArtifactError, DigestMismatch, UnsupportedAdapter
from laya_qual.synth import (
    artifact_configs,
    clone_artifact,
    head_kinds,
    requests_for,
    rewrite_file,
    seeds,
    write_artifact,
)

function_scoped_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def manifest_entries(directory: Path) -> dict[str, dict]:
    return {e["role"]: e for e in json.loads((directory / MANIFEST).read_text())["files"]}


@pytest.mark.laya_claim("artifact.roundtrip")
@given(seed=seeds(), kind=head_kinds(), config=artifact_configs(), data=st.data())
def test_synthetic_roundtrip_is_deterministic(artifact_factory, seed, kind, config, data):
    directory = artifact_factory(seed=seed, head_kind=kind, **config)
    first, second = laya.load_artifact(directory), laya.load_artifact(directory)
    request = data.draw(requests_for(first))
    a, b, c = first.predict(request), first.predict(request), second.predict(request)
    assert torch.equal(torch.tensor(a.probabilities), torch.tensor(b.probabilities))
    assert torch.equal(torch.tensor(a.probabilities), torch.tensor(c.probabilities))
    assert a.decision == b.decision == c.decision
    assert a.head_digest == c.head_digest


@pytest.mark.laya_claim("artifact.roundtrip")
@function_scoped_ok
@given(seed=seeds(), kind=head_kinds())
def test_synthetic_writer_is_byte_deterministic(tmp_path, seed, kind):
    one = write_artifact(tmp_path / f"{seed}-{kind}-1", seed=seed, head_kind=kind)
    two = write_artifact(tmp_path / f"{seed}-{kind}-2", seed=seed, head_kind=kind)
    names = sorted(os.listdir(one))
    assert names == sorted(os.listdir(two))
    for name in names:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


@pytest.mark.laya_claim("artifact.roundtrip")
@given(data=st.data())
def test_qualified_artifact_roundtrip(qualified_artifact, qualified_model, data):
    request = data.draw(requests_for(qualified_model))
    again = laya.load_artifact(qualified_artifact)
    a, b = qualified_model.predict(request), again.predict(request)
    assert torch.equal(torch.tensor(a.probabilities), torch.tensor(b.probabilities))
    assert a.decision == b.decision


@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", ROLES)
@function_scoped_ok
@given(where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255))
def test_any_flipped_byte_is_refused(tmp_path, qualified_artifact, role, where, mask):
    directory = clone_artifact(qualified_artifact, tmp_path / "tampered")
    path = directory / manifest_entries(directory)[role]["path"]
    data = bytearray(path.read_bytes())
    data[int(where * len(data))] ^= mask
    rewrite_file(path, bytes(data))
    with pytest.raises(DigestMismatch) as refused:
        laya.load_artifact(directory)
    assert refused.value.file == manifest_entries(directory)[role]["path"]


@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", ROLES)
def test_truncated_or_missing_file_is_refused(tmp_path, qualified_artifact, role):
    directory = clone_artifact(qualified_artifact, tmp_path / "cut")
    rel = manifest_entries(directory)[role]["path"]
    rewrite_file(directory / rel, (directory / rel).read_bytes()[:-1])
    with pytest.raises(DigestMismatch, match=rel):
        laya.load_artifact(directory)
    (directory / rel).unlink()
    with pytest.raises(ArtifactError, match=f"{rel}.*missing"):
        laya.load_artifact(directory)


def _rewrite_manifest(directory: Path, edit) -> None:
    manifest = json.loads((directory / MANIFEST).read_text())
    edit(manifest)
    rewrite_file(directory / MANIFEST, json.dumps(manifest).encode())


@pytest.mark.laya_claim("artifact.paths")
@pytest.mark.parametrize("bad", ["../encoder.safetensors", "/etc/passwd", "a/../../x", "./head.json", "a//b", "C:/x"])
def test_escaping_manifest_path_is_refused(tmp_path, qualified_artifact, bad):
    directory = clone_artifact(qualified_artifact, tmp_path / "escape")

    def point_head_at_bad_path(manifest):
        next(e for e in manifest["files"] if e["role"] == "head_config")["path"] = bad

    _rewrite_manifest(directory, point_head_at_bad_path)
    with pytest.raises(ArtifactError, match="escapes"):
        laya.load_artifact(directory)


@pytest.mark.laya_claim("artifact.paths")
@pytest.mark.parametrize("role", ROLES)
def test_symlinked_pinned_file_is_refused(tmp_path, qualified_artifact, role):
    """Even a symlink to byte-identical content is refused: the bytes must live inside."""
    directory = clone_artifact(qualified_artifact, tmp_path / "linked")
    rel = manifest_entries(directory)[role]["path"]
    outside = tmp_path / "outside.bin"
    shutil.copyfile(directory / rel, outside)
    (directory / rel).unlink()
    (directory / rel).symlink_to(outside)
    with pytest.raises(ArtifactError, match="symlink"):
        laya.load_artifact(directory)


@pytest.mark.laya_claim("artifact.paths")
def test_symlinked_artifact_directory_is_refused(tmp_path, qualified_artifact):
    link = tmp_path / "link"
    link.symlink_to(qualified_artifact, target_is_directory=True)
    with pytest.raises(ArtifactError, match="symlink"):
        laya.load_artifact(link)


@pytest.mark.laya_claim("artifact.unlisted")
@pytest.mark.parametrize("name", ["extra.bin", "sub/extra.json", "README"])
def test_unlisted_file_is_refused(tmp_path, qualified_artifact, name):
    directory = clone_artifact(qualified_artifact, tmp_path / "extra")
    (directory / name).parent.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"not in the manifest")
    with pytest.raises(ArtifactError, match="not listed"):
        laya.load_artifact(directory)


json_values = st.recursive(
    st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@pytest.mark.laya_claim("adapter.refuse.standalone")
@function_scoped_ok
@given(payload=json_values)
def test_non_null_adapter_is_refused(tmp_path, qualified_artifact, payload):
    directory = clone_artifact(qualified_artifact, tmp_path / "adapter")
    _rewrite_manifest(directory, lambda manifest: manifest.__setitem__("adapter", payload))
    with pytest.raises(UnsupportedAdapter, match="adapter"):
        laya.load_artifact(directory)
