"""report.verify.json: `laya-qual verify --json` gates exactly as the plain command does,
and says what it decided (the reference: docs/report-format.md, "Verifying")."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from laya_qual.cli import main as laya_qual
from laya_qual.report.signing import keygen, load_signer
from laya_qual.synth.reports import CLAIM_IDS, report_spec, signed_report

CLAIMS = CLAIM_IDS[:3]  # the builder's fourth, its benchmark's claim, always passes
RANK = {"FAILED": 0, "WARNED": 1, "PASSED": 2}
ACCEPTED, NOT_AUTHENTIC, USAGE, REJECTED = 0, 1, 2, 3


def reference_verdict(outcomes: list[str]) -> str:
    """A claim's verdict from its tests' outcomes, as docs/report-format.md defines it."""
    if "failed" in outcomes:
        return "failed"
    return "passed" if "passed" in outcomes else "not evaluated"


def reference_gate(verdicts: dict[str, str], require_result: str | None, require_claims: list[str]) -> tuple[str, int, int]:
    """(result, exit status, shortfalls) of an authentic report: at least --require-result
    (default WARNED) and every --require-claim passed."""
    values = set(verdicts.values())
    result = "FAILED" if "failed" in values else "WARNED" if "not evaluated" in values else "PASSED"
    short = int(RANK[result] < RANK[require_result or "WARNED"]) + sum(verdicts[c] != "passed" for c in require_claims)
    return result, (REJECTED if short else ACCEPTED), short


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("verify-keys")
    keygen(d / "k")
    keygen(d / "other")
    return {"signer": load_signer(d / "k"), "public": d / "k.pub", "other": d / "other.pub"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return tmp_path_factory.mktemp("verify-reports")


@pytest.fixture(scope="module")
def passing_bundle(keys, reports):
    return signed_report(reports / "passing", report_spec(), keys["signer"])


def verify(*args) -> tuple[int, str]:
    result = CliRunner().invoke(laya_qual, ["verify", *map(str, args)])
    return result.exit_code, result.stdout


OUTCOME = st.sampled_from(["passed", "failed", "skipped", None])  # None: the claim has no test


@pytest.mark.laya_claim("report.verify.json")
@settings(max_examples=25, deadline=None)
@given(outcomes=st.fixed_dictionaries({c: OUTCOME for c in CLAIMS}),
       require_result=st.sampled_from([None, "PASSED", "WARNED", "FAILED"]),
       require_claims=st.lists(st.sampled_from(CLAIMS), unique=True, max_size=2))
@example(outcomes=dict.fromkeys(CLAIMS, "passed"), require_result=None, require_claims=[])
@example(outcomes={**dict.fromkeys(CLAIMS, "passed"), CLAIMS[1]: "failed"}, require_result=None, require_claims=[])
@example(outcomes={**dict.fromkeys(CLAIMS, "passed"), CLAIMS[1]: "failed"}, require_result="FAILED", require_claims=[])
@example(outcomes={**dict.fromkeys(CLAIMS, "passed"), CLAIMS[2]: "skipped"}, require_result="PASSED",
         require_claims=[CLAIMS[2]])
def test_json_gates_as_the_plain_command_and_says_why(keys, reports, outcomes, require_result, require_claims):
    given_outcomes = {c: o for c, o in outcomes.items() if o is not None}
    bundle = signed_report(reports / uuid.uuid4().hex, report_spec(outcomes=given_outcomes),
                           keys["signer"])
    verdicts = {c: reference_verdict([o] if o else []) for c, o in outcomes.items()}
    verdicts["bench.serve.batch"] = "passed"  # the builder's benchmark record, always passed
    result, status, shortfalls = reference_gate(verdicts, require_result, require_claims)
    gate = [*(["--require-result", require_result] if require_result else []),
            *(arg for c in require_claims for arg in ("--require-claim", c))]
    plain, _ = verify(bundle, "--public-key", keys["public"], *gate)
    as_json, out = verify(bundle, "--public-key", keys["public"], *gate, "--json")
    assert plain == as_json == status, (plain, as_json, status)
    said = json.loads(out)
    assert said["verified"] is True and said["accepted"] is (status == ACCEPTED)
    assert said["result"] == result and len(said["shortfalls"]) == shortfalls
    assert said["claims"] == verdicts
    assert said["required"] == {"result": require_result or "WARNED", "claims": require_claims}


@pytest.mark.laya_claim("report.verify.json")
@settings(max_examples=8)
@given(word=st.text(min_size=0, max_size=12).filter(lambda w: w not in ("PASSED", "WARNED", "FAILED")))
@example(word="passed")
@example(word="OK")
@example(word="")
@example(word="PASSED ")
def test_a_result_no_report_can_have_is_a_usage_error_with_and_without_json(keys, passing_bundle, word):
    """--require-result takes PASSED, WARNED or FAILED, exactly (docs/report-format.md): any
    other word is exit 2, never read as some result (a gate that accepts `passed` or `OK`
    silently would gate on nothing)."""
    assert verify(passing_bundle, "--public-key", keys["public"], "--require-result", word)[0] == USAGE
    assert verify(passing_bundle, "--public-key", keys["public"], "--require-result", word, "--json")[0] == USAGE


@pytest.mark.laya_claim("report.verify.json")
def test_a_claim_no_catalogue_knows_is_a_usage_error_with_and_without_json(keys, reports):
    bundle = signed_report(reports / uuid.uuid4().hex, report_spec(), keys["signer"])
    assert verify(bundle, "--public-key", keys["public"], "--require-claim", "no.such.claim")[0] == USAGE
    assert verify(bundle, "--public-key", keys["public"], "--require-claim", "no.such.claim", "--json")[0] == USAGE


def _resigned(bundle, case: str) -> None:
    """Each envelope of ``bundle`` unsigned, or signed twice: its own signature and a
    broken copy (one bit of the signature flipped), in the order ``case`` names."""
    lines = []
    for line in bundle.read_text().splitlines():
        env = json.loads(line)
        good = env["signatures"][0]
        raw = bytearray(base64.b64decode(good["sig"]))
        raw[0] ^= 1
        bad = {**good, "sig": base64.b64encode(bytes(raw)).decode()}
        env["signatures"] = {"unsigned": [], "good first": [good, bad], "bad first": [bad, good]}[case]
        lines.append(json.dumps(env, separators=(",", ":")))
    bundle.write_text("\n".join(lines) + "\n")


@pytest.mark.laya_claim("report.verify.json")
@pytest.mark.parametrize("case", ["another key", "good first", "bad first", "unsigned"])
def test_a_bundle_that_is_not_authentic_is_exit_1_with_and_without_json(keys, reports, case):
    """Every signature must verify with the given key: one good signature beside a bad one
    is not authentic, whichever comes first."""
    bundle = signed_report(reports / uuid.uuid4().hex, report_spec(), keys["signer"])
    public = keys["other"] if case == "another key" else keys["public"]
    if case != "another key":
        _resigned(bundle, case)
    plain, _ = verify(bundle, "--public-key", public, "--require-result", "FAILED")
    as_json, out = verify(bundle, "--public-key", public, "--require-result", "FAILED", "--json")
    assert plain == as_json == NOT_AUTHENTIC, (plain, as_json)
    said = json.loads(out)
    assert said["verified"] is False and said["error"] and "accepted" not in said
