"""Accounting: `laya evolve plan` against the documented byte formulas, a real packet and a real
distributed run's sends; the FLOP model.

One stream of one packet holds microbatch x sequence x width float32 values; a
schedule stores batches of them per stream; the fixed-tail control stores two
streams (features and reference), the appended layout one; the read-only head
replica is the tied matrix plus the final norm's weight and bias, in float32. One
prefix request sends the int64 token ids, the activations between the owners and the
stream(s) to the learner. The FLOP model counts one update per token as docs/evolution.md states it.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st
from safetensors.torch import load_file

from laya.evolution.accounting import flop_model, projection
from laya.evolution.cli import evolve
from laya.evolution.layouts import Layout
from laya.evolution.packets import expected_binding, write_packet
from laya.evolution.parent import CONFIGS
from laya.evolution.prefix import full_prefix
from laya.evolution.workspace import Experiment, prepare, read_tokenizer_digest

STREAMS = {"appended": 1, "fixed-tail": 2}


class Shape(NamedTuple):
    """A named parent shape as docs/evolution.md's table states it ("Storage")."""

    vocab: int
    width: int
    heads: int
    depth: int
    seq_len: int
    mlp_ratio: int = 4


SHAPES = {"tiny": Shape(96, 32, 2, 4, 16), "seed-small": Shape(9496, 128, 1, 28, 64),
          "seed-cpu": Shape(18992, 256, 2, 28, 128), "parent-1.7b": Shape(151936, 2048, 16, 28, 1024)}
LINE = re.compile(r"^(?P<layout>[a-z-]+): (?P<n>\d+) stream\(s\) \S+; per packet (?P<per>\d+) bytes/stream, "
                  r"(?P<packet>\d+) bytes\n  (?P<b>\d+) batches x (?P<m>\d+) x (?P<s>\d+) x (?P<w>\d+) x 4 = "
                  r"(?P<stream>[\d.]+) GB per stream; total (?P<total>[\d.]+) GB before metadata; "
                  r"read-only head replica (?P<head>[\d.]+) GB$", re.M)


TRANSFER = re.compile(r"  per request: ids (?P<ids>\d+) \+ activations (?P<activations>\d+) \+ streams "
                      r"(?P<streams>\d+) = (?P<request>\d+) bytes sent, (?P<between>\d+) between nodes "
                      r"\(owners \| learner\)\n  (?P<updates>\d+) updates: kernel sends (?P<kernel>\d+) bytes "
                      r"\([\d.]+ GB\), (?P<kernel_between>\d+) between nodes; learner's arm: production sends "
                      r"(?P<production>\d+) bytes \([\d.]+ GB\), (?P<production_between>\d+) between nodes, "
                      r"packets written once and read once by the learner: (?P<packets>\d+) bytes each way\n")


def _plan(config: str, batches: int, microbatch: int, updates: int | None = None) -> dict[str, dict]:
    """Per layout: the storage figures and, from the lines right after them, the transfer figures."""
    args = ["plan", "--config", config, "--batches", str(batches), "--microbatch", str(microbatch)]
    out = CliRunner().invoke(evolve, args + ([] if updates is None else ["--updates", str(updates)]))
    assert out.exit_code == 0, out.output
    printed = {}
    for m in LINE.finditer(out.output):
        moved = TRANSFER.match(out.output, m.end() + 1)
        assert moved, out.output[m.end():]
        printed[m["layout"]] = m.groupdict() | {k: int(v) for k, v in moved.groupdict().items()}
    return printed


@pytest.mark.laya_claim("learner.plan.storage")
@given(config=st.sampled_from(sorted(SHAPES)), batches=st.integers(1, 4096), microbatch=st.integers(1, 64))
@example(config="parent-1.7b", batches=128, microbatch=8)
def test_plan_prints_the_documented_bytes(config, batches, microbatch):
    cfg = SHAPES[config]
    printed = _plan(config, batches, microbatch)
    assert sorted(printed) == sorted(STREAMS)
    per_stream = microbatch * cfg.seq_len * cfg.width * 4
    head = 4 * (cfg.vocab * cfg.width + 2 * cfg.width)
    for layout, streams in STREAMS.items():
        p = printed[layout]
        assert (int(p["n"]), int(p["per"]), int(p["packet"])) == (streams, per_stream, streams * per_stream), p
        assert (int(p["b"]), int(p["m"]), int(p["s"]), int(p["w"])) == (batches, microbatch, cfg.seq_len, cfg.width)
        for key, expected in (("stream", batches * per_stream), ("total", streams * batches * per_stream),
                              ("head", head)):
            assert abs(float(p[key]) - expected / 1e9) <= 0.005, (layout, key, p[key], expected)
        # the unrounded figures
        exact = projection(CONFIGS[config], Layout(layout), batches=batches, microbatch=microbatch)
        assert {k: exact[k] for k in ("packet_stream_bytes", "packet_bytes", "stream_bytes", "total_bytes",
                                      "head_replica_bytes")} == {
            "packet_stream_bytes": per_stream, "packet_bytes": streams * per_stream,
            "stream_bytes": batches * per_stream, "total_bytes": streams * batches * per_stream,
            "head_replica_bytes": head}, exact
        # and the shape they come from, as bench figures (packet_storage) carry it
        assert {k: exact[k] for k in ("batches", "microbatch", "seq_len", "width")} == {
            "batches": batches, "microbatch": microbatch, "seq_len": cfg.seq_len, "width": cfg.width}, exact


