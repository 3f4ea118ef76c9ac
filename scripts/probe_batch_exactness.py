"""Which ways of batching the encoder's GEMMs give every sequence bitwise its B=1 result?

Batched serving may only batch if a request's probabilities stay bitwise what it gets
alone. This probe answers the question for the torch build and CPU it runs on, on
MiniLM's shapes (hidden 384, 12 attention heads of 32): for each sequence length n and
batch size B it compares every row of a batched computation with the same sequence
computed alone, with ``torch.equal``, and prints which lengths differ; then which row
counts of one GEMM change a row's bits, which is what laya's packing (whole blocks of
``laya.encoder.ROW_QUANTUM`` rows) avoids.

    .venv/bin/python scripts/probe_batch_exactness.py [--max-length 40] [--hidden 384]
"""

from __future__ import annotations

import argparse

import torch
from torch.nn import functional as F

from laya.encoder import ROW_QUANTUM


def linear_ways(weight: torch.Tensor, bias: torch.Tensor) -> dict:
    """name -> (batched computation on [B, n, in], the same computation for one [n, in] sequence)."""
    def per_sequence_gemm(x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(bias, x, weight.t().expand(x.shape[0], -1, -1))

    return {
        "F.linear folded into one [B*n] GEMM": (lambda x: F.linear(x, weight, bias), lambda s: F.linear(s, weight, bias)),
        "baddbmm, one GEMM per sequence": (per_sequence_gemm, lambda s: per_sequence_gemm(s.unsqueeze(0))[0]),
        "F.linear per sequence (no batching)": (lambda x: torch.stack([F.linear(s, weight, bias) for s in x]),
                                                lambda s: F.linear(s, weight, bias)),
    }


def differing_lengths(batched, single, make, lengths, batch_sizes) -> tuple[int, int, list[int]]:
    rows = bad = 0
    lengths_with_a_difference = set()
    for n in lengths:
        for b in batch_sizes:
            x = make(b, n)
            out = batched(x)
            for i in range(b):
                rows += 1
                if not torch.equal(single(x[i]), out[i]):
                    bad += 1
                    lengths_with_a_difference.add(n)
    return bad, rows, sorted(lengths_with_a_difference)


def rows_that_change_bits(weight: torch.Tensor, bias: torch.Tensor, max_rows: int) -> list[int]:
    """Row counts M for which F.linear over M rows gives some row other bits than the same
    row in a 1024-row call: the counts a packing must avoid."""
    x = torch.randn(1024, weight.shape[1])
    reference = F.linear(x, weight, bias)
    return [m for m in range(1, max_rows + 1) if not torch.equal(F.linear(x[:m], weight, bias), reference[:m])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--heads", type=int, default=12)
    args = parser.parse_args()
    torch.manual_seed(0)
    lengths, batch_sizes = range(1, args.max_length + 1), (2, 8, 32)
    weight, bias = torch.randn(args.hidden, args.hidden) * 0.05, torch.randn(args.hidden)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, hidden {args.hidden}, "
          f"n = 1..{args.max_length}, B in {batch_sizes}")
    with torch.inference_mode():
        for name, (batched, single) in linear_ways(weight, bias).items():
            bad, rows, where = differing_lengths(batched, single, lambda b, n: torch.randn(b, n, args.hidden),
                                                 lengths, batch_sizes)
            print(f"{name}: {bad}/{rows} rows differ; lengths with a difference: {where}")
        d = args.hidden // args.heads
        scores = lambda q: q @ q.transpose(-1, -2)  # noqa: E731 - attention scores, [.., heads, n, n]
        bad, rows, where = differing_lengths(scores, scores, lambda b, n: torch.randn(b, args.heads, n, d),
                                             lengths, batch_sizes)
        print(f"attention scores [B, heads, n, d] vs [heads, n, d]: {bad}/{rows} differ; lengths: {where}")
        changing = rows_that_change_bits(weight, bias, max_rows=700)
        print(f"F.linear row counts 1..700 whose rows differ from a 1024-row call: {changing}; "
              f"of them multiples of {ROW_QUANTUM}: {[m for m in changing if m % ROW_QUANTUM == 0]}")


if __name__ == "__main__":
    main()
