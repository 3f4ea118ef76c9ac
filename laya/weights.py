"""Loading a pinned safetensors file from its hashed bytes, against an exact
expectation of tensor names, dtypes and shapes."""

from __future__ import annotations

from typing import Mapping

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors

from laya.artifact import PinnedFile
from laya.errors import ArtifactError, LayaError

Expected = Mapping[str, tuple[tuple[int, ...], torch.dtype]]


def load_tensors(pinned: PinnedFile, expected: Expected) -> dict[str, torch.Tensor]:
    """Tensors of ``pinned`` parsed from its bytes; refuses any missing, extra,
    wrong-dtype, wrong-shape or non-finite tensor, naming file and tensor."""
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
