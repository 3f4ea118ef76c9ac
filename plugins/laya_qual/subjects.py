"""Subject digests: what a report vouches for, named so anyone can recompute it.

Two algorithms, both documented in docs/report-format.md:

* runtime (source tree): sha256 over ``"<sha256hex>  <relpath>\\n"`` lines of every
  ``*.py`` file, sorted by relative path -- the bytes ``sha256sum`` prints, so a
  shell one-liner reproduces it, and renaming a file changes it.
* artifact (model directory): sha256 over the concatenated raw 32-byte sha256 of
  every regular file, sorted by relative path -- OpenSSF model-signing's
  "digest of digests" root, so its tooling and ours agree.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


class SubjectError(Exception):
    """A subject cannot be digested (missing directory, symlink inside)."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _regular_files(root: Path, pattern: str) -> list[tuple[str, Path]]:
    if not root.is_dir():
        raise SubjectError(f"{root}: not a directory")
    files = []
    for path in root.rglob(pattern):
        if "__pycache__" in path.parts:
            continue
        if path.is_symlink():
            raise SubjectError(f"{path}: symlinks are not digested (refused)")
        if path.is_file():
            files.append((path.relative_to(root).as_posix(), path))
    return sorted(files, key=lambda item: item[0].encode())


def source_digest(root: Path) -> tuple[str, dict[str, str]]:
    """Digest of a Python source tree and its per-file sha256s."""
    per_file = {rel: file_sha256(p) for rel, p in _regular_files(Path(root), "*.py")}
    lines = "".join(f"{digest}  {rel}\n" for rel, digest in per_file.items())
    return hashlib.sha256(lines.encode()).hexdigest(), per_file


def artifact_digest(root: Path) -> tuple[str, dict[str, str]]:
    """model-signing style root digest of a directory and its per-file sha256s."""
    per_file = {rel: file_sha256(p) for rel, p in _regular_files(Path(root), "*")}
    if not per_file:
        raise SubjectError(f"{root}: no files to digest")
    root_hash = hashlib.sha256()
    for digest in per_file.values():
        root_hash.update(bytes.fromhex(digest))
    return root_hash.hexdigest(), per_file


def package_dir(name: str) -> Path | None:
    """Directory of an importable package, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def runtime_subject() -> dict:
    root = package_dir("laya")
    if root is None:
        raise SubjectError("the laya runtime package is not importable")
    digest, per_file = source_digest(root)
    return {"name": "laya-runtime", "digest": {"sha256": digest},
            "annotations": {"kind": "runtime", "files": len(per_file)}}


def artifact_subject(directory: str | Path, role: str) -> dict:
    path = Path(directory)
    digest, per_file = artifact_digest(path)
    return {"name": f"artifact/{path.resolve().name}", "digest": {"sha256": digest},
            "annotations": {"kind": "artifact", "role": role, "files": per_file}}


def subjects(artifacts: list[str], base: str | None) -> list[dict]:
    """The runtime plus every qualified artifact directory (the base once)."""
    out = [runtime_subject()]
    seen = set()
    for directory, role in [(base, "base")] * (base is not None) + [(a, "head") for a in artifacts]:
        key = Path(directory).resolve()
        if key not in seen:
            seen.add(key)
            out.append(artifact_subject(directory, role))
    return out
