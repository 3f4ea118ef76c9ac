"""forward.encode.inputs: ``VerifiedBase.encode(token_ids)`` (docs/decisions.md: it takes
ids alone) takes 1 to max_position_embeddings ids, each an int below vocab_size (and so does
each sequence of ``encode_packed``, which gives no sequences an empty list), and
``VerifiedBase.render`` places one marker per option, so it renders as many options as the
base has markers and no more (docs/artifact-v1.md: the markers bound every head's option
budget).

Oracle: the boundaries as explicit examples, the config and the markers read from
encoder_config.json and special_tokens.json here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import laya
from laya.errors import RequestError
from laya_qual.synth import pinned_path


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=4, head_kind="float32")


def pinned_json(directory: Path, role: str) -> dict:
    return json.loads((directory / pinned_path(directory, role)).read_bytes())


@pytest.fixture(scope="module")
def base(pristine):
    return laya.load_artifact_base(pristine)


@pytest.mark.laya_claim("forward.encode.inputs")
def test_encode_takes_one_to_max_positions_ids_below_vocab_size(pristine, base):
    config = pinned_json(pristine, "encoder_config")
    vocab, positions, hidden = config["vocab_size"], config["max_position_embeddings"], config["hidden_size"]
    for ids in ([0], [vocab - 1], [5] * positions):
        assert tuple(base.encode(ids).shape) == (len(ids), hidden)
    for ids in ([], [5] * (positions + 1)):
        with pytest.raises(RequestError) as refused:
            base.encode(ids)
        assert refused.value.field == "token_ids", str(refused.value)
    for bad in (vocab, -1, True, 1.0, "5"):
        with pytest.raises(RequestError) as refused:
            base.encode([5, bad])
        assert refused.value.field == "token_ids[1]", (bad, str(refused.value))


@pytest.mark.laya_claim("forward.encode.inputs")
def test_encode_packed_checks_each_sequence_and_gives_nothing_for_nothing(pristine, base):
    """docs/decisions.md: encode_packed checks every sequence as encode does, and no
    sequences get an empty list, not an error from inside torch."""
    vocab = pinned_json(pristine, "encoder_config")["vocab_size"]
    assert base.encode_packed([]) == []
    one, two = base.encode_packed([[5], [vocab - 1, 0]])
    assert one.dtype == two.dtype == torch.float32 and (len(one), len(two)) == (1, 2)
    for bad in ([], [vocab]):
        with pytest.raises(RequestError) as refused:
            base.encode_packed([[5], bad])
        assert refused.value.field.startswith("token_ids"), str(refused.value)


@pytest.mark.laya_claim("forward.encode.inputs")
def test_render_refuses_more_options_than_the_base_has_markers(pristine, base):
    markers = len(json.loads((pristine / pinned_path(pristine, "special_tokens")).read_bytes())["option_markers"])
    words = [f"w{i}" for i in range(markers + 1)]
    assert len(base.render(laya.Request("answer", "q", tuple(words[:markers]))).marker_positions) == markers
    with pytest.raises(RequestError) as refused:
        base.render(laya.Request("answer", "q", tuple(words)))
    assert refused.value.field == "options", str(refused.value)
