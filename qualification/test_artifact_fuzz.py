"""artifact.fuzz: a mutated pinned file gets a named refusal or a sound answer, quickly
(the harness and its oracle: qualification/fuzzing.py).
"""

from __future__ import annotations

import json
import math
import shutil
import uuid
from pathlib import Path

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st

from laya.artifact.manifest import BASE_ROLES
from laya.errors import ArtifactError, LayaError
from laya_qual.suite.fuzzing import EXAMPLES, assert_sound, bound_for, served, within
from laya_qual.synth import clone_artifact, pinned_path, replace_pinned_file, requests_for, rewrite_file
from laya_qual.synth.fuzz import HeaderLength, Insert, JsonEdit, Raw, Truncate, file_mutations


@pytest.fixture(scope="module")
def bound_s(qualified_artifact) -> float:
    return bound_for(qualified_artifact)


# The artifact's JSON files that laya itself parses (the tokenizer is parsed by `tokenizers`):
# artifact-v1 reads them as strict JSON, so a repeated key or a value no finite JSON number
# spells (NaN, Infinity, 1e999, 1e-999, a number past 4300 digits) is refused wherever it appears.
STRICT_JSON_ROLES = ("manifest", "encoder_config", "special_tokens", "sequence_format", "head_config")


# Boundaries drawn on purpose, not by luck: each must be refused with ArtifactError naming the file.
# The repeated key repeats its own value, so only the strict-JSON rule can refuse it.
BOUNDARY_EDITS = {
    "repeated key": ("encoder_config", lambda doc: JsonEdit(("hidden_size",), "duplicate", doc["hidden_size"])),
    "NaN constant": ("head_config", lambda doc: JsonEdit(("tasks", 0, "temperature"), "replace", Raw("NaN"))),
    "1e999 parses to infinity": ("head_config", lambda doc: JsonEdit(("tasks", 0, "temperature"), "replace", Raw("1e999"))),
    "1e-999 underflows to zero": ("head_config",
                                  lambda doc: JsonEdit(("tasks", 0, "act_threshold"), "replace", Raw("1e-999"))),
    "integer beyond float range": ("head_config",
                                   lambda doc: JsonEdit(("tasks", 0, "act_threshold"), "replace", Raw("-" + "9" * 400))),
    "integer past 4300 digits": ("encoder_config", lambda doc: JsonEdit(("num_hidden_layers",), "replace", Raw("9" * 5000))),
    "nesting past the recursion limit": ("encoder_config", lambda doc: Insert(0, b"[" * 5000)),
    "empty JSON file": ("special_tokens", lambda doc: Truncate(0)),
    "empty tokenizer": ("tokenizer", lambda doc: Truncate(0)),
    "empty weights": ("encoder_weights", lambda doc: Truncate(0)),
    "header length 2^64-1": ("encoder_weights", lambda doc: HeaderLength(2**64 - 1)),
    "header length past the file": ("head_weights", lambda doc: HeaderLength(2**40)),
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """Where each example's mutated copy lives (one fresh directory per example, removed after it)."""
    return tmp_path_factory.mktemp("fuzz")


def refused_by_rule(role: str, mutation) -> bool:
    """Whether artifact-v1's strict-JSON rule alone says this edit must be refused."""
    if role not in STRICT_JSON_ROLES or not isinstance(mutation, JsonEdit):
        return False
    value = mutation.value
    return (mutation.action == "duplicate" or isinstance(value, Raw)
            or (isinstance(value, float) and not math.isfinite(value)))


def roles(directory: Path) -> list[str]:
    return [e["role"] for e in json.loads((directory / "manifest.json").read_text())["files"]]


# Every head on a base carries byte-identical base files (equal pins): those are mutated
# once per base, a head's own files and its manifest once per head.
@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("artifact.fuzz")
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_a_mutated_base_file_is_refused_or_served_soundly(qualified_artifact, bound_s, scratch, data):
    role = data.draw(st.sampled_from([r for r in roles(qualified_artifact) if r in BASE_ROLES]), label="role")
    check_mutated_file(qualified_artifact, bound_s, scratch, data, role)


@pytest.mark.laya_claim("artifact.fuzz")
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_a_mutated_head_file_is_refused_or_served_soundly(qualified_artifact, bound_s, scratch, data):
    role = data.draw(st.sampled_from([*(r for r in roles(qualified_artifact) if r not in BASE_ROLES), "manifest"]),
                     label="role")
    check_mutated_file(qualified_artifact, bound_s, scratch, data, role)


def check_mutated_file(qualified_artifact: Path, bound_s: float, scratch: Path, data, role: str) -> None:
    path = "manifest.json" if role == "manifest" else pinned_path(qualified_artifact, role)
    original = (qualified_artifact / path).read_bytes()
    mutation = data.draw(file_mutations(original), label="mutation")
    directory = clone_artifact(qualified_artifact, scratch / uuid.uuid4().hex)
    if role == "manifest":  # the root of trust itself, edited in place (nothing pins it)
        rewrite_file(directory / path, mutation.apply(original))
    else:
        replace_pinned_file(directory, role, mutation.apply(original))
    clock = within(bound_s)
    try:
        with clock:
            outcomes = served(directory, lambda model: [data.draw(requests_for(model)) for _ in range(2)])
    except LayaError as exc:
        event(clock.bucket)
        event(f"{role}: refused, {type(exc).__name__}")
        return
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert not refused_by_rule(role, mutation), f"{role}: loaded although strict JSON refuses {mutation!r}"
    event(clock.bucket)
    for alone, shared in outcomes:
        if isinstance(alone, str):
            assert alone == shared, f"standalone refused with {alone}, shared answered {shared}"
            event(f"{role}: loaded, request refused, {alone}")
            continue
        assert_sound(alone, "standalone")
        assert isinstance(shared, torch.Tensor) and torch.equal(alone, shared), (alone, shared)
        event(f"{role}: loaded and served")


@pytest.mark.laya_claim("artifact.fuzz")
@pytest.mark.parametrize("case", BOUNDARY_EDITS)
def test_a_boundary_edit_is_refused_naming_the_file(qualified_artifact, bound_s, scratch, case):
    role, make = BOUNDARY_EDITS[case]
    path = pinned_path(qualified_artifact, role)
    original = (qualified_artifact / path).read_bytes()
    directory = clone_artifact(qualified_artifact, scratch / uuid.uuid4().hex)
    replace_pinned_file(directory, role, make(json.loads(original) if role in STRICT_JSON_ROLES else None).apply(original))
    with pytest.raises(ArtifactError) as refused, within(bound_s):
        served(directory, lambda model: [])
    assert refused.value.file == path, str(refused.value)
