"""artifact-v1 claims: round trip, tamper refusal, path rules, adapter refusal."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.artifact.manifest import BASE_ROLES, HEAD_ROLES, MANIFEST, ROLES
from laya.errors import ArtifactError, DigestMismatch, LayaError
from laya_qual.synth import (
    artifact_configs,
    clone_artifact,
    head_kinds,
    pinned_path,
    replace_pinned_file,
    requests_for,
    rewrite_file,
    seeds,
    write_artifact,
)

function_scoped_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


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


def assert_flipped_byte_refused(directory: Path, role: str, where: float, mask: int) -> None:
    path = directory / pinned_path(directory, role)
    data = bytearray(path.read_bytes())
    data[int(where * len(data))] ^= mask
    rewrite_file(path, bytes(data))
    with pytest.raises(DigestMismatch) as refused:
        laya.load_artifact(directory)
    assert refused.value.file == pinned_path(directory, role)


# A head's copy of its base files is byte-identical to every other head's on that base
# (their pins are equal), so the base's files are tampered with once per base.
@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", BASE_ROLES)
@function_scoped_ok
@given(where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255))
def test_any_flipped_byte_of_a_base_file_is_refused(tmp_path, qualified_artifact, role, where, mask):
    assert_flipped_byte_refused(clone_artifact(qualified_artifact, tmp_path / "tampered"), role, where, mask)


@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", HEAD_ROLES)
@function_scoped_ok
@given(where=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255))
def test_any_flipped_byte_of_a_head_file_is_refused(tmp_path, qualified_artifact, role, where, mask):
    assert_flipped_byte_refused(clone_artifact(qualified_artifact, tmp_path / "tampered"), role, where, mask)


def assert_truncated_or_missing_refused(directory: Path, role: str) -> None:
    rel = pinned_path(directory, role)
    rewrite_file(directory / rel, (directory / rel).read_bytes()[:-1])
    with pytest.raises(DigestMismatch, match=rel):
        laya.load_artifact(directory)
    (directory / rel).unlink()
    with pytest.raises(ArtifactError, match=f"{rel}.*missing"):
        laya.load_artifact(directory)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", BASE_ROLES)
def test_a_truncated_or_missing_base_file_is_refused(tmp_path, qualified_artifact, role):
    assert_truncated_or_missing_refused(clone_artifact(qualified_artifact, tmp_path / "cut"), role)


@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", HEAD_ROLES)
def test_a_truncated_or_missing_head_file_is_refused(tmp_path, qualified_artifact, role):
    assert_truncated_or_missing_refused(clone_artifact(qualified_artifact, tmp_path / "cut"), role)


def _rewrite_manifest(directory: Path, edit) -> None:
    manifest = json.loads((directory / MANIFEST).read_text())
    edit(manifest)
    rewrite_file(directory / MANIFEST, json.dumps(manifest).encode())


# The manifest's `size` alone is off, its sha256 still right: only the size comparison, made
# from fstat before a byte is read, can refuse it (docs/artifact-v1.md, loading rule 5).
@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.tamper")
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("off_by", [-1, 1])
def test_a_pinned_size_other_than_the_files_is_refused(tmp_path, qualified_artifact, role, off_by):
    directory = clone_artifact(qualified_artifact, tmp_path / "resized")
    rel = pinned_path(directory, role)
    actual = (directory / rel).stat().st_size

    def resize(manifest):
        next(e for e in manifest["files"] if e["role"] == role)["size"] = actual + off_by
    _rewrite_manifest(directory, resize)
    with pytest.raises(DigestMismatch, match=f"size is {actual} bytes, manifest says {actual + off_by}") as refused:
        laya.load_artifact(directory)
    assert refused.value.file == rel


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.paths")
@pytest.mark.parametrize("bad", ["../encoder.safetensors", "/etc/passwd", "a/../../x", "./head.json", "a//b", "C:/x"])
def test_escaping_manifest_path_is_refused(tmp_path, qualified_artifact, bad):
    directory = clone_artifact(qualified_artifact, tmp_path / "escape")

    entries = json.loads((directory / MANIFEST).read_text())["files"]
    index = next(i for i, e in enumerate(entries) if e["role"] == "head_config")

    def point_head_at_bad_path(manifest):
        manifest["files"][index]["path"] = bad

    _rewrite_manifest(directory, point_head_at_bad_path)
    with pytest.raises(ArtifactError, match="escapes") as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == ("manifest.json", f"files[{index}].path"), str(refused.value)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.paths")
@pytest.mark.parametrize("unreadable", ["x" * 300 + ".json", "manifest.json/head.json"])
def test_a_path_the_file_system_cannot_open_is_refused_naming_it(tmp_path, qualified_artifact, unreadable):
    """A plain relative path that no file can have (a name past the file system's limit, a file
    where a directory should be) is an ArtifactError naming the path, never an OSError."""
    directory = clone_artifact(qualified_artifact, tmp_path / "unreadable")

    def point_head_at_it(manifest):
        next(e for e in manifest["files"] if e["role"] == "head_config")["path"] = unreadable

    _rewrite_manifest(directory, point_head_at_it)
    with pytest.raises(ArtifactError, match="cannot be read") as refused:
        laya.load_artifact(directory)
    assert refused.value.file == unreadable


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.paths")
@pytest.mark.parametrize("role", ROLES)
def test_symlinked_pinned_file_is_refused(tmp_path, qualified_artifact, role):
    """Even a symlink to byte-identical content is refused: the bytes must live inside."""
    directory = clone_artifact(qualified_artifact, tmp_path / "linked")
    rel = pinned_path(directory, role)
    outside = tmp_path / "outside.bin"
    shutil.copyfile(directory / rel, outside)
    (directory / rel).unlink()
    (directory / rel).symlink_to(outside)
    with pytest.raises(ArtifactError, match="symlink") as refused:
        laya.load_artifact(directory)
    assert refused.value.file == rel, str(refused.value)  # named, as every refusal of a file is


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.paths")
def test_symlinked_artifact_directory_is_refused(tmp_path, qualified_artifact):
    link = tmp_path / "link"
    link.symlink_to(qualified_artifact, target_is_directory=True)
    with pytest.raises(ArtifactError, match="symlink") as refused:
        laya.load_artifact(link)
    assert refused.value.file == str(link), str(refused.value)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.unlisted")
@pytest.mark.parametrize("name", ["extra.bin", "sub/extra.json", "README", ".notes", "sub/.hidden"])
def test_unlisted_file_is_refused(tmp_path, qualified_artifact, name):
    directory = clone_artifact(qualified_artifact, tmp_path / "extra")
    (directory / name).parent.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"not in the manifest")
    with pytest.raises(ArtifactError, match="not listed") as refused:
        laya.load_artifact(directory)
    assert refused.value.file == name, str(refused.value)  # the unlisted file, relative to the artifact


# --- parse what you hashed ---------------------------------------------------------------

class SwapAfterHash:
    """Right after the loader hashes the bytes it read from an armed file, that file's bytes change.

    Python's audit hook says which armed file was just opened; a wrapped hashlib.sha256
    sees those bytes being hashed and then overwrites the file in place with a valid but
    different file. A loader that parses the bytes it hashed is unaffected; one that
    reads the path again (Python or native reader, any API) parses the other file.
    """

    _active: list["SwapAfterHash"] = []
    _installed = False

    def __init__(self, armed: dict[Path, bytes]):
        self.files = {os.path.realpath(p): (Path(p).read_bytes(), new) for p, new in armed.items()}
        self.opened: str | None = None
        self.swapped: set[str] = set()

    @classmethod
    def _audit(cls, event: str, args: tuple) -> None:
        if event == "open" and cls._active and isinstance(args[0], (str, bytes, os.PathLike)):
            cls._active[-1].on_open(os.path.realpath(os.fsdecode(args[0])))

    def on_open(self, path: str) -> None:
        if path in self.files and path not in self.swapped:
            self.opened = path

    def hashed(self, data) -> None:
        path = self.opened
        if path is not None and bytes(data) == self.files[path][0]:
            self.swapped.add(path)
            self.opened = None
            with open(path, "r+b") as fh:  # the same inode: open descriptors and maps see it too
                fh.truncate(0)
                fh.write(self.files[path][1])

    def __enter__(self) -> "SwapAfterHash":
        if not SwapAfterHash._installed:  # audit hooks cannot be removed; inert while none is active
            sys.addaudithook(SwapAfterHash._audit)
            SwapAfterHash._installed = True
        SwapAfterHash._active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        SwapAfterHash._active.remove(self)


@contextlib.contextmanager
def watching_sha256(swap: SwapAfterHash):
    """hashlib.sha256 as always, telling `swap` which bytes were just hashed: those given at
    once or fed in chunks (``update``), told when the digest is taken."""
    real = hashlib.sha256

    class Watched:
        def __init__(self, data=b"", **kwargs):
            self._hash, self._seen = real(**kwargs), bytearray()
            self.update(data)

        def update(self, data) -> None:
            self._hash.update(data)
            self._seen += data

        def hexdigest(self) -> str:
            swap.hashed(self._seen)
            return self._hash.hexdigest()

        def digest(self) -> bytes:
            swap.hashed(self._seen)
            return self._hash.digest()

    hashlib.sha256 = Watched
    try:
        yield
    finally:
        hashlib.sha256 = real


def _alternative(role: str, data: bytes) -> bytes:
    """A valid file for `role` that differs from `data` in what it makes the model compute."""
    if role in ("encoder_weights", "head_weights"):
        return save_safetensors({k: t * 1.5 if t.is_floating_point() else t for k, t in load_safetensors(data).items()})
    obj = json.loads(data)
    if role == "encoder_config":
        obj["layer_norm_eps"] = 0.5
    elif role == "head_config":
        for task in obj["tasks"]:
            task["temperature"] *= 3
    elif role == "special_tokens":
        obj["cls"], obj["sep"] = obj["sep"], obj["cls"]
    elif role == "sequence_format":
        obj["question_token_type"], obj["option_token_type"] = obj["option_token_type"], obj["question_token_type"]
    elif role == "tokenizer":
        vocab = obj["model"]["vocab"]
        vocab["a"], vocab["e"] = vocab["e"], vocab["a"]  # the request's question is spelled with both
    return json.dumps(obj, indent=1).encode()


PARSE_REQUEST = laya.Request(task="answer", question="a e a e ba", options=("a e", "e", "ea ae"), state="e a")
FAMILIES = {"standalone": ROLES, "shared": ROLES, "base-dir": BASE_ROLES}


def _load(family: str, role: str, pristine: Path, armed: Path):
    """Load through one loader family, reading `role` from the armed copy and all else from the pristine one."""
    if family == "standalone":
        return laya.load_artifact(armed)
    if family == "base-dir":
        return laya.load_artifact_with_base(pristine, laya.load_artifact_base(pristine, armed))
    base_role = role in BASE_ROLES
    base = laya.load_artifact_base(armed if base_role else pristine)
    return laya.load_artifact_with_base(pristine if base_role else armed, base)


def _outcome(model) -> tuple:
    p = model.predict(PARSE_REQUEST)
    return torch.tensor(p.probabilities), p.decision, p.head_digest


@pytest.fixture(scope="module")
def parse_hashed_artifact(artifact_factory) -> tuple[Path, tuple]:
    directory = artifact_factory(seed=7, head_kind="transformer", base_seed=1)
    return directory, _outcome(laya.load_artifact(directory))


@pytest.mark.laya_claim("artifact.parse-hashed")
@pytest.mark.parametrize("family,role", [(f, r) for f, roles in FAMILIES.items() for r in roles])
def test_loader_parses_the_bytes_it_hashed(tmp_path, parse_hashed_artifact, family, role):
    pristine, expected = parse_hashed_artifact
    rel = pinned_path(pristine, role)
    other = _alternative(role, (pristine / rel).read_bytes())
    # the swapped-in file is one the loader would accept, and it changes the answer
    consistent = clone_artifact(pristine, tmp_path / "consistent")
    replace_pinned_file(consistent, role, other)
    changed = _outcome(laya.load_artifact(consistent))
    assert not torch.equal(changed[0], expected[0]) or changed[2] != expected[2], f"{role}: alternative is inert"

    armed = tmp_path / "armed"
    shutil.copytree(pristine, armed)  # real copies: the swap writes in place
    with SwapAfterHash({armed / rel: other}) as swap, watching_sha256(swap):
        try:
            model = _load(family, role, pristine, armed)
        except LayaError:
            model = None  # refusing is allowed: the bytes changed under the loader
    assert swap.swapped == {os.path.realpath(armed / rel)}, (
        f"{rel} was not hashed right after Python opened it; this check cannot see how the loader reads it")
    if model is not None:
        got = _outcome(model)
        assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:], (
            f"{family} loader: the model reflects {rel} as changed after hashing, not the hashed bytes")
