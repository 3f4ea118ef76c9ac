"""serve.finite: no NaN or infinity is served, cached or written as an answer (weights that
are not finite are refused at load: test_artifact_finite.py).

Oracle: the poisoned weights are edited here in the safetensors bytes
(``safetensors.torch``, not laya's loader) and re-pinned, the tiny temperature is
written by the synthetic writer, and what a correct answer is comes from the
unpoisoned twin: a request that never touches the poison must be served bitwise as
the twin serves it.

Why a row of 3e38 overflows: LayerNorm's mean sums ``hidden`` positive values of
3e38 (float32's largest is 3.4e38), so the sum is +inf in any order and the
embedding output is NaN. A temperature of 1e-39 turns any score difference above
3.4e-39·T into ±inf before the softmax, whose output is then NaN.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

import laya
from laya.errors import NumericError
from laya.serving.jsonl import predict_lines
from laya_qual.synth import ReferenceModel, copy_with_weights_edit, requests_for, seeds

KINDS = ("float32", "int8", "transformer")
OVERFLOW = 3e38
TINY_TEMPERATURE = 1e-39


def token_ids(directory, request: laya.Request) -> tuple[int, ...]:
    return ReferenceModel(directory).render(request.question, request.options, request.state).token_ids


@pytest.mark.laya_claim("serve.finite")
@given(seed=seeds(), kind=st.sampled_from(KINDS), data=st.data())
def test_an_overflowing_embedding_row_is_refused_and_never_cached(tmp_path_factory, artifact_factory, seed, kind, data):
    clean_dir = artifact_factory(seed=seed, head_kind=kind)
    clean = laya.open_adapters({"a": clean_dir}, base=clean_dir, cache_bytes=1 << 20)
    poisoned_request = data.draw(requests_for(clean.head("a")), label="request with the poisoned token")
    poison = token_ids(clean_dir, poisoned_request)[1]  # the question's first piece
    other = data.draw(requests_for(clean.head("a")).filter(lambda r: poison not in token_ids(clean_dir, r)),
                      label="request without it")
    bad_dir = tmp_path_factory.mktemp("poisoned") / "artifact"

    def overflow_row(tensors):
        tensors["embeddings.word_embeddings.weight"][poison] = OVERFLOW

    copy_with_weights_edit(clean_dir, bad_dir, "encoder_weights", overflow_row)
    served = laya.open_adapters({"a": bad_dir}, base=bad_dir, cache_bytes=1 << 20)
    with pytest.raises(NumericError) as refused:
        served.predict("a", poisoned_request)
    assert refused.value.stage == "encoder states" and str(bad_dir) in refused.value.source
    stats = served.cache_stats()
    assert (stats.entries, stats.bytes) == (0, 0), "a non-finite forward left an entry in the cache"
    answer = served.predict("a", other)
    assert all(math.isfinite(p) for p in answer.probabilities)
    assert answer.probabilities == clean.predict("a", other).probabilities
    assert served.cache_stats().entries == 1
    with pytest.raises(NumericError):  # refused again, never served from anything cached
        served.predict("a", poisoned_request)


@pytest.mark.laya_claim("serve.finite")
@given(seed=seeds(), kind=st.sampled_from(KINDS), data=st.data())
def test_a_temperature_that_overflows_is_refused(artifact_factory, load_model, seed, kind, data):
    task = {"name": "pick", "max_options": 4, "temperature": TINY_TEMPERATURE, "act_threshold": 0.5,
            "escalate_threshold": 1.0}
    model = load_model(artifact_factory(seed=seed, head_kind=kind, tasks=[task]))
    request = data.draw(requests_for(model))
    try:
        prediction = model.predict(request)
    except NumericError as refused:
        assert refused.stage in ("scores", "probabilities") and refused.source.startswith("head ")
    else:  # only scores equal to the last bit divide into something finite
        assert all(math.isfinite(p) for p in prediction.probabilities)
        assert math.isclose(sum(prediction.probabilities), 1.0, abs_tol=1e-5)


@pytest.mark.laya_claim("serve.finite", "jsonl.selectors")
def test_jsonl_writes_an_error_object_for_a_non_finite_or_too_deep_line(tmp_path, artifact_factory):
    clean_dir = artifact_factory(seed=21, head_kind="float32")
    clean = laya.load_artifact(clean_dir)
    poisoned_request = find(requests_for(clean), lambda r: True)
    poison = token_ids(clean_dir, poisoned_request)[1]
    other = find(requests_for(clean), lambda r: poison not in token_ids(clean_dir, r))
    bad_dir = tmp_path / "artifact"

    def overflow_row(tensors):
        tensors["embeddings.word_embeddings.weight"][poison] = OVERFLOW

    copy_with_weights_edit(clean_dir, bad_dir, "encoder_weights", overflow_row)
    served = laya.open_adapters({"a": bad_dir}, base=bad_dir, cache_bytes=1 << 20)
    lines = [json.dumps({"adapter": "a", "task": r.task, "question": r.question, "options": list(r.options),
                         **({"state": r.state} if r.state is not None else {})}).encode()
             for r in (poisoned_request, other)]
    deep = b"[" * 100_000 + b"]" * 100_000  # past the JSON parser's recursion limit
    out = list(predict_lines(served, io.BytesIO(b"\n".join([*lines, deep, lines[1]]))))
    assert [o["line"] for o in out] == [1, 2, 3, 4]
    assert out[0]["error"]["type"] == "NumericError" and "encoder states" in out[0]["error"]["message"]
    assert out[2]["error"]["type"] == "RequestError" and "nested" in out[2]["error"]["message"]
    for served_line in (out[1], out[3]):
        assert served_line["prediction"]["probabilities"] == list(clean.predict(other).probabilities)
