"""The frozen feature store: the base's marker and pooled states for an exact list
of token sequences, computed once and reused by every head trained on that base.

Features are only reusable where they would be recomputed bit for bit, so a store
binds everything that fixes those bits: the five base pins (encoder config and
weights, tokenizer, and the sequence layout: special ids and sequence format),
the kernel identity, the numeric profile, and the exact token sequences with
their marker positions. Opening a store for anything else is refused with
``laya.errors.FeatureStoreMismatch`` naming the first field that differs.

On disk a store is one safetensors file; its binding lives in the header metadata,
and the file is read once and parsed from those bytes. It is written through a
temporary sibling and renamed into place, so an interrupted run never leaves a
truncated store for the next run to trip over, and an existing store is never replaced.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from laya.artifact.manifest import BASE_ROLES
from laya.artifact.atomic import write_file
from laya.serving.base import VerifiedBase
from laya.artifact.binding import canonical_json, numeric_profile, require, state_digest
from laya.errors import FeatureStoreMismatch
from laya.serving.rendering import Rendered

FORMAT = "laya-feature-store-v2"
_METADATA_KEY = "laya_feature_store"
IDENTITY_FIELDS = BASE_ROLES + ("kernel", "numeric_profile")  # what a store binds, compared in this order


def store_identity(base: VerifiedBase) -> dict:
    """Everything a store binds about the base and process that computed it."""
    identity: dict = {role: base.pins[role] for role in BASE_ROLES}
    identity["kernel"] = base.identity  # the encoder's effective kernel/architecture identity
    identity["numeric_profile"] = numeric_profile(base.options.device)
    return identity


@dataclass(frozen=True)
class FeatureStore:
    identity: dict
    sequences: tuple[tuple[int, ...], ...]
    marker_positions: tuple[tuple[int, ...], ...]
    markers: tuple[torch.Tensor, ...]  # per example: final states at its option markers, [options, hidden]
    pooled: torch.Tensor  # per example: mean of its final states over the whole sequence, [n, hidden]

    def __len__(self) -> int:
        return len(self.sequences)


def build_store(base: VerifiedBase, rendered: Sequence[Rendered],
                progress: Callable[[int], None] | None = None) -> FeatureStore:
    """Encode every sequence once, unpadded and one at a time, exactly as serving does."""
    markers, pooled = [], []
    for item in rendered:
        states = base.encode(item.token_ids)
        markers.append(states[list(item.marker_positions)].clone())
        pooled.append(states.mean(dim=0))
        if progress is not None:
            progress(1)
    return FeatureStore(store_identity(base), tuple(r.token_ids for r in rendered),
                        tuple(r.marker_positions for r in rendered), tuple(markers), torch.stack(pooled))


def save_store(store: FeatureStore, path: str | os.PathLike) -> Path:
    tensors = _tensors(store)
    binding = {"format": FORMAT, "identity": store.identity, "features": state_digest(tensors)}
    data = save_safetensors(tensors, metadata={_METADATA_KEY: canonical_json(binding).decode("utf-8")})
    return write_file(path, data)  # whole or absent (laya.artifact.atomic); an existing store is refused


def load_store(path: str | os.PathLike, base: VerifiedBase, rendered: Sequence[Rendered]) -> FeatureStore:
    """Open a saved store for ``base`` and exactly the sequences ``rendered``, or refuse."""
    file = str(path)
    data = Path(path).read_bytes()
    binding = _binding(data, file)
    try:
        tensors = load_safetensors(data)
    except SafetensorError as exc:
        raise FeatureStoreMismatch(f"not a valid safetensors file ({exc})", field="format", file=file) from None
    if binding.get("features") != state_digest(tensors):
        raise FeatureStoreMismatch("feature bytes do not hash to the digest the store binds", field="features", file=file)
    ours = store_identity(base)
    theirs = binding.get("identity", {})
    require(IDENTITY_FIELDS, ours, theirs, lambda field, _: FeatureStoreMismatch(
        f"built with {theirs.get(field)!r}, this base has {ours[field]!r}", field=field, file=file))
    store = _from_tensors(tensors, theirs)
    _check_sequences(store, rendered, file)
    return store


def _check_sequences(store: FeatureStore, rendered: Sequence[Rendered], file: str) -> None:
    if len(store) != len(rendered):
        raise FeatureStoreMismatch(f"store holds {len(store)} sequences, the dataset renders {len(rendered)}",
                                   field="sequences", file=file)
    for i, item in enumerate(rendered):
        if store.sequences[i] != item.token_ids:
            raise FeatureStoreMismatch(f"example {i} renders to different token ids than the store holds",
                                       field="sequences", file=file)
        if store.marker_positions[i] != item.marker_positions:
            raise FeatureStoreMismatch(f"example {i} has different marker positions", field="marker_positions",
                                       file=file)


def _tensors(store: FeatureStore) -> dict[str, torch.Tensor]:
    def offsets(lengths: list[int]) -> torch.Tensor:
        return torch.tensor([0] + lengths, dtype=torch.int64).cumsum(0)

    return {
        "markers": torch.cat(store.markers).contiguous(),
        "pooled": store.pooled.contiguous(),
        "marker_positions": torch.tensor([p for ps in store.marker_positions for p in ps], dtype=torch.int64),
        "marker_offsets": offsets([len(ps) for ps in store.marker_positions]),
        "token_ids": torch.tensor([t for s in store.sequences for t in s], dtype=torch.int64),
        "token_offsets": offsets([len(s) for s in store.sequences]),
    }


def _from_tensors(tensors: dict[str, torch.Tensor], identity: dict) -> FeatureStore:
    def split(flat: torch.Tensor, offsets: torch.Tensor) -> list[torch.Tensor]:
        bounds = offsets.tolist()
        return [flat[a:b] for a, b in zip(bounds, bounds[1:])]

    marker_offsets = tensors["marker_offsets"]
    return FeatureStore(
        identity,
        tuple(tuple(s.tolist()) for s in split(tensors["token_ids"], tensors["token_offsets"])),
        tuple(tuple(p.tolist()) for p in split(tensors["marker_positions"], marker_offsets)),
        tuple(m.clone() for m in split(tensors["markers"], marker_offsets)),
        tensors["pooled"],
    )


def _binding(data: bytes, file: str) -> dict:
    """The store's binding, from the safetensors header of the bytes already read."""
    try:
        (size,) = struct.unpack("<Q", data[:8])
        metadata = json.loads(data[8:8 + size])["__metadata__"]
        binding = json.loads(metadata[_METADATA_KEY])
    except (struct.error, ValueError, KeyError, TypeError):
        raise FeatureStoreMismatch("not a laya feature store (no binding in the header)", field="format",
                                   file=file) from None
    if not isinstance(binding, dict) or binding.get("format") != FORMAT:
        raise FeatureStoreMismatch(f"format is not {FORMAT}", field="format", file=file)
    return binding
