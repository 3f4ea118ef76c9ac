"""Adapters claims: only explicitly opened adapter ids serve, and the set of heads is immutable."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import laya
from laya.errors import UnknownAdapter
from laya_qual.synth import requests_for


@pytest.mark.laya_once_per("base-kind")
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
