"""DSSE/in-toto signing and offline verification: tamper, wrong key, agreement,
subject digests, and interop with securesystemslib both ways."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from laya_qual.claims import CLAIMS
from laya_qual.report.model import LAYA_TYPE, PAYLOAD_TYPE, TEST_RESULT_TYPE, build_claims, build_statements, canonical
from laya_qual.report.signing import (PASSWORD_ENV, PUBLIC_KEY_ENV, SigningError, keygen, load_public_key, load_signer,
                                pae, public_key_path, write_bundle)
from laya_qual.subjects import artifact_subject
from laya_qual.report.verify import VerifyError, verify_bundle, verify_bytes

CATALOGUE = {cid: CLAIMS[cid] for cid in ("report.verdicts", "report.signature", "report.interop")}
RECORDS = [
    {"test": "t.py::test_ok", "claims": ["report.verdicts"], "outcome": "passed"},
    {"test": "t.py::test_bad", "claims": ["report.signature"], "outcome": "failed"},
    {"test": "t.py::test_skip", "claims": ["report.signature", "report.interop"], "outcome": "skipped"},
]
SUBJECTS = [{"name": "laya-runtime", "digest": {"dirHash": "ab" * 32}}]


def payloads(records=RECORDS, subjects=SUBJECTS):
    return build_statements(subjects, build_claims(CATALOGUE, records), {"note": "test"}, [])


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    keygen(d / "k")
    keygen(d / "other")
    return d


@pytest.fixture(scope="module")
def keys(key_dir):
    d = key_dir
    return load_signer(d / "k"), load_public_key(d / "k.pub"), load_public_key(d / "other.pub")


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
    assert load_signer(tmp_path / "k").public_key.keyid == load_public_key(public).keyid
    with pytest.raises(SigningError, match="already exists"):
        keygen(tmp_path / "k")
    with pytest.raises(SigningError, match="not a usable PEM public key"):
        load_public_key(tmp_path / "k")
    with pytest.raises(SigningError, match="not a usable PEM private key"):
        load_signer(public)


@pytest.mark.laya_claim("report.signature")
def test_encrypted_key_needs_its_password_from_the_environment(tmp_path, monkeypatch):
    public = load_public_key(keygen(tmp_path / "k", password=b"s3cret"))
    assert b"ENCRYPTED PRIVATE KEY" in (tmp_path / "k").read_bytes()
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with pytest.raises(SigningError, match=f"encrypted.*{PASSWORD_ENV}"):
        load_signer(tmp_path / "k")
    monkeypatch.setenv(PASSWORD_ENV, "wrong")
    with pytest.raises(SigningError, match="k: "):
        load_signer(tmp_path / "k")
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(), load_signer(tmp_path / "k"))
    assert verify_bundle(path, public).keyid == public.keyid


@pytest.mark.laya_claim("report.signature")
def test_signer_uri_signs_through_securesystemslib(tmp_path, monkeypatch):
    """Any securesystemslib signer URI works; ``file2:`` is the one that needs no KMS."""
    keygen(tmp_path / "k")
    monkeypatch.delenv(PUBLIC_KEY_ENV, raising=False)
    with pytest.raises(SigningError, match=PUBLIC_KEY_ENV):
        load_signer(f"file2:{tmp_path / 'k'}")
    with pytest.raises(SigningError, match=PUBLIC_KEY_ENV):
        public_key_path(f"file2:{tmp_path / 'k'}")
    assert public_key_path(str(tmp_path / "k")) == tmp_path / "k.pub"
    monkeypatch.setenv(PUBLIC_KEY_ENV, str(tmp_path / "k.pub"))
    assert public_key_path(f"file2:{tmp_path / 'k'}") == tmp_path / "k.pub"
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(), load_signer(f"file2:{tmp_path / 'k'}"))
    verify_bundle(path, load_public_key(tmp_path / "k.pub"))
    with pytest.raises(SigningError, match="cannot load signer"):
        load_signer(f"file2:{tmp_path / 'missing'}")


@pytest.mark.laya_claim("report.signature")
def test_ecdsa_keys_sign_and_only_their_key_verifies(tmp_path, keys):
    ecdsa = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec").write_bytes(ecdsa.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    (tmp_path / "ec.pub").write_bytes(ecdsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(), load_signer(tmp_path / "ec"))
    verify_bundle(path, load_public_key(tmp_path / "ec.pub"))
    with pytest.raises(VerifyError, match="not by the given key"):
        verify_bundle(path, keys[1])


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


def _resign(path, private, edit_test_result=None, edit_laya=None, statements=None):
    """Re-sign (validly) statements changed by the edit functions."""
    tr, laya = (json.loads(p) for p in statements or payloads())
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


UNCOLLECTED = "sub/test_syntax.py"


@pytest.mark.laya_claim("report.verify.agreement")
@pytest.mark.parametrize("edit_tr, edit_laya, reason", [
    (lambda tr: tr["predicate"].update(result="PASSED"), lambda laya: laya["predicate"].update(result="PASSED"),
     "results disagree: .*claims and collection errors give 'FAILED'"),
    (lambda tr: tr["predicate"]["failedTests"].clear(), None, "failedTests disagrees"),
    (None, lambda laya: laya["predicate"]["invocation"].update(collectionErrors=[]),
     "results disagree: .*claims and collection errors give 'PASSED'"),
    (None, lambda laya: laya["predicate"]["invocation"].update(collectionErrors=UNCOLLECTED),
     "collectionErrors is not a list of module ids"),
    (None, lambda laya: laya["predicate"].update(invocation=[UNCOLLECTED]), "invocation is not an object"),
])
def test_a_module_that_did_not_collect_verifies_only_in_a_failed_report(tmp_path, keys, edit_tr, edit_laya, reason):
    """docs/report-format.md: a report whose invocation names a module that did not
    collect is FAILED with that module in failedTests, though every claim passed; a
    validly signed report saying otherwise is refused."""
    records = [{"test": f"t.py::test_{i}", "claims": [cid], "outcome": "passed"} for i, cid in enumerate(CATALOGUE)]
    made = build_statements(SUBJECTS, build_claims(CATALOGUE, records),
                            {"invocation": {"collectionErrors": [UNCOLLECTED]}}, [])
    tr, laya = (json.loads(p)["predicate"] for p in made)
    assert {c["verdict"] for c in laya["claims"]} == {"passed"}
    assert tr["result"] == laya["result"] == "FAILED"
    assert tr["failedTests"] == [UNCOLLECTED] and len(tr["passedTests"]) == len(CATALOGUE)
    path = tmp_path / "r.intoto.jsonl"
    _resign(path, keys[0], statements=made)
    verify_bundle(path, keys[1])
    _resign(path, keys[0], edit_tr, edit_laya, statements=made)
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
def test_securesystemslib_verifies_our_bundle(bundle, keys, key_dir):
    _, public, other = keys
    for line in bundle.read_text().splitlines():
        env = Envelope.from_dict(json.loads(line))
        assert env.payload_type == PAYLOAD_TYPE
        pem = serialization.load_pem_public_key((key_dir / "k.pub").read_bytes())
        accepted = env.verify([SSlibKey.from_crypto(pem)], 1)
        assert list(accepted) == [public.keyid]
        with pytest.raises(VerificationError):
            env.verify([other], 1)


@pytest.mark.laya_claim("report.interop")
def test_we_verify_a_securesystemslib_bundle(tmp_path, keys):
    other = keys[2]
    signer = CryptoSigner.generate_ed25519()
    public = signer.public_key
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


def _line(payload: bytes, signer=None, payload_type=PAYLOAD_TYPE) -> str:
    """One DSSE line built with securesystemslib (independent of our writer)."""
    env = Envelope(payload, payload_type, {})
    if signer is not None:
        env.sign(signer)
    return json.dumps(env.to_dict()) + "\n"


def _foreign_statement() -> bytes:
    return canonical({"_type": "https://in-toto.io/Statement/v1", "subject": SUBJECTS,
                      "predicateType": "https://slsa.dev/provenance/v1", "predicate": {"buildDefinition": {}}})


@pytest.mark.laya_claim("report.interop")
def test_unrecognised_lines_are_ignored(bundle, keys):
    """The in-toto bundle spec: consumers ignore lines they do not recognise, whoever signed them."""
    stranger = CryptoSigner.generate_ed25519()
    original = bundle.read_text()
    extras = [_line(_foreign_statement(), stranger), _line(_foreign_statement()),
              _line(b"not json at all", stranger, "application/octet-stream"),
              _line(_foreign_statement(), keys[0])]
    for extra in extras:
        for text in (extra + original, original + extra):
            bundle.write_text(text)
            assert verify_bundle(bundle, keys[1]).ignored == 1


@pytest.mark.laya_claim("report.signature")
@pytest.mark.parametrize("which", [0, 1], ids=["test-result", "laya"])
def test_our_predicate_types_signed_by_another_key_or_unsigned_are_refused(bundle, keys, which):
    """An extra line of a laya-qual predicate type is never ignored: it must verify."""
    stranger = CryptoSigner.generate_ed25519()
    original = bundle.read_text()
    payload = payloads()[which]
    for extra, reason in ((_line(payload, stranger), "not by the given key"),
                          (_line(payload), "unsigned")):
        for text in (extra + original, original + extra):
            bundle.write_text(text)
            with pytest.raises(VerifyError, match=reason):
                verify_bundle(bundle, keys[1])
    # The same statement alone (our own line removed), signed by another key: refused too.
    lines = original.splitlines(keepends=True)
    lines[which] = _line(payload, stranger)
    bundle.write_text("".join(lines))
    with pytest.raises(VerifyError, match="not by the given key"):
        verify_bundle(bundle, keys[1])


@pytest.mark.laya_claim("report.signature")
@pytest.mark.parametrize("which", [0, 1], ids=["test-result", "laya"])
def test_our_predicate_type_in_sloppy_base64_is_refused_not_ignored(bundle, keys, which):
    """An extra line whose payload carries a character outside the base64 alphabet, which a
    lenient reader (Python's default b64decode, Node's Buffer) decodes to one of our
    statements, says it is ours: it is never ignored, and it is refused as not strict
    base64 (securesystemslib refuses it too)."""
    line = json.loads(_line(payloads()[which], keys[0]))
    line["payload"] = line["payload"][:8] + "*" + line["payload"][8:]
    assert base64.b64decode(line["payload"]) == payloads()[which]  # what a lenient reader sees
    bundle.write_text(bundle.read_text() + json.dumps(line) + "\n")
    with pytest.raises(VerifyError, match="line 3: .*base64"):
        verify_bundle(bundle, keys[1])


# --- subject digests: references written from docs/report-format.md, not from subjects.py ---

def _tree(root, files: dict[str, bytes]):
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


ARTIFACT = {"manifest.json": b'{"a": 1}', "head/weights.safetensors": bytes(range(256)) * 4,
            "tokenizer.json": b"{}", ".hidden": b"dot-file", "head/.meta/deep/x.bin": b"\x00\x01",
            "B.txt": b"upper sorts first", "Zz.txt": b"bytewise before 'head', case-folded after 'tokenizer'", "head-x": b"'-' (0x2d) sorts before '/' (0x2f)"}


def reference_dir_hash(root) -> str:
    """in-toto dirHash: sha256sum lines of every file, sorted bytewise by relative path."""
    rels = sorted((os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs),
                  key=str.encode)
    lines = "".join(f"{hashlib.sha256(open(os.path.join(root, r), 'rb').read()).hexdigest()}  {r}\n" for r in rels)
    return hashlib.sha256(lines.encode()).hexdigest()


def reference_digest_of_digests(root) -> str:
    rels = sorted((os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs),
                  key=str.encode)
    return hashlib.sha256(b"".join(hashlib.sha256(open(os.path.join(root, r), "rb").read()).digest()
                                   for r in rels)).hexdigest()


def shell_dir_hash(root) -> str | None:
    """The in-toto spec's own command line, when coreutils are there."""
    if not (shutil.which("sha256sum") and shutil.which("find")):
        return None
    out = subprocess.run("find . -type f | cut -c3- | LC_ALL=C sort | xargs -r sha256sum | sha256sum | cut -f1 -d' '",
                         shell=True, cwd=root, capture_output=True, text=True, check=True).stdout
    return out.strip()


