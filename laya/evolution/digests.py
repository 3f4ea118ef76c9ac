"""Canonical digests: the same content always hashes the same, whatever wrote it."""

from __future__ import annotations

import hashlib
import json

import torch


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def json_digest(value) -> str:
    return sha256(canonical_json(value))


def tensor_digest(tensor: torch.Tensor) -> str:
    """Digest of dtype, shape and raw bytes, so equal digests mean bitwise-equal tensors."""
    t = tensor.detach().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """Digest of a named tensor collection, independent of insertion order."""
    return json_digest({name: tensor_digest(state[name]) for name in sorted(state)})
