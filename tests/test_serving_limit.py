"""The serving benchmark's limit (laya_qual.bench.serving_limit): the FLOPs it counts are the ones
torch's own FLOP counter sees in the plain one-sequence forward, and its GEMM rate is timed
on float32 arithmetic at one thread."""

from __future__ import annotations

import types

import pytest
import torch
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from laya.serving.encoder import EncoderConfig, TransformerLayer
from laya_qual.bench import serving_limit
from laya_qual.bench.serving_limit import NotFloat32, gemm_arms, gemm_shapes, useful_flops

CONFIG = EncoderConfig(vocab_size=50, hidden_size=24, num_hidden_layers=3, num_attention_heads=4,
                       intermediate_size=40, max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-12)


@pytest.mark.parametrize("lengths", [[1], [7], [1, 16, 33], [5, 5, 64]])
def test_useful_flops_are_what_torchs_counter_counts_in_the_one_sequence_forward(lengths):
    """Each sequence through the plain (unpacked, unpadded) layer, every layer: torch's
    FlopCounterMode counts the linear layers and attention's two matmuls, nothing else."""
    layer = TransformerLayer(CONFIG.hidden_size, CONFIG.num_attention_heads, CONFIG.intermediate_size, 1e-12)
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        for n in lengths:
            for _ in range(CONFIG.num_hidden_layers):
                layer(torch.randn(n, CONFIG.hidden_size))
    assert useful_flops(CONFIG, lengths) == counter.get_total_flops()


def test_the_gemm_arms_compute_each_shape_once_at_one_thread_and_restore_the_count():
    arms, flops = gemm_arms(CONFIG, rows=32)
    assert flops == sum(2 * 32 * d_in * d_out for d_in, d_out in gemm_shapes(CONFIG))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    try:
        for name, arm in arms.items():
            outputs = arm()
            assert [tuple(o.shape) for o in outputs] == [(32, d_out) for _, d_out in gemm_shapes(CONFIG)], name
            seen.append(torch.get_num_threads())
    finally:
        torch.set_num_threads(before)
    assert seen == [2] * len(arms) and "gemm_aten" in arms


def test_the_arms_run_on_one_thread(monkeypatch):
    threads = []

    def linear(x, w, b):
        threads.append(torch.get_num_threads())
        return F.linear(x, w, b)

    monkeypatch.setattr(serving_limit, "F", types.SimpleNamespace(linear=linear))
    arms, _ = gemm_arms(CONFIG, rows=8)
    threads.clear()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        arms["gemm_aten"]()
    finally:
        torch.set_num_threads(before)
    assert threads == [1] * len(gemm_shapes(CONFIG))


def test_a_gemm_in_bfloat16_is_refused_by_name(monkeypatch):
    """A kernel that rounds through bfloat16 would time less arithmetic than float32's."""
    def lossy(x, w, b):
        return F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).float()

    monkeypatch.setattr(serving_limit, "F", types.SimpleNamespace(linear=lossy))
    with pytest.raises(NotFloat32, match=r"gemm_aten at \(8, 24\) x \(24, 72\): relative error .* from float64"):
        gemm_arms(CONFIG, rows=8)
