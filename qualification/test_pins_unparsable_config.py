"""pins.refuse.encoder_config: a head whose encoder_config does not even parse (not JSON, not
an object, not a whole config), re-pinned, still differs from the base's on that pin
(docs/artifact-v1.md: pins compare sha256, never dimensions) and is refused with PinMismatch
naming pin encoder_config and the head's file, never with the parse error.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import laya
from laya.errors import PinMismatch
from laya_qual.synth import pinned_path, replace_pinned_file
from laya_qual.suite.int8_head import base, pristine  # noqa: F401 - fixtures


@pytest.mark.laya_claim("pins.refuse.encoder_config")
@pytest.mark.parametrize("text", [b"not json", b"[]", b'{"vocab_size": 1}'], ids=["not-json", "a-list", "partial"])
def test_a_head_whose_encoder_config_does_not_parse_is_refused_on_that_pin(pristine, base, tmp_path, text):
    directory = Path(shutil.copytree(pristine, tmp_path / "head"))
    replace_pinned_file(directory, "encoder_config", text)
    with pytest.raises(PinMismatch) as refused:
        laya.load_artifact_with_base(directory, base)
    assert (refused.value.pin, refused.value.file) == ("encoder_config", pinned_path(directory, "encoder_config"))
