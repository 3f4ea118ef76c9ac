"""Where each rank computes and how the hand-offs between ranks travel.

On the CPU every rank computes on the CPU and gloo carries the hand-offs. With CUDA, a
rank gets a GPU of its own when its node has at least as many GPUs as it runs ranks
(the node's k-th rank on cuda:k), and NCCL then carries the hand-offs from GPU to GPU;
otherwise every rank of the node computes on cuda:0 (the single-GPU layout) and gloo
carries CPU copies, because NCCL refuses two ranks on one GPU. On CUDA the process
group is always "cpu:gloo,cuda:nccl": object collectives and barriers take gloo, CUDA
tensors NCCL, whose communicators start only when first used, so a single-GPU group
never starts one. Which of the two a job uses is decided by all ranks together
(`direct_handoffs`), so a node short of GPUs makes every rank send CPU copies.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from laya.errors import DeviceError

CPU = torch.device("cpu")
HANDOFFS = {"cuda": "GPU to GPU over NCCL", "cpu": "CPU copies over gloo"}  # by handoff_device's type


def backend(device: str) -> str:
    """The process group's backend for ranks that compute on `device` (cpu or cuda)."""
    return "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"


def require_device(device: str) -> None:
    """Refuse `cuda` where torch sees no CUDA device, before any rank starts."""
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"device cuda: torch {torch.__version__} sees no CUDA device on this machine")


def rank_device(device: str, local_rank: int, local_world: int, gpus: int) -> torch.device:
    """The device of the node's `local_rank`-th of `local_world` ranks when the node has `gpus` GPUs."""
    if device == "cpu":
        return CPU
    if gpus < 1:
        raise DeviceError(f"device cuda: local rank {local_rank} sees no CUDA device")
    return torch.device("cuda", local_rank if gpus >= local_world else 0)


def place(device: str, local_rank: int, local_world: int) -> torch.device:
    """Make this process's rank compute on its device (call before joining the group)."""
    chosen = rank_device(device, local_rank, local_world, torch.cuda.device_count() if device == "cuda" else 0)
    if chosen.type == "cuda":  # pragma: no cover — platform guard: needs a CUDA device; the suite runs on CPU
        torch.cuda.set_device(chosen)
    return chosen


def direct_handoffs(gpus: list[str | None]) -> bool:
    """Whether hand-offs may go from GPU to GPU over NCCL, given every rank's GPU (its uuid;
    None for a rank on the CPU): only when every rank has a GPU and no two share one."""
    return all(g is not None for g in gpus) and len(set(gpus)) == len(gpus)


def handoff_device(device: torch.device) -> torch.device:
    """Where this rank's sends and receives live: its GPU when every rank of the group has
    one of its own and the group has NCCL, else the CPU. Collective: every rank calls it at
    the same point of a job."""
    if device.type != "cuda" or "cuda:nccl" not in dist.get_backend_config():  # pragma: no branch — platform guard:
        # going on needs CUDA ranks in a group with NCCL; the suite runs on CPU (scripts/gpu-probe.sh)
        return CPU
    gpus: list = [None] * dist.get_world_size()
    dist.all_gather_object(gpus, str(torch.cuda.get_device_properties(device).uuid))
    return device if direct_handoffs(gpus) else CPU
