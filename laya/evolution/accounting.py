"""Storage and compute accounting: what feature reuse costs on disk and what it can save.

Storage: one stream is batches x microbatch x sequence x width x 4 bytes (FP32,
before metadata); the fixed-tail control stores two streams. Compute: a FLOP model
of one update in each arm; its ratio is the most the learner can gain from not
recomputing the prefix (transfer and pipeline waits are not in it).
"""

from __future__ import annotations

from .layouts import Layout
from .parent import ParentConfig

PREDECESSOR_STREAM_GB = 13.82  # the predecessor design: one FP32 stream for the existing 128-batch schedule


def stream_bytes(config: ParentConfig, microbatch: int) -> int:
    """Bytes of one stream of one packet (one microbatch)."""
    return microbatch * config.seq_len * config.width * 4


def projection(config: ParentConfig, layout: Layout, *, batches: int, microbatch: int) -> dict:
    per_stream = batches * stream_bytes(config, microbatch)
    streams = len(layout.streams)
    return {"batches": batches, "microbatch": microbatch, "seq_len": config.seq_len, "width": config.width,
            "streams": list(layout.streams), "packet_stream_bytes": stream_bytes(config, microbatch),
            "packet_bytes": streams * stream_bytes(config, microbatch), "stream_bytes": per_stream,
            "total_bytes": streams * per_stream,
            "head_replica_bytes": 4 * config.head_params()}


def _block_flops(config: ParentConfig) -> int:
    """Forward FLOPs of one block per token: matmuls plus full (unmasked) attention."""
    d, m, n = config.width, config.mlp_ratio * config.width, config.seq_len
    return 2 * (3 * d * d + d * d + 2 * d * m) + 2 * 2 * n * d


def flop_model(config: ParentConfig, layout: Layout) -> dict:
    """FLOPs per token of one update in each arm, and their ratio (the speedup limit)."""
    block, head = _block_flops(config), 2 * config.width * config.vocab
    cut = layout.cut_layer(config)
    reference = (config.depth - cut) * block if "reference" in layout.streams else 0
    learner = 3 * layout.tail_blocks * block + 2 * head  # tail fwd+bwd; head fwd + input-grad bwd
    kernel = cut * block + reference + learner
    return {"kernel_flops_per_token": kernel, "learner_flops_per_token": learner, "limit": kernel / learner}
