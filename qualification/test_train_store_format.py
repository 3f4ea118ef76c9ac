"""train.store.format: `laya train`'s feature store (docs/training.md) opens only as what it
is, for exactly the sequences it was built for.

Oracle: the file's bytes, edited here in the safetensors wire form (an 8-byte little-endian
header length, the JSON header whose ``__metadata__`` carries the store's binding, then the
tensor bytes) with struct and json; each refusal must be FeatureStoreMismatch naming the
field the doc's "first difference" rule implies (``format`` for a file that is not a laya
store of this format, ``sequences`` for another number of sequences). The stores are built
with and without a progress callback, which must not change a byte.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import laya
from laya.errors import FeatureStoreMismatch
from laya.training.features import build_store, load_store, save_store

QUESTIONS = ("is it here", "where is it", "what now")


@pytest.fixture(scope="module")
def base(artifact_factory):
    return laya.load_artifact_base(artifact_factory(seed=8, head_kind="float32"))


@pytest.fixture(scope="module")
def rendered(base):
    return [base.render(laya.Request("answer", q, ("yes", "no"))) for q in QUESTIONS]


@pytest.fixture
def store_file(base, rendered, tmp_path) -> Path:
    ticks = []
    with_progress = save_store(build_store(base, rendered, progress=ticks.append), tmp_path / "with.safetensors")
    without = save_store(build_store(base, rendered), tmp_path / "without.safetensors")
    assert ticks == [1] * len(rendered)
    assert with_progress.read_bytes() == without.read_bytes()
    return without


def header(data: bytes) -> tuple[dict, bytes]:
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + size]), data[8 + size:]


def with_header(head: dict, body: bytes) -> bytes:
    text = json.dumps(head).encode()
    return struct.pack("<Q", len(text)) + text + body


def other_format(data: bytes) -> bytes:
    head, body = header(data)
    binding = json.loads(head["__metadata__"]["laya_feature_store"])
    head["__metadata__"]["laya_feature_store"] = json.dumps({**binding, "format": "laya-feature-store-v1"})
    return with_header(head, body)


def body_cut(data: bytes) -> bytes:
    return data[:-4]  # the header and its binding intact; the tensors short


def no_binding(data: bytes) -> bytes:
    head, body = header(data)
    del head["__metadata__"]
    return with_header(head, body)


@pytest.mark.laya_claim("train.store.format")
@pytest.mark.parametrize("edit", [other_format, body_cut, no_binding, lambda d: b"not a store"],
                         ids=["other-format", "body-cut", "no-binding", "not-safetensors"])
def test_a_file_that_is_not_this_store_format_is_refused(base, rendered, store_file, edit):
    assert len(load_store(store_file, base, rendered)) == len(rendered)
    store_file.write_bytes(edit(store_file.read_bytes()))
    with pytest.raises(FeatureStoreMismatch) as refused:
        load_store(store_file, base, rendered)
    assert (refused.value.field, refused.value.file) == ("format", str(store_file)), str(refused.value)


@pytest.mark.laya_claim("train.store.format")
@pytest.mark.parametrize("count", [2, 4])
def test_a_store_opened_for_another_number_of_sequences_is_refused(base, rendered, store_file, count):
    sequences = (rendered * 2)[:count]
    with pytest.raises(FeatureStoreMismatch) as refused:
        load_store(store_file, base, sequences)
    assert (refused.value.field, refused.value.file) == ("sequences", str(store_file)), str(refused.value)
