"""Binding: these bytes were made by exactly this, or a refusal naming the first field that differs.

Artifact pins, feature stores, feature packets and their certificates each bind
bytes to what made them. Each declares the fields it binds (a tuple beside its
reader) and checks them with ``require``; what they compare is spelled here once:
one canonical JSON, one sha256, one tensor digest, one numeric profile. A file
checked against a digest is read once, and its parser gets the bytes that were hashed.

torch is imported inside the two functions that need it: ``laya.artifact.manifest`` imports
this module, and ``import laya`` (and ``laya --help``) must not pay for torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover — typing only: read by type checkers; torch is imported where used
    import torch


def canonical_json(value: Any) -> bytes:
    """The one JSON spelling laya writes and hashes: sorted keys, two-space indent, trailing newline.

    Artifact files are written in it and compared byte for byte, so it never changes."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def sha256(data: bytes) -> str:
    """Lowercase hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def json_digest(value: Any) -> str:
    return sha256(canonical_json(value))


def read_hashed(path: str | os.PathLike) -> tuple[bytes, str]:
    """A file's bytes and their sha256 from one read: parse these bytes, never the path again."""
    data = Path(path).read_bytes()
    return data, sha256(data)


def tensor_digest(tensor: torch.Tensor) -> str:
    """Digest of dtype, shape and raw bytes, so equal digests mean bitwise-equal tensors."""
    import torch

    t = tensor.detach().cpu().contiguous()  # the bytes of a CUDA tensor are hashed on the host
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """Digest of a named tensor collection, independent of insertion order."""
    return json_digest({name: tensor_digest(state[name]) for name in sorted(state)})


def numeric_profile(device: str) -> dict:
    """What decides the bits of a float32 forward pass on ``device`` in this process, read live:
    thread counts, torch version, written-out attention, and the CUDA exactness settings
    (deterministic kernels, TF32 for matmuls and cuDNN, the cuBLAS workspace; on CUDA also
    the GPU model and its compute capability). Feature stores
    and feature packets bind it, so features made under other numerics are refused."""
    import torch

    return {
        "dtype": "float32",
        "device": device,
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "torch": torch.__version__,
        "attention": "math",
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    } | (_gpu_model() if device == "cuda" else {})


def _gpu_model() -> dict:  # pragma: no cover — platform guard: runs only on a CUDA device; the suite runs on CPU
    """The current GPU's model and compute capability: cuBLAS picks kernels by them, so the
    same settings on another model of GPU can give other bits."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"gpu": props.name, "compute_capability": f"{props.major}.{props.minor}"}


def require(fields: Sequence[str], expected: Mapping[str, Any], found: Mapping[str, Any],
            refuse: Callable[[str, list[str]], Exception]) -> None:
    """Compare ``found`` with ``expected`` on the bound ``fields`` in their declared order; if any
    differs, raise ``refuse(first, differing)``, so the error names the first differing field."""
    differing = [field for field in fields if found.get(field) != expected.get(field)]
    if differing:
        raise refuse(differing[0], differing)
