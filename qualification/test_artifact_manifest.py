"""artifact.manifest: the manifest's shape rules of docs/artifact-v1.md ("Directory and
manifest": one entry per role; a head artifact lists all seven roles, a base-only one the
five base roles and no head role) and the loader's refusals around them, each an
ArtifactError naming the file and, where there is one, the field (loading rule 6).

Oracle: the rule as the doc states it, applied to a copy of a synthetic artifact whose
manifest.json is edited here as JSON (the manifest is the root of trust, not itself
pinned), with the files it drops deleted so that nothing is unlisted. Each refused copy
differs from a copy that loads (``test_the_unedited_copy_loads``) in that one edit.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import laya
from laya.artifact.manifest import BASE_ROLES, HEAD_ROLES, MANIFEST, write_artifact_files
from laya.errors import ArtifactError
from laya_qual.synth import pinned_path, replace_pinned_file


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=3, head_kind="float32")


@pytest.fixture
def copy(pristine, tmp_path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "artifact"))


def edit_manifest(directory: Path, edit) -> None:
    manifest = json.loads((directory / MANIFEST).read_bytes())
    edit(manifest)
    (directory / MANIFEST).write_text(json.dumps(manifest))


def drop_roles(directory: Path, roles) -> None:
    """The entries of ``roles`` removed from the manifest and their files deleted."""
    for role in roles:
        (directory / pinned_path(directory, role)).unlink()
    edit_manifest(directory, lambda m: m.update(files=[e for e in m["files"] if e["role"] not in roles]))


def refused(load, directory: Path) -> ArtifactError:
    with pytest.raises(ArtifactError) as caught:
        load(directory)
    return caught.value


LOADERS = {
    "load_artifact": laya.load_artifact,
    "load_artifact_base": laya.load_artifact_base,
    "load_artifact_with_base": lambda d: laya.load_artifact_with_base(d, laya.load_artifact_base(d)),
}


@pytest.mark.laya_claim("artifact.manifest")
def test_the_unedited_copy_loads(copy, pristine):
    edit_manifest(copy, lambda m: None)  # the same manifest, re-spelled by json.dumps
    assert laya.load_artifact(copy).tasks
    drop_roles(copy, HEAD_ROLES)
    assert laya.load_artifact_base(copy).hidden_size == 32  # a base-only artifact is a base
    # and it is the base a head on it is loaded with (base_dir), the same base as the head's own copy
    shared = laya.load_artifact_base(pristine, base_dir=copy)
    assert shared.identity == laya.load_artifact_base(pristine).identity


@pytest.mark.laya_claim("artifact.manifest")
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_directory_that_does_not_exist_is_refused_naming_it(tmp_path, loader):
    missing = tmp_path / "no-such-artifact"
    error = refused(LOADERS[loader], missing)
    assert error.file == str(missing) and "does not exist" in str(error), str(error)
    assert not missing.exists()


@pytest.mark.laya_claim("artifact.manifest")
@pytest.mark.parametrize("roles", [HEAD_ROLES, HEAD_ROLES[1:], BASE_ROLES[2:3]],
                         ids=["base-only", "no-head-weights", "no-tokenizer"])
def test_a_head_artifact_lists_all_seven_roles(copy, roles):
    drop_roles(copy, roles)
    error = refused(laya.load_artifact, copy)
    assert (error.file, error.field) == (MANIFEST, "files"), str(error)
    assert all(role in str(error) for role in roles), str(error)


@pytest.mark.laya_claim("artifact.manifest")
@pytest.mark.parametrize("roles", [HEAD_ROLES[:1], HEAD_ROLES[1:]], ids=["no-head-weights", "no-head-config"])
def test_a_base_load_refuses_half_a_head(copy, roles):
    drop_roles(copy, roles)
    error = refused(laya.load_artifact_base, copy)
    assert (error.file, error.field) == (MANIFEST, "files"), str(error)


def _twice(manifest: dict, key: str) -> None:
    first, second = manifest["files"][0], manifest["files"][1]
    second[key] = first[key]


@pytest.mark.laya_claim("artifact.manifest")
@pytest.mark.parametrize("edit", [
    pytest.param(lambda m: _twice(m, "role"), id="role-twice"),
    pytest.param(lambda m: _twice(m, "path"), id="path-twice"),
    pytest.param(lambda m: m["files"][1].update(path=MANIFEST), id="manifest-pinned"),
])
def test_a_role_or_path_listed_twice_is_refused(copy, edit):
    edit_manifest(copy, edit)
    error = refused(laya.load_artifact, copy)
    assert (error.file, error.field) == (MANIFEST, "files[1]"), str(error)


@pytest.mark.laya_claim("artifact.manifest")
@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_pinned_path_that_is_a_directory_is_refused_naming_it(copy, loader):
    """The manifest pins the directory's own size, so no size check can stand in for this rule."""
    path = pinned_path(copy, "tokenizer")
    (copy / path).unlink()
    (copy / path).mkdir()
    size = (copy / path).stat().st_size
    edit_manifest(copy, lambda m: [e.update(size=size) for e in m["files"] if e["path"] == path])
    assert refused(LOADERS[loader], copy).file == path


@pytest.mark.laya_claim("artifact.manifest")
@pytest.mark.parametrize("role, text", [(None, "[]"), ("head_config", "[1]"), ("special_tokens", '"cls"'),
                                        ("encoder_config", "null")])
def test_a_json_file_whose_top_level_is_not_an_object_is_refused_naming_it(copy, role, text):
    if role is None:
        (copy / MANIFEST).write_text(text)
    else:
        replace_pinned_file(copy, role, text.encode())
    error = refused(laya.load_artifact, copy)
    assert error.file == (MANIFEST if role is None else pinned_path(copy, role)), str(error)


@pytest.mark.laya_claim("artifact.manifest")
def test_writing_an_unknown_role_is_refused_and_writes_nothing(tmp_path):
    files = {"encoder_config": ("encoder_config.json", b"{}"), "adapter_weights": ("adapter.bin", b"\0")}
    with pytest.raises(ArtifactError) as caught:
        write_artifact_files(tmp_path / "artifact", files)
    assert (caught.value.file, caught.value.field) == ("adapter.bin", "role"), str(caught.value)
    assert os.listdir(tmp_path) == []
