"""request.text: a request's text is text (docs/serving.md, "Request and result lines"): a
lone surrogate (U+D800..U+DFFF, which a JSON string can spell as an escape but no UTF-8
text holds) in the task, the question, an option or the state, or in an unknown field's
name, is refused with RequestError naming that field: by ``laya.Request`` in the Python
API, and on its own result line by a real `laya predict` process, whose other lines are
served as alone and whose output stays UTF-8 JSON.

Oracle: the rules of docs/serving.md written out here (which field, the character index,
the escaped name), and each valid line's prediction from ``Adapters.predict`` in this
process, alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import laya
from laya.errors import RequestError
from laya_qual.synth import pinned_path, requests_for
from laya_qual.synth.hostile import (TEXT_FIELDS, edited, escaped_surrogates, field_text, hostile_names,
                                    with_lone_surrogate)

RUN_TIMEOUT_S = 120.0  # a hang guard, loose enough for a loaded machine


@pytest.fixture(scope="module")
def artifact(artifact_factory) -> Path:
    return artifact_factory(seed=11, head_kind="float32", base_seed=3)  # test_jsonl.py's recipe: written once


@pytest.fixture(scope="module")
def task(artifact) -> str:
    return json.loads((artifact / pinned_path(artifact, "head_config")).read_bytes())["tasks"][0]["name"]


def body(request: laya.Request) -> dict:
    return {"task": request.task, "question": request.question, "options": list(request.options),
            "state": request.state}


@pytest.mark.laya_claim("request.text")
@given(data=st.data(), field=st.sampled_from(TEXT_FIELDS))
@example(data=None, field="question")
@example(data=None, field="state")
def test_a_lone_surrogate_in_any_text_field_is_refused_naming_it(qualified_model, data, field):
    request = (data.draw(requests_for(qualified_model, with_state=True), label="request") if data is not None
               else laya.Request(sorted(qualified_model.tasks)[0], "a b", ("yes", "no"), "s"))
    fields = body(request)
    if data is None:
        text, at = "a\ud800b", 1  # the example
    else:
        text, at = data.draw(with_lone_surrogate(field_text(fields, field)), label="text")
    bad = edited(fields, field, text)
    with pytest.raises(RequestError) as refused:
        laya.Request(bad["task"], bad["question"], tuple(bad["options"]), bad["state"])
    assert refused.value.field == field, str(refused.value)
    assert f"U+{ord(text[at]):04X} at character {at}" in str(refused.value), str(refused.value)


@pytest.mark.laya_claim("request.text")
@given(name=hostile_names())
@example(name="x\ud800y")
@example(name="\x00")
@example(name="a\nb")
def test_an_unknown_field_whose_name_is_not_text_is_refused_with_the_name_escaped(name):
    line = {"task": "t", "question": "q", "options": ["a", "b"], name: 1}
    with pytest.raises(RequestError) as refused:
        laya.Request.from_json(line)
    assert refused.value.field == escaped_surrogates(name), str(refused.value)
    str(refused.value).encode("utf-8")  # the message UTF-8 can carry: every result line can be written


def run_predict(artifact: Path, lines: list[str], *adapters: bytes) -> subprocess.CompletedProcess:
    named = adapters or (f"h={artifact}".encode(),)
    args = [sys.executable.encode(), b"-m", b"laya.cli", b"predict", b"--base", str(artifact).encode(),
            *[a for pair in named for a in (b"--adapter", pair)]]
    return subprocess.run(args, input="".join(line + "\n" for line in lines).encode("ascii"),
                          capture_output=True, timeout=RUN_TIMEOUT_S)


@pytest.mark.laya_claim("request.text")
def test_laya_predict_answers_every_line_beside_lone_surrogates(artifact, task):
    """The issue's lines, each beside valid ones in one chunk: before, the process died
    (exit 1, nothing written) on the first of them."""
    good = {"adapter": "h", "task": task, "question": "is it here", "options": ["yes", "no"]}
    cases = [  # (line object, the field its error must name)
        ({**good, "question": "a\ud800b"}, "question"),
        ({**good, "options": ["yes", "n\udc00"]}, "options[1]"),
        ({**good, "state": "\udfff"}, "state"),
        ({**good, "task": "\udbff" + task}, "task"),
        ({**good, "x\ud800y": 1}, "x\\ud800y"),
    ]
    lines = [json.dumps(good)] + [text for case, _ in cases for text in (json.dumps(case), json.dumps(good))]
    run = run_predict(artifact, lines)
    assert run.returncode == 3, run.stderr.decode()
    results = [json.loads(row) for row in run.stdout.decode("utf-8").splitlines()]  # strict UTF-8
    assert [r["line"] for r in results] == list(range(1, len(lines) + 1)), run.stdout
    adapters = laya.open_adapters({"h": artifact}, base=artifact)
    alone = adapters.predict("h", laya.Request(task, "is it here", ("yes", "no"))).to_json()
    assert all(r == {"line": r["line"], "prediction": alone} for r in results[::2]), results
    for (_, field), result in zip(cases, results[1::2]):
        assert (result["error"]["type"], result["error"]["field"]) == ("RequestError", field), result
    assert run.stderr.decode().splitlines()[-1] == f"lines: {len(lines)}, failed: {len(cases)}"


@pytest.mark.laya_claim("request.text")
def test_an_adapter_id_utf8_cannot_carry_is_still_written_as_json(artifact, task):
    """An id given as argv bytes that are not UTF-8 (here 0xff, which Python holds as the lone
    surrogate U+DCFF) and named by a line: its prediction is written with \\u escapes, the same
    JSON value, instead of ending the process."""
    line = json.dumps({"adapter": "\udcff", "task": task, "question": "is it here", "options": ["yes", "no"]})
    run = run_predict(artifact, [line], b"\xff=" + str(artifact).encode())
    assert run.returncode == 0, run.stderr.decode()
    (result,) = [json.loads(row) for row in run.stdout.decode("ascii").splitlines()]
    assert result["prediction"]["adapter_id"] == "\udcff", result
