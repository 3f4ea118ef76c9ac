"""artifact.tensors: docs/artifact-v1.md loading rule 4 ("tensor files must hold exactly the
expected tensor names, dtypes and shapes"): an extra tensor or one of another dtype or shape,
in the encoder's or the head's weights file, re-saved with safetensors and re-pinned, is refused
with ArtifactError naming the file and the tensor; the file re-saved unchanged loads.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import laya
from laya.errors import ArtifactError
from laya_qual.synth import copy_with_weights_edit, pinned_path, replace_pinned_file
from laya_qual.synth.fuzz import relaid_safetensors_mutations


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=6, head_kind="int8")


def add_tensor(tensors):
    tensors["extra.weight"] = torch.zeros(2)


def first_float32(tensors) -> str:
    return sorted(n for n, t in tensors.items() if t.dtype == torch.float32)[0]


def widen_first(tensors):
    name = first_float32(tensors)
    tensors[name] = tensors[name].double()


def lengthen_first(tensors):
    """One more row (its first, repeated): the dtype right, the shape not the config's."""
    name = first_float32(tensors)
    tensors[name] = torch.cat([tensors[name], tensors[name][:1]])


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("edit, tensor", [(add_tensor, lambda t: "extra.weight"), (widen_first, first_float32),
                                          (lengthen_first, first_float32)],
                         ids=["extra-tensor", "float64", "another-shape"])
def test_a_weights_file_with_another_tensor_is_refused_naming_it(pristine, tmp_path, role, edit, tensor):
    from safetensors.torch import load as load_safetensors

    original = load_safetensors((pristine / pinned_path(pristine, role)).read_bytes())
    directory = copy_with_weights_edit(pristine, tmp_path / "edited", role, edit)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, role), tensor(original)), \
        str(refused.value)
    assert laya.load_artifact(copy_with_weights_edit(pristine, tmp_path / "same", role, lambda t: None)).tasks


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("removed, says", [(1, "tensor missing"), (2, "tensor missing (and 1 more)")])
def test_a_weights_file_missing_tensors_is_refused_naming_the_first(pristine, tmp_path, role, removed, says):
    from safetensors.torch import load as load_safetensors

    names = sorted(load_safetensors((pristine / pinned_path(pristine, role)).read_bytes()))

    def remove(tensors):
        for name in names[:removed]:
            del tensors[name]

    directory = copy_with_weights_edit(pristine, tmp_path / "edited", role, remove)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, role), names[0])
    assert str(refused.value) == f"file {pinned_path(directory, role)}, field {names[0]}: {says}"


def header_of(data: bytes) -> tuple[dict, bytes]:
    """A safetensors file's header object and its tensor bytes (the format: an 8-byte
    little-endian header length, the header's JSON, then the data)."""
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + length]), data[8 + length:]


def with_header_text(text: str, body: bytes) -> bytes:
    encoded = text.encode()
    return len(encoded).to_bytes(8, "little") + encoded + body


def entry_text(entry: dict) -> str:
    return json.dumps(entry, separators=(",", ":"))


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("where", ["name", "entry-key"])
def test_a_header_listing_a_name_twice_is_refused_naming_the_tensor(pristine, tmp_path, role, where):
    """Two entries for one name (the first pointing at another tensor's bytes of the same
    dtype and shape where there is one): safetensors keeps the last, another reader may keep
    the first, so the pinned bytes would not say which tensor they hold. Likewise an entry
    listing its dtype twice. Each is refused, naming the tensor; before, the last won."""
    header, body = header_of((pristine / pinned_path(pristine, role)).read_bytes())
    names = sorted(n for n in header if n != "__metadata__")
    name = names[0]
    twin = next((n for n in names[1:] if {k: header[n][k] for k in ("dtype", "shape")}
                 == {k: header[name][k] for k in ("dtype", "shape")}), name)
    if where == "name":
        entries = [f'"{name}":{entry_text(header[twin])}'] + [f'"{n}":{entry_text(e)}' for n, e in header.items()]
    else:
        entries = [f'"{n}":' + (entry_text(e) if n != name else
                                '{"dtype":"F64",' + entry_text(e)[1:]) for n, e in header.items()]
    directory = tmp_path / "edited"
    shutil.copytree(pristine, directory)
    replace_pinned_file(directory, role, with_header_text("{" + ",".join(entries) + "}", body))
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, role), name), str(refused.value)
    assert ("listed twice" if where == "name" else "key 'dtype' twice") in str(refused.value)


