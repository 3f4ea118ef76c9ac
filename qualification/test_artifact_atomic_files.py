"""artifact.atomic-file: laya's single-file writer (laya.artifact.atomic.write_file / write_files,
which writes the feature store of `laya train` and laya-qual's keys and reports) follows
docs/artifact-v1.md's "Writing rules" too: each file appears whole or not at all and an
existing one is never replaced (docs/training.md: "an existing store is never replaced",
laya.artifact.atomic.OutputExists).

Oracle: the parent directory's bytes, read with os.walk before and after, and the error's
class and ``file``. The failures are real: an existing name of each kind; a write cut short
by the process's file-size limit (RLIMIT_FSIZE: the kernel's EFBIG, as on a full disk); a
name taken by a second thread while the writer holds right before publishing (the
``LAYA_TEST_HOLD_PUBLISH`` seam); a temporary name already taken by a leftover file (the
random draw made to give that name first). A filesystem without hard links, whose ``link``
fails with EPERM, is simulated by making ``os.link`` fail so.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
from pathlib import Path

import pytest

from laya.artifact.atomic import write_file, write_files
from laya.errors import LayaError, OutputExists
from laya_qual.suite.holding import while_held



def tree(directory: Path) -> dict[str, bytes | None]:
    """Every path under ``directory`` (hidden ones and dangling links included): its bytes,
    None for a directory, the target for a symlink."""
    out: dict[str, bytes | str | None] = {}
    for p in sorted(directory.rglob("*")):
        out[str(p.relative_to(directory))] = (os.readlink(p) if p.is_symlink() else
                                              p.read_bytes() if p.is_file() else None)
    return out


def entries(parent: Path, *sizes: int) -> list[tuple[Path, bytes, int]]:
    return [(parent / f"f{i}.bin", bytes([i]) * size, 0o644) for i, size in enumerate(sizes)]


def existing(parent: Path, kind: str) -> Path:
    path = parent / "f1.bin"
    if kind == "file":
        path.write_bytes(b"someone else's")
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(parent / "nowhere")  # dangling: lexists, not exists
    return path


def write_while_held(files: list[tuple[Path, bytes, int]], marker: Path, meanwhile) -> None:
    """write_files(files), running ``meanwhile()`` once the writer holds before publishing
    (the seam holds on the last file); re-raises what the writer raised."""
    while_held(files[-1][0], marker, lambda: write_files(files), lambda _temporaries: meanwhile())


@pytest.fixture
def without_hard_links(monkeypatch):
    """``os.link`` failing as on a filesystem without hard links (vfat, some network mounts)."""
    def link(*_args, **_kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", link)


@pytest.mark.laya_claim("artifact.atomic-file")
@pytest.mark.parametrize("kind", ["file", "directory", "dangling-symlink"])
def test_an_existing_name_is_refused_and_nothing_is_written(tmp_path, kind):
    taken = existing(tmp_path, kind)
    before = tree(tmp_path)
    with pytest.raises(OutputExists) as refused:
        write_files(entries(tmp_path, 3, 5, 7))  # f0 is written to a temporary before f1 is refused
    assert refused.value.file == str(taken)
    assert tree(tmp_path) == before
    with pytest.raises(OutputExists):
        write_file(taken, b"x")
    assert tree(tmp_path) == before


def one_line_naming(error: OSError, path: Path, reason: str) -> None:
    """What a command prints as its one `Error:` line: a LayaError naming the output and the OS's reason."""
    assert isinstance(error, LayaError), f"a raw {type(error).__name__}, not a LayaError: {error!r}"
    assert str(error) == f"{path}: cannot be written ({reason})", str(error)


@pytest.mark.laya_claim("artifact.atomic-file")
def test_a_write_cut_short_leaves_nothing(tmp_path):
    """The second file exceeds the file-size limit mid-write: EFBIG, and no byte of either
    file remains, under its name or a temporary one."""
    assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN  # Python's default: EFBIG, not a kill
    (tmp_path / "neighbour").write_bytes(b"keep")
    before = tree(tmp_path)
    limit = 1 << 16
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        with pytest.raises(OSError) as failed:
            write_files(entries(tmp_path, 100, limit + 1))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert failed.value.errno == errno.EFBIG, failed.value
    one_line_naming(failed.value, tmp_path / "f1.bin", "File too large")
    assert tree(tmp_path) == before
    assert write_file(tmp_path / "f1.bin", b"z" * (limit + 1)).read_bytes() == b"z" * (limit + 1)  # the limit's doing


@pytest.mark.laya_claim("artifact.atomic-file")
def test_a_name_taken_during_publication_unpublishes_the_earlier_files(tmp_path):
    """f0 is published, then f1's name turns out taken: OutputExists naming f1, f0 removed
    again, the other writer's f1 kept."""
    files = entries(tmp_path, 3, 5)
    with pytest.raises(OutputExists) as refused:
        write_while_held(files, tmp_path / "held", lambda: files[1][0].write_bytes(b"theirs"))
    assert refused.value.file == str(files[1][0])
    assert tree(tmp_path) == {"f1.bin": b"theirs"}


@pytest.mark.laya_claim("artifact.atomic-file")
@pytest.mark.usefixtures("without_hard_links")
def test_without_hard_links_files_are_still_published_whole_and_never_replace(tmp_path):
    files = entries(tmp_path, 3, 5)
    write_files(files)
    assert tree(tmp_path) == {"f0.bin": files[0][1], "f1.bin": files[1][1]}
    again = [(tmp_path / "g0.bin", b"mine", 0o644), (tmp_path / "g1.bin", b"mine too", 0o644)]
    with pytest.raises(OutputExists) as refused:
        write_while_held(again, tmp_path / "held", lambda: again[1][0].write_bytes(b"theirs"))
    assert refused.value.file == str(again[1][0])
    assert tree(tmp_path) == {"f0.bin": files[0][1], "f1.bin": files[1][1], "g1.bin": b"theirs"}


@pytest.mark.laya_claim("artifact.atomic-file")
def test_a_failing_link_raises_its_error_and_leaves_nothing(tmp_path, monkeypatch):
    """A link error other than "exists" or "no hard links here" (EIO) is not a refusal of the
    name: it propagates and nothing remains."""
    def link(*_args, **_kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(OSError) as failed:
        write_files(entries(tmp_path, 3, 5))
    assert failed.value.errno == errno.EIO and not isinstance(failed.value, OutputExists)
    one_line_naming(failed.value, tmp_path / "f0.bin", "Input/output error")
    assert tree(tmp_path) == {}


@pytest.mark.laya_claim("artifact.atomic-file")
def test_a_temporary_name_already_taken_is_never_written_and_another_is_drawn(tmp_path, monkeypatch):
    """The temporary sibling is created exclusively: when its random name is already taken (a
    leftover of a killed writer), that file is left as it was and a fresh name is drawn."""
    import laya.artifact.atomic

    final = tmp_path / "store.bin"
    leftover = tmp_path / ".store.bin.tmp-00000000"
    theirs = b"a killed writer's bytes, longer than the new data"
    leftover.write_bytes(theirs)
    names = iter([leftover, tmp_path / ".store.bin.tmp-00000001"])
    monkeypatch.setattr(laya.artifact.atomic, "temporary_sibling", lambda _final: next(names))
    write_file(final, b"new data")
    assert tree(tmp_path) == {"store.bin": b"new data", leftover.name: theirs}
