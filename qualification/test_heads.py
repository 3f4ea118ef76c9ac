"""Head claims: int8 agrees with its float32 source; calibration is exactly as documented."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors

from laya.artifact import read_artifact_files
from laya_qual.synth import artifact_configs, requests_for, seeds

PROBABILITY_BOUND = 0.02
SQNR_DB_BOUND = 30.0


def centered_scores(probabilities: tuple[float, ...], temperature: float) -> torch.Tensor:
    """Scores up to their mean, recovered from probabilities (softmax is shift-invariant)."""
    logp = torch.tensor(probabilities, dtype=torch.float64).log() * temperature
    return logp - logp.mean()


@pytest.mark.laya_claim("heads.parity.int8")
@given(seed=seeds(), config=artifact_configs(), data=st.data())
def test_int8_head_tracks_its_float32_source(artifact_factory, load_model, seed, config, data):
    config = {k: v for k, v in config.items() if k != "head_layers"}
    float_model = load_model(artifact_factory(seed=seed, head_kind="float32", **config))
    int8_model = load_model(artifact_factory(seed=seed, head_kind="int8", **config))
    signal = noise = 0.0
    for _ in range(4):
        request = data.draw(requests_for(float_model))
        reference, quantized = float_model.predict(request), int8_model.predict(request)
        worst = max(abs(a - b) for a, b in zip(reference.probabilities, quantized.probabilities))
        assert worst <= PROBABILITY_BOUND, f"int8 probability off by {worst:.4f}"
        temperature = float_model.tasks[request.task].temperature
        s, q = centered_scores(reference.probabilities, temperature), centered_scores(quantized.probabilities, temperature)
        signal += float((s ** 2).sum())
        noise += float(((s - q) ** 2).sum())
    if noise > 0 and signal > 0:
        sqnr = 10 * math.log10(signal / noise)
        assert sqnr >= SQNR_DB_BOUND, f"logit SQNR {sqnr:.1f} dB < {SQNR_DB_BOUND} dB"


def readout_rows(directory, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The readout weights straight from the artifact's bytes, dequantized by hand."""
    tensors = load_safetensors(read_artifact_files(directory)["head_weights"].data)
    if kind == "int8":
        weight = tensors["readout.weight_int8"].double() * tensors["readout.weight_scale"].double()[:, None]
    else:
        weight = tensors["readout.weight"].double()
    return weight, tensors["readout.bias"].double()


def assert_calibrated(directory, model, request) -> None:
    """Recompute scores independently (float64, from the file's bytes) for linear heads;
    for every head, check the act/escalate rule against the reported probabilities."""
    task = model.tasks[request.task]
    prediction = model.predict(request)
    probabilities = prediction.probabilities
    assert len(probabilities) == len(request.options)
    assert abs(sum(probabilities) - 1.0) < 1e-5
    if model.kind in ("float32", "int8"):
        rendered = model.base.render(request)
        states = model.base.encode(rendered.token_ids).double()
        weight, bias = readout_rows(directory, model.kind)
        scores = states[list(rendered.marker_positions)] @ weight[task.index] + bias[task.index]
        expected = torch.softmax(scores / task.temperature, dim=0)
        assert torch.allclose(torch.tensor(probabilities, dtype=torch.float64), expected, atol=1e-5), (probabilities, expected)
    top, runner_up = sorted(probabilities, reverse=True)[:2]
    should_act = top >= task.act_threshold and runner_up < task.escalate_threshold
    assert prediction.decision == ("act" if should_act else "escalate")


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