# --- the header is read as safetensors reads it ---------------------------------------------
# laya parses the header itself, so the tensors can be views into the hashed bytes (loading
# rule 1). Its oracle is the safetensors library reading the same bytes, plus the rules laya
# adds on top (loading rule 4), written out here from the text of artifact-v1.md.

HEADER_LIMIT = 1 << 20  # "a safetensors header of over 1 MiB is refused"
ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


def breaks_a_rule_laya_adds(data: bytes) -> bool:
    """A name or a key of one entry listed twice, an entry key other than the format's
    three, or a header over 1 MiB: refused by laya, although safetensors may read it."""
    length = int.from_bytes(data[:8], "little")
    if length > HEADER_LIMIT:
        return True
    repeated = []

    def pairs(items):
        repeated.append(len({k for k, _ in items}) != len(items))
        return dict(items)

    header = json.loads(data[8:8 + length], object_pairs_hook=pairs)
    return any(repeated) or any(set(e) != ENTRY_KEYS for n, e in header.items() if n != "__metadata__")


def read_by_safetensors(data: bytes) -> dict[str, torch.Tensor] | None:
    from safetensors import SafetensorError
    from safetensors.torch import load as load_safetensors
    try:
        return load_safetensors(data)
    except (SafetensorError, ValueError, OverflowError, TypeError):
        return None


def signature(tensors: dict[str, torch.Tensor]) -> dict[str, tuple]:
    return {name: (t.dtype, tuple(t.shape)) for name, t in tensors.items()}


def loaded_tensors(model, role: str) -> dict[str, torch.Tensor]:
    return model.base.weight_tensors() if role == "encoder_weights" else model.weight_tensors()


def swap_offsets_of_twins(data: bytes) -> bytes:
    """Two tensors of one dtype and shape trade data_offsets: a valid file whose tensors
    trade values, so a reader that walks the data in header order loads them swapped."""
    header, body = header_of(data)
    names = sorted(n for n in header if n != "__metadata__")
    a, b = next((a, b) for i, a in enumerate(names) for b in names[i + 1:]
                if (header[a]["dtype"], header[a]["shape"]) == (header[b]["dtype"], header[b]["shape"]))
    header[a]["data_offsets"], header[b]["data_offsets"] = header[b]["data_offsets"], header[a]["data_offsets"]
    return with_header_text(json.dumps(header), body)


def pad_header_by(count: int):
    """The header followed by ``count`` spaces (JSON allows them): the data section then
    starts off its elements' alignment, which a view into the bytes must not mind."""
    def pad(data: bytes) -> bytes:
        length = int.from_bytes(data[:8], "little")
        return with_header_text(data[8:8 + length].decode() + " " * count, data[8 + length:])
    return pad


def first_and_rest(data: bytes) -> tuple[dict, bytes, list[str]]:
    header, body = header_of(data)
    return header, body, sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])


def gap_after_first(data: bytes) -> bytes:
    """Four unreferenced bytes after the first tensor's, every later offset moved past
    them: each entry's size still right, the data not covered without gaps."""
    header, body, order = first_and_rest(data)
    cut = header[order[0]]["data_offsets"][1]
    for name in order[1:]:
        header[name]["data_offsets"] = [o + 4 for o in header[name]["data_offsets"]]
    return with_header_text(json.dumps(header), body[:cut] + bytes(4) + body[cut:])


def overlap_twins(data: bytes) -> bytes:
    """Of two tensors of one dtype and shape, the one stored later points at the other's
    bytes too, and its own bytes go: sizes right, the ranges overlap."""
    header, body = header_of(data)
    names = sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])
    a, b = next((a, b) for i, a in enumerate(names) for b in names[i + 1:]
                if (header[a]["dtype"], header[a]["shape"]) == (header[b]["dtype"], header[b]["shape"]))
    begin, end = header[b]["data_offsets"]
    header[b]["data_offsets"] = list(header[a]["data_offsets"])
    for name in names:
        if name != b and header[name]["data_offsets"][0] >= end:
            header[name]["data_offsets"] = [o - (end - begin) for o in header[name]["data_offsets"]]
    return with_header_text(json.dumps(header), body[:begin] + body[end:])


