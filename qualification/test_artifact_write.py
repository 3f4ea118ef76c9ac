"""artifact.atomic-write: an artifact directory appears complete or not at all.

Oracle: what a complete artifact holds is spelled out here from docs/artifact-v1.md
(exactly the given files, byte for byte, and a manifest pinning each one's sha256
and size, sorted by path, ``adapter: null``), computed with hashlib and compared as
parsed JSON; "nothing" is the parent directory's listing before the write, taken
with ``os.listdir``. No laya reader is involved.

Two real interruptions, at a drawn point: an OS error while writing the k-th file
(the k-th path runs through an earlier file, so its directory cannot be made), and a
real SIGINT, sent by a second thread once the writer holds right before publishing
(the ``LAYA_TEST_HOLD_PUBLISH`` seam of laya.artifact.atomic), turned into KeyboardInterrupt
by Python's own handler. An existing output is refused and left as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from laya.artifact.manifest import ROLES, write_artifact_files
from laya.artifact.atomic import HOLD_ENV
from laya.errors import LayaError

NAMES = ("a.json", "b.bin", "c.safetensors", "d/e.json", "d/f.bin", "g/h/i.bin")
HOLD_TIMEOUT_S = 30.0  # turns a writer that never holds into a failure


@st.composite
def artifact_files(draw, min_size=1):
    """{role: (path, bytes)} with distinct roles and paths, none inside another."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=min_size, max_size=len(NAMES) - 1, unique=True))
    roles = draw(st.permutations(ROLES))[:len(names)]
    return {role: (name, draw(st.binary(max_size=64))) for role, name in zip(roles, names)}


def expected_manifest(files) -> dict:
    entries = [{"path": path, "role": role, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
               for role, (path, data) in files.items()]
    return {"format": "laya-artifact-v1", "files": sorted(entries, key=lambda e: e["path"]), "adapter": None}


def tree(directory) -> dict[str, bytes]:
    out = {}
    for dirpath, _, filenames in os.walk(directory):
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, directory).replace(os.sep, "/")] = fh.read()
    return out


def output_path(tmp_path_factory, existing: str) -> Path:
    """``artifact`` in a fresh directory, already there as ``existing`` says: none, an empty
    directory, a file, or a non-empty directory."""
    final = tmp_path_factory.mktemp("write") / "artifact"
    if existing == "file":
        final.write_bytes(b"someone else's")
    elif existing != "none":
        final.mkdir()
        if existing == "non-empty directory":
            (final / "mine.txt").write_bytes(b"someone else's")
    return final


@pytest.mark.laya_claim("artifact.atomic-write")
@given(files=artifact_files(), existing=st.sampled_from(["none", "empty directory"]))
def test_complete_write_is_exactly_the_files_and_their_manifest(tmp_path_factory, files, existing):
    final = output_path(tmp_path_factory, existing)
    parent = final.parent
    write_artifact_files(final, files)
    written = tree(final)
    assert json.loads(written.pop("manifest.json")) == expected_manifest(files)
    assert written == {path: data for path, data in files.values()}
    assert os.listdir(parent) == ["artifact"], "a temporary was left beside the artifact"


@pytest.mark.laya_claim("artifact.atomic-write")
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_written_artifact_has_the_modes_of_a_plain_write(tmp_path, umask):
    """Built in a temporary but published with the modes a directory and files made in place
    get: 0o777 and 0o666 less the umask."""
    before = os.umask(umask)
    try:
        root = write_artifact_files(tmp_path / "artifact", {"encoder_config": ("config/e.json", b"{}"),
                                                            "tokenizer": ("t.json", b"{}")})
    finally:
        os.umask(before)
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}
    directories, files = 0o777 & ~umask, 0o666 & ~umask
    assert modes == {"artifact": directories, "artifact/config": directories, "artifact/config/e.json": files,
                     "artifact/t.json": files, "artifact/manifest.json": files}, {k: oct(v) for k, v in modes.items()}


@pytest.mark.laya_claim("artifact.atomic-write")
@given(files=artifact_files(min_size=2), at=st.integers(1, len(NAMES)))
@example(files={"encoder_config": ("a.json", b"{}"), "tokenizer": ("b.bin", b"x")}, at=1)
def test_an_error_while_writing_leaves_nothing(tmp_path_factory, files, at):
    parent = tmp_path_factory.mktemp("write")
    (parent / "neighbour").write_bytes(b"keep")
    before = sorted(os.listdir(parent))
    items = list(files.items())
    at = min(at, len(items))
    first_path = items[0][1][0]
    spare = next(r for r in ROLES if r not in files)
    items.insert(at, (spare, (f"{first_path}/inside.bin", b"cannot be written")))  # under a file: OSError
    with pytest.raises(LayaError) as failed:  # a one-line error naming the artifact, not a raw OSError
        write_artifact_files(parent / "artifact", dict(items))
    message = str(failed.value)  # the OS's reason varies (mkdir under a file: "File exists")
    assert message.startswith(f"{parent / 'artifact'}: cannot be written (") and "\n" not in message, message
    assert sorted(os.listdir(parent)) == before


@pytest.mark.laya_claim("artifact.atomic-write")
@given(files=artifact_files())
def test_sigint_before_publishing_leaves_nothing(tmp_path_factory, files):
    parent = tmp_path_factory.mktemp("write")
    marker = tmp_path_factory.mktemp("marker") / "held"
    final = parent / "artifact"
    before = sorted(os.listdir(parent))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    done = threading.Event()

    def interrupt_when_held():
        while not marker.exists():
            if done.wait(0.005):
                return
        os.kill(os.getpid(), signal.SIGINT)

    os.environ[HOLD_ENV] = f"{final}{os.pathsep}{marker}"
    killer = threading.Thread(target=interrupt_when_held, daemon=True)
    killer.start()
    timer = threading.Timer(HOLD_TIMEOUT_S, done.set)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            write_artifact_files(final, files)
    finally:
        del os.environ[HOLD_ENV]
        done.set()
        timer.cancel()
        killer.join()
        signal.signal(signal.SIGINT, previous)
    assert sorted(os.listdir(parent)) == before


@pytest.mark.laya_claim("artifact.atomic-write")
@given(files=artifact_files(), existing=st.sampled_from(["file", "non-empty directory"]))
def test_an_existing_output_is_refused_and_kept(tmp_path_factory, files, existing):
    final = output_path(tmp_path_factory, existing)
    parent = final.parent
    before = tree(parent)
    with pytest.raises(LayaError) as refused:
        write_artifact_files(final, files)
    assert str(final) in str(refused.value)
    assert tree(parent) == before and sorted(os.listdir(parent)) == ["artifact"]
