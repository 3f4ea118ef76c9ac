"""Loading a pinned safetensors file from its hashed bytes, against an exact
expectation of tensor names, dtypes and shapes."""

from __future__ import annotations

import json
from typing import Any, Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors

from laya.artifact.manifest import PinnedFile
from laya.errors import ArtifactError, LayaError

Expected = Mapping[str, tuple[tuple[int, ...], torch.dtype]]


def load_tensors(pinned: PinnedFile, expected: Expected) -> dict[str, torch.Tensor]:
    """Tensors of ``pinned`` parsed from its bytes; refuses any missing, extra,
    wrong-dtype, wrong-shape or non-finite tensor, naming file and tensor."""
    _refuse_repeated_names(pinned)
    try:
        tensors = load_safetensors(pinned.data)
    except SafetensorError as exc:
        raise ArtifactError(f"not a valid safetensors file ({exc})", file=pinned.path) from None
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ArtifactError(f"tensor missing (and {len(missing) - 1} more)" if len(missing) > 1 else "tensor missing",
                            file=pinned.path, field=missing[0])
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise ArtifactError("tensor not expected for this configuration", file=pinned.path, field=extra[0])
    for name, (shape, dtype) in expected.items():
        tensor = tensors[name]
        if tensor.dtype != dtype:
            raise ArtifactError(f"dtype is {tensor.dtype}, expected {dtype}", file=pinned.path, field=name)
        if tuple(tensor.shape) != tuple(shape):
            raise ArtifactError(f"shape is {tuple(tensor.shape)}, expected {tuple(shape)}", file=pinned.path, field=name)
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ArtifactError("holds non-finite values", file=pinned.path, field=name)
    return tensors


class _Entries(dict):
    """A header object as parsed, with the first key it lists twice (``None`` if none)."""
    repeated: str | None = None


def _entries(pairs: list[tuple[str, Any]]) -> _Entries:
    obj = _Entries(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


def _refuse_repeated_names(pinned: PinnedFile) -> None:
    """Refuse a header (parsed here from the hashed bytes) that lists a tensor name, or a key
    of a tensor's entry, twice: safetensors keeps the last, another reader may keep the first,
    so two readers of the pinned bytes could load different tensors. A header that is not
    JSON is left to safetensors' own refusal."""
    data = pinned.data
    length = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    if not 0 <= length <= len(data) - 8:
        return
    try:
        header = json.loads(data[8:8 + length].decode("utf-8"), object_pairs_hook=_entries)
    except (ValueError, RecursionError):
        return
    if not isinstance(header, _Entries):
        return
    if header.repeated is not None:
        raise ArtifactError("tensor name listed twice in the safetensors header", file=pinned.path,
                            field=header.repeated)
    for name, entry in header.items():
        if isinstance(entry, _Entries) and entry.repeated is not None:
            raise ArtifactError(f"header entry lists key {entry.repeated!r} twice", file=pinned.path, field=name)


class FrozenWeights:
    """Installs loaded tensors as a module's parameters and notices in-place edits.

    Shared weights are meant to be immutable. torch cannot make a CPU tensor
    read-only, so every in-place write (which bumps a tensor's version counter)
    is detected at the next forward and refused loudly instead of serving from
    silently edited weights.
    """

    def __init__(self, module: torch.nn.Module, tensors: Mapping[str, torch.Tensor], *, owner: str,
                 device: str = "cpu"):
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
