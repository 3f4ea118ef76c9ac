"""report.verify.fuzz: a mutated report bundle is refused, or accepted only saying exactly
what was signed (the harness and its oracle: qualification/fuzzing.py).
"""

from __future__ import annotations

import base64
import dataclasses

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from laya_qual.claims import CLAIMS
from laya_qual.report.model import build_claims, build_statements
from laya_qual.report.signing import keygen, load_public_key, load_signer, write_bundle
from laya_qual.suite.fuzzing import EXAMPLES, MIN_BOUND_S, within
from laya_qual.synth.fuzz import DuplicateLine, Insert, JsonEdit, LineEdit, PayloadEdit, Truncate, bundle_mutations
from laya_qual.report.verify import VerifyError, verify_bytes


@dataclasses.dataclass(frozen=True)
class SignedBundle:
    data: bytes
    public: object
    statements: tuple[dict, dict]  # (test-result, laya-qual) as signed

    def __repr__(self) -> str:
        return f"SignedBundle(<{len(self.data)} bytes>)"


@pytest.fixture(scope="module")
def signed_bundle(tmp_path_factory) -> SignedBundle:
    """A two-statement bundle over every claim, signed with a fresh key."""
    directory = tmp_path_factory.mktemp("fuzz-bundle")
    keygen(directory / "k")
    records = [{"test": f"t.py::{cid}", "claims": [cid], "outcome": "passed"} for cid in CLAIMS]
    statements = build_statements([{"name": "laya-runtime", "digest": {"dirHash": "ab" * 32}}],
                                  build_claims(CLAIMS, records), {"note": "fuzz"}, [])
    path = directory / "r.intoto.jsonl"
    write_bundle(path, statements, load_signer(directory / "k"))
    public = load_public_key(directory / "k.pub")
    clean = verify_bytes(path.read_bytes(), public)
    return SignedBundle(path.read_bytes(), public, (clean.test_result, clean.laya))


# Each must be refused: the first line is the test-result statement, the second laya-qual's.
BOUNDARY_BUNDLES = {
    "empty bundle": Truncate(0),
    "payload not base64": LineEdit(0, JsonEdit(("payload",), "replace", "@@@@")),
    "no signatures": LineEdit(0, JsonEdit(("signatures",), "replace", [])),
    "signature not base64": LineEdit(1, JsonEdit(("signatures", 0, "sig"), "replace", "@@@@")),
    "second statement hidden as another type": LineEdit(1, JsonEdit(("payloadType",), "replace", "text/plain")),
    "statement edited, signature kept": LineEdit(0, PayloadEdit(JsonEdit(("predicateType",), "duplicate", "x"))),
    "line repeated": DuplicateLine(0),
    "nesting past the recursion limit": Insert(0, b"[" * 5000),
    "payload nested past the recursion limit": LineEdit(0, JsonEdit(("payload",), "replace",
                                                                    base64.b64encode(b"[" * 5000).decode())),
}


@pytest.mark.laya_claim("report.verify.fuzz")
@pytest.mark.parametrize("case", BOUNDARY_BUNDLES)
def test_a_boundary_bundle_is_refused(signed_bundle, case):
    mutated = BOUNDARY_BUNDLES[case].apply(signed_bundle.data)
    with pytest.raises(VerifyError), within(MIN_BOUND_S):
        verify_bytes(mutated, signed_bundle.public)


@pytest.mark.laya_claim("report.verify.fuzz")
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_a_mutated_bundle_is_refused_or_says_what_was_signed(signed_bundle, data):
    mutated = data.draw(bundle_mutations(signed_bundle.data), label="mutation").apply(signed_bundle.data)
    clock = within(MIN_BOUND_S)
    try:
        with clock:
            verified = verify_bytes(mutated, signed_bundle.public)
    except VerifyError:
        event(clock.bucket)
        event("refused, VerifyError")
        return
    assert (verified.test_result, verified.laya) == signed_bundle.statements, "accepted statements that were not signed"
    event(clock.bucket)
    event("accepted, statements unchanged")
