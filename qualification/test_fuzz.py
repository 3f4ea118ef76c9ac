"""Fuzz claims: a mutated pinned file, JSONL line or report bundle gets a named answer, quickly.

Oracle: the mutations come from ``laya_qual.synth.fuzz``, which knows JSON,
safetensors and DSSE only from their public specs and imports nothing of laya. A
sound answer is defined here, not asked of the code under test:

- an artifact: a ``LayaError`` subclass (nothing else may escape), or a load whose
  served probabilities are finite, within [0, 1], sum to 1 (``math.fsum``) and are
  bitwise the same standalone and on the shared base;
- a JSONL stream: exactly one output object per input line, each a prediction with
  such probabilities or an error object naming a ``LayaError`` subclass, and every
  output line strict JSON (no NaN or Infinity);
- a bundle: ``VerifyError``, or acceptance of statements equal to the signed ones.

Every example must answer within ``bound_s``: 20 times what the unmutated artifact
takes to load and serve, and never less than 5 s. The bound interrupts (SIGALRM) a
run that would hang, where the test runs on the main thread.

Outcomes are recorded as Hypothesis events: ``--hypothesis-show-statistics`` prints
them per role and error type.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st

import laya
from laya.errors import ArtifactError, LayaError
from laya.jsonl import predict_lines
from laya_qual.report import build_claims, build_statements
from laya_qual.claims import CLAIMS
from laya_qual.signing import keygen, load_public_key, load_signer, write_bundle
from laya_qual.synth import clone_artifact, pinned_path, replace_pinned_file, requests_for, rewrite_file
from laya_qual.synth.fuzz import (DuplicateLine, HeaderLength, Insert, JsonEdit, LineEdit, PayloadEdit, Raw, Truncate,
                                  bundle_mutations, file_mutations, huge_line_values, request_streams)
from laya_qual.verify import VerifyError, verify_bytes

EXAMPLES = max(settings.default.max_examples, 40)  # the thorough profile's 200 where it asks for more
MIN_BOUND_S = 5.0
BOUND_FACTOR = 20
# The artifact's JSON files that laya itself parses (the tokenizer is parsed by `tokenizers`):
# artifact-v1 reads them as strict JSON, so a repeated key or a value no finite JSON number
# spells (NaN, Infinity, 1e999, a number past 4300 digits) is refused wherever it appears.
STRICT_JSON_ROLES = ("manifest", "encoder_config", "special_tokens", "sequence_format", "head_config")

# Boundaries drawn on purpose, not by luck: each must be refused with ArtifactError naming the file.
# The repeated key repeats its own value, so only the strict-JSON rule can refuse it.
BOUNDARY_EDITS = {
    "repeated key": ("encoder_config", lambda doc: JsonEdit(("hidden_size",), "duplicate", doc["hidden_size"])),
    "NaN constant": ("head_config", lambda doc: JsonEdit(("tasks", 0, "temperature"), "replace", Raw("NaN"))),
    "1e999 parses to infinity": ("head_config", lambda doc: JsonEdit(("tasks", 0, "temperature"), "replace", Raw("1e999"))),
    "integer beyond float range": ("head_config",
                                   lambda doc: JsonEdit(("tasks", 0, "act_threshold"), "replace", Raw("-" + "9" * 400))),
    "integer past 4300 digits": ("encoder_config", lambda doc: JsonEdit(("num_hidden_layers",), "replace", Raw("9" * 5000))),
    "nesting past the recursion limit": ("encoder_config", lambda doc: Insert(0, b"[" * 5000)),
    "empty JSON file": ("special_tokens", lambda doc: Truncate(0)),
    "empty tokenizer": ("tokenizer", lambda doc: Truncate(0)),
    "empty weights": ("encoder_weights", lambda doc: Truncate(0)),
    "header length 2^64-1": ("encoder_weights", lambda doc: HeaderLength(2**64 - 1)),
    "header length past the file": ("head_weights", lambda doc: HeaderLength(2**40)),
}


class TimeBoundExceeded(AssertionError):
    pass


class within:
    """Fail if the block runs past ``seconds``; interrupt it (SIGALRM) where that is possible.
    Afterwards ``elapsed`` holds its wall time and ``bucket`` names its order of magnitude."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.interrupt = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")

    def _expire(self, signum, frame):
        raise TimeBoundExceeded(f"no answer within {self.seconds:.1f} s")

    def __enter__(self) -> "within":
        if self.interrupt:
            self.previous = signal.signal(signal.SIGALRM, self._expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.monotonic() - self.started
        if self.interrupt:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        if self.elapsed > self.seconds:
            raise TimeBoundExceeded(f"answered after {self.elapsed:.1f} s, over the bound of {self.seconds:.1f} s")

    @property
    def bucket(self) -> str:
        for limit, name in ((0.01, "10 ms"), (0.1, "100 ms"), (1.0, "1 s"), (10.0, "10 s")):
            if self.elapsed < limit:
                return f"answered in < {name}"
        return "answered in >= 10 s"


def assert_sound(probabilities, where: str) -> None:
    values = [float(p) for p in probabilities]
    assert all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in values), f"{where}: {values}"
    assert abs(math.fsum(values) - 1.0) <= 1e-5, f"{where}: sums to {math.fsum(values)}"


def served(directory: Path, requests) -> list:
    """Each request's outcome standalone and shared: (probabilities tensor) or the error's type."""
    standalone = laya.load_artifact(directory)
    shared = laya.open_adapters({"h": directory}, base=laya.load_artifact_base(directory))
    outcomes = []
    for request in requests(standalone):
        pair = []
        for predict in (standalone.predict, lambda r: shared.predict("h", r)):
            try:
                pair.append(torch.tensor(predict(request).probabilities))
            except LayaError as exc:
                pair.append(type(exc).__name__)
        outcomes.append(pair)
    return outcomes


