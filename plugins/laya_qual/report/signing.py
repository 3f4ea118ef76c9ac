"""Keys and DSSE envelopes through securesystemslib's signer API, offline.

A signing key is named the way release engineers hold one: a PEM private key file
(PKCS#8, optionally encrypted; the password comes from an environment variable, never
from the command line) or any private-key URI securesystemslib's ``Signer`` supports
(``gcpkms:``, ``awskms:``, ``azurekms:``, ``hsm:``, ``file2:``, ...), whose public key
is then named separately. Envelope parsing stays ours and strict.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.exceptions import UnverifiedSignatureError, VerificationError
from securesystemslib.signer import SIGNER_FOR_URI_SCHEME, CryptoSigner, Key, Signature, Signer, SSlibKey

from laya.artifact.atomic import write_file, write_files
from laya.errors import OutputExists

KEY_ENV = "LAYA_QUAL_SIGNING_KEY"
PASSWORD_ENV = "LAYA_QUAL_SIGNING_KEY_PASSWORD"
PUBLIC_KEY_ENV = "LAYA_QUAL_SIGNING_PUBLIC_KEY"


class SigningError(Exception):
    """A key or an envelope is unusable; the message is one line for the CLI."""


def dev_key_path() -> Path:
    """The per-user development key: under $XDG_CACHE_HOME (default ~/.cache), never in
    a project tree, so no repository can commit it by accident."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "laya-qual" / "dev-key"


def keygen(path: Path, password: bytes | None = None) -> Path:
    """Write a new Ed25519 private key at ``path`` (PKCS#8 PEM, mode 0600 from creation,
    encrypted when a password is given) and its public key at ``path.pub``.

    Both are written to temporary siblings and published only when complete, public key
    first: a private key at ``path`` always has its ``.pub`` beside it, and an interrupted
    keygen leaves neither (laya.artifact.atomic). Neither file may exist yet."""
    path = Path(path)
    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if os.path.lexists(existing):
            raise SigningError(f"{existing}: already exists (refusing to overwrite a key)")
    private = Ed25519PrivateKey.generate()
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        write_files([(public_path, public, 0o666), (path, pem, 0o600)])
    except OutputExists as e:
        raise SigningError(f"{e.file}: already exists (refusing to overwrite a key)") from None
    return public_path


def _read(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise SigningError(f"{path}: cannot read {what} ({e.strerror or e})") from None


def _is_uri(spec: str) -> bool:
    scheme, sep, _ = spec.partition(":")
    return bool(sep) and scheme in SIGNER_FOR_URI_SCHEME and not Path(spec).exists()


def load_public_key(path: Path) -> SSlibKey:
    """A PEM (SubjectPublicKeyInfo) public key of any type securesystemslib verifies."""
    try:
        return SSlibKey.from_crypto(serialization.load_pem_public_key(_read(path, "public key")))
    except (ValueError, TypeError) as e:
        raise SigningError(f"{path}: not a usable PEM public key ({e})") from None


def public_key_path(spec: str) -> Path:
    """Where the public half of a key spec lives: $LAYA_QUAL_SIGNING_PUBLIC_KEY for a
    signer URI, the ``.pub`` file beside a PEM private key otherwise."""
    if _is_uri(spec):
        if not os.environ.get(PUBLIC_KEY_ENV):
            raise SigningError(f"{spec.partition(':')[0]}: a signer URI needs its public key in ${PUBLIC_KEY_ENV}")
        return Path(os.environ[PUBLIC_KEY_ENV])
    return Path(spec + ".pub")


def load_signer(spec: str | Path) -> Signer:
    """The signer a key spec names: a signer URI (public key from $LAYA_QUAL_SIGNING_PUBLIC_KEY)
    or a PEM private key file (password, if encrypted, from $LAYA_QUAL_SIGNING_KEY_PASSWORD)."""
    spec = str(spec)
    if _is_uri(spec):
        public_path = os.environ.get(PUBLIC_KEY_ENV)
        if not public_path:
            raise SigningError(f"{spec.partition(':')[0]}: a signer URI needs its public key in ${PUBLIC_KEY_ENV}")
        try:
            return Signer.from_priv_key_uri(spec, load_public_key(Path(public_path)))
        except SigningError:
            raise
        except Exception as e:  # each signer backend raises its own errors (network, KMS, file)
            raise SigningError(f"{spec}: cannot load signer ({type(e).__name__}: {e})") from None
    password = os.environ.get(PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(_read(Path(spec), "private key"),
                                                 password=password.encode() if password else None)
    except TypeError as e:
        hint = f"; set ${PASSWORD_ENV}" if "encrypted" in str(e) and not password else ""
        raise SigningError(f"{spec}: cannot load the PEM private key ({e}{hint})") from None
    except ValueError as e:
        raise SigningError(f"{spec}: not a usable PEM private key ({e})") from None
    try:
        return CryptoSigner(key)
    except ValueError as e:
        raise SigningError(f"{spec}: unsupported private key ({e})") from None


def is_dev_key(public: Key) -> bool:
    """Whether ``public`` is this user's development key."""
    pub = dev_key_path().with_name(dev_key_path().name + ".pub")
    try:
        return load_public_key(pub).keyid == public.keyid
    except SigningError:
        return False


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is actually signed."""
    t = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def envelope(payload: bytes, payload_type: str, signer: Signer | None) -> dict:
    """A DSSE envelope; with no signer it carries no signature (and will not verify)."""
    signatures = []
    if signer is not None:
        sig = signer.sign(pae(payload_type, payload))
        signatures.append({"keyid": sig.keyid, "sig": base64.b64encode(bytes.fromhex(sig.signature)).decode()})
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


def open_envelope(env: object, public: Key) -> tuple[str, bytes]:
    """Check shape and every signature against ``public``; return (payloadType, payload)."""
    if not isinstance(env, dict) or set(env) != {"payload", "payloadType", "signatures"}:
        raise SigningError("not a DSSE envelope (needs exactly payload, payloadType, signatures)")
    payload_type, signatures = env["payloadType"], env["signatures"]
    if not isinstance(payload_type, str):
        raise SigningError("payloadType is not a string")
    payload = strict_b64decode(env["payload"], "payload")
    if not isinstance(signatures, list) or not signatures:
        raise SigningError("envelope is unsigned")
    expected = public.keyid
    for sig in signatures:
        if not isinstance(sig, dict) or "sig" not in sig or not set(sig) <= {"keyid", "sig"}:
            raise SigningError("malformed signature entry (needs sig, optional keyid)")
        if sig.get("keyid", expected) != expected:
            raise SigningError(f"signed by keyid {str(sig.get('keyid'))[:16]}..., not by the given key {expected[:16]}...")
        raw = strict_b64decode(sig["sig"], "signature")
        try:
            public.verify_signature(Signature(expected, raw.hex()), pae(payload_type, payload))
        except (UnverifiedSignatureError, VerificationError):
            raise SigningError("signature does not verify with the given key") from None
    return payload_type, payload


def write_bundle(path: Path, payloads: tuple[bytes, ...], signer: Signer | None,
                 payload_type: str = "application/vnd.in-toto+json") -> None:
    """One compact DSSE envelope per line (``*.intoto.jsonl``), written to a temporary
    sibling and renamed over ``path``: a reader finds the earlier bundle or the new one,
    complete, never a truncated one (docs/report-format.md, "Writing the bundle")."""
    lines = [json.dumps(envelope(p, payload_type, signer), separators=(",", ":")) + "\n" for p in payloads]
    write_file(path, "".join(lines).encode("utf-8"), replace=True)