@pytest.mark.laya_claim("report.subjects")
def test_artifact_subject_is_in_toto_dir_hash_and_model_signing_root(tmp_path):
    d = _tree(tmp_path / "artifact", ARTIFACT)
    subject = artifact_subject(d, "head")
    assert subject["digest"]["dirHash"] == reference_dir_hash(d)
    assert subject["digest"]["sha256OfFileDigests"] == reference_digest_of_digests(d)
    assert "sha256" not in subject["digest"]  # no blob has these bytes
    shell = shell_dir_hash(d)
    assert shell in (None, subject["digest"]["dirHash"])
    assert set(subject["annotations"]["files"]) == set(ARTIFACT)


@pytest.mark.laya_claim("report.subjects")
def test_runtime_subject_is_dir_hash_of_the_py_tree(tmp_path):
    from laya_qual.subjects import runtime_subject, package_dir

    copy = tmp_path / "laya"
    shutil.copytree(package_dir("laya"), copy, ignore=lambda d, names: [
        n for n in names if n == "__pycache__" or (os.path.isfile(os.path.join(d, n)) and not n.endswith(".py"))])
    subject = runtime_subject()
    assert subject["digest"]["dirHash"] == reference_dir_hash(copy)
    assert shell_dir_hash(copy) in (None, subject["digest"]["dirHash"])
    commit = subject["digest"].get("gitCommit")
    if commit is not None:  # only a clean checkout of the runtime may name its commit
        git = ["git", "-C", str(package_dir("laya"))]
        assert commit == subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        assert not subprocess.run([*git, "status", "--porcelain", "--", "."], capture_output=True, text=True).stdout


