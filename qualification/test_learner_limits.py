"""learner.experiment.limits and learner.placement: what an evolution experiment accepts, and where
its ranks compute.

Oracle: docs/evolution.md, written out as boundary examples. Layouts: `appended` cuts after
`cut` frozen blocks (0..depth, depth by default), `fixed-tail` retrains exactly the last two
blocks (so it cuts at depth - 2). Ranks: owner 0 holds blocks [0, split), owner 1 [split, cut).
Microbatches: each row right-padded, labelled with the next token, -100 past its end, weighted 0
exactly where it has no label (so a row needs 2 tokens, and fits in the sequence). GPUs: the
node's k-th rank on cuda:k when the node has a GPU per rank, else all on cuda:0; GPU-to-GPU
hand-offs only when no two ranks share a GPU; `cuda` where torch sees none refused before any
work. The device decisions are plain values (torch.device), so a CPU machine checks them all;
only the CUDA calls themselves need a GPU.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from laya.errors import DeviceError
from laya.evolution.data import pad_microbatch
from laya.evolution.layouts import Layout
from laya.evolution.numerics import use_device
from laya.evolution.parent import CONFIGS, ParentConfig
from laya.evolution.placement import backend, direct_handoffs, place, rank_device, require_device
from laya.evolution.workspace import Experiment

TINY = CONFIGS["tiny"]  # depth 4, sequence 16
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


@pytest.mark.laya_claim("learner.experiment.limits")
@pytest.mark.parametrize("layout, says", [
    (dict(name="prepended"), "unknown layout 'prepended'; expected one of ('appended', 'fixed-tail')"),
    (dict(name="fixed-tail", tail_blocks=3), "the fixed-tail control always retrains exactly the last two blocks"),
    (dict(name="fixed-tail", cut=2), "the fixed-tail control always retrains exactly the last two blocks"),
])
def test_a_layout_the_doc_does_not_define_is_refused(layout, says):
    with pytest.raises(ValueError, match=f"^{re.escape(says)}$"):
        Layout(**layout)


@pytest.mark.laya_claim("learner.experiment.limits")
@pytest.mark.parametrize("layout, config, cut", [
    (Layout("appended"), TINY, 4), (Layout("appended", cut=0), TINY, 0), (Layout("appended", cut=4), TINY, 4),
    (Layout("appended", cut=5), TINY, None), (Layout("appended", cut=-1), TINY, None),
    (Layout("fixed-tail"), TINY, 2),
    (Layout("fixed-tail"), dataclasses.replace(TINY, depth=2), 0),
    (Layout("fixed-tail"), dataclasses.replace(TINY, depth=1), None),  # no last two blocks to retrain
])
def test_the_cut_lies_in_0_to_depth(layout, config, cut):
    if cut is not None:
        assert layout.cut_layer(config) == cut
        return
    wrong = layout.cut if layout.cut is not None else config.depth - 2
    with pytest.raises(ValueError, match=rf"^cut layer {wrong} outside 0\.\.{config.depth}$"):
        layout.cut_layer(config)


@pytest.mark.laya_claim("learner.experiment.limits")
@pytest.mark.parametrize("split, accepted", [(0, True), (2, True), (4, True), (5, False), (-1, False)])
def test_the_owner_split_lies_in_0_to_cut(split, accepted):
    exp = Experiment(split=split)  # tiny, appended: cut 4
    if accepted:
        assert exp.owner_split == split
        return
    with pytest.raises(ValueError, match=rf"^owner split {split} outside 0\.\.4$"):
        exp.owner_split


@pytest.mark.laya_claim("learner.experiment.limits")
@pytest.mark.parametrize("heads, accepted", [(1, True), (4, True), (3, False), (5, False)])
def test_the_parent_width_divides_into_its_heads(heads, accepted):
    if accepted:
        assert ParentConfig(vocab=96, width=32, heads=heads, depth=4, seq_len=16).heads == heads
        return
    with pytest.raises(ValueError, match=f"^width 32 is not divisible by heads {heads}$"):
        ParentConfig(vocab=96, width=32, heads=heads, depth=4, seq_len=16)


@pytest.mark.laya_claim("learner.experiment.limits")
@pytest.mark.parametrize("tokens", [0, 1, 17, 40])
def test_a_row_with_no_label_or_past_the_sequence_is_refused(tokens):
    with pytest.raises(ValueError, match=f"^example 7 has {tokens} tokens; need 2..16$"):
        pad_microbatch((3, 7), [[5, 6, 7], list(range(10, 10 + tokens))], 16, 0, 2)


@pytest.mark.laya_claim("learner.experiment.limits")
def test_rows_of_2_and_of_the_whole_sequence_are_padded_and_labelled():
    full = list(range(20, 36))  # 16 tokens: every position but the last has a label
    mb = pad_microbatch((3, 7), [[5, 9], full], 16, 0, 2)
    assert mb.input_ids.tolist() == [[5, 9] + [0] * 14, full]
    assert mb.labels.tolist() == [[9] + [-100] * 15, full[1:] + [-100]]
    assert ((mb.weights > 0) == (mb.labels != -100)).all()


@pytest.mark.laya_claim("learner.placement")
@pytest.mark.parametrize("local_rank, local_world, gpus, expected", [
    (0, 3, 3, "cuda:0"), (2, 3, 3, "cuda:2"), (2, 3, 8, "cuda:2"),  # a GPU per rank
    (2, 3, 2, "cuda:0"), (1, 3, 1, "cuda:0"),                        # too few: all share cuda:0
    (1, 2, 2, "cuda:1"), (0, 1, 1, "cuda:0"),                        # nodes of 2 and 1 ranks
    (1, 3, 0, None),                                                 # no GPU on the node
])
def test_a_cuda_rank_gets_its_own_gpu_only_when_the_node_has_one_per_rank(local_rank, local_world, gpus, expected):
    if expected is not None:
        assert rank_device("cuda", local_rank, local_world, gpus) == torch.device(expected)
        return
    with pytest.raises(DeviceError, match="^device cuda: local rank 1 sees no CUDA device$"):
        rank_device("cuda", local_rank, local_world, gpus)


@pytest.mark.laya_claim("learner.placement")
def test_cpu_ranks_stay_on_the_cpu_over_gloo():
    assert rank_device("cpu", 2, 3, 8) == place("cpu", 2, 3) == torch.device("cpu")
    assert backend("cpu") == "gloo" and backend("cuda") == "cpu:gloo,cuda:nccl"
    require_device("cpu")  # nothing to refuse


@pytest.mark.laya_claim("learner.placement")
@pytest.mark.parametrize("gpus, direct", [
    (["a", "b", "c"], True), (["a", "a", "a"], False), (["a", "b", "a"], False), (["a", "b", None], False),
    ([None, None, None], False),
])
def test_handoffs_go_gpu_to_gpu_only_when_no_two_ranks_share_a_gpu(gpus, direct):
    assert direct_handoffs(gpus) is direct


@pytest.mark.laya_claim("learner.placement")
@NO_CUDA
@pytest.mark.parametrize("select", [require_device, use_device], ids=["require_device", "use_device"])
def test_cuda_where_torch_sees_none_is_refused_by_name(select):
    with pytest.raises(DeviceError, match=f"^device cuda: torch {re.escape(torch.__version__)} sees no CUDA device"):
        select("cuda")
