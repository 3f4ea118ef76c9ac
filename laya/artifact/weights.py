"""Loading a pinned safetensors file from its hashed bytes, against an exact
expectation of tensor names, dtypes and shapes.

The header is parsed here, from the bytes that were hashed, and each tensor is a view
into those same bytes: a weights file is held in memory once, never copied out tensor by
tensor (as ``safetensors.torch.load(bytes)`` does) and never read a second time."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from laya.artifact.manifest import MAX_JSON_BYTES, PinnedFile
from laya.errors import ArtifactError, LayaError

Expected = Mapping[str, tuple[tuple[int, ...], torch.dtype]]

# The safetensors format's dtype names (its Rust crate's ``Dtype``) that torch holds.
_DTYPES = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "U16": torch.uint16,
           "I32": torch.int32, "U32": torch.uint32, "I64": torch.int64, "U64": torch.uint64,
           "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
           "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
_ENTRY_KEYS = {"dtype", "shape", "data_offsets"}
_FINITE_SLICE = 1 << 20  # values checked for finiteness at a time


@dataclass(frozen=True)
class _Entry:
    dtype: torch.dtype
    shape: tuple[int, ...]
    begin: int  # offsets into the data section, which starts after the header
    end: int


def load_tensors(pinned: PinnedFile, expected: Expected) -> dict[str, torch.Tensor]:
    """Tensors of ``pinned`` as views into its bytes; refuses any missing, extra,
    wrong-dtype, wrong-shape or non-finite tensor, naming file and tensor.

    A ``bytearray`` is viewed in place (what ``read_artifact_files`` gives); ``bytes``,
    which torch cannot view without making writable, is copied once first."""
    start, entries = _parse_header(pinned)
    missing = sorted(set(expected) - set(entries))
    if missing:
        raise ArtifactError(f"tensor missing (and {len(missing) - 1} more)" if len(missing) > 1 else "tensor missing",
                            file=pinned.path, field=missing[0])
    extra = sorted(set(entries) - set(expected))
    if extra:
        raise ArtifactError("tensor not expected for this configuration", file=pinned.path, field=extra[0])
    for name, (shape, dtype) in expected.items():
        entry = entries[name]
        if entry.dtype != dtype:
            raise ArtifactError(f"dtype is {entry.dtype}, expected {dtype}", file=pinned.path, field=name)
        if entry.shape != tuple(shape):
            raise ArtifactError(f"shape is {entry.shape}, expected {tuple(shape)}", file=pinned.path, field=name)
    buffer = pinned.data if isinstance(pinned.data, bytearray) else bytearray(pinned.data)
    tensors = {name: _view(buffer, start, entry) for name, entry in entries.items()}
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not _finite(tensor):
            raise ArtifactError("holds non-finite values", file=pinned.path, field=name)
    return tensors


def _finite(tensor: torch.Tensor) -> bool:
    """Whether every value is finite, checked a slice at a time: ``isfinite`` allocates
    temporaries as large as its input, which over a whole embedding matrix would cost
    most of a second copy of the weights."""
    return all(bool(torch.isfinite(part).all()) for part in tensor.reshape(-1).split(_FINITE_SLICE))


def _view(buffer: bytearray, start: int, entry: _Entry) -> torch.Tensor:
    """The tensor ``entry`` describes, sharing ``buffer``'s memory; a tensor whose bytes
    do not start on a multiple of its element size (a file safetensors' own writer never
    makes) is copied to aligned memory instead."""
    count = math.prod(entry.shape)
    if count == 0:
        return torch.empty(entry.shape, dtype=entry.dtype)
    offset = start + entry.begin
    if offset % entry.dtype.itemsize:
        return torch.frombuffer(bytearray(buffer[offset:start + entry.end]), dtype=entry.dtype).view(entry.shape)
    return torch.frombuffer(buffer, dtype=entry.dtype, count=count, offset=offset).view(entry.shape)


class _Entries(dict):
    """A header object as parsed, with the first key it lists twice (``None`` if none)."""
    repeated: str | None = None


def _entries(pairs: list[tuple[str, Any]]) -> _Entries:
    obj = _Entries(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


def _parse_header(pinned: PinnedFile) -> tuple[int, dict[str, _Entry]]:
    """Where the data section starts, and each tensor's entry, by the format's rules: an
    8-byte little-endian header length, a UTF-8 JSON object opening with ``{`` (an optional
    ``__metadata__`` object of strings; per tensor exactly ``dtype``, ``shape`` and
    ``data_offsets``), then the data, which the tensors' byte ranges must cover exactly,
    in order, without gaps or overlaps. A name, or a key of one entry, listed twice is
    refused too: safetensors keeps the last, another reader may keep the first, so two
    readers of the pinned bytes could load different tensors."""
    data, path = pinned.data, pinned.path
    if len(data) < 8:
        raise _invalid(path, "shorter than the 8-byte header length")
    length = int.from_bytes(data[:8], "little")
    if length > min(len(data) - 8, MAX_JSON_BYTES):
        raise _invalid(path, f"header length {length} runs past the file's end or over {MAX_JSON_BYTES} bytes")
    text = bytes(data[8:8 + length])
    if not text.startswith(b"{"):
        raise _invalid(path, "header does not start with '{'")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_entries)
    except (ValueError, RecursionError) as exc:
        raise _invalid(path, f"header is not UTF-8 JSON: {exc}") from None
    if header.repeated is not None:
        raise ArtifactError("tensor name listed twice in the safetensors header", file=path, field=header.repeated)
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _invalid(path, "__metadata__ is not an object of strings", "__metadata__")
    entries = {name: _entry(path, name, raw) for name, raw in header.items()}
    position = 0
    for name, entry in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if entry.begin != position:
            raise _invalid(path, f"data_offsets start at {entry.begin}, the previous tensor ends at {position}", name)
        position = entry.end
    if position != len(data) - 8 - length:
        raise _invalid(path, f"tensors cover {position} bytes of a {len(data) - 8 - length}-byte data section")
    return 8 + length, entries


def _invalid(path: str, why: str, name: str | None = None) -> ArtifactError:
    return ArtifactError(f"not a valid safetensors file ({why})", file=path, field=name)


def _entry(path: str, name: str, raw: Any) -> _Entry:
    if not isinstance(raw, dict):
        raise _invalid(path, "entry is not an object", name)
    if isinstance(raw, _Entries) and raw.repeated is not None:
        raise ArtifactError(f"header entry lists key {raw.repeated!r} twice", file=path, field=name)
    if set(raw) != _ENTRY_KEYS:
        raise _invalid(path, f"entry keys are {sorted(raw)}, expected {sorted(_ENTRY_KEYS)}", name)
    dtype, shape, offsets = raw["dtype"], raw["shape"], raw["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise _invalid(path, f"dtype {dtype!r} is not a safetensors dtype", name)
    if not isinstance(shape, list) or not all(_count(d) for d in shape):
        raise _invalid(path, f"shape {shape!r} is not a list of non-negative integers", name)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_count, offsets)) and offsets[0] <= offsets[1]):
        raise _invalid(path, f"data_offsets {offsets!r} is not [begin, end] with 0 <= begin <= end", name)
    entry = _Entry(_DTYPES[dtype], tuple(shape), offsets[0], offsets[1])
    size = math.prod(entry.shape) * entry.dtype.itemsize
    if entry.end - entry.begin != size:
        raise _invalid(path, f"data_offsets span {entry.end - entry.begin} bytes, {dtype} of shape {shape} is {size}", name)
    return entry


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class FrozenWeights:
    """Installs loaded tensors as a module's parameters and notices in-place edits.

    Shared weights are meant to be immutable. torch cannot make a CPU tensor
    read-only, so every in-place write (which bumps a tensor's version counter)
    is detected at the next forward and refused loudly instead of serving from
    silently edited weights. The module is built on the meta device, so no
    initial weights are allocated only to be replaced by the loaded ones.
    """

    def __init__(self, build: Callable[[], torch.nn.Module], tensors: Mapping[str, torch.Tensor], *, owner: str,
                 device: str = "cpu"):
        with torch.device("meta"):
            module = build()
        module.requires_grad_(False)
        module.load_state_dict(dict(tensors), strict=True, assign=True)
        # Moved before the versions are recorded: a move makes new tensors with new counters.
        self.module = module.to(device).eval()
        self.owner = owner
        self._versions = {name: t._version for name, t in module.state_dict(keep_vars=True).items()}

    def check_unmodified(self) -> None:
        for name, tensor in self.module.state_dict(keep_vars=True).items():
            if tensor._version != self._versions[name]:
                raise LayaError(f"{self.owner}: tensor {name} was modified in place after loading; "
                                "loaded weights are immutable")
