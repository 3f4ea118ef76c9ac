"""`laya predict` JSONL claim, end to end through the real console entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from hypothesis import find

import laya
from laya_qual.synth import requests_for


@pytest.mark.laya_claim("jsonl.selectors")
def test_jsonl_selectors_end_to_end(artifact_factory, load_model):
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
         "--adapter", f"two={second}", "--cache-bytes", "1000000"],
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
