"""One thread's float32 GEMM rate at an encoder's linear-layer shapes, for each kernel the
packed forward can use (laya's oneDNN kernel, torch's F.linear), each checked against
float64 first (laya_qual.bench.serving_limit.gemm_arms). Kernels and row counts are timed in
interleaved rounds; prints GFLOP/s medians and the load average beside them, since the
machine may be shared.

    python scripts/gemm_rate.py [--hidden 384] [--intermediate 1536] [--rows 48,144,256,4096] [--rounds 9]
"""

from __future__ import annotations

import argparse
import os

import torch

from laya.serving.encoder import EncoderConfig
from laya_qual.bench.benchmarking import side_by_side
from laya_qual.bench.serving_limit import gemm_arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--intermediate", type=int, default=1536)
    parser.add_argument("--rows", default="48,144,256,4096", help="comma-separated row counts")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    config = EncoderConfig(vocab_size=1, hidden_size=args.hidden, num_hidden_layers=1, num_attention_heads=1,
                           intermediate_size=args.intermediate, max_position_embeddings=1, type_vocab_size=1,
                           layer_norm_eps=1e-12)
    arms, flops = {}, {}
    for rows in map(int, args.rows.split(",")):
        kernels, flops[rows] = gemm_arms(config, rows=rows)
        arms.update({(name, rows): arm for name, arm in kernels.items()})
    before = os.getloadavg()
    medians = side_by_side({f"{name}@{rows}": arm for (name, rows), arm in arms.items()}, args.rounds)
    print(f"torch {torch.__version__}; one thread, float32, the four GEMMs of one layer (hidden {args.hidden}, "
          f"intermediate {args.intermediate}) per call; {args.rounds} interleaved rounds, medians")
    print("load average before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}".format(*before, *os.getloadavg()))
    for (name, rows) in arms:
        print(f"{name:<12} {rows:>6} rows  {flops[rows] / medians[f'{name}@{rows}'] / 1e9:7.1f} GFLOP/s")


if __name__ == "__main__":
    main()
