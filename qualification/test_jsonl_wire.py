"""jsonl.wire: a request line of `laya predict` (docs/serving.md, "Request and result
lines"), each field changed alone in the JSON text.

Oracle: the field table of docs/serving.md, copied here (never read from laya): every
field given each JSON type the table does not allow, or left out when required, and any
unknown field, gets an error object naming that field, and the other lines of its chunk
are served as alone; `state` is accepted present, absent and null. Values of a wrong type
are drawn by ``laya_qual.synth.wire``; each type's boundary value is tried on every run.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import laya
from laya.serving.jsonl import predict_lines
from laya_qual.synth import requests_for
from laya_qual.synth.wire import BOUNDARY, of_type, wrong_types


REQUEST_FIELDS = {"adapter": "string", "task": "string", "question": "string", "options": "list",
                  "options[0]": "string", "state": "string"}
# The field a refusal names: an adapter id that names no open adapter is `adapter_id`.
REQUEST_NAMED = {"adapter": "adapter_id", "task": "task", "question": "question", "options": "options",
                 "options[0]": "options[0]", "state": "state"}
REQUEST_REQUIRED = {"adapter": "adapter", "task": "task", "question": "question", "options": "options"}


@pytest.fixture(scope="module")
def wire_adapters(qualified_artifact):
    return laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=0)


def body(request) -> dict:
    line = {"adapter": "h", "task": request.task, "question": request.question, "options": list(request.options)}
    return {**line, **({"state": request.state} if request.state is not None else {})}


def served(adapters, lines: list[bytes]) -> list[dict]:
    """The result objects of one chunk holding ``lines``."""
    return list(predict_lines(adapters, io.BytesIO(b"\n".join(lines) + b"\n"), batch_size=len(lines)))


def assert_alone_refused(adapters, good: dict, bad: bytes, field: str | None) -> None:
    """The bad line, between two good ones in one chunk, is refused naming ``field`` and
    the good lines are served as they are alone."""
    good_line = json.dumps(good).encode()
    results = served(adapters, [good_line, bad, good_line])
    alone = served(adapters, [good_line])[0]
    assert [r["line"] for r in results] == [1, 2, 3]
    assert "error" in results[1], (bad, results[1])
    assert results[1]["error"]["field"] == field, (bad, results[1])
    for r in (results[0], results[2]):
        assert r["prediction"] == alone["prediction"], r


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.wire")
@pytest.mark.parametrize("field, json_type", [(f, t) for f, kind in REQUEST_FIELDS.items() for t in wrong_types(kind)
                                              if not (f == "state" and t == "null")])
@given(data=st.data())
def test_request_field_of_each_wrong_json_type_is_refused_by_name(qualified_model, wire_adapters, field, json_type,
                                                                 data):
    good = body(data.draw(requests_for(qualified_model), label="request"))
    for value in (BOUNDARY[json_type], data.draw(of_type(json_type), label="value")):
        bad = json.loads(json.dumps(good))
        if field == "options[0]":
            bad["options"][0] = value
        else:
            bad[field] = value
        assert_alone_refused(wire_adapters, good, json.dumps(bad).encode(), REQUEST_NAMED[field])


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.wire")
@pytest.mark.parametrize("field", sorted(REQUEST_REQUIRED))
@given(data=st.data())
def test_request_required_field_left_out_is_refused_by_name(qualified_model, wire_adapters, field, data):
    good = body(data.draw(requests_for(qualified_model), label="request"))
    bad = {k: v for k, v in good.items() if k != field}
    assert_alone_refused(wire_adapters, good, json.dumps(bad).encode(), REQUEST_REQUIRED[field])


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.wire")
@given(data=st.data(), keys=st.sets(st.text(min_size=1, max_size=12).filter(lambda k: k not in REQUEST_FIELDS),
                                    min_size=1, max_size=3))
@example(data=None, keys={"adapter_id"})
@example(data=None, keys={"Task"})
@example(data=None, keys={"label"})
@example(data=None, keys={"task2", "label", "Task"})  # several: the first in code-point order, "Task"
def test_request_unknown_field_is_refused_by_name(qualified_model, wire_adapters, data, keys):
    """One unknown field is named; of several, the first in code-point order (docs/serving.md)."""
    request = (data.draw(requests_for(qualified_model), label="request") if data is not None
               else laya.Request(sorted(qualified_model.tasks)[0], "q", ("a", "b")))
    good = body(request)
    line = json.dumps({**good, **dict.fromkeys(keys, "x")}).encode()
    assert_alone_refused(wire_adapters, good, line, min(keys))


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.wire")
@pytest.mark.parametrize("ending", [b"\n", b""], ids=["newline", "end-of-input"])
@pytest.mark.parametrize("cut", ['{"adapter": "h", "task":', '{"adapter": "h"', '{"adapter": "h", "task": "t",  '])
def test_a_line_that_is_not_json_names_the_column_in_that_line(wire_adapters, ending, cut):
    """docs/serving.md: the column of a JSON error is counted in its line, whose newline is not
    part of it; every cut here ends where the parser gives up (trailing blanks included), so the
    column is one past the cut."""
    good = b'{"adapter": "h", "task": "t", "question": "q", "options": ["a", "b"]}'
    results = list(predict_lines(wire_adapters, io.BytesIO(cut.encode() + b"\n" + good + ending)))
    message = results[0]["error"]["message"]
    assert re.fullmatch(rf"line is not valid JSON \(.* at column {len(cut) + 1}\)", message), message
    assert [r["line"] for r in results] == [1, 2], results  # the next line is a line of its own


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.wire")
def test_an_empty_first_line_is_a_line_of_its_own(wire_adapters):
    """Refused as not JSON (at column 1), and the line after it is line 2."""
    good = b'{"adapter": "h", "task": "t", "question": "q", "options": ["a", "b"]}'
    results = list(predict_lines(wire_adapters, io.BytesIO(b"\n" + good + b"\n")))
    assert [r["line"] for r in results] == [1, 2] and results[0]["error"]["message"].endswith("at column 1)"), results


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.wire")
@given(data=st.data())
def test_request_optional_state_present_absent_and_null(qualified_model, wire_adapters, data):
    """A line without `state` and the same line with `"state": null` are served the same
    bits, as the request without a state; with a state, as the request with it."""
    request = data.draw(requests_for(qualified_model, with_state=True), label="request")
    with_state = body(request)
    without = {k: v for k, v in with_state.items() if k != "state"}
    results = served(wire_adapters, [json.dumps(with_state).encode(), json.dumps(without).encode(),
                                     json.dumps({**without, "state": None}).encode()])
    expected = [wire_adapters.predict("h", request).to_json(),
                wire_adapters.predict("h", laya.Request(request.task, request.question, request.options)).to_json()]
    bits = [[p.hex() for p in r["prediction"]["probabilities"]] for r in results]
    assert bits[1] == bits[2], "null state served unlike an absent one"
    assert [r["prediction"] for r in results] == [expected[0], expected[1], expected[1]]
    # docs/serving.md's result line: its five keys, naming the adapter and task the line asked for
    assert all(sorted(r["prediction"]) == ["adapter_id", "decision", "head_digest", "probabilities", "task"]
               and (r["prediction"]["adapter_id"], r["prediction"]["task"]) == ("h", request.task) for r in results)
