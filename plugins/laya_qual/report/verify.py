"""Offline verification of a report bundle: signatures, statement shapes, agreement
of the two predicates, and (given directories) the artifact subject digests.

Every failure is a VerifyError with a one-line reason; nothing is trusted before the
signature over it has been checked. Lines this verifier does not recognise (another
payload type, another predicate type) are ignored, as the in-toto bundle spec asks of
consumers; a line that claims to be one of ours must be signed by the given key.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from securesystemslib.signer import Key

from laya_qual.report.model import (LAYA_TYPE, PAYLOAD_TYPE, STATEMENT_TYPE, TEST_RESULT_TYPE,
                              AgreementError, check_agreement)
from laya_qual.report.signing import SigningError, open_envelope
from laya_qual.subjects import DIR_HASH, SubjectError, artifact_digest


class VerifyError(Exception):
    pass


@dataclass
class Verified:
    test_result: dict
    laya: dict
    keyid: str
    ignored: int = 0


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate key in {keys}")
    return dict(pairs)


def read_bundle(path: Path) -> bytes:
    """The bundle's bytes; anything but a regular file (a FIFO, /dev/zero, a directory) is
    refused before a byte is read: it could block forever or never end."""
    try:
        with open(path, "rb", opener=_nonblocking) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise VerifyError(f"{path}: not a regular file (a bundle is a file of signed lines)")
            return f.read()
    except OSError as e:
        raise VerifyError(f"{path}: cannot read bundle ({e.strerror or e})") from None


def _nonblocking(path: str, flags: int) -> int:
    """Open without blocking: opening a FIFO that no writer holds otherwise waits forever."""
    return os.open(path, flags | os.O_NONBLOCK)


def parse_lines(data: bytes, path: Path | str) -> list[dict]:
    """The bundle's envelopes, parsed strictly: one JSON object per newline-terminated
    line, no blank lines, no surrounding whitespace."""
    if not data.endswith(b"\n"):
        raise VerifyError(f"{path}: last line is not newline-terminated")
    envelopes = []
    for number, raw in enumerate(data[:-1].split(b"\n"), 1):
        try:
            text = raw.decode("utf-8")
            if text != text.strip() or not text:
                raise ValueError("blank line or surrounding whitespace")
            envelopes.append(json.loads(text, object_pairs_hook=_no_duplicates))
        except (ValueError, RecursionError) as e:  # RecursionError: nesting past the parser's limit
            raise VerifyError(f"{path}: line {number} is not one JSON object ({e})") from None
    return envelopes


def read_statements(path: Path) -> list[tuple[dict, bytes]]:
    """In-toto statements without checking signatures (for ``show``): (statement, payload).
    Lines that carry no readable statement are skipped, as ``verify`` ignores them."""
    out = []
    for env in parse_lines(read_bundle(path), path):
        try:
            payload = base64.b64decode(env["payload"], validate=True)
            stmt = json.loads(payload)
        except (KeyError, TypeError, ValueError):
            continue
        if isinstance(stmt, dict):
            out.append((stmt, payload))
    return out


def _check_statement(stmt: object, where: str) -> dict:
    if not isinstance(stmt, dict) or stmt.get("_type") != STATEMENT_TYPE:
        raise VerifyError(f"{where}: not an in-toto Statement v1")
    subjects = stmt.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise VerifyError(f"{where}: statement has no subjects")
    for s in subjects:
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) \
                or not isinstance(s.get("digest"), dict) or not s["digest"]:
            raise VerifyError(f"{where}: subject needs a name and a digest")
    if not isinstance(stmt.get("predicateType"), str) or not isinstance(stmt.get("predicate"), dict):
        raise VerifyError(f"{where}: statement needs predicateType and a predicate object")
    return stmt


def verify_bundle(path: Path, public: Key, artifacts: list[str] = ()) -> Verified:
    return verify_bytes(read_bundle(path), public, artifacts, path)


OURS = (TEST_RESULT_TYPE, LAYA_TYPE)


class _Pairs(list):
    """A JSON object read as its (key, value) pairs, repeats kept."""


def _claimed_type(env: dict) -> str | None:
    """The predicate type a line says it carries, read without trusting it, to decide
    whether the line is ours (and must verify) or someone else's (and is ignored). A
    payload that names ``predicateType`` more than once is ours if any of them is: a
    repeated key must not turn a line of ours into an ignored one. The payload is decoded
    as leniently as other readers decode it (characters outside the base64 alphabet
    skipped): what any of them would take for one of ours is ours, and then refused
    unless it is strict base64."""
    if env.get("payloadType") != PAYLOAD_TYPE:
        return None
    try:
        stmt = json.loads(base64.b64decode(env.get("payload")), object_pairs_hook=_Pairs)
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(stmt, _Pairs):
        return None
    claimed = [value for key, value in stmt if key == "predicateType" and isinstance(value, str)]
    return next((t for t in claimed if t in OURS), claimed[-1] if claimed else None)


def _not_ours(env: dict) -> str:
    """Why a line was taken for someone else's: said when a statement of ours is missing,
    since a damaged line of ours (one changed character) looks like that too."""
    if env.get("payloadType") != PAYLOAD_TYPE:
        return f"payloadType {str(env.get('payloadType'))[:80]!r}"
    claimed = _claimed_type(env)
    if claimed is None:
        return "an in-toto payload that is not base64 of a JSON object with a predicateType: damaged?"
    return f"predicateType {claimed[:120]!r}"


def verify_bytes(data: bytes, public: Key, artifacts: list[str] = (),
                 path: Path | str = "bundle") -> Verified:
    by_type: dict[str, tuple[dict, bytes]] = {}
    ignored, set_aside = 0, []  # the lines taken for someone else's, and why
    for number, env in enumerate(parse_lines(data, path), 1):
        where = f"{path}: line {number}"
        if not isinstance(env, dict):
            raise VerifyError(f"{where}: not a DSSE envelope (not a JSON object)")
        if _claimed_type(env) not in OURS:
            ignored += 1
            set_aside.append(f"line {number} ({_not_ours(env)})")
            continue
        try:
            payload_type, payload = open_envelope(env, public)
        except SigningError as e:
            raise VerifyError(f"{where}: {e}") from None
        try:
            stmt = _check_statement(json.loads(payload, object_pairs_hook=_no_duplicates), where)
        except ValueError as e:
            raise VerifyError(f"{where}: payload is not JSON ({e})") from None
        if stmt["predicateType"] in by_type:
            raise VerifyError(f"{where}: a second {stmt['predicateType']} statement")
        by_type[stmt["predicateType"]] = (stmt, payload)
    missing = [t for t in OURS if t not in by_type]
    if missing:
        why = f"; set aside as not ours: {', '.join(set_aside)}" if set_aside else ""
        raise VerifyError(f"{path}: needs one test-result and one laya-qual statement (missing {missing}){why}")
    (test_result, _), (laya, laya_payload) = by_type[TEST_RESULT_TYPE], by_type[LAYA_TYPE]
    try:
        check_agreement(test_result, laya, laya_payload)
    except (AgreementError, AttributeError, KeyError, TypeError) as e:
        raise VerifyError(f"{path}: statements disagree: {e}") from None
    for directory in artifacts:
        check_artifact(laya, directory)
    return Verified(test_result, laya, public.keyid, ignored)


def check_artifact(laya: dict, directory: str) -> None:
    """The recomputed digest set of ``directory`` must match one of the report's
    artifact subjects (in-toto matching: any shared algorithm agrees)."""
    try:
        digests, per_file = artifact_digest(Path(directory))
    except (SubjectError, OSError) as e:
        raise VerifyError(f"artifact {directory}: {e}") from None
    subjects = [s for s in laya["subject"] if s.get("annotations", {}).get("kind") == "artifact"]
    if any(s["digest"].get(alg) == value for s in subjects for alg, value in digests.items()):
        return
    name = f"artifact/{Path(directory).resolve().name}"
    for s in subjects:
        if s["name"] == name:
            recorded = s.get("annotations", {}).get("files", {})
            changed = sorted(set(recorded.items()) ^ set(per_file.items()))
            detail = f" (first differing file: {changed[0][0]})" if changed else ""
            raise VerifyError(f"artifact {directory}: {DIR_HASH} {digests[DIR_HASH][:16]}... differs from "
                              f"subject {name} {s['digest'].get(DIR_HASH, '')[:16]}...{detail}")
    raise VerifyError(f"artifact {directory}: {DIR_HASH} {digests[DIR_HASH][:16]}... is not a subject of this report")