@pytest.mark.laya_claim("report.subjects")
def test_one_artifact_byte_changes_the_digest_and_fails_verify(tmp_path, keys):
    d = _tree(tmp_path / "artifact", ARTIFACT)
    subject = artifact_subject(d, "head")
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(subjects=[*SUBJECTS, subject]), keys[0])
    verify_bundle(path, keys[1], [str(d)])
    for name in ("head/weights.safetensors", ".hidden", "head/.meta/deep/x.bin"):
        data = (d / name).read_bytes()
        for i in (0, len(data) // 2, len(data) - 1):
            changed = bytearray(data)
            changed[i] ^= 0x80
            (d / name).write_bytes(changed)
            assert reference_dir_hash(d) != subject["digest"]["dirHash"]
            with pytest.raises(VerifyError, match=f"differs from subject artifact/artifact.*{name}"):
                verify_bundle(path, keys[1], [str(d)])
        (d / name).write_bytes(data)
    verify_bundle(path, keys[1], [str(d)])
    (d / "head" / ".new").write_bytes(b"")  # an added (empty, hidden) file is a change too
    with pytest.raises(VerifyError, match="head/.new"):
        verify_bundle(path, keys[1], [str(d)])
    (d / "head" / ".new").unlink()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_bytes(b"x")
    with pytest.raises(VerifyError, match="is not a subject"):
        verify_bundle(path, keys[1], [str(tmp_path / "other")])


@pytest.mark.laya_claim("report.subjects")
@pytest.mark.parametrize("case", ["symlinked directory", "fifo", "name not utf-8"])
def test_verify_refuses_what_load_artifact_refuses(tmp_path, keys, case):
    """`verify --artifact` walks what load_artifact would: a directory that is a link, a
    file that is no regular file, a name that is not UTF-8 are refused in one line, never
    digested through, skipped or a traceback."""
    d = _tree(tmp_path / "artifact", ARTIFACT)
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(subjects=[artifact_subject(d, "head")]), keys[0])
    given = d
    if case == "symlinked directory":
        given = tmp_path / "link"
        given.symlink_to(d, target_is_directory=True)
        said = "a symlink to a directory is not digested"
    elif case == "fifo":
        os.mkfifo(d / "pipe")
        said = "not a regular file"
    else:
        (d / os.fsdecode(b"x\xff")).write_bytes(b"")
        said = "a file name that is not UTF-8 is not digested"
    with pytest.raises(VerifyError, match=said) as refused:
        verify_bundle(path, keys[1], [str(given)])
    assert "\n" not in str(refused.value)


