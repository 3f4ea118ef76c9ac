"""request.validation: a request that is not a JSON object is refused with RequestError, by
Request.from_json and as a `laya predict` line (docs/serving.md: "a line that is not a UTF-8
JSON object ... is refused on its own result line"), while the next line is served.
"""

from __future__ import annotations

import io
import json

import pytest

import laya
from laya.errors import RequestError
from laya.serving.jsonl import predict_lines
from laya_qual.suite.int8_head import base, pristine  # noqa: F401 - fixtures


@pytest.mark.laya_claim("request.validation")
@pytest.mark.parametrize("value", [[], ["answer"], "answer", 1, None])
def test_a_request_that_is_not_a_json_object_is_refused(pristine, base, value):
    with pytest.raises(RequestError):
        laya.Request.from_json(value)
    adapters = laya.open_adapters({"a": pristine}, base=base)
    good = json.dumps({"adapter": "a", "task": "answer", "question": "q", "options": ["x", "y"]})
    results = list(predict_lines(adapters, io.BytesIO(f"{json.dumps(value)}\n{good}\n".encode()), batch_size=2))
    assert results[0]["error"]["type"] == "RequestError" and "prediction" in results[1], results
