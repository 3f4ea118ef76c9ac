"""The machine's limit for the serving benchmark (scripts/bench_serving.py): the encoder
FLOPs its requests' own tokens need (no padding, no quantum rows), and the float32 GEMM
rate measured on the machine that runs it, at the encoder's shapes, one thread. Their
quotient is the time no encoder can beat on that thread without skipping arithmetic,
which laya's measured time is set against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.nn import functional as F

from laya.serving.encoder import EncoderConfig, OneDnnLinear

GEMM_ROWS = 4096  # rows of each timed GEMM: a batch of 32 requests of 128 tokens
FP32_RELATIVE_ERROR = 1e-5  # a float32 GEMM's largest error over its largest value; bfloat16 would be ~1e-3


class NotFloat32(AssertionError):
    """A timed GEMM's result is not float32 arithmetic (a faster, lossier mode would time less work)."""


def gemm_shapes(config: EncoderConfig) -> list[tuple[int, int]]:
    """(in, out) of each linear layer of one encoder layer: queries/keys/values, the
    attention output, the FFN's two."""
    h, i = config.hidden_size, config.intermediate_size
    return [(h, 3 * h), (h, h), (h, i), (i, h)]


def useful_flops(config: EncoderConfig, lengths: Sequence[int]) -> int:
    """Multiply-adds (2 FLOPs each) of the encoder's layers on the sequences' own tokens:
    every linear layer on each token, and attention's scores and weighted sum on each
    sequence's own n x n pairs. Embeddings, LayerNorm, softmax and GELU are left out: a few
    FLOPs a value, not GEMM work."""
    per_token = sum(2 * d_in * d_out for d_in, d_out in gemm_shapes(config))
    h = config.hidden_size
    return config.num_hidden_layers * sum(per_token * n + 2 * 2 * n * n * h for n in lengths)


def gemm_arms(config: EncoderConfig, rows: int = GEMM_ROWS, seed: int = 0) -> tuple[dict[str, Callable[[], object]], int]:
    """``gemm_onednn`` and ``gemm_aten``: the layer's four GEMMs (``gemm_shapes``) on
    ``rows`` rows, each through laya's oneDNN kernel and through ``F.linear``, on one
    thread whatever torch's count (restored after); and the FLOPs of one call. Refuses
    (NotFloat32) a kernel whose result is farther from float64 than float32 rounding."""
    generator = torch.Generator().manual_seed(seed)
    operands = [(torch.randn(rows, d_in, generator=generator), torch.randn(d_out, d_in, generator=generator) / d_in ** 0.5,
                 torch.randn(d_out, generator=generator)) for d_in, d_out in gemm_shapes(config)]
    kernels = {"gemm_aten": F.linear}
    if torch.backends.mkldnn.is_available():
        kernels["gemm_onednn"] = OneDnnLinear.linear
    for name, kernel in kernels.items():
        for x, w, b in operands:
            exact = x.double() @ w.double().t() + b.double()
            worst = float((kernel(x, w, b).double() - exact).abs().max() / exact.abs().max())
            if not worst <= FP32_RELATIVE_ERROR:
                raise NotFloat32(f"{name} at {tuple(x.shape)} x {tuple(w.t().shape)}: relative error {worst:.3g} "
                                 f"from float64 (> {FP32_RELATIVE_ERROR})")

    def one_thread(kernel) -> Callable[[], object]:
        def run() -> list[torch.Tensor]:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                with torch.inference_mode():
                    return [kernel(x, w, b) for x, w, b in operands]
            finally:
                torch.set_num_threads(threads)
        return run

    flops = sum(2 * rows * d_in * d_out for d_in, d_out in gemm_shapes(config))
    return {name: one_thread(kernel) for name, kernel in kernels.items()}, flops