@pytest.mark.laya_claim("report.subjects")
def test_symlinks_in_an_artifact_are_refused(tmp_path, keys):
    d = _tree(tmp_path / "artifact", ARTIFACT)
    (d / "link").symlink_to(d / "tokenizer.json")
    path = tmp_path / "r.intoto.jsonl"
    write_bundle(path, payloads(), keys[0])
    with pytest.raises(VerifyError, match="symlink"):
        verify_bundle(path, keys[1], [str(d)])


# --- laya-qual verify as a release gate ---

def cli(*args):
    from click.testing import CliRunner

    from laya_qual.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _graded_bundle(tmp_path, name: str, outcomes: dict[str, str], key) -> Path:
    """A signed bundle whose claims get the given outcomes (the rest of the catalogue: none)."""
    catalogue = {cid: CLAIMS[cid] for cid in ("report.verdicts", "report.signature", "report.interop")}
    records = [{"test": f"t.py::test_{i}", "claims": [cid], "outcome": o} for i, (cid, o) in enumerate(outcomes.items())]
    path = tmp_path / f"{name}.intoto.jsonl"
    subjects = [{"name": "laya-runtime", "digest": {"dirHash": "ab" * 32}}]
    write_bundle(path, build_statements(subjects, build_claims(catalogue, records), {}, []), load_signer(key))
    return path