def first_spans_more(data: bytes) -> bytes:
    """The first tensor's range four bytes longer than its dtype and shape make, the
    rest moved along, the data covered exactly: only the size rule is broken."""
    header, body, order = first_and_rest(data)
    header[order[0]]["data_offsets"][1] += 4
    cut = header[order[0]]["data_offsets"][1] - 4
    for name in order[1:]:
        header[name]["data_offsets"] = [o + 4 for o in header[name]["data_offsets"]]
    return with_header_text(json.dumps(header), body[:cut] + bytes(4) + body[cut:])


def trailing_bytes(data: bytes) -> bytes:
    """Four bytes after the last tensor's, which no entry covers."""
    return data + bytes(4)


def check_read_as_safetensors_reads(pristine: Path, directory: Path, role: str, data: bytes) -> str:
    shutil.copytree(pristine, directory)
    replace_pinned_file(directory, role, data)
    theirs = read_by_safetensors(data)
    original = read_by_safetensors((pristine / pinned_path(pristine, role)).read_bytes())
    loads = (theirs is not None and signature(theirs) == signature(original)
             and all(bool(torch.isfinite(t).all()) for t in theirs.values() if t.is_floating_point())
             and not breaks_a_rule_laya_adds(data))
    try:
        model = laya.load_artifact(directory)
    except ArtifactError as refused:
        assert not loads, f"refused a file safetensors reads as the expected tensors: {refused}"
        assert refused.file == pinned_path(directory, role), str(refused)
        return "refused"
    assert loads, "loaded a file that safetensors refuses or reads as other tensors"
    ours = loaded_tensors(model, role)
    assert signature(ours) == signature(theirs)
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), name
        assert ours[name].data_ptr() % ours[name].element_size() == 0, f"{name} is not aligned to its dtype"
    return "loaded"


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("edit", [swap_offsets_of_twins, pad_header_by(1), pad_header_by(3), pad_header_by(8)],
                         ids=["twins-swap-offsets", "pad-1", "pad-3", "pad-8"])
def test_a_valid_rearranged_header_loads_the_tensors_safetensors_reads(pristine, tmp_path, role, edit):
    original = (pristine / pinned_path(pristine, role)).read_bytes()
    assert check_read_as_safetensors_reads(pristine, tmp_path / "edited", role, edit(original)) == "loaded"


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("edit", [gap_after_first, overlap_twins, first_spans_more, trailing_bytes],
                         ids=["gap", "overlap", "size", "trailing"])
def test_a_header_whose_ranges_do_not_tile_the_data_is_refused(pristine, tmp_path, role, edit):
    original = (pristine / pinned_path(pristine, role)).read_bytes()
    assert read_by_safetensors(edit(original)) is None, "the example must be one safetensors refuses"
    assert check_read_as_safetensors_reads(pristine, tmp_path / "edited", role, edit(original)) == "refused"


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@pytest.mark.parametrize("over, outcome", [(0, "loaded"), (1, "refused")], ids=["at-1MiB", "over-1MiB"])
def test_a_header_over_1_mib_is_refused(pristine, tmp_path, role, over, outcome):
    original = (pristine / pinned_path(pristine, role)).read_bytes()
    padding = HEADER_LIMIT + over - int.from_bytes(original[:8], "little")
    assert check_read_as_safetensors_reads(pristine, tmp_path / "edited", role,
                                           pad_header_by(padding)(original)) == outcome


@pytest.mark.laya_claim("artifact.tensors")
@pytest.mark.parametrize("role", ["encoder_weights", "head_weights"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_header_is_read_as_safetensors_reads_it(pristine, tmp_path, role, data):
    """The file laid out anew (tensor bytes in another order, entries in another order,
    the header padded off alignment), then perhaps one header edit (a name, dtype, shape or
    offset changed, added, removed or repeated, or the header length replaced): laya loads
    exactly when safetensors reads the expected tensors, all finite, and no rule laya adds
    is broken; what it loads is bitwise what safetensors reads."""
    original = (pristine / pinned_path(pristine, role)).read_bytes()
    mutation = data.draw(relaid_safetensors_mutations(original), label="mutation")
    directory = tmp_path / uuid.uuid4().hex
    try:
        event(check_read_as_safetensors_reads(pristine, directory, role, mutation.apply(original)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
