"""Storage, transfer and compute accounting: what feature reuse costs and what it can save.

Storage: one stream is batches x microbatch x sequence x width x 4 bytes (FP32,
before metadata); the fixed-tail control stores two streams. Transfer: the bytes
of the hand-offs, per request and for a schedule, and which of them cross between
nodes when the owners and the learner are on different nodes. Compute: a FLOP model
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


def handoff_bytes(config: ParentConfig, layout: Layout, microbatch: int) -> dict:
    """Bytes one prefix request sends (the kernel's every update; production's every packet):
    the padded token ids learner -> owner 0 (int64), the activations owner 0 -> owner 1,
    the stream(s) owner 1 -> learner. With the owners on one node and the learner on
    another, the ids and the streams cross between nodes; the activations stay on the
    owners' node."""
    ids = microbatch * config.seq_len * 8
    activations = stream_bytes(config, microbatch)
    streams = len(layout.streams) * activations
    return {"ids": ids, "activations": activations, "streams": streams, "request": ids + activations + streams,
            "between_nodes": ids + streams}


def transfer(config: ParentConfig, layout: Layout, *, batches: int, microbatch: int, updates: int) -> dict:
    """Bytes each arm moves for `updates` updates over `batches` distinct microbatches.

    The kernel sends one request's bytes every update. The learner's arm sends them once
    per batch (production), writes each packet once to shared storage, and its learner
    reads every packet once per run (it keeps them in memory for all its updates)."""
    one = handoff_bytes(config, layout, microbatch)
    packets = projection(config, layout, batches=batches, microbatch=microbatch)["total_bytes"]
    return {"per_request": one,
            "kernel": {"sent": updates * one["request"], "between_nodes": updates * one["between_nodes"]},
            "learner": {"sent": batches * one["request"], "between_nodes": batches * one["between_nodes"],
                        "packets_written": packets, "packets_read": packets}}


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