@pytest.fixture(scope="module")
def bound_s(qualified_artifact) -> float:
    """The per-example bound: BOUND_FACTOR x the clean artifact's load-and-serve time."""
    started = time.monotonic()
    served(qualified_artifact, lambda model: [])
    return max(MIN_BOUND_S, BOUND_FACTOR * (time.monotonic() - started))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """Where each example's mutated copy lives (one fresh directory per example, removed after it)."""
    return tmp_path_factory.mktemp("fuzz")


def refused_by_rule(role: str, mutation) -> bool:
    """Whether artifact-v1's strict-JSON rule alone says this edit must be refused."""
    if role not in STRICT_JSON_ROLES or not isinstance(mutation, JsonEdit):
        return False
    value = mutation.value
    return (mutation.action == "duplicate" or isinstance(value, Raw)
            or (isinstance(value, float) and not math.isfinite(value)))


def roles(directory: Path) -> list[str]:
    return [e["role"] for e in json.loads((directory / "manifest.json").read_text())["files"]]


@pytest.mark.laya_claim("artifact.fuzz")
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_a_mutated_pinned_file_is_refused_or_served_soundly(qualified_artifact, bound_s, scratch, data):
    role = data.draw(st.sampled_from([*roles(qualified_artifact), "manifest"]), label="role")
    path = "manifest.json" if role == "manifest" else pinned_path(qualified_artifact, role)
    original = (qualified_artifact / path).read_bytes()
    mutation = data.draw(file_mutations(original), label="mutation")
    directory = clone_artifact(qualified_artifact, scratch / uuid.uuid4().hex)
    if role == "manifest":  # the root of trust itself, edited in place (nothing pins it)
        rewrite_file(directory / path, mutation.apply(original))
    else:
        replace_pinned_file(directory, role, mutation.apply(original))
    clock = within(bound_s)
    try:
        with clock:
            outcomes = served(directory, lambda model: [data.draw(requests_for(model)) for _ in range(2)])
    except LayaError as exc:
        event(clock.bucket)
        event(f"{role}: refused, {type(exc).__name__}")
        return
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert not refused_by_rule(role, mutation), f"{role}: loaded although strict JSON refuses {mutation!r}"
    event(clock.bucket)
    for alone, shared in outcomes:
        if isinstance(alone, str):
            assert alone == shared, f"standalone refused with {alone}, shared answered {shared}"
            event(f"{role}: loaded, request refused, {alone}")
            continue
        assert_sound(alone, "standalone")
        assert isinstance(shared, torch.Tensor) and torch.equal(alone, shared), (alone, shared)
        event(f"{role}: loaded and served")


@pytest.mark.laya_claim("artifact.fuzz")
@pytest.mark.parametrize("case", BOUNDARY_EDITS)
def test_a_boundary_edit_is_refused_naming_the_file(qualified_artifact, bound_s, scratch, case):
    role, make = BOUNDARY_EDITS[case]
    path = pinned_path(qualified_artifact, role)
    original = (qualified_artifact / path).read_bytes()
    directory = clone_artifact(qualified_artifact, scratch / uuid.uuid4().hex)
    replace_pinned_file(directory, role, make(json.loads(original) if role in STRICT_JSON_ROLES else None).apply(original))
    with pytest.raises(ArtifactError) as refused, within(bound_s):
        served(directory, lambda model: [])
    assert refused.value.file == path, str(refused.value)


@pytest.fixture(scope="module")
def jsonl_adapters(qualified_artifact):
    return laya.open_adapters({"h": qualified_artifact}, base=laya.load_artifact_base(qualified_artifact),
                              cache_bytes=1 << 20)


@st.composite
def request_bodies(draw, model) -> dict:
    """A valid `laya predict` line's object for adapter ``h``, drawn from the model's own tasks."""
    request = draw(requests_for(model))
    body = {"adapter": "h", "task": request.task, "question": request.question, "options": list(request.options)}
    return body if request.state is None else {**body, "state": request.state}


@pytest.mark.laya_claim("jsonl.fuzz")
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_a_mutated_jsonl_stream_gets_one_sound_answer_per_line(qualified_model, jsonl_adapters, bound_s, data):
    stream = data.draw(request_streams(request_bodies(qualified_model)), label="stream").data
    with within(bound_s) as clock:
        out = list(predict_lines(jsonl_adapters, io.BytesIO(stream)))
    event(clock.bucket)
    assert [o["line"] for o in out] == list(range(1, stream.count(b"\n") + 1))
    for obj in out:
        json.dumps(obj, allow_nan=False)  # strict JSON, as laya predict writes it
        if "prediction" in obj:
            assert_sound(obj["prediction"]["probabilities"], f"line {obj['line']}")
            event("line served")
        else:
            error = getattr(laya.errors, obj["error"]["type"], None)
            assert isinstance(error, type) and issubclass(error, LayaError), obj["error"]
            event(f"line refused, {obj['error']['type']}")


@pytest.mark.laya_claim("jsonl.fuzz")
@pytest.mark.parametrize("index", range(5), ids=["deep-array", "deep-object", "long-question", "long-number",
                                                  "long-field"])
@pytest.mark.parametrize("size", [5_000, 1_000_000])
def test_a_huge_line_gets_its_error_object(jsonl_adapters, bound_s, size, index):
    line = huge_line_values(b'{"adapter": "h"}', size)[index]
    with within(bound_s):
        out = list(predict_lines(jsonl_adapters, io.BytesIO(line + b"\n")))
    assert len(out) == 1 and out[0]["line"] == 1, out
    assert issubclass(getattr(laya.errors, out[0]["error"]["type"]), LayaError), out


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
