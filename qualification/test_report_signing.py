"""DSSE/in-toto signing and offline verification: tamper, wrong key, agreement,
subject digests, and interop with securesystemslib both ways."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from laya_qual.claims import CLAIMS
from laya_qual.report import LAYA_TYPE, PAYLOAD_TYPE, TEST_RESULT_TYPE, build_claims, build_statements, canonical
from laya_qual.signing import SigningError, keygen, keyid, load_private_key, load_public_key, pae, write_bundle
from laya_qual.subjects import artifact_digest, artifact_subject, source_digest
from laya_qual.verify import VerifyError, verify_bundle, verify_bytes

CATALOGUE = {cid: CLAIMS[cid] for cid in ("report.verdicts", "report.signature", "report.interop")}
RECORDS = [
    {"test": "t.py::test_ok", "claims": ["report.verdicts"], "outcome": "passed"},
    {"test": "t.py::test_bad", "claims": ["report.signature"], "outcome": "failed"},
    {"test": "t.py::test_skip", "claims": ["report.signature", "report.interop"], "outcome": "skipped"},
]
SUBJECTS = [{"name": "laya-runtime", "digest": {"sha256": "ab" * 32}}]


def payloads(records=RECORDS, subjects=SUBJECTS):
    return build_statements(subjects, build_claims(CATALOGUE, records), {"note": "test"}, [])


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    keygen(d / "k")
    keygen(d / "other")
    return load_private_key(d / "k"), load_public_key(d / "k.pub"), load_public_key(d / "other.pub")


@pytest.fixture
def bundle(tmp_path, keys):
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(), keys[0])
    return path


@pytest.mark.laya_claim("report.signature")
def test_keygen_modes_and_refuses_overwrite(tmp_path):
    public = keygen(tmp_path / "k")
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert public == tmp_path / "k.pub" and b"BEGIN PUBLIC KEY" in public.read_bytes()
    assert keyid(load_private_key(tmp_path / "k").public_key()) == keyid(load_public_key(public))
    with pytest.raises(SigningError, match="already exists"):
        keygen(tmp_path / "k")


@pytest.mark.laya_claim("report.signature")
def test_wrong_key_types_are_refused(tmp_path):
    ecdsa = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec.pub").write_bytes(ecdsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(SigningError, match="not an Ed25519 public key"):
        load_public_key(tmp_path / "ec.pub")


@pytest.mark.laya_claim("report.signature")
def test_bundle_verifies_with_its_key_and_not_another(bundle, keys):
    _, public, other = keys
    verified = verify_bundle(bundle, public)
    assert verified.test_result["predicate"]["result"] == verified.laya["predicate"]["result"] == "FAILED"
    with pytest.raises(VerifyError, match="not by the given key"):
        verify_bundle(bundle, other)
    # Without a keyid to short-cut on, it is the Ed25519 signature itself that fails.
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    for env in lines:
        del env["signatures"][0]["keyid"]
    bundle.write_text("".join(json.dumps(e) + "\n" for e in lines))
    verify_bundle(bundle, public)
    with pytest.raises(VerifyError, match="signature does not verify"):
        verify_bundle(bundle, other)


@pytest.mark.laya_claim("report.interop")
def test_pae_is_dsse_v1():
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


@pytest.mark.laya_claim("report.verify.tamper")
def test_any_single_byte_change_fails_verify(bundle, keys):
    public = keys[1]
    original = bundle.read_bytes()
    rng = random.Random(0)
    verify_bytes(original, public)
    for i in range(len(original)):  # every byte, each to some other value
        new = original[i] ^ rng.randrange(1, 256)
        with pytest.raises(VerifyError):
            verify_bytes(original[:i] + bytes([new]) + original[i + 1:], public)
            pytest.fail(f"byte {i} changed {original[i]:#x}->{new:#x} still verifies")


@pytest.mark.laya_claim("report.verify.tamper")
def test_base64_malleability_is_refused(bundle, keys):
    """A payload spelled differently but decoding to the same bytes is still a change."""
    env = json.loads(bundle.read_text().splitlines()[0])
    raw = base64.b64decode(env["payload"])
    spelled = env["payload"].rstrip("=")
    if len(raw) % 3 == 0:
        pytest.skip("payload length has no padding bits to abuse")
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    twin = spelled[:-1] + last[last.index(spelled[-1]) + 1] + env["payload"][len(spelled):]
    assert base64.b64decode(twin) == raw  # the same bytes, a different line
    env["payload"] = twin
    bundle.write_text(json.dumps(env) + "\n" + bundle.read_text().splitlines()[1] + "\n")
    with pytest.raises(VerifyError, match="canonical base64"):
        verify_bundle(bundle, keys[1])


def _resign(path, private, edit_test_result=None, edit_laya=None):
    """Re-sign (validly) statements changed by the edit functions."""
    tr, laya = (json.loads(p) for p in payloads())
    if edit_laya:
        edit_laya(laya)
        laya_bytes = canonical(laya)
        tr["predicate"]["configuration"][0]["digest"]["sha256"] = hashlib.sha256(laya_bytes).hexdigest()
    else:
        laya_bytes = canonical(laya)
    if edit_test_result:
        edit_test_result(tr)
    write_bundle(path, (canonical(tr), laya_bytes), private)


@pytest.mark.laya_claim("report.verify.agreement")
@pytest.mark.parametrize("edit_tr, edit_laya, reason", [
    (lambda tr: tr["predicate"].update(result="PASSED"), None, "results disagree"),
    (lambda tr: tr["predicate"]["failedTests"].clear(), None, "failedTests disagrees"),
    (lambda tr: tr["predicate"]["passedTests"].append("t.py::test_bad"), None, "passedTests disagrees"),
    (lambda tr: tr.update(subject=[{"name": "x", "digest": {"sha256": "cd" * 32}}]), None, "different subjects"),
    (lambda tr: tr["predicate"]["configuration"].clear(), None, "does not name this laya-qual statement"),
    (None, lambda laya: laya["predicate"]["claims"][1].update(verdict="passed"), "evidence gives 'failed'"),
    (None, lambda laya: laya["predicate"]["claims"][1]["evidence"].pop(0), "verdict 'failed' but"),
    (None, lambda laya: laya["predicate"]["claims"].append(laya["predicate"]["claims"][0]), "unique"),
])
def test_valid_signature_over_a_different_statement_fails(tmp_path, keys, edit_tr, edit_laya, reason):
    path = tmp_path / "r.intoto.jsonl"
    _resign(path, keys[0])
    verify_bundle(path, keys[1])  # the unedited re-signing is fine
    _resign(path, keys[0], edit_tr, edit_laya)
    with pytest.raises(VerifyError, match="statements disagree: .*" + reason):
        verify_bundle(path, keys[1])


@pytest.mark.laya_claim("report.verify.agreement")
def test_statements_must_both_be_there_once(tmp_path, keys):
    tr, laya = payloads()
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, (tr,), keys[0])
    with pytest.raises(VerifyError, match="missing"):
        verify_bundle(path, keys[1])
    write_bundle(path, (tr, laya, tr), keys[0])
    with pytest.raises(VerifyError, match="a second"):
        verify_bundle(path, keys[1])


@pytest.mark.laya_claim("report.interop")
def test_securesystemslib_verifies_our_bundle(bundle, keys):
    private, public, other = keys
    for line in bundle.read_text().splitlines():
        env = Envelope.from_dict(json.loads(line))
        assert env.payload_type == PAYLOAD_TYPE
        accepted = env.verify([SSlibKey.from_crypto(public)], 1)
        assert list(accepted) == [keyid(public)]
        with pytest.raises(VerificationError):
            env.verify([SSlibKey.from_crypto(other)], 1)


@pytest.mark.laya_claim("report.interop")
def test_we_verify_a_securesystemslib_bundle(tmp_path, keys):
    private, public, other = keys
    signer = CryptoSigner(private)
    lines = []
    for payload in payloads():
        env = Envelope(payload, PAYLOAD_TYPE, {})
        env.sign(signer)
        lines.append(json.dumps(env.to_dict()) + "\n")
    path = tmp_path / "sslib.intoto.jsonl"
    path.write_text("".join(lines))
    verified = verify_bundle(path, public)
    assert verified.keyid == signer.public_key.keyid
    assert {verified.test_result["predicateType"], verified.laya["predicateType"]} == {TEST_RESULT_TYPE, LAYA_TYPE}
    with pytest.raises(VerifyError):
        verify_bundle(path, other)


def _artifact(tmp_path):
    d = tmp_path / "artifact"
    (d / "head").mkdir(parents=True)
    (d / "manifest.json").write_bytes(b'{"a": 1}')
    (d / "head" / "weights.safetensors").write_bytes(bytes(range(256)) * 4)
    (d / "tokenizer.json").write_bytes(b"{}")
    return d


@pytest.mark.laya_claim("report.subjects")
def test_artifact_digest_is_model_signing_digest_of_digests(tmp_path):
    d = _artifact(tmp_path)
    files = sorted(p for p in d.rglob("*") if p.is_file())
    expected = hashlib.sha256(b"".join(hashlib.sha256(p.read_bytes()).digest()
                                       for p in sorted(files, key=lambda p: p.relative_to(d).as_posix())))
    digest, per_file = artifact_digest(d)
    assert digest == expected.hexdigest()
    assert list(per_file) == ["head/weights.safetensors", "manifest.json", "tokenizer.json"]


@pytest.mark.laya_claim("report.subjects")
def test_runtime_digest_is_sha256sum_lines(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "a.py").write_text("y = 2\n")
    (tmp_path / "pkg" / "data.txt").write_text("not source")
    lines = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {name}\n" for name, p in
                    [("__init__.py", tmp_path / "pkg" / "__init__.py"), ("sub/a.py", tmp_path / "pkg" / "sub" / "a.py")])
    assert source_digest(tmp_path / "pkg")[0] == hashlib.sha256(lines.encode()).hexdigest()


@pytest.mark.laya_claim("report.subjects")
def test_one_artifact_byte_changes_the_digest_and_fails_verify(tmp_path, keys):
    d = _artifact(tmp_path)
    subject = artifact_subject(d, "head")
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(subjects=[*SUBJECTS, subject]), keys[0])
    verify_bundle(path, keys[1], [str(d)])
    weights = d / "head" / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    for i in (0, len(data) // 2, len(data) - 1):
        changed = bytearray(data)
        changed[i] ^= 0x80
        weights.write_bytes(changed)
        assert artifact_digest(d)[0] != subject["digest"]["sha256"]
        with pytest.raises(VerifyError, match="differs from subject artifact/artifact.*head/weights.safetensors"):
            verify_bundle(path, keys[1], [str(d)])
    weights.write_bytes(data)
    verify_bundle(path, keys[1], [str(d)])
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_bytes(b"x")
    with pytest.raises(VerifyError, match="is not a subject"):
        verify_bundle(path, keys[1], [str(tmp_path / "other")])


@pytest.mark.laya_claim("report.subjects")
def test_symlinks_in_an_artifact_are_refused(tmp_path, keys):
    d = _artifact(tmp_path)
    (d / "link").symlink_to(d / "tokenizer.json")
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(), keys[0])
    with pytest.raises(VerifyError, match="symlink"):
        verify_bundle(path, keys[1], [str(d)])
