"""Ed25519 keys and DSSE envelopes, offline.

Written directly on ``cryptography`` (one small, auditable path); the keyid is
securesystemslib's default (sha256 of the canonical key dict), so envelopes signed
here verify with securesystemslib's ``Envelope.verify`` and vice versa.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_ENV = "LAYA_QUAL_SIGNING_KEY"


class SigningError(Exception):
    """A key or an envelope is unusable; the message is one line for the CLI."""


def keyid(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key = {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": raw.hex()}}
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def keygen(path: Path) -> Path:
    """Write a new private key at ``path`` (PEM, mode 0600) and its public key at ``path.pub``."""
    path = Path(path)
    if path.exists():
        raise SigningError(f"{path}: already exists (refusing to overwrite a key)")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public_path = path.with_name(path.name + ".pub")
    public_path.write_bytes(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return public_path


def _read(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise SigningError(f"{path}: cannot read {what} ({e.strerror or e})") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(_read(path, "private key"), password=None)
    except (ValueError, TypeError) as e:
        raise SigningError(f"{path}: not an unencrypted PEM private key ({e})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path}: not an Ed25519 private key ({type(key).__name__})")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(_read(path, "public key"))
    except (ValueError, TypeError) as e:
        raise SigningError(f"{path}: not a PEM public key ({e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError(f"{path}: not an Ed25519 public key ({type(key).__name__})")
    return key


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is actually signed."""
    t = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def envelope(payload: bytes, payload_type: str, key: Ed25519PrivateKey | None) -> dict:
    """A DSSE envelope; with no key it carries no signature (and will not verify)."""
    signatures = []
    if key is not None:
        sig = key.sign(pae(payload_type, payload))
        signatures.append({"keyid": keyid(key.public_key()), "sig": base64.b64encode(sig).decode()})
    return {"payload": base64.b64encode(payload).decode(), "payloadType": payload_type,
            "signatures": signatures}


def strict_b64decode(text: object, what: str) -> bytes:
    """Standard base64 with exactly one spelling per value, so no byte of the
    encoded text can change without changing the decoded bytes."""
    if not isinstance(text, str):
        raise SigningError(f"{what} is not a string")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SigningError(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode() != text:
        raise SigningError(f"{what} is not canonical base64")
    return raw


def open_envelope(env: object, public: Ed25519PublicKey) -> tuple[str, bytes]:
    """Check shape and every signature against ``public``; return (payloadType, payload)."""
    if not isinstance(env, dict) or set(env) != {"payload", "payloadType", "signatures"}:
        raise SigningError("not a DSSE envelope (needs exactly payload, payloadType, signatures)")
    payload_type, signatures = env["payloadType"], env["signatures"]
    if not isinstance(payload_type, str):
        raise SigningError("payloadType is not a string")
    payload = strict_b64decode(env["payload"], "payload")
    if not isinstance(signatures, list) or not signatures:
        raise SigningError("envelope is unsigned")
    expected = keyid(public)
    for sig in signatures:
        if not isinstance(sig, dict) or "sig" not in sig or not set(sig) <= {"keyid", "sig"}:
            raise SigningError("malformed signature entry (needs sig, optional keyid)")
        if sig.get("keyid", expected) != expected:
            raise SigningError(f"signed by keyid {str(sig.get('keyid'))[:16]}..., not by the given key {expected[:16]}...")
        try:
            public.verify(strict_b64decode(sig["sig"], "signature"), pae(payload_type, payload))
        except InvalidSignature:
            raise SigningError("signature does not verify with the given key") from None
    return payload_type, payload


def write_bundle(path: Path, payloads: tuple[bytes, ...], key: Ed25519PrivateKey | None,
                 payload_type: str = "application/vnd.in-toto+json") -> None:
    """One compact DSSE envelope per line (``*.intoto.jsonl``)."""
    lines = [json.dumps(envelope(p, payload_type, key), separators=(",", ":")) + "\n" for p in payloads]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
