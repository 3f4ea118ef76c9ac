"""jsonl.fuzz: a mutated JSONL stream gets exactly one sound answer per line, quickly (the
harness and its oracle: qualification/fuzzing.py).
"""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import laya
from laya.errors import LayaError
from laya.serving.jsonl import predict_lines
from laya_qual.suite.fuzzing import EXAMPLES, assert_sound, bound_for, within
from laya_qual.synth import requests_for
from laya_qual.synth.fuzz import huge_line_values, request_streams


@pytest.fixture(scope="module")
def bound_s(qualified_artifact) -> float:
    return bound_for(qualified_artifact)


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


@pytest.mark.laya_once_per("base")
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
