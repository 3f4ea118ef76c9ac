"""The feature learner: trains the tail in one process from reloaded feature packets.

It never calls an owner. Every packet is reloaded and checked against what this
learner expects (its committed parent digest, its tokenizer, its head replica, its
own numeric profile, the exact microbatch, labels and weights) before it is used.
"""

from __future__ import annotations

import time

import torch

from laya.errors import FeaturePacketError, LayaError

from .audit import check_certificate
from .group import peak_rss_bytes
from .layouts import build_tail
from .numerics import clock, peak_device_bytes, use_device
from .packets import expected_binding, read_packet
from .parent import build_decoder_head
from .tail_training import make_optimizer, snapshot, train_step
from .workspace import Workspace, read_tensors, read_tokenizer_digest


def sizes(ws: Workspace) -> dict:
    """Parameter bytes of the learner (tail + read-only head) and of the whole parent."""
    cfg = ws.exp.config
    learner = 4 * (ws.exp.layout.tail_blocks * cfg.block_params() + cfg.head_params())
    return {"learner_bytes": learner, "parent_bytes": 4 * cfg.total_params()}


def check_token_weights(weights: torch.Tensor, index: int) -> None:
    """Refuse weights that define no objective: Σ w·CE / Σ w needs finite weights >= 0, not all 0."""
    if not bool(torch.isfinite(weights).all() and (weights >= 0).all()):
        raise FeaturePacketError(f"microbatch {index}: token weights must be finite and >= 0",
                                 field="objective_weights")
    if not bool((weights > 0).any()):
        raise FeaturePacketError(f"microbatch {index}: every token weight is 0, so the weighted loss "
                                 "(Σ w·CE / Σ w) is 0/0", field="objective_weights")


def load_packets(ws: Workspace, head_state: dict, *, require_certificate: bool) -> dict:
    """Reload and verify every packet the schedule uses; returns {index: (streams, certificate digest)}."""
    tokenizer = read_tokenizer_digest(ws.tokenizer_file)
    loaded = {}
    for i in sorted(set(ws.exp.schedule())):
        mb = ws.microbatches[i]
        check_token_weights(mb.weights, i)
        expected = expected_binding(ws, mb, tokenizer_digest=tokenizer, head_state=head_state)
        streams, binding = read_packet(ws.packet(i), expected, ws.exp.layout.streams)
        cert = check_certificate(ws.packet(i), binding, mb.input_digest()) if require_certificate else None
        loaded[i] = (streams, cert)
    return loaded


def learn(rank: int, ws: Workspace, *, require_certificate: bool = False, snapshots: bool = True) -> dict:
    """Train the tail from reloaded packets on the experiment's device; per-update records and figures."""
    cfg, device = ws.exp.config, use_device(ws.exp.device)
    size = sizes(ws)
    if size["learner_bytes"] >= size["parent_bytes"]:
        raise LayaError(f"learner ({size['learner_bytes']} bytes) is not smaller than the parent "
                        f"({size['parent_bytes']} bytes)")
    head_state = read_tensors(ws.head_file)[0]
    head = build_decoder_head(cfg, head_state).to(device)
    tail = build_tail(cfg, read_tensors(ws.tail_file)[0], ws.exp.layout.tail_blocks).to(device)
    opt = make_optimizer(tail, ws.exp.adam)
    t0 = clock(device)
    packets = {i: ({k: v.to(device) for k, v in streams.items()}, cert)
               for i, (streams, cert) in load_packets(ws, head_state, require_certificate=require_certificate).items()}
    load_seconds = clock(device) - t0
    records, seconds = [], []
    cpu_start = time.process_time()
    for update, index in enumerate(ws.exp.schedule()):
        streams, cert = packets[index]
        t0 = clock(device)
        loss, grad_norm = train_step(tail, head, opt, streams["features"], streams.get("reference"),
                                     ws.microbatches[index], ws.exp.retention)
        seconds.append(clock(device) - t0)
        records.append({"update": update, "microbatch": index, "loss": loss, "grad_norm": grad_norm,
                        "certificate": cert} | (snapshot(tail, opt) if snapshots else {}))
    return {"load_seconds": load_seconds, "update_seconds": seconds, "cpu_seconds": time.process_time() - cpu_start,
            "peak_rss": peak_rss_bytes(),
            "peak_device": peak_device_bytes(device), "records": records} | size
