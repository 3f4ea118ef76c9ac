"""Subject digests: what a report vouches for, named so anyone can recompute it.

They are computed here on purpose, independently of the runtime's own hashing
(``laya.artifact.binding``): the verifier must not trust the code it qualifies.

Both algorithms are documented in docs/report-format.md:

* ``dirHash`` (in-toto's DigestSet algorithm, Go's dirhash Hash1 in hex): sha256 over
  ``"<sha256hex>  <relpath>\\n"`` lines of every file, sorted bytewise by relative
  path -- what ``sha256sum`` prints, so a shell one-liner reproduces it. The runtime
  subject is the dirHash of the ``laya`` package's ``*.py`` tree; an artifact's is the
  dirHash of its whole directory.
* ``sha256OfFileDigests`` (artifacts only): sha256 over the concatenated raw 32-byte
  sha256 of every file in the same order -- OpenSSF model-signing's digest-of-digests
  root. It is a digest over digests, not the sha256 of any one blob, and its label
  says so.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
from pathlib import Path

DIR_HASH = "dirHash"
DIGEST_OF_DIGESTS = "sha256OfFileDigests"
GIT_COMMIT = "gitCommit"


class SubjectError(Exception):
    """A subject cannot be digested (missing directory, symlink inside)."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _regular_files(root: Path, pattern: str) -> list[tuple[str, Path]]:
    """Every file under ``root`` matching ``pattern``, refusing what load_artifact refuses
    rather than digesting around it: a symlink, a file that is not a regular one (a FIFO, a
    socket, a device), a name that is not UTF-8 or that no sha256sum line can hold."""
    if not root.is_dir():
        raise SubjectError(f"{root}: not a directory")
    files = []
    for path in root.rglob(pattern):
        if "__pycache__" in path.relative_to(root).parts:
            continue
        if path.is_symlink():
            raise SubjectError(f"{path}: symlinks are not digested (refused)")
        if not path.is_dir() and not path.is_file():
            raise SubjectError(f"{path}: not a regular file (a FIFO, socket or device is not digested; refused)")
        if path.is_file():
            rel = path.relative_to(root).as_posix()
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                raise SubjectError(f"{path!r}: a file name that is not UTF-8 is not digested (refused)") from None
            if "\n" in rel or "\\" in rel:
                # sha256sum escapes such names, so no portable line exists for them.
                raise SubjectError(f"{path!r}: a newline or backslash in a file name is not digested (refused)")
            files.append((rel, path))
    return files  # in walk order: each digest below fixes its own order


def dir_hash(per_file: dict[str, str]) -> str:
    """in-toto dirHash of files given as {relative path: sha256 hex}."""
    lines = "".join(f"{per_file[rel]}  {rel}\n" for rel in sorted(per_file, key=str.encode))
    return hashlib.sha256(lines.encode()).hexdigest()


def source_digest(root: Path, nested: tuple[Path, ...] = (),
                  patterns: tuple[str, ...] = ("*.py",)) -> tuple[str, dict[str, str]]:
    """dirHash of a Python source tree (its ``*.py`` files, or those matching ``patterns``)
    and its per-file sha256s, leaving out the ``nested`` directories (other packages' trees
    inside it)."""
    per_file = {rel: file_sha256(p) for pattern in patterns for rel, p in _regular_files(Path(root), pattern)
                if not any(p.is_relative_to(n) for n in nested)}
    return dir_hash(per_file), per_file


HARNESS_PACKAGES = ("laya_qual", "laya_qual.suite", "laya_qual.synth")


def harness_digests(dirs: dict[str, Path]) -> dict[str, str]:
    """dirHash of each harness package's own files (import name -> directory given): its
    ``*.py`` sources and the ``*.json`` data they ship (the traceability map, the CLI
    reference), which decide verdicts as much as the code does. An install nests the suite
    and synth inside ``laya_qual/``, a checkout keeps them apart (``qualification/``,
    ``fixtures/``): ``laya_qual``'s digest leaves them out, so the same code has the same
    digests in either layout."""
    return {name: source_digest(path, tuple(d for n, d in dirs.items() if n != name and d.is_relative_to(path)),
                                ("*.py", "*.json"))[0]
            for name, path in dirs.items()}


