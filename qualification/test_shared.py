"""Shared-base claims: parity with standalone, pins, private calibration, immutability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

import laya
from laya.artifact import canonical_json, read_artifact_files
from laya.errors import LayaError, PinMismatch, UnknownAdapter, UnsupportedAdapter
from laya_qual.suite.calibration_oracle import expected_decision, pinned_bytes, reference_probabilities, task_numbers
from laya_qual.synth import (
    artifact_configs,
    clone_artifact,
    replace_pinned_file,
    requests_for,
    rewrite_file,
    seeds,
)

KINDS = ("float32", "int8", "transformer")


def probabilities(prediction: laya.Prediction) -> torch.Tensor:
    return torch.tensor(prediction.probabilities)


def assert_parity(directory: Path, base: laya.VerifiedBase, requests: list[laya.Request]) -> None:
    """Standalone vs shared with the cache off, cold and warm: bitwise, every request."""
    standalone = laya.load_artifact(directory)
    off = laya.open_adapters({"h": directory}, base=base)
    cached = laya.open_adapters({"h": directory}, base=base, cache_bytes=1 << 24)
    for request in requests:
        expected = standalone.predict(request)
        for label, adapters in (("off", off), ("cold", cached), ("warm", cached)):
            got = adapters.predict("h", request)
            assert torch.equal(probabilities(got), probabilities(expected)), f"cache {label}"
            assert got.decision == expected.decision and got.head_digest == expected.head_digest
    assert cached.cache_stats().hits >= len(requests)


@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.laya_claim(f"shared.parity.{k}")) for k in KINDS])
@given(seed=seeds(), config=artifact_configs(), data=st.data())
def test_synthetic_parity(artifact_factory, kind, seed, config, data):
    directory = artifact_factory(seed=seed, head_kind=kind, base_seed=seed + 1, **config)
    sibling = artifact_factory(seed=seed + 2, head_kind="float32", base_seed=seed + 1, **config)
    base = laya.load_artifact_base(sibling)  # the base comes from another head's copy of it
    model = laya.load_artifact(directory)
    assert_parity(directory, base, [data.draw(requests_for(model)) for _ in range(3)])


@pytest.mark.laya_claim("shared.parity.float32", "shared.parity.int8", "shared.parity.transformer")
@given(data=st.data())
def test_qualified_artifact_parity(qualified_artifact, qualified_model, qualified_base_dir, data):
    base = laya.load_artifact_base(qualified_artifact, qualified_base_dir)
    assert_parity(qualified_artifact, base, [data.draw(requests_for(qualified_model)) for _ in range(2)])


def _edit_json(data: bytes, **changes) -> bytes:
    return canonical_json({**json.loads(data), **changes})


def _perturb_weights(data: bytes, where: float) -> bytes:
    tensors = load_safetensors(data)
    name = sorted(tensors)[int(where * len(tensors))]
    flat = tensors[name].flatten().clone()
    flat[int(where * flat.numel()) % flat.numel()] += 1e-3
    tensors[name] = flat.view(tensors[name].shape)
    return save_safetensors(tensors)


def _swap_markers(data: bytes, where: float) -> bytes:
    special = json.loads(data)
    markers = special["option_markers"]
    i = int(where * (len(markers) - 1))
    markers[i], markers[i + 1] = markers[i + 1], markers[i]
    return canonical_json(special)


def _tokenizer_without_lowercasing(data: bytes, where: float) -> bytes:
    tokenizer = json.loads(data)
    if tokenizer.get("normalizer") and "lowercase" in tokenizer["normalizer"]:
        tokenizer["normalizer"]["lowercase"] = not tokenizer["normalizer"]["lowercase"]
    else:
        tokenizer["normalizer"] = {"type": "Lowercase"}
    return json.dumps(tokenizer).encode()


PIN_EDITS = {
    "encoder_config": ("encoder_config", lambda data, where: _edit_json(
        data, layer_norm_eps=json.loads(data)["layer_norm_eps"] * (2 + where))),
    "encoder_weights": ("encoder_weights", _perturb_weights),
    "tokenizer": ("tokenizer", _tokenizer_without_lowercasing),
    "special_tokens": ("special_tokens", _swap_markers),
    "sequence_format": ("sequence_format", lambda data, where: _edit_json(
        data, state_position={"after_options": "after_question"}.get(json.loads(data)["state_position"], "after_options"))),
}


@pytest.mark.parametrize("pin", [pytest.param(p, marks=pytest.mark.laya_claim(f"pins.refuse.{p}")) for p in sorted(PIN_EDITS)])
@given(where=st.floats(0, 1, exclude_max=True))
def test_every_base_pin_is_enforced(tmp_path_factory, qualified_artifact, qualified_base_dir, pin, where):
    """Same dimensions, one pinned base file different: refused, naming that pin."""
    base = laya.load_artifact_base(qualified_artifact, qualified_base_dir)
    directory = clone_artifact(qualified_artifact, tmp_path_factory.mktemp("pin") / "head")
    role, edit = PIN_EDITS[pin]
    original = read_artifact_files(directory)[role]
    replace_pinned_file(directory, role, edit(original.data, where))
    with pytest.raises(PinMismatch) as refused:
        laya.load_artifact_with_base(directory, base)
    assert refused.value.pin == pin and refused.value.file == original.path
    laya.load_artifact(directory)  # the edited artifact is itself consistent: only sharing is refused


@pytest.mark.laya_claim("pins.refuse.depth")
@given(seed=seeds(), depth=st.integers(1, 3))
def test_depth_pin_is_enforced(artifact_factory, seed, depth):
    base = laya.load_artifact_base(artifact_factory(seed=seed, head_kind="float32", num_layers=depth))
    deeper = artifact_factory(seed=seed, head_kind="float32", num_layers=depth + 1)
    with pytest.raises(PinMismatch) as refused:
        laya.load_artifact_with_base(deeper, base)
    assert refused.value.pin == "depth"


@pytest.mark.laya_claim("adapter.refuse.shared")
@given(payload=st.dictionaries(st.text(max_size=4), st.integers(), min_size=0, max_size=2) | st.just("lora"))
def test_shared_loaders_refuse_adapter_payloads(tmp_path_factory, qualified_artifact, payload):
    directory = clone_artifact(qualified_artifact, tmp_path_factory.mktemp("adapter") / "head")
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["adapter"] = payload
    rewrite_file(directory / "manifest.json", json.dumps(manifest).encode())
    with pytest.raises(UnsupportedAdapter):
        laya.load_artifact_base(directory)
    base = laya.load_artifact_base(qualified_artifact)
    with pytest.raises(UnsupportedAdapter):
        laya.load_artifact_with_base(directory, base)


@pytest.mark.laya_claim("adapters.explicit")
@given(bad=st.none() | st.integers() | st.text(max_size=6).filter(lambda s: s != "h"), data=st.data())
def test_only_explicit_known_adapters_serve(qualified_artifact, qualified_model, bad, data):
    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact)
    request = data.draw(requests_for(qualified_model))
    with pytest.raises(UnknownAdapter):
        adapters.predict(bad, request)
    with pytest.raises(TypeError):
        adapters.heads["other"] = adapters.heads["h"]
    assert adapters.adapter_ids == ("h",)
    assert adapters.predict("h", request).adapter_id == "h"


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
    assert torch.equal(probabilities(a_before), probabilities(a_after)) and a_before.decision == a_after.decision
    assert after.heads["a"].tasks == before.heads["a"].tasks
    mine, theirs = task_numbers(first, request.task), task_numbers(second, request.task)
    assert theirs.temperature != mine.temperature
    assert after.heads["b"].tasks[request.task].temperature == theirs.temperature
    rendered = base.render(request)
    states = base.encode(rendered.token_ids)[list(rendered.marker_positions)]
    expected_b = reference_probabilities(states, second, theirs)
    assert torch.allclose(torch.tensor(b_after.probabilities, dtype=torch.float64), expected_b, atol=1e-5)
    assert b_after.decision == expected_decision(b_after.probabilities, theirs)


@pytest.mark.laya_claim("weights.immutable")
@pytest.mark.parametrize("target", ["base", "head"])
def test_in_place_writes_are_detected(qualified_artifact, qualified_model, target):
    from hypothesis import find

    adapters = laya.open_adapters({"h": qualified_artifact}, base=qualified_artifact, cache_bytes=1 << 22)
    request = find(requests_for(qualified_model), lambda r: True)
    adapters.predict("h", request)  # warm: the next call would be served from the cache
    module = adapters.base._weights.module if target == "base" else adapters.heads["h"]._weights.module
    tensor = next(t for t in module.parameters() if t.is_floating_point())
    with torch.no_grad():
        tensor.mul_(1.0)
    with pytest.raises(LayaError, match="modified in place"):
        adapters.predict("h", request)
