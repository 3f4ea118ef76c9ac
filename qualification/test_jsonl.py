"""`laya predict` JSONL claim, end to end through the real console entry point, and
served in chunks of any size exactly as one line at a time."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

import laya
from laya.serving.jsonl import predict_lines
from laya_qual.suite.fuzzing import EXAMPLES
from laya_qual.synth import requests_for
from laya_qual.synth.fuzz import byte_mutations, json_mutations


@pytest.mark.laya_claim("jsonl.selectors")
@pytest.mark.parametrize("batch_size", [1, 4, None], ids=["batch-1", "batch-4", "batch-default"])
def test_jsonl_selectors_end_to_end(artifact_factory, load_model, batch_size):
    """11 lines: one at a time, in chunks of 4 (4 + 4 + 3, so the last is partial), and
    with the command's default."""
    first = artifact_factory(seed=11, head_kind="float32", base_seed=3)
    second = artifact_factory(seed=12, head_kind="transformer", base_seed=3)
    model = load_model(first)
    good = find(requests_for(model), lambda r: len(r.options) >= 2)
    body = {"task": good.task, "question": good.question, "options": list(good.options)}
    lines = [
        json.dumps({"adapter": "one", **body}).encode(),
        b"\xff\xfe not utf-8",
        json.dumps({"adapter": "nope", **body}).encode(),
        b"{not json",
        json.dumps({**body}).encode(),  # no adapter named
        json.dumps({"adapter": "two", **body, "options": "a"}).encode(),
        json.dumps({"adapter": "two", **body, "question": "word " * 200}).encode(),
        b"",
        json.dumps({"adapter": "two", **body}).encode(),
        json.dumps({"adapter": "one", **body}).encode(),
        json.dumps({"adapter": "one", **body}).encode().replace(b'"question": "', b'"question": "\xc3\x28'),
    ]
    run = subprocess.run(
        [sys.executable, "-m", "laya.cli", "predict", "--base", str(first), "--adapter", f"one={first}",
         "--adapter", f"two={second}", "--cache-bytes", "1000000",
         *(["--batch-size", str(batch_size)] if batch_size else [])],
        input=b"\n".join(lines) + b"\n", capture_output=True, timeout=600)  # a hang guard, loose enough for loaded CI
    assert run.returncode == 3, run.stderr.decode()  # some lines failed: a script must be able to tell
    out = [json.loads(line) for line in run.stdout.decode().splitlines()]
    assert [o["line"] for o in out] == list(range(1, len(lines) + 1))
    expected_errors = {2: None, 3: "adapter_id", 4: None, 5: "adapter", 6: "options", 7: "sequence", 8: None,
                       11: None}
    for number, field in expected_errors.items():
        assert "error" in out[number - 1], out[number - 1]
        assert out[number - 1]["error"]["field"] == field
    for number in (2, 11):  # invalid UTF-8 is refused as such, never decoded with replacement characters
        assert "not valid UTF-8" in out[number - 1]["error"]["message"], out[number - 1]
    shared = laya.open_adapters({"one": first, "two": second}, base=first)
    for number, adapter in ((1, "one"), (9, "two"), (10, "one")):
        prediction = out[number - 1]["prediction"]
        assert prediction["adapter_id"] == adapter
        direct = shared.predict(adapter, good)
        assert torch.equal(torch.tensor(prediction["probabilities"]), torch.tensor(direct.probabilities))
    assert "cache: 2 hits, 1 misses" in run.stderr.decode()
    assert "lines: 11, failed: 8" in run.stderr.decode()


@pytest.fixture(scope="module")
def twin_adapters(qualified_artifact):
    """Two independent openings of the same head, each with its own cache: one serves
    chunked, the other one line at a time, and they see the same streams."""
    return [laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 20)
            for _ in range(2)]


@st.composite
def mixed_lines(draw, model) -> bytes:
    """One input line: a valid request for adapter ``h``, one naming an unknown adapter, a
    blank line, or a request edited as JSON or as bytes (which may split it in two)."""
    request = draw(requests_for(model))
    body = {"adapter": "h", "task": request.task, "question": request.question, "options": list(request.options),
            **({"state": request.state} if request.state is not None else {})}
    line = json.dumps(body).encode()
    kind = draw(st.sampled_from(["valid", "valid", "unknown-adapter", "blank", "json", "bytes"]))
    if kind == "unknown-adapter":
        line = json.dumps({**body, "adapter": "nope"}).encode()
    elif kind == "blank":
        line = b""
    elif kind == "json":
        line = draw(json_mutations(body)).apply(line)
    elif kind == "bytes":
        line = draw(byte_mutations(len(line))).apply(line)
    return line


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("jsonl.selectors")
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_any_chunking_serves_each_line_as_one_at_a_time(qualified_model, twin_adapters, data):
    lines = data.draw(st.lists(mixed_lines(qualified_model), min_size=1, max_size=12), label="lines")
    stream = b"\n".join(lines) + data.draw(st.sampled_from([b"\n", b""]), label="end")  # last newline optional
    batch_size = data.draw(st.integers(1, len(lines) + 2), label="batch_size")
    chunked, single = twin_adapters
    got = list(predict_lines(chunked, io.BytesIO(stream), batch_size=batch_size))
    expected = list(predict_lines(single, io.BytesIO(stream), batch_size=1))
    count = stream.count(b"\n") + (1 if stream and not stream.endswith(b"\n") else 0)
    assert [o["line"] for o in got] == list(range(1, count + 1))  # one output per input line, numbered from 1
    assert [o["line"] for o in expected] == list(range(1, count + 1))
    for ours, theirs in zip(got, expected):
        if "prediction" in theirs:
            assert "prediction" in ours, ours
            bits = [[p.hex() for p in o["prediction"]["probabilities"]] for o in (ours, theirs)]
            assert bits[0] == bits[1], f"line {ours['line']}: probabilities differ"
        assert ours == theirs
    assert chunked.cache_stats() == single.cache_stats()  # the cache used as one at a time uses it
