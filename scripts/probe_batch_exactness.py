"""Which ways of batching the encoder's kernels give every sequence bitwise its B=1 result?

Batched serving may only batch if a request's probabilities stay bitwise what it gets
alone. This probe answers the question for the torch build and CPU it runs on, on
MiniLM's shapes (hidden 384, 12 attention heads of 32, intermediate 1536): for each
sequence length n and batch size B it compares every row of a batched computation with
the same sequence computed alone, with ``torch.equal``, and prints which lengths differ;
then, for every linear kernel the packed forward uses (``laya.serving.encoder.OneDnnLinear``
on a CPU: the fused query/key/value projection, GELU fused, residual add fused; and
``AtenLinear``'s ``F.linear`` for other devices), which row counts change a row's bits,
which is what laya's packing (whole blocks of each kernel's ``quantum`` rows per
sequence) avoids; and whether the grouped attention (one
``scaled_dot_product_attention`` call over the sequences of one width, padded to whole
blocks of the CPU's quantum and masked) gives a sequence the same bits in a group of B
as alone.

    .venv/bin/python scripts/probe_batch_exactness.py [--max-length 40] [--hidden 384]
        [--heads 12] [--intermediate 1536] [--max-rows 700] [--quantum Q]

--quantum Q asks the same of blocks of Q rows (default: each kernel's own ``quantum``, and
the CPU's for attention): which multiples of Q change a row's bits, and whether attention over groups padded to whole
blocks of Q keeps them. A smaller quantum wastes fewer rows, but only one the probe finds
no differing row for may be used, and using it makes a new kernel identity.
"""

from __future__ import annotations

import argparse

import torch
from torch.nn import functional as F

from laya.serving.encoder import AtenLinear, OneDnnLinear, row_quantum


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


def rows_that_change_bits(kernel, d_in: int, d_out: int, max_rows: int, quantum: int) -> list[int]:
    """Row counts M for which ``kernel`` (x, layer, residual) over M rows gives some row other
    bits than the same row in an 8192-row call (32 sequences of 256 tokens): every count
    1..max_rows, then every 37th multiple of ``quantum`` up to 8192. The counts a packing
    must avoid."""
    layer = torch.nn.Linear(d_in, d_out)
    x, residual = torch.randn(8192, d_in), torch.randn(8192, d_out)
    reference = kernel(x, layer, residual)
    counts = [*range(1, max_rows + 1), *range(-(-max_rows // quantum) * quantum, 8192, 37 * quantum)]
    return [m for m in counts if not torch.equal(kernel(x[:m], layer, residual[:m]), reference[:m])]


def linear_kernels(hidden: int, intermediate: int) -> dict:
    """name -> (kernel(x, layer, residual), d_in, d_out, its quantum): each linear kernel of
    the packed forward at the shape it runs at."""
    found = {}
    for kernels in (AtenLinear, OneDnnLinear) if torch.backends.mkldnn.is_available() else (AtenLinear,):
        found[f"{kernels.__name__}.linear (q, k, v fused: {hidden}->{3 * hidden})"] = (
            lambda x, layer, _, k=kernels: k.linear(x, layer.weight, layer.bias), hidden, 3 * hidden, kernels.quantum)
        found[f"{kernels.__name__}.linear_gelu ({hidden}->{intermediate})"] = (
            lambda x, layer, _, k=kernels: k.linear_gelu(x, layer.weight, layer.bias), hidden, intermediate,
            kernels.quantum)
        for d_in in (hidden, intermediate):  # the attention output, the FFN output
            found[f"{kernels.__name__}.linear_add ({d_in}->{hidden}, + residual)"] = (
                lambda x, layer, residual, k=kernels: k.linear_add(x, layer.weight, layer.bias, residual), d_in, hidden,
                kernels.quantum)
    return found


def grouped_attention_differences(lengths, batch_sizes, heads: int, d: int,
                                  quantum: int) -> tuple[int, int, list[int]]:
    """Rows of a sequence attended in a group of B (padded and masked to its width, as
    laya.serving.encoder.SelfAttention.packed does) that differ from the sequence attended alone."""
    def attend(group: list[torch.Tensor], width: int) -> torch.Tensor:
        q = torch.zeros(len(group), width, heads * d)
        mask = torch.zeros(len(group), 1, 1, width, dtype=torch.bool)
        for i, s in enumerate(group):
            q[i, :len(s)] = s
            mask[i, ..., :len(s)] = True
        q = q.view(len(group), width, heads, d).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q * 0.5, q * 2.0, attn_mask=mask).transpose(1, 2)

    rows = bad = 0
    where = set()
    for n in lengths:
        width = -(-n // quantum) * quantum
        for b in batch_sizes:
            group = [torch.randn(torch.randint(max(1, width - quantum + 1), width + 1, ()).item(), heads * d)
                     for _ in range(b - 1)] + [torch.randn(n, heads * d)]
            together = attend(group, width)[-1, :n]
            rows += n
            differing = int((together != attend(group[-1:], width)[0, :n]).any(dim=(1, 2)).sum())
            bad += differing
            if differing:
                where.add(n)
    return bad, rows, sorted(where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--intermediate", type=int, default=1536)
    parser.add_argument("--max-rows", type=int, default=700)
    parser.add_argument("--quantum", type=int, help="the row block to probe (default: each kernel's own)")
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
        quantum = args.quantum or row_quantum("cpu")
        bad, rows, where = grouped_attention_differences(lengths, batch_sizes, args.heads, d, quantum)
        print(f"grouped attention (sdpa, {quantum}-key blocks, masked) in a group of B vs alone: "
              f"{bad}/{rows} rows differ; lengths: {where}")
        for name, (kernel, d_in, d_out, own) in linear_kernels(args.hidden, args.intermediate).items():
            quantum = args.quantum or own
            changing = rows_that_change_bits(kernel, d_in, d_out, args.max_rows, quantum)
            print(f"{name}: row counts (1..{args.max_rows}, then every {37 * quantum}th to 8192) whose rows differ "
                  f"from an 8192-row call: {changing}; "
                  f"of them multiples of {quantum}: {[m for m in changing if m % quantum == 0]}")


if __name__ == "__main__":
    main()