def artifact_digest(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """An artifact directory's digest set (dirHash and digest of file digests) and per-file sha256s;
    a directory that is itself a symlink is refused, as load_artifact refuses it."""
    if Path(root).is_symlink():
        raise SubjectError(f"{root}: a symlink to a directory is not digested (refused)")
    per_file = {rel: file_sha256(p) for rel, p in _regular_files(Path(root), "*")}
    if not per_file:
        raise SubjectError(f"{root}: no files to digest")
    root_hash = hashlib.sha256()
    for rel in sorted(per_file, key=str.encode):
        root_hash.update(bytes.fromhex(per_file[rel]))
    return {DIR_HASH: dir_hash(per_file), DIGEST_OF_DIGESTS: root_hash.hexdigest()}, per_file


def package_dir(name: str) -> Path | None:
    """Directory of an importable package, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def clean_git_commit(directory: Path) -> str | None:
    """HEAD when ``directory`` is tracked in a git checkout with no local changes
    under it; None otherwise (an installed copy, untracked or modified sources)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    try:
        if not git("ls-files", "--", ".") or git("status", "--porcelain", "--", "."):
            return None
        return git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None


def runtime_subject() -> dict:
    root = package_dir("laya")
    if root is None:
        raise SubjectError("the laya runtime package is not importable")
    digest, per_file = source_digest(root)
    digests = {DIR_HASH: digest}
    commit = clean_git_commit(root)
    if commit:
        digests[GIT_COMMIT] = commit
    return {"name": "laya-runtime", "digest": digests,
            "annotations": {"kind": "runtime", "files": len(per_file)}}


def artifact_subject(directory: str | Path, role: str) -> dict:
    path = Path(directory)
    digests, per_file = artifact_digest(path)
    return {"name": f"artifact/{path.resolve().name}", "digest": digests,
            "annotations": {"kind": "artifact", "role": role, "files": per_file}}


def _qualified(artifacts: list[str], base: str | None, synthetic: list[Path]) -> list[tuple[str, str]]:
    """(directory, role) of every artifact subject, in subject order: the base first, each
    directory once; the synthetic default's (role ``synthetic``) when no artifact is given."""
    out, seen = [], set()
    for directory, role in ([(base, "base")] * (base is not None) + [(a, "head") for a in artifacts]
                            + [(str(d), "synthetic") for d in synthetic]):
        key = Path(directory).resolve()
        if key not in seen:
            seen.add(key)
            out.append((directory, role))
    return out


def subjects(artifacts: list[str], base: str | None, synthetic: list[Path] = ()) -> list[dict]:
    """The runtime plus every qualified artifact directory (the base once)."""
    return [runtime_subject(), *(artifact_subject(d, role) for d, role in _qualified(artifacts, base, synthetic))]


def head_entry(directory: str | Path, subject: dict) -> dict:
    """The predicate's ``heads`` entry of one artifact: its head.json ``kind`` and task objects,
    verbatim. The bytes are read once, hashed and parsed (as ``laya.artifact.binding`` reads a file), so
    the entry says exactly what the subject's digest covers; a head.json that cannot be read as
    a head gets ``kind`` null, no tasks and the reason (the artifact's claims say the rest)."""
    entry = {"subject": subject["name"], "kind": None, "tasks": []}
    path = Path(directory) / "head.json"
    try:
        data = path.read_bytes()
    except OSError as e:
        return {**entry, "error": f"head.json: cannot read it ({e.strerror or e})"}
    if hashlib.sha256(data).hexdigest() != subject["annotations"]["files"].get("head.json"):
        raise SubjectError(f"{path}: changed after its artifact was digested")
    try:
        config = json.loads(data)
    except (ValueError, RecursionError) as e:
        return {**entry, "error": f"head.json: not JSON ({e})"}
    tasks = config.get("tasks") if isinstance(config, dict) else None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks) \
            or not isinstance(config.get("kind"), str):
        return {**entry, "error": "head.json: not an object with a string kind and a list of task objects"}
    return {**entry, "kind": config["kind"], "tasks": tasks}


def heads(artifacts: list[str], base: str | None, subject_list: list[dict], synthetic: list[Path] = ()) -> list[dict]:
    """One ``heads`` entry per ``--laya-artifact`` directory (or synthetic default one), in
    subject order (``subject_list`` is what ``subjects(artifacts, base, synthetic)`` returned)."""
    wanted = {Path(a).resolve() for a in [*artifacts, *synthetic]}
    return [head_entry(directory, subject)
            for (directory, _), subject in zip(_qualified(artifacts, base, synthetic), subject_list[1:])
            if Path(directory).resolve() in wanted]
