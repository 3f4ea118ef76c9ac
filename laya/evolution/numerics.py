"""The thread pinning and device settings that make both arms' numerics the same.

Bitwise equality between processes only holds when every process runs the same
kernels with the same thread counts, so the pinning happens before any torch work;
the numeric profile that results (laya.artifact.binding.numeric_profile, read live) is bound
into every feature packet.
"""

from __future__ import annotations

import os
import time

import torch
import torch.utils.deterministic

from .placement import require_device


def pin_threads() -> None:
    """One intra-op and one inter-op thread; call first thing in every process."""
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def use_device(device: str) -> torch.device:
    """Select the device a job computes on; on CUDA, force deterministic kernels and no TF32.

    Every process of both arms runs the same kernels on the same model of GPU (this
    process's current one, chosen by laya.evolution.placement), which is what keeps CUDA
    results bitwise equal between them (CPU settings are untouched).
    """
    cuda = device == "cuda"
    if cuda:
        require_device(device)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS first starts
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.cuda.reset_peak_memory_stats()  # peak figures are per job, not per reused worker
        torch.utils.deterministic.fill_uninitialized_memory = False  # receive buffers are overwritten whole
    torch.use_deterministic_algorithms(cuda)  # workers are reused: a later CPU job gets the default back
    return torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")


def clock(device: torch.device) -> float:
    """perf_counter after the device's queued work finished (CUDA runs asynchronously)."""
    if device.type == "cuda":  # pragma: no cover — platform guard: needs a CUDA device; the suite runs on CPU
        torch.cuda.synchronize(device)
    return time.perf_counter()


def peak_device_bytes(device: torch.device) -> int | None:
    """Peak bytes held by torch's CUDA allocator in this process; None on CPU."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
