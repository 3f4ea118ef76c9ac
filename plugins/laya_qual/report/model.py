"""The report model: from plain per-test records and the run's facts to the two
in-toto statements, and the rules that tie them together.

Everything here works on plain data (dicts, lists, strings), so the controller builds
the same report whether the tests ran in-process or on xdist workers, and ``verify``
re-derives verdicts, the result and the test lists with the very same rules.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import laya_qual
from laya_qual.claims import Claim
from laya_qual.subjects import DIR_HASH

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
TEST_RESULT_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
LAYA_TYPE = "https://laya-qual.dev/attestation/qualification/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_DESCRIPTOR = "laya-qual-predicate"

PASSED, FAILED, NOT_EVALUATED = "passed", "failed", "not evaluated"
VERDICTS = (PASSED, FAILED, NOT_EVALUATED)
# Per-test outcomes and where each lands in the test-result predicate.
FAILING_OUTCOMES = ("failed", "error", "xfailed")
WARNING_OUTCOMES = ("skipped", "unmeasured")
OUTCOMES = ("passed", *FAILING_OUTCOMES, *WARNING_OUTCOMES)

SCOPE = {
    "statement": (
        "This report qualifies mechanics only: parity, pins, cache, cancellation and exactness "
        "of the laya runtime and its artifacts on the environment recorded here. It does not "
        "qualify real-domain accuracy, nor latency, throughput or memory on any other hardware. "
        "Artifacts loaded here remain unaccepted model nominations that need domain validation "
        "before use."
    ),
    "notQualified": [
        "real-domain accuracy of any head or base",
        "latency, throughput or memory on hardware other than the recorded environment",
        "acceptance of any loaded artifact (each stays an unaccepted model nomination)",
    ],
}


class AgreementError(Exception):
    """The two statements of a bundle, or a claim and its evidence, disagree."""


def verdict_of(outcomes: Iterable[str]) -> str:
    """A claim fails if any of its tests failed, passes if one passed and none
    failed, and is otherwise (nothing ran, or all skipped/unmeasured) not evaluated."""
    outcomes = list(outcomes)
    if any(o in FAILING_OUTCOMES for o in outcomes):
        return FAILED
    return PASSED if "passed" in outcomes else NOT_EVALUATED


def result_of(verdicts: Iterable[str], collection_errors: Iterable[str] = ()) -> str:
    """FAILED if a claim failed or a module failed to collect (its tests never ran, and
    nobody can say which claims they held), WARNED if a claim was not evaluated."""
    verdicts = list(verdicts)
    if FAILED in verdicts or list(collection_errors):
        return "FAILED"
    return "WARNED" if NOT_EVALUATED in verdicts else "PASSED"


def collection_errors_of(details: Mapping) -> list[str]:
    """The modules a report's invocation names as failed to collect (none when it records
    no invocation); anything but a list of strings is refused."""
    invocation = details.get("invocation", {})
    if not isinstance(invocation, dict):
        raise AgreementError("laya-qual invocation is not an object")
    errors = invocation.get("collectionErrors", [])
    if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
        raise AgreementError("laya-qual invocation collectionErrors is not a list of module ids")
    return errors


def report_records(records: Iterable[Mapping]) -> list[dict]:
    """The records as the report counts them, sorted by test: a passed benchmark test
    that measured nothing (xdist, --benchmark-disable) is ``unmeasured``; a test whose
    call never ran and whose setup did not fail (``--setup-only``) is no evidence."""
    out = []
    for record in records:
        if record["outcome"] is None:
            continue
        record = dict(record)
        if record["outcome"] == "passed" and record.get("benchmark", {}).get("measured") is False:
            record["outcome"] = "unmeasured"
        out.append(record)
    return sorted(out, key=lambda r: r["test"])


def build_claims(catalogue: Mapping[str, Claim], records: Iterable[Mapping]) -> list[dict]:
    """Every catalogued claim, in catalogue order, with its verdict and evidence.

    A record is ``{"test", "claims", "outcome", "hypothesis"?, "benchmark"?}``.
    """
    evidence: dict[str, list[dict]] = {cid: [] for cid in catalogue}
    for record in sorted(records, key=lambda r: r["test"]):
        entry = {k: record[k] for k in ("test", "outcome", "hypothesis", "benchmark") if record.get(k)}
        for cid in record["claims"]:
            evidence[cid].append(entry)
    return [{"id": c.id, "area": c.area, "statement": c.statement,
             "verdict": verdict_of(e["outcome"] for e in evidence[c.id]),
             "evidence": evidence[c.id]} for c in catalogue.values()]


def tests_by_outcome(claims: list[dict], collection_errors: Iterable[str] = ()) -> dict[str, list[str]]:
    """passedTests / warnedTests / failedTests of the test-result predicate; a module that
    failed to collect is a failed test of its own."""
    outcome: dict[str, str] = {}
    for claim in claims:
        for entry in claim["evidence"]:
            seen = outcome.setdefault(entry["test"], entry["outcome"])
            if seen != entry["outcome"]:
                raise AgreementError(f"test {entry['test']} has outcomes {seen!r} and {entry['outcome']!r}")
    lists = {"passedTests": [], "warnedTests": [], "failedTests": []}
    for test, o in sorted(outcome.items()):
        if o not in OUTCOMES:
            raise AgreementError(f"test {test} has unknown outcome {o!r}")
        key = "passedTests" if o == "passed" else "failedTests" if o in FAILING_OUTCOMES else "warnedTests"
        lists[key].append(test)
    lists["failedTests"] = sorted({*lists["failedTests"], *collection_errors})
    return lists


def canonical(obj) -> bytes:
    """The payload bytes that get signed (stable for identical content)."""
    # Deliberately not laya's canonical_json: the verifier must not trust the code it qualifies.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def statement(subjects: list[dict], predicate_type: str, predicate: dict) -> dict:
    return {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": predicate_type,
            "predicate": predicate}


def verdict_summary(claims: list[dict], collection_errors: Iterable[str] = ()) -> dict:
    """The report's ``result`` and its ``counts`` of claims per verdict."""
    return {"result": result_of((c["verdict"] for c in claims), collection_errors),
            "counts": {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}}