@pytest.mark.laya_claim("learner.plan.storage")
def test_the_named_shapes_are_the_documented_ones():
    """Every name --config offers has the documented shape, field by field (heads only shows in a run)."""
    assert {name: Shape(c.vocab, c.width, c.heads, c.depth, c.seq_len, c.mlp_ratio)
            for name, c in CONFIGS.items()} == SHAPES


# docs/evolution.md, "Storage": the predecessor design's 13.82 GB for one FP32 stream of its
# 128-batch schedule is, at width 2048, 13,180 positions per batch; parent-1.7b is width 2048, sequence 1024.
PREDECESSOR_GB, PREDECESSOR_POSITIONS, WIDTH, SEQUENCE = 13.82, 13180, 2048, 1024


@pytest.mark.laya_claim("learner.plan.storage")
@pytest.mark.parametrize("args, microbatch", [([], 8), (["--microbatch", "3", "--updates", "7"], 3)])
def test_plan_sets_the_predecessors_stream_beside_its_own(args, microbatch):
    """Only for parent-1.7b over 128 batches (the defaults), the last line compares the predecessor
    design's stream with this projection's, in positions per batch."""
    assert round(PREDECESSOR_GB * 1e9 / (128 * WIDTH * 4)) == PREDECESSOR_POSITIONS  # the doc's own arithmetic
    out = CliRunner().invoke(evolve, ["plan", *args])
    assert out.exit_code == 0, out.output
    ours = 128 * microbatch * SEQUENCE * WIDTH * 4 / 1e9
    assert out.output.splitlines()[-1] == (
        f"seed: one FP32 stream for the 128-batch schedule occupies {PREDECESSOR_GB} GB; this projection: "
        f"{ours:.2f} GB ({microbatch} x {SEQUENCE} positions per batch); the seed's figure corresponds to "
        f"{PREDECESSOR_POSITIONS} positions per batch at width {WIDTH}")
    for other in (["--batches", "127"], ["--config", "seed-small"], ["--config", "tiny", "--batches", "128"]):
        out = CliRunner().invoke(evolve, ["plan", *other])
        assert out.exit_code == 0 and "seed: " not in out.output, (other, out.output)


@pytest.mark.laya_claim("learner.plan.storage")
@pytest.mark.parametrize("layout", sorted(STREAMS))
def test_a_written_packet_holds_the_planned_bytes(tmp_path_factory, layout):
    """The tensor bytes of a packet the runtime writes equal the plan's per-packet figure, and its
    binding.json lists each stored stream's shape and dtype (docs/evolution.md)."""
    exp = Experiment(layout=Layout(layout), microbatch=3, microbatches=1, updates=1)
    ws = prepare(exp, Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())))
    mb = ws.microbatches[0]
    streams = full_prefix(exp.config, load_file(ws.parent_file), exp.cut, mb.input_ids, layout == "fixed-tail")
    write_packet(ws.packet(0), expected_binding(ws, mb, tokenizer_digest=read_tokenizer_digest(ws.tokenizer_file),
                                                head_state=load_file(ws.head_file)), streams)
    stored = load_file(ws.packet(0) / "features.safetensors")
    listed = json.loads((ws.packet(0) / "binding.json").read_text())["streams"]
    assert listed == {k: {"shape": list(t.shape), "dtype": str(t.dtype)} for k, t in stored.items()}, listed
    payload = sum(t.numel() * t.element_size() for t in stored.values())
    cfg = exp.config
    assert payload == STREAMS[layout] * 3 * cfg.seq_len * cfg.width * 4
    assert int(_plan("tiny", 1, 3)[layout]["packet"]) == payload


