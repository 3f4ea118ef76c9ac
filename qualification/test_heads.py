"""Head claims: int8 agrees with its float32 source; calibration is exactly as documented."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

import laya
from laya.artifact.binding import canonical_json
from laya_qual.suite.calibration_oracle import expected_decision, pinned_bytes, reference_probabilities, task_numbers
from laya_qual.synth import ReferenceModel, artifact_configs, clone_artifact, replace_pinned_file, requests_for, seeds

PROBABILITY_BOUND = 0.02
SQNR_DB_BOUND = 30.0


def readout_sqnr_db(float_dir, int8_dir) -> float:
    """Worst task's 10·log10(|w|² / |w - q·scale|²), rows read from both artifacts' bytes.

    For states with no preferred direction E[(h·w)²] ∝ |w|² and E[(h·(w-ŵ))²] ∝ |w-ŵ|², so
    this is the expected logit SQNR. Measured on served probabilities instead it has no
    floor: two near-identical options leave almost no centred signal to compare."""
    source = ReferenceModel(float_dir).head_weights["readout.weight"].double()
    quantized = ReferenceModel(int8_dir).head_weights
    dequantized = quantized["readout.weight_int8"].double() * quantized["readout.weight_scale"].double()[:, None]
    signal, noise = (source ** 2).sum(dim=1), ((source - dequantized) ** 2).sum(dim=1)
    return min(math.inf if n == 0 else 10 * math.log10(s / n) for s, n in zip(signal.tolist(), noise.tolist()))


@pytest.mark.laya_claim("heads.parity.int8")
@given(seed=seeds(), config=artifact_configs(), data=st.data())
def test_int8_head_tracks_its_float32_source(artifact_factory, load_model, seed, config, data):
    config = {k: v for k, v in config.items() if k != "head_layers"}
    float_dir = artifact_factory(seed=seed, head_kind="float32", **config)
    int8_dir = artifact_factory(seed=seed, head_kind="int8", **config)
    float_model, int8_model = load_model(float_dir), load_model(int8_dir)
    for _ in range(4):
        request = data.draw(requests_for(float_model))
        reference, quantized = float_model.predict(request), int8_model.predict(request)
        worst = max(abs(a - b) for a, b in zip(reference.probabilities, quantized.probabilities))
        assert worst <= PROBABILITY_BOUND, f"int8 probability off by {worst:.4f}"
    sqnr = readout_sqnr_db(float_dir, int8_dir)
    assert sqnr >= SQNR_DB_BOUND, f"readout SQNR {sqnr:.1f} dB < {SQNR_DB_BOUND} dB"


def assert_calibrated(directory, model, request) -> laya.Prediction:
    """Probabilities against softmax(float64 scores / temperature) for linear heads, and
    the decision against the documented rule; every number from the artifact's bytes."""
    numbers = task_numbers(directory, request.task)
    prediction = model.predict(request)
    assert (prediction.task, prediction.adapter_id) == (request.task, None)  # the request's task, standalone
    probabilities = prediction.probabilities
    assert len(probabilities) == len(request.options)
    assert abs(sum(probabilities) - 1.0) < 1e-5
    if model.kind in ("float32", "int8"):
        rendered = model.base.render(request)
        states = model.base.encode(rendered.token_ids)[list(rendered.marker_positions)]
        expected = reference_probabilities(states, directory, numbers)
        assert torch.allclose(torch.tensor(probabilities, dtype=torch.float64), expected, atol=1e-5), (probabilities, expected)
    assert prediction.decision == expected_decision(probabilities, numbers), (probabilities, numbers)
    return prediction


@pytest.mark.laya_claim("heads.calibration")
@given(data=st.data())
def test_qualified_artifact_calibration(qualified_artifact, qualified_model, data):
    assert_calibrated(qualified_artifact, qualified_model, data.draw(requests_for(qualified_model)))