def build_details(records: list[dict], *, hypothesis: dict, environment: dict, invocation: dict, signing: dict,
                  harness: dict[str, str], subjects: list[dict], heads: list[dict], suite: dict[str, dict],
                  passes: list[dict]) -> tuple[dict, list[dict]]:
    """The laya predicate's run details and the test-result ``configuration`` (the
    harness digests and the pytest invocation), from the report's records and the run's facts."""
    details = {
        "hypothesis": hypothesis,
        "benchmarks": [{"test": r["test"], **r["benchmark"]} for r in records
                       if r.get("benchmark", {}).get("measured")],
        "environment": environment,
        "invocation": invocation,
        "signing": signing,
        "harness": {"version": laya_qual.__version__, DIR_HASH: harness},
        "nominations": [s["name"] for s in subjects if s["annotations"]["kind"] == "artifact"
                        and s["annotations"].get("role") != "synthetic"],  # nobody nominates a synthetic head
        "heads": heads,
        **({"suite": suite} if suite else {}),
        "passes": passes,
    }
    run = {k: invocation[k] for k in ("args", "workers", "device", "exitStatus")} | {
        "hypothesisSeed": hypothesis["seed"]}
    content = canonical(run)
    configuration = [
        *({"name": name, "digest": {DIR_HASH: digest}, "annotations": {"version": laya_qual.__version__}}
          for name, digest in harness.items()),
        {"name": "pytest-invocation", "mediaType": "application/json",
         "content": base64.b64encode(content).decode(), "digest": {"sha256": hashlib.sha256(content).hexdigest()},
         "annotations": run},
    ]
    return details, configuration


class Statements(NamedTuple):
    """A bundle's payloads, in bundle order."""

    test_result: bytes
    laya: bytes


