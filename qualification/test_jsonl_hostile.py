"""jsonl.hostile: `laya predict` answers every line (docs/serving.md, "Request and result
lines"): a stream of valid request lines mixed with hostile ones (laya_qual.synth.hostile:
control characters, NUL and newlines in a question, a lone surrogate in any text field, an
unknown field whose name is not text, a megabyte question, any other JSON value, nested or
huge, and bytes that are not UTF-8) gets one UTF-8 JSON result line per input line, in
order; each valid line exactly (bitwise probabilities, decision, digest) what its request
gets served alone, each hostile one an error object of the documented type and field; the
exit status is 3 when a line failed, 0 when none did.

The command runs as itself (its click entry point, in process, so a Hypothesis run of many
streams takes seconds; test_request_text.py runs the issue's lines through a real process).
Oracle: the expectation each line carries, from the doc's rules; a valid line's answer from
``Adapters.predict`` alone on separately opened adapters.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import laya
from laya.cli import main as laya_cli
from laya.errors import LayaError
from laya_qual.synth import requests_for
from laya_qual.synth.hostile import Line, hostile_lines

EXAMPLES = 25  # each a whole command run: the property's cost is its example count


@pytest.fixture(scope="module")
def alone(qualified_artifact):
    return laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact)


@st.composite
def bodies(draw, model) -> dict:
    request = draw(requests_for(model, with_state=True))
    return {"adapter": "h", "task": request.task, "question": request.question, "options": list(request.options),
            "state": request.state}


def expected(line: Line, alone) -> object:
    """What the doc says the line gets: the request's answer alone, or an error's (type, field)."""
    if line.expect != "alone":
        return line.expect
    obj = json.loads(line.data)
    try:
        return alone.predict("h", laya.Request(obj["task"], obj["question"], tuple(obj["options"]),
                                               obj["state"])).to_json()
    except LayaError as exc:
        return (type(exc).__name__, exc.field)


def issue_lines(model) -> list[Line]:
    """The issue's lines (the process used to die on the first) and a field named U+2028 (which
    a raw result line would break in two for str.splitlines), between valid ones."""
    good = {"adapter": "h", "task": sorted(model.tasks)[0], "question": "is it here", "options": ["yes", "no"],
            "state": "s"}
    bad = [({**good, "question": "a\ud800b"}, "question"), ({**good, "options": ["yes", "n\udc00"]}, "options[1]"),
           ({**good, "state": "\ud800"}, "state"), ({**good, "x\ud800y": 1}, "x\\ud800y"),
           ({**good, "\u2028": None}, "\u2028")]  # a line break to str.splitlines, JSON's to hold raw
    ok = Line(json.dumps(good).encode(), "alone")
    return [ok] + [line for obj, field in bad for line in (Line(json.dumps(obj).encode(), ("RequestError", field)), ok)]


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.hostile")
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), batch_size=st.sampled_from([1, 3, 32]))
@example(data=None, batch_size=32)
def test_every_line_of_a_hostile_stream_gets_its_answer(qualified_artifact, qualified_model, alone, data,
                                                        batch_size):
    lines = (issue_lines(qualified_model) if data is None else
             data.draw(st.lists(hostile_lines(bodies(qualified_model)), min_size=1, max_size=8), label="lines"))
    stream = b"".join(line.data + b"\n" for line in lines)
    run = CliRunner().invoke(laya_cli, ["predict", "--base", str(qualified_artifact), "--adapter",
                                        f"h={qualified_artifact}", "--batch-size", str(batch_size)], input=stream)
    results = [json.loads(row) for row in run.stdout_bytes.decode("utf-8").splitlines()]  # strict UTF-8
    assert [r["line"] for r in results] == list(range(1, len(lines) + 1)), (run.output, run.exception)
    failed = 0
    for line, result in zip(lines, results):
        want = expected(line, alone)
        if isinstance(want, dict):
            assert result == {"line": result["line"], "prediction": want}, (line, result)
            event("line served as alone")
            continue
        failed += 1
        error = result["error"]
        assert issubclass(getattr(laya.errors, error["type"]), LayaError), (line, result)
        assert want[0] in (None, error["type"]) and want[1] in (None, error["field"]), (line, result)
        event(f"line refused, {error['type']}")
    assert run.exit_code == (3 if failed else 0), (run.output, run.exception)
    assert run.stderr.splitlines()[-1] == f"lines: {len(lines)}, failed: {failed}", run.stderr
