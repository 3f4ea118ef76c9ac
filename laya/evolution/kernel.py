"""The distributed incremental kernel and distributed feature production (3 ranks, gloo).

Rank 0 and 1 own the frozen prefix (embedding + blocks [0, split) and blocks
[split, cut), plus the original tail blocks [cut, depth) for the fixed-tail
reference). Rank 2 is the learner: it holds the trainable tail and a read-only
replica of the output head. Per request the learner sends the exact padded
microbatch's token ids to rank 0; activations then travel point to point
0 -> 1 -> 2. The kernel does this on every update; production does it once per
microbatch and writes feature packets.

On CUDA each rank computes on its GPU (laya.evolution.placement). When every rank has
a GPU of its own, the hand-offs go from GPU to GPU over NCCL; when ranks share one GPU,
gloo carries CPU copies (its point-to-point ops take CPU tensors only) and the copies
are part of what the kernel pays per update. Either way every sent byte is counted.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .group import peak_rss_bytes, waiting_on
from .numerics import clock, peak_device_bytes, use_device
from .packets import expected_binding, write_packet
from .placement import handoff_device
from .parent import build_blocks, build_embed, build_decoder_head, read_parent
from .prefix import run_blocks
from .layouts import build_tail
from .tail_training import make_optimizer, snapshot, train_step
from .workspace import Workspace, read_tensors, read_tokenizer_digest

OWNER_A, OWNER_B, LEARNER = 0, 1, 2


class Wire:
    """Point-to-point sends and receives that count the bytes this rank sends.

    Built by every rank at the same point of a job (choosing where the hand-offs live is
    collective): tensors travel from `device` itself over NCCL when every rank has a GPU
    of its own, else as CPU copies over gloo.
    """

    def __init__(self, device: torch.device):
        self.sent = 0
        self.via = handoff_device(device)

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        with waiting_on(f"send to rank {dst}"):
            dist.send(tensor.to(self.via).contiguous(), dst)
        self.sent += tensor.numel() * tensor.element_size()

    def recv(self, shape, dtype, src: int) -> torch.Tensor:
        buf = torch.empty(shape, dtype=dtype, device=self.via)
        with waiting_on(f"receive from rank {src}"):
            dist.recv(buf, src)
        return buf


def _act_shape(ws: Workspace) -> tuple[int, int, int]:
    cfg = ws.exp.config
    return (ws.exp.microbatch, cfg.seq_len, cfg.width)


@torch.no_grad()
def _serve_prefix(rank: int, ws: Workspace, requests: int, wire: Wire, device: torch.device) -> list[float]:
    """Owner loop: answer `requests` prefix requests with this rank's share of the parent.
    Returns the seconds each request's compute took (waiting and sending excluded)."""
    cfg, state, _ = read_parent(ws.parent_file)
    cut, split = ws.exp.cut, ws.exp.owner_split
    if rank == OWNER_A:
        embed, blocks = build_embed(cfg, state).to(device), build_blocks(cfg, state, range(split)).to(device)
    else:
        blocks = build_blocks(cfg, state, range(split, cut)).to(device)
        originals = (build_blocks(cfg, state, range(cut, cfg.depth)).to(device)
                     if "reference" in ws.exp.layout.streams else None)
    del state
    compute = []
    for _ in range(requests):
        if rank == OWNER_A:
            ids = wire.recv((ws.exp.microbatch, cfg.seq_len), torch.int64, LEARNER).to(device)
            t0 = clock(device)
            out = run_blocks(blocks, embed(ids))
            compute.append(clock(device) - t0)
            wire.send(out, OWNER_B)
        else:
            received = wire.recv(_act_shape(ws), torch.float32, OWNER_A).to(device)
            t0 = clock(device)
            features = run_blocks(blocks, received)
            reference = run_blocks(originals, features) if originals is not None else None
            compute.append(clock(device) - t0)
            wire.send(features, LEARNER)
            if reference is not None:
                wire.send(reference, LEARNER)
    return compute


def _request(ws: Workspace, index: int, wire: Wire) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The CPU feature (and reference) stream of one microbatch, from the owners."""
    wire.send(ws.microbatches[index].input_ids, OWNER_A)
    features = wire.recv(_act_shape(ws), torch.float32, OWNER_B)
    reference = wire.recv(_act_shape(ws), torch.float32, OWNER_B) if "reference" in ws.exp.layout.streams else None
    return features, reference


def _figures(start: float, cpu_start: float, wire: Wire, device: torch.device) -> dict:
    """Wall and this process's CPU seconds since the start, bytes sent and from where, peak memory."""
    return {"seconds": clock(device) - start, "cpu_seconds": time.process_time() - cpu_start,
            "bytes_sent": wire.sent, "handoff_device": wire.via.type, "peak_rss": peak_rss_bytes(), "peak_device": peak_device_bytes(device)}


def produce(rank: int, ws: Workspace) -> dict:
    """Compute each distinct microbatch's prefix once, distributed, and write it as a packet."""
    device = use_device(ws.exp.device)
    wire = Wire(device)
    indices = sorted(set(ws.exp.schedule()))
    dist.barrier()
    start, cpu_start = clock(device), time.process_time()
    if rank != LEARNER:
        _serve_prefix(rank, ws, len(indices), wire, device)
    else:
        head, _ = read_tensors(ws.head_file)
        tokenizer = read_tokenizer_digest(ws.tokenizer_file)
        for i in indices:
            features, reference = _request(ws, i, wire)
            streams = {"features": features} | ({"reference": reference} if reference is not None else {})
            binding = expected_binding(ws, ws.microbatches[i], tokenizer_digest=tokenizer, head_state=head)
            write_packet(ws.packet(i), binding, streams)
    dist.barrier()
    return _figures(start, cpu_start, wire, device) | {"packets": len(indices)}


def run_kernel(rank: int, ws: Workspace, *, snapshots: bool = True) -> dict:
    """The incremental kernel: every update recomputes the prefix of its microbatch."""
    device = use_device(ws.exp.device)
    wire = Wire(device)
    schedule = ws.exp.schedule()
    if rank != LEARNER:
        dist.barrier()
        start, cpu_start = clock(device), time.process_time()
        compute = _serve_prefix(rank, ws, len(schedule), wire, device)
        dist.barrier()
        return _figures(start, cpu_start, wire, device) | {"compute_seconds": compute}
    cfg = ws.exp.config
    head = build_decoder_head(cfg, read_tensors(ws.head_file)[0]).to(device)
    tail = build_tail(cfg, read_tensors(ws.tail_file)[0], ws.exp.layout.tail_blocks).to(device)
    opt = make_optimizer(tail, ws.exp.adam)
    records, seconds, waits = [], [], []
    dist.barrier()
    start, cpu_start = clock(device), time.process_time()
    for update, index in enumerate(schedule):
        t0 = clock(device)
        features, reference = _request(ws, index, wire)
        waits.append(clock(device) - t0)
        loss, grad_norm = train_step(tail, head, opt, features.to(device),
                                     None if reference is None else reference.to(device),
                                     ws.microbatches[index], ws.exp.retention)
        seconds.append(clock(device) - t0)
        records.append({"update": update, "microbatch": index, "loss": loss, "grad_norm": grad_norm,
                        "certificate": None} | (snapshot(tail, opt) if snapshots else {}))
    dist.barrier()
    return _figures(start, cpu_start, wire, device) | {"update_seconds": seconds, "request_seconds": waits,
                                                       "records": records}