@pytest.mark.laya_claim("learner.plan.flops")
@given(config=st.sampled_from(sorted(SHAPES)), data=st.data())
def test_flop_model_counts_the_documented_work(config, data):
    cfg = SHAPES[config]
    if data.draw(st.sampled_from(sorted(STREAMS))) == "appended":
        layout = Layout("appended", tail_blocks=data.draw(st.integers(1, 4)), cut=data.draw(st.integers(0, cfg.depth)))
    else:
        layout = Layout("fixed-tail")
    d, m, n = cfg.width, cfg.mlp_ratio * cfg.width, cfg.seq_len
    block = 2 * (3 * d * d + d * d + d * m + m * d) + 2 * (n * d + n * d)  # matmuls; scores and weighted sum
    head = 2 * d * cfg.vocab
    cut = cfg.depth - 2 if layout.name == "fixed-tail" else layout.cut
    learner = 3 * layout.tail_blocks * block + 2 * head
    kernel = cut * block + (2 * block if layout.name == "fixed-tail" else 0) + learner
    model = flop_model(CONFIGS[config], layout)
    assert (model["kernel_flops_per_token"], model["learner_flops_per_token"]) == (kernel, learner)
    assert model["limit"] == pytest.approx(kernel / learner, rel=1e-12)


def _transfer(cfg, streams: int, batches: int, microbatch: int, updates: int) -> dict:
    """The documented hand-off bytes: int64 ids to owner 0, float32 activations to owner 1, the stream(s)
    to the learner; between nodes (owners | learner) the ids and the streams."""
    ids, activations = microbatch * cfg.seq_len * 8, microbatch * cfg.seq_len * cfg.width * 4
    request, between = ids + activations + streams * activations, ids + streams * activations
    return {"ids": ids, "activations": activations, "streams": streams * activations, "request": request,
            "between": between, "updates": updates, "kernel": updates * request, "kernel_between": updates * between,
            "production": batches * request, "production_between": batches * between,
            "packets": streams * batches * activations}


@pytest.mark.laya_claim("learner.plan.transfer")
@given(config=st.sampled_from(sorted(SHAPES)), batches=st.integers(1, 4096), microbatch=st.integers(1, 64),
       updates=st.integers(1, 100_000))
@example(config="parent-1.7b", batches=128, microbatch=8, updates=128)
@example(config="tiny", batches=4, microbatch=2, updates=8)
def test_plan_prints_the_documented_transfer(config, batches, microbatch, updates):
    printed = _plan(config, batches, microbatch, updates)
    for layout, streams in STREAMS.items():
        expected = _transfer(SHAPES[config], streams, batches, microbatch, updates)
        assert {k: printed[layout][k] for k in expected} == expected, layout


def _run_kernel(rank, ws):
    from laya.evolution.kernel import run_kernel

    return run_kernel(rank, ws, snapshots=False)


@pytest.mark.laya_claim("learner.plan.transfer")
@pytest.mark.parametrize("layout", sorted(STREAMS))
def test_a_distributed_run_sends_the_planned_bytes(evolution_group, evolution_workspaces, layout):
    """Each rank's counted sends in real production and kernel runs, against the plan's split:
    owner 0 sends the activations, owner 1 the stream(s), the learner rank the ids."""
    from laya.evolution.kernel import produce

    exp = Experiment(layout=Layout(layout))
    ws = evolution_workspaces.fresh(exp)
    batches = len(set(exp.schedule()))
    plan = _plan("tiny", batches, exp.microbatch, exp.updates)[layout]
    for job, requests, total in ((produce, batches, plan["production"]), (_run_kernel, exp.updates, plan["kernel"])):
        sent = [figures["bytes_sent"] for figures in evolution_group.run(job, ws)]
        assert sent == [requests * plan["activations"], requests * plan["streams"], requests * plan["ids"]], job
        assert sum(sent) == total and sent[1] + sent[2] == requests * plan["between"]  # what crosses nodes


@pytest.mark.laya_claim("learner.plan.storage")
@pytest.mark.parametrize("option", ["--batches", "--microbatch", "--updates"])
def test_a_count_below_one_is_a_usage_error_naming_the_option(option):
    done = CliRunner().invoke(evolve, ["plan", "--config", "tiny", option, "0"])
    assert done.exit_code == 2 and f"Invalid value for '{option}': 0 is not in the range x>=1" in done.output
    assert "bytes" not in done.output  # nothing projected
    assert CliRunner().invoke(evolve, ["plan", "--config", "tiny", option, "1"]).exit_code == 0
