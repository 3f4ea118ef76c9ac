"""Shared-base claims: a head on a shared base serves bitwise what it serves standalone.

The other guarantees of sharing have their own claim areas: pins (test_pins.py), private
calibration (test_calibration.py), explicit adapters (test_adapters.py), immutable weights
(test_weights.py), adapter payloads (test_adapter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import laya
from laya_qual.synth import artifact_configs, requests_for, seeds

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
