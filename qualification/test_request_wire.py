"""request.validation through the wire form: a text piece that tokenizes to no tokens at
all (docs/artifact-v1.md, "sequence_format.json") is refused naming its field.

Oracle: the doc's rule, with the artifact's own tokenizer (the `tokenizers` library
reading the pinned tokenizer.json, not laya's rendering) saying which texts hold no
token. Each such text goes in as the JSON text of a request line, in the question, an
option or the state; its line must get an error object naming that field, and the other
lines of its chunk are served.
"""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tokenizers import Tokenizer

import laya
from laya.serving.jsonl import predict_lines
from laya_qual.synth import pinned_path, requests_for

# Characters a BERT-style normalizer drops: control characters, format characters
# (zero-width space, byte-order mark, soft hyphen) and a lone combining accent.
DROPPED = ["\x00", "\x01", "\x7f", "\u200b", "\ufeff", "\u00ad", "\u0301"]


@pytest.fixture(scope="module")
def tokenizer(qualified_artifact) -> Tokenizer:
    return Tokenizer.from_str((qualified_artifact / pinned_path(qualified_artifact, "tokenizer")).read_text())


@pytest.fixture(scope="module")
def empty_adapters(qualified_artifact):
    return laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=0)


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("request.validation")
@given(data=st.data(), field=st.sampled_from(["question", "options[0]", "options[1]", "state"]),
       text=st.text(alphabet=st.sampled_from(DROPPED), min_size=1, max_size=6))
@example(data=None, field="question", text="\x00")
@example(data=None, field="options[1]", text="\u200b")
@example(data=None, field="state", text="\ufeff\u0301")
def test_a_text_of_no_tokens_is_refused_naming_its_field(qualified_model, tokenizer, empty_adapters, data, field,
                                                          text):
    if not text.strip() or tokenizer.encode(text, add_special_tokens=False).ids:
        return  # blank (another rule) or not empty for this tokenizer: not this rule's case
    request = (data.draw(requests_for(qualified_model, with_state=True), label="request") if data is not None
               else laya.Request(sorted(qualified_model.tasks)[0], "q", ("a", "b"), "s"))
    good = {"adapter": "h", "task": request.task, "question": request.question, "options": list(request.options),
            "state": request.state}
    bad = json.loads(json.dumps(good))
    if field.startswith("options"):
        bad["options"][int(field[-2])] = text
    else:
        bad[field] = text
    lines = [json.dumps(good), json.dumps(bad), json.dumps(good)]
    results = list(predict_lines(empty_adapters, io.BytesIO("\n".join(lines).encode() + b"\n"), batch_size=3))
    assert "error" in results[1], (bad, results[1])
    assert (results[1]["error"]["type"], results[1]["error"]["field"]) == ("RequestError", field), results[1]
    assert results[1]["error"]["message"].startswith(f"request field {field}: "), results[1]
    assert "prediction" in results[0] and results[0]["prediction"] == results[2]["prediction"]
