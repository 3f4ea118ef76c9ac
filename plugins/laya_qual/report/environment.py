"""The environment a report was produced in: what a reader needs to judge whether
its figures transfer to their machine (versions, hardware, threads, determinism)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "numpy", "tokenizers", "safetensors", "hypothesis", "pytest",
            "pytest-xdist", "pytest-benchmark", "laya-qual")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
DETERMINISM_VARS = ("CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The first `model name` of ``cpuinfo`` (everything after its first colon), else what
    the platform module says."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(directory: Path) -> dict | None:
    """HEAD of the checkout whose tracked files include ``directory``, and whether
    it has local changes; None for an installed copy (even inside some other repo)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    try:
        if not git("ls-files", "--", "."):
            return None
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return None


def torch_state(device: str) -> dict:
    import torch

    state = {
        "threads": {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads(),
                    **{v: os.environ.get(v) for v in THREAD_VARS}},
        "determinism": {
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            **{v: os.environ.get(v) for v in DETERMINISM_VARS},
        },
        "device": device,
        "gpu": None,
    }
    if torch.cuda.is_available():
        state["gpu"] = {"name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                        "cuda": torch.version.cuda}
    return state


def collect(device: str, source_dir: Path | None) -> dict:
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in PACKAGES},
        "cpu": {"model": cpu_model(), "logical_cores": os.cpu_count()},
        **torch_state(device),
        "git": git_commit(source_dir) if source_dir else None,
    }