@pytest.mark.laya_claim("report.verify.gate")
def test_verify_exit_codes_gate_on_result_and_claims(tmp_path):
    cli("keygen", tmp_path / "k")
    key, public = tmp_path / "k", tmp_path / "k.pub"
    every = ("report.verdicts", "report.signature", "report.interop")
    passed = _graded_bundle(tmp_path, "passed", dict.fromkeys(every, "passed"), key)
    warned = _graded_bundle(tmp_path, "warned", dict.fromkeys(every[:2], "passed"), key)
    failed = _graded_bundle(tmp_path, "failed", {**dict.fromkeys(every, "passed"), "report.signature": "failed"}, key)
    codes = {}
    for name, bundle in (("PASSED", passed), ("WARNED", warned), ("FAILED", failed)):
        codes[name] = {req: cli("verify", bundle, "--public-key", public, *(["--require-result", req] if req else [])).exit_code
                       for req in (None, "PASSED", "WARNED", "FAILED")}
    assert codes == {"PASSED": {None: 0, "PASSED": 0, "WARNED": 0, "FAILED": 0},
                     "WARNED": {None: 0, "PASSED": 3, "WARNED": 0, "FAILED": 0},
                     "FAILED": {None: 3, "PASSED": 3, "WARNED": 3, "FAILED": 0}}
    rejected = cli("verify", failed, "--public-key", public, "--require-result", "PASSED")
    assert "OK" not in rejected.output and "REJECTED" in rejected.output and "result FAILED" in rejected.output
    assert cli("verify", warned, "--public-key", public, "--require-claim", "report.verdicts").exit_code == 0
    assert cli("verify", warned, "--public-key", public, "--require-claim", "report.interop").exit_code == 3
    assert cli("verify", passed, "--public-key", public, "--require-claim", "no.such.claim").exit_code == 2  # a claim no catalogue knows: a usage error
    report = json.loads(cli("verify", warned, "--public-key", public, "--json", "--require-result", "PASSED",
                            "--require-claim", "report.interop").output)
    assert report["verified"] is True and report["accepted"] is False and report["result"] == "WARNED"
    assert report["claims"]["report.interop"] == "not evaluated" and len(report["shortfalls"]) == 2
    cli("keygen", tmp_path / "other")
    assert cli("verify", passed, "--public-key", tmp_path / "other.pub", "--require-result", "FAILED").exit_code == 1


