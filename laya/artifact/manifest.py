"""artifact-v1 on disk: the manifest, its pinned files, and the rules that make
loading trustworthy (docs/artifact-v1.md is the specification).

Each pinned file is read once into memory, hashed chunk by chunk as it is read, and
later parsed from those same bytes; nothing re-opens a path after hashing it, and no
file is read at all whose size is not the manifest's or is above its role's limit. Paths stay inside the
artifact directory, symlinks are refused, and so is any file the manifest does
not list. Manifests (and the JSON files laya writes into artifacts) are spelled in
laya.artifact.binding's canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from laya.artifact.atomic import new_directory
from laya.artifact.binding import canonical_json, sha256
from laya.errors import ArtifactError, DigestMismatch, UnsupportedAdapter
from laya.artifact.text import unprintable_reason

FORMAT = "laya-artifact-v1"
MANIFEST = "manifest.json"
BASE_ROLES = ("encoder_config", "encoder_weights", "tokenizer", "special_tokens", "sequence_format")
HEAD_ROLES = ("head_config", "head_weights")
ROLES = BASE_ROLES + HEAD_ROLES
JSON_ROLES = ("encoder_config", "special_tokens", "sequence_format", "head_config")
# Checked on the file's size before it is read (docs/artifact-v1.md, "Limits").
MAX_JSON_BYTES = 1 << 20  # the manifest and every small JSON file
MAX_TOKENIZER_BYTES = 64 << 20
MAX_ENCODER_WEIGHTS_BYTES = 16 << 30  # 4 Gi float32 parameters: seven XLM-R-large encoders
MAX_HEAD_WEIGHTS_BYTES = 256 << 20  # 64 Mi float32 parameters: 5 transformer head layers at width 1024
_CHUNK = 1 << 20  # bytes read and hashed at a time
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PinnedFile:
    role: str
    path: str  # relative to the artifact directory, '/'-separated
    data: bytes | bytearray  # as read and hashed; a weights file's tensors are views into it: never write to it
    sha256: str


@dataclass(frozen=True)
class ArtifactFiles:
    """The verified bytes of one artifact directory, by role."""

    directory: Path
    files: Mapping[str, PinnedFile]

    def __getitem__(self, role: str) -> PinnedFile:
        return self.files[role]


def read_artifact_files(directory: str | os.PathLike, *, require_head: bool = True) -> ArtifactFiles:
    """Read and verify every file an artifact's manifest lists.

    ``require_head=False`` accepts a base-only artifact (base roles alone).
    """
    root = Path(directory)
    if not root.exists():
        raise ArtifactError("artifact directory does not exist", file=str(root))
    if root.is_symlink() or not root.is_dir():
        raise ArtifactError("artifact path is a symlink or not a directory", file=str(root))
    manifest = _parse_manifest(_read_inside(root, MANIFEST, limit=MAX_JSON_BYTES)[0])
    files: dict[str, PinnedFile] = {}
    for entry in manifest["files"]:
        data, digest = _read_inside(root, entry["path"], size=entry["size"], limit=_ROLE_LIMITS[entry["role"]])
        if digest != entry["sha256"]:
            raise DigestMismatch(f"sha256 is {digest}, manifest pins {entry['sha256']}", file=entry["path"])
        files[entry["role"]] = PinnedFile(entry["role"], entry["path"], data, digest)
    required = ROLES if require_head else BASE_ROLES
    missing = [role for role in required if role not in files]
    if missing:
        raise ArtifactError(f"manifest lists no file for role(s) {missing}", file=MANIFEST, field="files")
    if not require_head and any(r in files for r in HEAD_ROLES) and not all(r in files for r in HEAD_ROLES):
        raise ArtifactError(f"a head needs both roles {list(HEAD_ROLES)}", file=MANIFEST, field="files")
    _refuse_unlisted(root, {MANIFEST} | {e["path"] for e in manifest["files"]})
    return ArtifactFiles(root, files)


def require_new_artifact_dir(directory: str | os.PathLike) -> Path:
    """``directory`` if an artifact may be written there (absent, or an empty directory);
    ArtifactError naming it otherwise. Callers with long work ahead check this first."""
    root = Path(directory)
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise ArtifactError("refusing to write: the path exists and is not a directory", file=str(root))
    if root.exists() and any(root.iterdir()):
        raise ArtifactError("refusing to write into a non-empty directory", file=str(root))
    return root


def write_artifact_files(directory: str | os.PathLike, files: Mapping[str, tuple[str, bytes]]) -> Path:
    """Write pinned files ({role: (relative path, bytes)}) and their manifest.

    The directory must not exist yet or be empty: an artifact is written whole. It is
    built in a temporary sibling and renamed into place only once complete and synced
    (laya.artifact.atomic), so an interrupted write leaves nothing under ``directory``.
    """
    root = require_new_artifact_dir(directory)
    for role, (rel, _) in files.items():
        if role not in ROLES:
            raise ArtifactError(f"unknown file role {role!r}", file=rel, field="role")
    with new_directory(root) as temp:
        entries = []
        for role, (rel, data) in files.items():
            target = temp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            entries.append({"path": rel, "role": role, "sha256": sha256(data), "size": len(data)})
        manifest = {"format": FORMAT, "files": sorted(entries, key=lambda e: e["path"]), "adapter": None}
        (temp / MANIFEST).write_bytes(canonical_json(manifest))
    return root


def parse_json_object(pinned: PinnedFile) -> dict[str, Any]:
    """Parse a pinned JSON file from the bytes that were hashed."""
    return loads_json_object(pinned.data, pinned.path)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse a repeated key: parsers disagree on which value wins, so the pin would be ambiguous."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        repeated = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"duplicate key {repeated!r}")
    return obj


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON (strict JSON has no NaN or Infinity)")


_NONZERO_DIGIT = re.compile(r"[1-9]")


def _exact_float(literal: str) -> float:
    """Refuse a number that a float cannot hold: silently reading 1e999 as infinity or
    1e-999 as zero would load a value the file does not say."""
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"{literal[:40]} overflows a float to infinity")
    if value == 0.0 and _NONZERO_DIGIT.search(literal.lower().partition("e")[0]):
        raise ValueError(f"{literal[:40]} underflows a float to zero")
    return value


def loads_json_object(data: bytes, path: str) -> dict[str, Any]:
    """A JSON object from UTF-8 bytes, or ArtifactError naming ``path``."""
    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant,
                         parse_float=_exact_float)
    except RecursionError:
        raise ArtifactError("JSON nested deeper than the parser's recursion limit", file=path) from None
    except ValueError as exc:  # bad UTF-8 or JSON, a duplicate key, NaN, a float out of range, a number too long
        raise ArtifactError(f"not valid strict UTF-8 JSON ({exc})", file=path) from None
    if not isinstance(obj, dict):
        raise ArtifactError("top level must be a JSON object", file=path)
    return obj


def _parse_manifest(data: bytes) -> dict[str, Any]:
    manifest = loads_json_object(data, MANIFEST)
    if "adapter" not in manifest:
        raise ArtifactError("missing field (artifact-v1 requires `adapter: null`)", file=MANIFEST, field="adapter")
    if manifest["adapter"] is not None:
        raise UnsupportedAdapter(f"{MANIFEST}: field adapter: non-null adapter payloads are not supported")
    unknown = set(manifest) - {"format", "files", "adapter"}
    if unknown:
        raise ArtifactError(f"unknown field(s) {sorted(unknown)}", file=MANIFEST)
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"format is {manifest.get('format')!r}, expected {FORMAT!r}", file=MANIFEST, field="format")
    entries = manifest.get("files")
    if not isinstance(entries, list) or not entries:
        raise ArtifactError("must be a non-empty list", file=MANIFEST, field="files")
    seen_roles: set[str] = set()
    seen_paths: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"files[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"path", "role", "sha256", "size"}:
            raise ArtifactError("each entry needs exactly path, role, sha256, size", file=MANIFEST, field=where)
        path, role, digest, size = entry["path"], entry["role"], entry["sha256"], entry["size"]
        if role not in ROLES:
            raise ArtifactError(f"unknown role {role!r}", file=MANIFEST, field=f"{where}.role")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ArtifactError("sha256 must be 64 lowercase hex digits", file=MANIFEST, field=f"{where}.sha256")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ArtifactError("size must be a non-negative integer", file=MANIFEST, field=f"{where}.size")
        _check_relative(path, f"{where}.path")
        if role in seen_roles or path in seen_paths or path == MANIFEST:
            raise ArtifactError(f"role {role!r} or path {path!r} listed twice", file=MANIFEST, field=where)
        seen_roles.add(role)
        seen_paths.add(path)
    return manifest


def _check_relative(path: Any, field: str) -> None:
    if not isinstance(path, str) or not path:
        raise ArtifactError("path must be a non-empty string", file=MANIFEST, field=field)
    reason = unprintable_reason(path)
    if reason is not None:
        raise ArtifactError(f"path {path!r} is not a name: {reason}", file=MANIFEST, field=field)
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts) or ":" in parts[0]:
        raise ArtifactError(f"path {path!r} escapes or is not a plain relative path", file=MANIFEST, field=field)


_ROLE_LIMITS = {**{role: MAX_JSON_BYTES for role in JSON_ROLES}, "tokenizer": MAX_TOKENIZER_BYTES,
                "encoder_weights": MAX_ENCODER_WEIGHTS_BYTES, "head_weights": MAX_HEAD_WEIGHTS_BYTES}


def _read_inside(root: Path, rel: str, *, size: int | None = None, limit: int) -> tuple[bytearray, str]:
    """The bytes of root/rel and their sha256, refusing symlinks anywhere on the way and
    non-regular files, and, before reading a byte, a size other than the manifest's or above
    the role's limit."""
    current = root
    for part in rel.split("/"):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            raise ArtifactError("file is missing", file=rel) from None
        except OSError as e:  # a name longer than the file system allows, a file where a directory should be
            raise ArtifactError(f"cannot be read: {e.strerror}", file=rel) from None
        if stat.S_ISLNK(mode):
            raise ArtifactError("symlinks are refused", file=rel)
    if not stat.S_ISREG(mode):
        raise ArtifactError("not a regular file", file=rel)
    fd = os.open(current, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        actual = os.fstat(fh.fileno()).st_size
        if size is not None and actual != size:
            raise DigestMismatch(f"size is {actual} bytes, manifest says {size}", file=rel)
        if actual > limit:
            raise ArtifactError(f"is {actual} bytes, the limit for this file is {limit}", file=rel)
        data, digest = _read_hashed(fh, actual)
    if size is not None and len(data) != size:  # pragma: no cover — defensive: the file changed size
        # between the fstat above and this read, a race no test can time; the caller's sha256 check refuses it too
        raise DigestMismatch(f"size is {len(data)} bytes, manifest says {size}", file=rel)
    return data, digest


def _read_hashed(fh, expected: int) -> tuple[bytearray, str]:
    """Read at most ``expected`` + 1 bytes in chunks, hashing each as it arrives: one pass
    over the file into the buffer it stays in (never copied: the weights' tensors are views
    into it), and never more memory than the size already checked against the limit (a file
    that grew since its fstat shows as one byte more, which the size check refuses)."""
    buffer = bytearray(expected + 1)
    view = memoryview(buffer)
    digest = hashlib.sha256()
    filled = 0
    while filled <= expected:
        count = fh.readinto(view[filled:filled + _CHUNK])
        if not count:
            break
        digest.update(view[filled:filled + count])
        filled += count
    view.release()
    del buffer[filled:]
    return buffer, digest.hexdigest()


def _refuse_unlisted(root: Path, listed: set[str]) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if rel not in listed:
                raise ArtifactError("file is not listed in the manifest", file=rel)
