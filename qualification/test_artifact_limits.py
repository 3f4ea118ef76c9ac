"""artifact.limits: every documented limit holds at its boundary, cheaply.

Oracle: the limits table of docs/artifact-v1.md, copied here as numbers (never
imported from laya). A value at a limit must not be refused for that field; one
above it must be refused naming the file and the field, before anything the size
of the claimed dimension is built. ``HANG_GUARD_S`` only turns a hang into a
failure (an unbounded load takes minutes); it is not a speed claim.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import laya
from laya.errors import ArtifactError
from laya_qual.synth import pinned_path, replace_pinned_file, seeds

ENCODER_LIMITS = {"vocab_size": 1 << 20, "hidden_size": 8192, "num_hidden_layers": 128, "num_attention_heads": 256,
                  "intermediate_size": 65536, "max_position_embeddings": 16384, "type_vocab_size": 16}
HEAD_LIMITS = {"head_layers": 32, "head_attention_heads": 256, "head_intermediate_size": 65536}
MAX_JSON_BYTES = 1 << 20
MAX_TOKENIZER_BYTES = 64 << 20
JSON_ROLES = ("encoder_config", "special_tokens", "sequence_format", "head_config")
HANG_GUARD_S = 60.0


def edited(directory, destination, role: str, data: bytes):
    shutil.copytree(directory, destination)
    replace_pinned_file(destination, role, data)
    return destination


def load_outcome(directory) -> ArtifactError | None:
    start = time.monotonic()
    try:
        laya.load_artifact(directory)
        outcome = None
    except ArtifactError as refused:
        outcome = refused
    assert time.monotonic() - start < HANG_GUARD_S, "loading did not answer within the hang guard"
    return outcome


@pytest.mark.laya_claim("artifact.limits")
@given(seed=seeds(), role_field=st.sampled_from([("encoder_config", f) for f in ENCODER_LIMITS]
                                                + [("head_config", f) for f in HEAD_LIMITS]),
       excess=st.integers(0, 2**62))
@example(seed=0, role_field=("encoder_config", "hidden_size"), excess=2**31 - 8192)
@example(seed=0, role_field=("encoder_config", "num_hidden_layers"), excess=0)  # 129 layers: an unbounded count
# builds them and fails in seconds on the weights; a huge count would fail only by hanging
@example(seed=0, role_field=("encoder_config", "vocab_size"), excess=1)
@example(seed=0, role_field=("head_config", "head_layers"), excess=1)
@example(seed=0, role_field=("head_config", "head_attention_heads"), excess=0)  # 256 does not divide 32
@pytest.mark.parametrize("side", ["at", "above"])
def test_config_dimensions_are_bounded(tmp_path_factory, artifact_factory, seed, role_field, excess, side):
    role, field = role_field
    limit = {**ENCODER_LIMITS, **HEAD_LIMITS}[field]
    value = limit if side == "at" else limit + 1 + excess
    directory = artifact_factory(seed=seed, head_kind="transformer")
    config = json.loads((directory / pinned_path(directory, role)).read_bytes())
    config[field] = value
    bad = edited(directory, tmp_path_factory.mktemp("limits") / "a", role, json.dumps(config).encode())
    refused = load_outcome(bad)
    out_of_range = (refused is not None and refused.file == pinned_path(bad, role) and refused.field == field
                    and f"{value} is outside" in str(refused))
    if side == "above":
        assert out_of_range, f"{field}={value} (limit {limit}) not refused by name: {refused}"
    else:  # legal; the load still stops, on the weights (or heads not dividing hidden), never on the range
        assert refused is not None and not out_of_range, f"{field}={value} is the documented limit: {refused}"


# docs/artifact-v1.md, encoder_config.json: the lowest value each dimension may take
ENCODER_LOWEST = {"vocab_size": 1, "hidden_size": 1, "num_hidden_layers": 0, "num_attention_heads": 1,
                  "intermediate_size": 1, "max_position_embeddings": 1, "type_vocab_size": 2}


@pytest.mark.laya_claim("artifact.limits")
@pytest.mark.parametrize("field", sorted(ENCODER_LOWEST))
@pytest.mark.parametrize("side", ["at", "below"])
def test_config_dimensions_are_bounded_below(tmp_path, artifact_factory, field, side):
    """One under a dimension's documented lowest value is refused by that range, naming the
    field; the lowest itself is legal (the load stops elsewhere, never on the range)."""
    value = ENCODER_LOWEST[field] - (side == "below")
    directory = artifact_factory(seed=0, head_kind="float32")
    config = json.loads((directory / pinned_path(directory, "encoder_config")).read_bytes())
    config[field] = value
    bad = edited(directory, tmp_path / "a", "encoder_config", json.dumps(config).encode())
    refused = load_outcome(bad)
    out_of_range = (refused is not None and refused.file == pinned_path(bad, "encoder_config")
                    and refused.field == field and f"{value} is outside" in str(refused))
    assert out_of_range == (side == "below"), f"{field}={value}: {refused}"


@pytest.mark.laya_claim("artifact.limits")
@given(seed=seeds(), role=st.sampled_from(JSON_ROLES), depth=st.integers(5_000, 200_000))
def test_deep_json_is_refused_by_name(tmp_path_factory, artifact_factory, seed, role, depth):
    directory = artifact_factory(seed=seed, head_kind="float32")
    bad = edited(directory, tmp_path_factory.mktemp("deep") / "a", role, b"[" * depth + b"]" * depth)
    refused = load_outcome(bad)
    assert refused is not None and refused.file == pinned_path(bad, role), refused


@pytest.mark.laya_claim("artifact.limits")
@given(seed=seeds(), role=st.sampled_from(JSON_ROLES), over=st.integers(0, 1 << 16))
@example(seed=0, role="encoder_config", over=0)
@pytest.mark.parametrize("side", ["at", "above"])
def test_json_files_are_bounded_in_size(tmp_path_factory, artifact_factory, seed, role, over, side):
    """Whitespace keeps the JSON valid: at the limit the file loads, one byte more is refused."""
    directory = artifact_factory(seed=seed, head_kind="float32")
    data = (directory / pinned_path(directory, role)).read_bytes()
    size = MAX_JSON_BYTES if side == "at" else MAX_JSON_BYTES + 1 + over
    bad = edited(directory, tmp_path_factory.mktemp("big") / "a", role, data + b" " * (size - len(data)))
    refused = load_outcome(bad)
    if side == "above":
        assert refused is not None and refused.file == pinned_path(bad, role) and "limit" in str(refused), refused
    else:
        assert refused is None, refused


@pytest.mark.laya_claim("artifact.limits")
def test_an_oversized_tokenizer_is_refused_before_it_is_read(tmp_path, artifact_factory):
    directory = artifact_factory(seed=0, head_kind="float32")
    data = (directory / pinned_path(directory, "tokenizer")).read_bytes()
    bad = edited(directory, tmp_path / "a", "tokenizer", data + b" " * (MAX_TOKENIZER_BYTES + 1 - len(data)))
    refused = load_outcome(bad)
    assert refused is not None and refused.file == pinned_path(bad, "tokenizer") and "limit" in str(refused)


@pytest.mark.laya_claim("artifact.limits")
@given(heads=st.integers(1, 256))
@example(heads=3)
@example(heads=64)
def test_head_attention_heads_must_divide_hidden(tmp_path_factory, artifact_factory, heads):
    directory = artifact_factory(seed=0, head_kind="transformer")  # hidden_size 32
    config = json.loads((directory / pinned_path(directory, "head_config")).read_bytes())
    config["head_attention_heads"] = heads
    bad = edited(directory, tmp_path_factory.mktemp("heads") / "a", "head_config", json.dumps(config).encode())
    refused = load_outcome(bad)
    named = refused is not None and (refused.file, refused.field) == (pinned_path(directory, "head_config"),
                                                                    "head_attention_heads")
    assert named == (32 % heads != 0), (heads, refused)


HEAD_TASKS_LIMIT = 1024  # docs/artifact-v1.md, head.json `tasks`: 1 to 1024 task objects


@pytest.mark.laya_claim("artifact.limits")
@pytest.mark.parametrize("count", [0, HEAD_TASKS_LIMIT, HEAD_TASKS_LIMIT + 1], ids=["none", "at", "above"])
def test_a_head_has_one_to_the_limit_of_tasks(tmp_path, artifact_factory, count):
    """head.json's task list at its documented bounds: none, or one over the limit, is refused
    naming head.json and `tasks`; at the limit the load still stops (the readout holds one
    row per task of the original head), never on the count."""
    directory = artifact_factory(seed=0, head_kind="float32")
    config = json.loads((directory / pinned_path(directory, "head_config")).read_bytes())
    template = config["tasks"][0]
    config["tasks"] = [{**template, "name": f"task-{i}"} for i in range(count)]
    bad = edited(directory, tmp_path / "a", "head_config", json.dumps(config).encode())
    refused = load_outcome(bad)
    named = refused is not None and refused.file == pinned_path(bad, "head_config") and refused.field == "tasks"
    assert refused is not None and named == (count != HEAD_TASKS_LIMIT), (count, refused)


@pytest.mark.laya_claim("artifact.limits")
@given(heads=st.integers(1, 256))
@example(heads=3)
@example(heads=64)
@example(heads=8)
def test_encoder_attention_heads_must_divide_hidden(tmp_path_factory, artifact_factory, heads):
    """encoder_config.json: hidden_size "divisible by num_attention_heads" (docs/artifact-v1.md)."""
    directory = artifact_factory(seed=0, head_kind="float32")  # hidden_size 32
    config = json.loads((directory / pinned_path(directory, "encoder_config")).read_bytes())
    assert config["hidden_size"] == 32
    config["num_attention_heads"] = heads
    bad = edited(directory, tmp_path_factory.mktemp("heads") / "a", "encoder_config", json.dumps(config).encode())
    refused = load_outcome(bad)
    named = (refused is not None and refused.file == pinned_path(bad, "encoder_config")
             and refused.field == "num_attention_heads")
    assert named == (32 % heads != 0), (heads, refused)
