"""Calibration claims: each head's temperature and thresholds are its own; recalibrating one head leaves every other bitwise alone."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import laya
from laya.artifact.binding import canonical_json
from laya_qual.suite.calibration_oracle import expected_decision, pinned_bytes, reference_probabilities, task_numbers
from laya_qual.synth import clone_artifact, replace_pinned_file, requests_for, seeds


@pytest.mark.laya_claim("calibration.private")
@given(seed=seeds(), factor=st.floats(0.05, 0.8) | st.floats(1.25, 10), act=st.floats(0, 1),
       escalate=st.floats(0.01, 1), data=st.data())
def test_calibration_stays_private(tmp_path_factory, artifact_factory, seed, factor, act, escalate, data):
    """Two heads with same-named tasks; recalibrating one leaves the other bitwise alone.
    The new temperature is the old one times a factor away from 1, so it differs by
    construction; the recalibrated head serves its own numbers (float64 reference)."""
    first = artifact_factory(seed=seed, head_kind="float32", base_seed=5)
    second = clone_artifact(first, tmp_path_factory.mktemp("recalibrated") / "head")
    config = json.loads(pinned_bytes(second, "head_config"))
    for task in config["tasks"]:
        task.update(temperature=task["temperature"] * factor, act_threshold=act, escalate_threshold=escalate)
    replace_pinned_file(second, "head_config", canonical_json(config))
    base = laya.load_artifact_base(first)
    before = laya.open_adapters({"a": first, "b": first}, base=base)
    after = laya.open_adapters({"a": first, "b": second}, base=base, cache_bytes=1 << 22)
    request = data.draw(requests_for(before.heads["a"]))
    a_before, a_after = before.predict("a", request), after.predict("a", request)
    b_after = after.predict("b", request)
    assert torch.equal(torch.tensor(a_before.probabilities), torch.tensor(a_after.probabilities)) and a_before.decision == a_after.decision
    assert after.heads["a"].tasks == before.heads["a"].tasks
    mine, theirs = task_numbers(first, request.task), task_numbers(second, request.task)
    assert theirs.temperature != mine.temperature
    assert after.heads["b"].tasks[request.task].temperature == theirs.temperature
    rendered = base.render(request)
    states = base.encode(rendered.token_ids)[list(rendered.marker_positions)]
    expected_b = reference_probabilities(states, second, theirs)
    assert torch.allclose(torch.tensor(b_after.probabilities, dtype=torch.float64), expected_b, atol=1e-5)
    assert b_after.decision == expected_decision(b_after.probabilities, theirs)
