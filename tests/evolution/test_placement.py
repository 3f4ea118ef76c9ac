"""Where ranks compute and how hand-offs travel (laya.evolution.placement), as far as a CPU can show.

The NCCL path itself needs GPUs; what runs here is the decision table written out from
the documented rule (tests/evolution/test_torchrun.py checks that CPU ranks hand off on the CPU).
"""

from __future__ import annotations

import pytest
import torch

from laya.errors import DeviceError
from laya.evolution.placement import backend, direct_handoffs, rank_device, require_device


def test_backend_adds_nccl_for_cuda_only():
    assert backend("cpu") == "gloo"
    assert backend("cuda") == "cpu:gloo,cuda:nccl"  # object collectives and barriers stay on gloo


# (local_rank, ranks on the node, GPUs on the node) -> the rank's device
RULE = [
    (0, 3, 3, "cuda:0"), (1, 3, 3, "cuda:1"), (2, 3, 3, "cuda:2"),   # a GPU per rank
    (2, 3, 8, "cuda:2"),                                             # more GPUs than ranks
    (0, 3, 1, "cuda:0"), (1, 3, 1, "cuda:0"), (2, 3, 1, "cuda:0"),   # the single-GPU layout
    (1, 3, 2, "cuda:0"),                                             # too few GPUs: all share cuda:0
    (0, 1, 1, "cuda:0"), (1, 2, 2, "cuda:1"),                        # nodes of 1 and 2 ranks
]


@pytest.mark.parametrize("local_rank, local_world, gpus, expected", RULE)
def test_a_rank_gets_its_own_gpu_only_when_the_node_has_one_per_rank(local_rank, local_world, gpus, expected):
    assert rank_device("cuda", local_rank, local_world, gpus) == torch.device(expected)


def test_cpu_ranks_stay_on_the_cpu_and_cuda_without_a_gpu_is_refused():
    assert rank_device("cpu", 2, 3, 8) == torch.device("cpu")
    with pytest.raises(DeviceError, match="local rank 1 sees no CUDA device"):
        rank_device("cuda", 1, 3, 0)


@pytest.mark.parametrize("gpus, direct", [
    (["a", "b", "c"], True),          # three GPUs, one node or several
    (["a", "a", "a"], False),         # one shared GPU: NCCL refuses two ranks on one GPU
    (["a", "b", "a"], False),         # one node short of GPUs makes every rank send CPU copies
    (["a", "b", None], False),        # a rank on the CPU
    ([None, None, None], False),
])
def test_handoffs_go_gpu_to_gpu_only_when_no_two_ranks_share_a_gpu(gpus, direct):
    assert direct_handoffs(gpus) is direct


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_is_refused_by_name_where_torch_sees_none():
    with pytest.raises(DeviceError, match="device cuda: torch .* sees no CUDA device"):
        require_device("cuda")