@pytest.mark.laya_claim("report.verify.tamper")
def test_signature_base64_malleability_is_refused(bundle, keys):
    """The signature has unused bits on every bundle (64 bytes of Ed25519 leave 4 in the
    last base64 digit), so this case never depends on the payload's length."""
    lines = bundle.read_text().splitlines()
    env = json.loads(lines[0])
    text = env["signatures"][0]["sig"]
    spelled = text.rstrip("=")
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    twin = spelled[:-1] + digits[digits.index(spelled[-1]) ^ 1] + text[len(spelled):]
    assert base64.b64decode(twin) == base64.b64decode(text) and twin != text  # same bytes, another line
    env["signatures"][0]["sig"] = twin
    bundle.write_text(json.dumps(env) + "\n" + lines[1] + "\n")
    with pytest.raises(VerifyError, match="canonical base64"):
        verify_bundle(bundle, keys[1])


@pytest.mark.laya_claim("report.verify.tamper")
@pytest.mark.parametrize("extra", ["\n", " ", "!", "-"])
def test_a_signature_with_a_character_outside_base64_is_refused_as_not_base64(bundle, keys, extra):
    """A lenient decoder skips the stray character and gets the same signature bytes; strict
    base64 refuses the text itself, before any canonical re-spelling is compared."""
    lines = bundle.read_text().splitlines()
    env = json.loads(lines[0])
    text = env["signatures"][0]["sig"]
    sloppy = text[:10] + extra + text[10:]
    assert base64.b64decode(sloppy) == base64.b64decode(text)  # "-" too: urlsafe's digit, skipped by standard
    env["signatures"][0]["sig"] = sloppy
    bundle.write_text(json.dumps(env) + "\n" + lines[1] + "\n")
    with pytest.raises(VerifyError, match="is not valid base64"):
        verify_bundle(bundle, keys[1])


B64_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@pytest.mark.laya_claim("report.verify.tamper")
@settings(max_examples=30)
@given(line=st.sampled_from([1, 2]), where=st.floats(0, 1, exclude_max=True), shift=st.integers(1, 63))
@example(line=2, where=0.0, shift=1).via("the payload's first character: no JSON object is left")
def test_a_changed_payload_character_is_refused_naming_its_line(keys, tmp_path_factory, line, where, shift):
    """One base64 digit of a payload replaced by another: refused, and the error names the
    line: the payload still reads as a statement of ours (its signature fails), or it reads as
    someone else's or as nothing (the statement is missing, and the line set aside is named)."""
    path = tmp_path_factory.mktemp("flip") / "r.intoto.jsonl"
    write_bundle(path, payloads(), keys[0])
    lines = path.read_text().splitlines()
    env = json.loads(lines[line - 1])
    text = env["payload"].rstrip("=")
    i = int(where * (len(text) - 1))  # not the last digit, whose unused bits may not change the bytes
    env["payload"] = text[:i] + B64_DIGITS[(B64_DIGITS.index(text[i]) + shift) % 64] + env["payload"][i + 1:]
    lines[line - 1] = json.dumps(env)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(VerifyError) as refused:
        verify_bundle(path, keys[1])
    said = str(refused.value)
    assert f"line {line}:" in said or f"set aside as not ours: line {line} (" in said, said
