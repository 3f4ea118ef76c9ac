"""Weights claims: an in-place write to frozen base or head weights is detected before anything is served."""

from __future__ import annotations

import pytest
import torch

import laya
from laya.errors import LayaError
from laya_qual.synth import requests_for


@pytest.mark.laya_once_per("base-kind")
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