@pytest.mark.laya_claim("heads.calibration")
@given(seed=seeds(), kind=st.sampled_from(["float32", "int8"]), temperature=st.floats(0.05, 5),
       act=st.floats(0.2, 0.9), escalate=st.floats(0.05, 0.6), data=st.data())
def test_calibration_over_random_thresholds(artifact_factory, load_model, seed, kind, temperature, act, escalate, data):
    """Thresholds drawn so that both rules (act and escalate) decide some requests."""
    task = {"name": "pick", "max_options": 4, "temperature": temperature, "act_threshold": act,
            "escalate_threshold": escalate}
    directory = artifact_factory(seed=seed, head_kind=kind, tasks=[task])
    model = load_model(directory)
    for _ in range(3):
        assert_calibrated(directory, model, data.draw(requests_for(model)))


def float32_steps(value: float, steps: int) -> float:
    """``value`` moved by ``steps`` float32 spacings: exactly representable in both precisions."""
    x = np.float32(value)
    for _ in range(abs(steps)):
        x = np.nextafter(x, np.float32(np.inf if steps > 0 else -np.inf))
    return float(x)


def fixed_request(model) -> laya.Request:
    """A request with no Hypothesis draw, for the explicit boundary examples."""
    words = sorted(t for t in model.base.tokenizer.get_vocab() if t.isalpha() and len(t) > 2)
    return laya.Request("pick", " ".join(words[:3]), (words[3], words[4], words[5]))


BOUNDARY_TASK = {"name": "pick", "max_options": 4, "act_threshold": 0.5, "escalate_threshold": 1.0}


@pytest.mark.laya_claim("heads.calibration")
@given(seed=seeds(), kind=st.sampled_from(["float32", "int8", "transformer"]), temperature=st.floats(0.1, 5),
       act_step=st.integers(-1, 1), escalate_step=st.none() | st.integers(-1, 1), data=st.data())
@example(seed=3, kind="float32", temperature=1.0, act_step=0, escalate_step=None, data=None)  # act == top
@example(seed=3, kind="int8", temperature=0.7, act_step=-1, escalate_step=0, data=None)  # escalate == runner-up
@example(seed=4, kind="transformer", temperature=2.0, act_step=0, escalate_step=1, data=None)  # both rules pass at the edge
@example(seed=4, kind="float32", temperature=1.5, act_step=1, escalate_step=-1, data=None)  # top one step short
def test_decision_at_threshold_boundaries(tmp_path_factory, artifact_factory, load_model, seed, kind, temperature,
                                          act_step, escalate_step, data):
    """Thresholds exactly at the served top / runner-up probability, or one float32 step
    either side (escalate_step None: 1.0, the runner-up rule off): `>=` vs `>` in the act
    rule and `<` vs `<=` in the escalate rule are decided every run, not by luck."""
    directory = artifact_factory(seed=seed, head_kind=kind, base_seed=1, tasks=[{**BOUNDARY_TASK, "temperature": temperature}])
    model = load_model(directory)
    request = fixed_request(model) if data is None else data.draw(requests_for(model))
    served = assert_calibrated(directory, model, request).probabilities
    top, runner_up = sorted(served, reverse=True)[:2]
    act = float32_steps(top, act_step)
    escalate = 1.0 if escalate_step is None else float32_steps(runner_up, escalate_step)
    assume(0.0 <= act <= 1.0 and 0.0 < escalate <= 1.0)
    edited = clone_artifact(directory, tmp_path_factory.mktemp("boundary") / "head")
    config = json.loads(pinned_bytes(edited, "head_config"))
    config["tasks"][0].update(act_threshold=act, escalate_threshold=escalate)
    replace_pinned_file(edited, "head_config", canonical_json(config))
    numbers = task_numbers(edited, "pick")
    assert (numbers.act_threshold, numbers.escalate_threshold) == (act, escalate)  # written exactly
    prediction = laya.load_artifact_with_base(edited, model.base).predict(request)
    assert prediction.probabilities == served  # thresholds never change probabilities
    assert prediction.decision == expected_decision(served, numbers), (served, act, escalate)
