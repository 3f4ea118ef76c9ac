"""Outputs that appear whole or not at all.

Every file or directory laya and laya-qual write is built under a temporary sibling
name (``.NAME.tmp-XXXXXXXX`` in the same directory, hence on the same filesystem),
flushed to disk with fsync, and only then renamed to NAME. A crash, Ctrl-C or kill
therefore leaves either the complete output or nothing under NAME; an exception
(KeyboardInterrupt and SystemExit included) removes the temporary, and only a hard
kill (SIGKILL, power loss) can leave one behind, under its hidden name.

Publishing never replaces an existing output: a file is published with ``link``
(which refuses an existing name, symlinks included), a directory with ``rename``
(which refuses anything but an empty directory). ``replace=True`` is for the
outputs whose documented option says they are overwritten (the report bundle).
An OS error on the way (a full disk, no permission) is ``WriteFailed`` naming the output,
raised once the temporaries are gone, so a command can say it in one ``Error:`` line.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from laya.errors import OutputExists, WriteFailed

# Test seam (tests/test_interrupted_writes.py): "FINAL<os.pathsep>MARKER". Before publishing
# FINAL, write the temporaries' names to MARKER and wait until MARKER is removed, so a
# test can signal a process whose output is complete but not yet published.
HOLD_ENV = "LAYA_TEST_HOLD_PUBLISH"
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV)


def temporary_sibling(final: Path) -> Path:
    """A fresh hidden name next to ``final``: ``.NAME.tmp-XXXXXXXX``."""
    return final.with_name(f".{final.name}.tmp-{secrets.token_hex(4)}")


@contextmanager
def new_directory(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling directory to fill. When the block ends normally its
    tree is fsynced and it is renamed to ``final``, which may exist only as an empty
    directory (``OutputExists`` otherwise); on any exception it is removed."""
    final = Path(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        temp = _create(final, lambda path: os.mkdir(path, 0o777))
    except OSError as exc:
        _raise_write_failed(final, exc)
        raise
    try:
        yield temp
        _sync_tree(temp)
        _hold_for_test(final, [temp])
        try:
            os.rename(temp, final)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise OutputExists(final) from None
            raise
        _sync_directory(final.parent)
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        _raise_write_failed(final, exc)
        raise


def write_file(final: str | os.PathLike, data: bytes, *, mode: int = 0o666, replace: bool = False) -> Path:
    """Write ``data`` to ``final`` through a temporary sibling (``mode`` before the umask)."""
    write_files([(Path(final), data, mode)], replace=replace)
    return Path(final)


def write_files(entries: Sequence[tuple[Path, bytes, int]], *, replace: bool = False) -> None:
    """Write each ``(path, data, mode)`` to a temporary sibling created with that mode
    (so a 0600 file is never readable by others, not even for a moment), fsync them
    all, then publish them in the given order. Without ``replace`` an existing path is
    refused with ``OutputExists`` and, if publishing fails half way, the files already
    published are removed again. A hard kill between two publications can leave the
    earlier ones only: callers put the file whose presence means "complete" last."""
    temps: list[Path] = []
    published: list[Path] = []
    try:
        for final, data, mode in entries:
            if not replace and os.path.lexists(final):
                raise OutputExists(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            temps.append(_create(final, lambda path, data=data, mode=mode: _write_new(path, data, mode)))
        _hold_for_test(entries[-1][0], temps)
        for (final, _, _), temp in zip(entries, temps):
            _publish(temp, final, replace)
            published.append(final)
        for parent in {final.parent for final in published}:
            _sync_directory(parent)
    except BaseException as exc:
        for path in temps + ([] if replace else published):
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # every OS error comes after the loop has named its ``final``
            _raise_write_failed(final, exc)
        raise


def _raise_write_failed(final: Path, exc: BaseException) -> None:
    """Re-raise a plain OS error as ``WriteFailed`` naming ``final``; anything else goes on as it was."""
    if isinstance(exc, OSError) and not isinstance(exc, WriteFailed):
        raise WriteFailed(final, exc.strerror or str(exc), exc.errno) from None


def _create(final: Path, make) -> Path:
    """Make a new temporary sibling of ``final`` with ``make(path)``, retrying a name clash."""
    while True:
        temp = temporary_sibling(final)
        try:
            make(temp)
            return temp
        except FileExistsError:  # a leftover temporary with the same 32 random bits: never written, draw again
            continue


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _publish(temp: Path, final: Path, replace: bool) -> None:
    if replace:
        os.replace(temp, final)
        return
    try:
        os.link(temp, final, follow_symlinks=False)
    except FileExistsError:
        raise OutputExists(final) from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # A filesystem without hard links: check, then rename (a narrow race remains).
        if os.path.lexists(final):
            raise OutputExists(final) from None
        os.rename(temp, final)
        return
    temp.unlink()


def _sync_tree(root: Path) -> None:
    """fsync every file, then every directory bottom-up, so the rename publishes data on disk."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _sync_directory(Path(dirpath))


def _sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hold_for_test(final: Path, temps: list[Path]) -> None:
    spec = os.environ.get(HOLD_ENV)
    if not spec:
        return
    target, _, marker = spec.partition(os.pathsep)
    if os.path.abspath(target) != os.path.abspath(final):
        return
    Path(marker).write_text("\n".join(str(t) for t in temps) + "\n")
    while os.path.exists(marker):
        time.sleep(0.01)