def build_statements(subjects: list[dict], claims: list[dict], details: dict,
                     configuration: list[dict]) -> Statements:
    """The test-result payload names the laya payload's digest."""
    collection_errors = collection_errors_of(details)
    summary = verdict_summary(claims, collection_errors)
    result = summary["result"]
    laya = canonical(statement(subjects, LAYA_TYPE, {**summary, "claims": claims, "scope": SCOPE, **details}))
    binding = {"name": PREDICATE_DESCRIPTOR, "mediaType": PAYLOAD_TYPE,
               "digest": {"sha256": hashlib.sha256(laya).hexdigest()}}
    url = details.get("invocation", {}).get("url")
    test_result = canonical(statement(subjects, TEST_RESULT_TYPE, {
        "result": result, "configuration": [binding, *configuration], **tests_by_outcome(claims, collection_errors),
        **({"url": url} if url else {})}))
    return Statements(test_result, laya)


def check_agreement(test_result: dict, laya: dict, laya_payload: bytes) -> None:
    """Raise AgreementError unless both statements tell the same story."""
    if test_result["subject"] != laya["subject"]:
        raise AgreementError("the two statements name different subjects")
    tr, lq = test_result["predicate"], laya["predicate"]
    bound = [d for d in tr.get("configuration", []) if isinstance(d, dict) and d.get("name") == PREDICATE_DESCRIPTOR]
    if [d.get("digest", {}).get("sha256") for d in bound] != [hashlib.sha256(laya_payload).hexdigest()]:
        raise AgreementError("the test-result statement does not name this laya-qual statement's digest")
    claims = lq.get("claims")
    if not isinstance(claims, list) or not claims:
        raise AgreementError("laya-qual predicate has no claims list")
    ids = [c.get("id") if isinstance(c, dict) else None for c in claims]
    if len(set(ids)) != len(ids) or not all(isinstance(i, str) for i in ids):
        raise AgreementError("laya-qual claims need unique string ids")
    for claim in claims:
        if not isinstance(claim.get("evidence"), list):
            raise AgreementError(f"claim {claim['id']}: evidence is not a list")
        derived = verdict_of(e.get("outcome") for e in claim["evidence"])
        if claim.get("verdict") != derived:
            raise AgreementError(f"claim {claim['id']}: verdict {claim.get('verdict')!r} but its evidence gives {derived!r}")
    check_heads(lq.get("heads", []), laya["subject"])
    counts = verdict_summary(claims)["counts"]
    if lq.get("counts") != counts:
        raise AgreementError(f"counts {lq.get('counts')!r} but the claims' verdicts give {counts!r}")
    collection_errors = collection_errors_of(lq)
    result = result_of((c["verdict"] for c in claims), collection_errors)
    if lq.get("result") != result or tr.get("result") != result:
        raise AgreementError(f"results disagree: test-result {tr.get('result')!r}, "
                             f"laya-qual {lq.get('result')!r}, claims and collection errors give {result!r}")
    for key, tests in tests_by_outcome(claims, collection_errors).items():
        if sorted(tr.get(key, [])) != tests:
            raise AgreementError(f"test-result {key} disagrees with the laya-qual claims' evidence")


def check_heads(heads: object, subjects: list[dict]) -> None:
    """``heads`` (absent from reports made before it existed) must be a list of
    ``{subject, kind, tasks}`` entries, each naming an artifact subject of the statement."""
    artifacts = {s.get("name") for s in subjects if s.get("annotations", {}).get("kind") == "artifact"}
    if not isinstance(heads, list):
        raise AgreementError("laya-qual heads is not a list")
    for entry in heads:
        if not isinstance(entry, dict) or entry.get("subject") not in artifacts:
            raise AgreementError(f"laya-qual heads entry {str(entry)[:60]!r} names no artifact subject")
        if not (entry.get("kind") is None or isinstance(entry["kind"], str)) or not isinstance(
                entry.get("tasks"), list) or not all(isinstance(t, dict) for t in entry["tasks"]):
            raise AgreementError(f"laya-qual heads entry {entry['subject']}: needs a kind and a list of task objects")
