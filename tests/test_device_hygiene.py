"""Device hygiene on a CPU-only machine: no forward path makes a tensor on the default device.

On CUDA every tensor a forward pass creates must land where its operands live: a
``torch.arange(n)`` without ``device=`` stays on the CPU and the next op that meets
the CUDA weights fails (the position-id bug, docs/benchmarks.md). CI has no GPU,
so these tests make that mistake fail on the CPU: modules and inputs are loaded on
the CPU, then each forward path runs with ``torch.set_default_device("meta")`` (the
previous default put back afterwards, also on failure). A tensor a factory call
makes without an explicit device then lands on ``meta``; one derived from existing
tensors stays where they are.

The default device alone is not enough (checked on torch 2.13): ``cpu + meta``
raises, but a CPU ``nn.Embedding`` or CPU indexing given ``meta`` indices returns
CPU garbage without a word (``emb(torch.arange(n))``, the position-id bug itself;
``x[torch.arange(k)]``), and ``torch.tensor(list)``, ``torch.randperm`` with a CPU
generator and ``torch.empty`` make ``meta`` tensors silently. So a
``TorchFunctionMode`` also records every torch call that takes or returns a
``meta`` tensor, and any record fails the test; each path's results must also
equal, bit for bit, the same call made outside the check.

What it cannot see: a CPU input the code forgets to move (inputs sit on the CPU
here: dropping ``.to(logits.device)`` from the labels in evolution.layouts.objective
passes); tensors made without torch's Python factories (safetensors loading,
``torch.from_numpy``), which ignore the default device; what is wrong on CUDA for
other reasons (``.numpy()`` of a CUDA tensor, gloo given CUDA tensors, a CPU
generator for a CUDA draw, ops without a deterministic CUDA kernel); and functions
that build their modules inside the call (``learn``, the auditor's ``full_prefix``,
the process-group arms): modules built there would land on ``meta``, so their
per-update compute (``Embed``/``Block`` via ``run_blocks``, ``train_step``) runs
here on modules loaded beforehand.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
from torch.overrides import TorchFunctionMode

import laya
from laya.training.dataset import Example
from laya.evolution.layouts import Layout, build_tail
from laya.evolution.learner import check_token_weights
from laya.evolution.parent import build_blocks, build_embed, build_decoder_head, read_parent
from laya.evolution.prefix import run_blocks
from laya.evolution.tail_training import make_optimizer, snapshot, train_step
from laya.evolution.workspace import Experiment, prepare, read_tensors
from laya.training.features import build_store
from laya.training.head_training import TrainConfig, initial_head, train_head, warm_start
from laya.artifact.weights import FrozenWeights
from laya_qual.synth import write_artifact
from laya_qual.synth.tokenizer import vocabulary_words

KINDS = ("float32", "int8", "transformer")


class MetaTensorLog(TorchFunctionMode):
    """Records every torch call that takes or returns a tensor on ``meta``."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(t.device.type == "meta" for t in _tensors((args, kwargs, out))):
            self.calls.append(getattr(func, "__qualname__", repr(func)))
        return out


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


@contextmanager
def default_device_meta():
    """Run the block with the default device on ``meta``; fail on any tensor that landed there."""
    previous = torch.get_default_device()
    log = MetaTensorLog()
    torch.set_default_device("meta")
    try:
        with log:
            yield
    finally:  # also when the block raised: the calls named here are the cause
        torch.set_default_device(None if previous.type == "cpu" else previous)
        if log.calls:
            raise AssertionError(f"tensors made on the default device (meta) reached: {sorted(set(log.calls))}")


def test_the_check_catches_a_device_less_arange():
    """The position-id bug fails loudly, though the CPU embedding alone would return garbage."""
    embedding = torch.nn.Embedding(8, 4)
    with pytest.raises(AssertionError, match="embedding"):
        with default_device_meta():
            embedding(torch.arange(3))
    assert torch.get_default_device() == torch.device("cpu")  # restored after the failure too
    with default_device_meta():
        embedding(torch.arange(3, device="cpu"))
    assert torch.get_default_device() == torch.device("cpu")


@pytest.fixture(scope="module")
def serving(tmp_path_factory):
    """Three head kinds on one base, each also standalone; loaded on the CPU."""
    root = tmp_path_factory.mktemp("hygiene")
    dirs = {kind: write_artifact(root / kind, seed=7, head_kind=kind, base_seed=1) for kind in KINDS}
    models = {kind: laya.load_artifact(d) for kind, d in dirs.items()}
    words = vocabulary_words(models["float32"].base.tokenizer)
    requests = [laya.Request("answer", " ".join(words[:5]), tuple(words[5:8])),
                laya.Request("triage", " ".join(words[8:11]), tuple(words[11:13]), state=" ".join(words[13:15]))]
    return dirs, models, requests


def outcome(prediction: laya.Prediction) -> tuple:
    return prediction.probabilities, prediction.decision


def test_serving_paths(serving):
    dirs, models, requests = serving
    expected = {(kind, i): outcome(models[kind].predict(r)) for kind in KINDS for i, r in enumerate(requests)}
    base = models["float32"].base
    ids = base.render(requests[0]).token_ids
    states = base.encode(ids)
    plain = laya.open_adapters(dirs, base=dirs["float32"])
    cached = laya.open_adapters(dirs, base=dirs["float32"], cache_bytes=1 << 20)
    with default_device_meta():
        assert torch.equal(base.encode(ids), states)
        layers = base.encode_layers(ids)
        got = {(kind, i): outcome(models[kind].predict(r)) for kind in KINDS for i, r in enumerate(requests)}
        served = [{(kind, i): outcome(adapters.predict(kind, r)) for kind in KINDS for i, r in enumerate(requests)}
                  for adapters in (plain, cached, cached)]  # the second cached round is served from the cache
        pairs = [(kind, r) for kind in KINDS for r in requests]
        batched = [outcome(p) for p in plain.predict_many(pairs)]
        packed = base.encode_packed([base.render(r).token_ids for r in requests])
    assert torch.equal(layers[-1], states) and torch.equal(packed[0], states)
    assert got == expected and all(answers == expected for answers in served)
    assert batched == [expected[kind, i] for kind in KINDS for i in range(len(requests))]
    stats = cached.cache_stats()  # a miss per distinct sequence, written and then read under the check
    assert (stats.misses, stats.hits) == (len(requests), len(KINDS) * len(requests) * 2 - len(requests))


def test_head_training_step(serving):
    dirs, models, requests = serving
    base = models["float32"].base
    examples = [Example(f"e{i}", "train", r, label=i % len(r.options), target=None) for i, r in enumerate(requests)]
    examples.append(Example("soft", "train", requests[0], label=None, target=(0.5, 0.25, 0.25)))
    rendered = [base.render(e.request) for e in examples]
    initial = initial_head(["answer", "triage"], base.hidden_size, seed=3)
    config = TrainConfig(seed=5, epochs=2, batch_size=2)
    store = build_store(base, rendered)
    head = train_head(store, examples, range(len(examples)), initial, config)
    with default_device_meta():
        store_meta = build_store(base, rendered)
        head_meta = train_head(store_meta, examples, range(len(examples)), initial, config)
        starts = [warm_start(models[kind]) for kind in ("float32", "int8")]
    assert all(torch.equal(a, b) for a, b in zip(store.markers, store_meta.markers))
    assert torch.equal(head.weight, head_meta.weight) and torch.equal(head.bias, head_meta.bias)
    assert [s.weight.device.type for s in starts] == ["cpu", "cpu"]


@pytest.mark.parametrize("layout", ["appended", "fixed-tail"])
def test_evolution_step(tmp_path, layout):
    """One owner prefix pass, the reference stream and one learner update (what both arms run per update)."""
    ws = prepare(Experiment(layout=Layout(layout), microbatches=1, updates=1), tmp_path)
    cfg, state, _ = read_parent(ws.parent_file)
    cut, mb = ws.exp.cut, ws.microbatches[0]
    embed, prefix = build_embed(cfg, state), build_blocks(cfg, state, range(cut))
    originals = build_blocks(cfg, state, range(cut, cfg.depth))
    head = build_decoder_head(cfg, read_tensors(ws.head_file)[0])
    tails = [build_tail(cfg, read_tensors(ws.tail_file)[0], ws.exp.layout.tail_blocks) for _ in range(2)]
    opts = [make_optimizer(t, ws.exp.adam) for t in tails]

    def update(tail, opt):
        with torch.no_grad():
            features = run_blocks(prefix, embed(mb.input_ids))
            reference = run_blocks(originals, features) if "reference" in ws.exp.layout.streams else None
        check_token_weights(mb.weights, 0)
        loss, grad = train_step(tail, head, opt, features, reference, mb, ws.exp.retention)
        return features, loss, grad, snapshot(tail, opt)

    expected = update(tails[0], opts[0])
    with default_device_meta():
        got = update(tails[1], opts[1])
    assert torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1]) and torch.equal(expected[2], got[2])
    assert all(torch.equal(p, got[3]["params"][n]) for n, p in expected[3]["params"].items())


def test_frozen_weights_record_versions_after_the_move():
    """Moving to the serving device makes new tensors with fresh version counters: the
    counters must be recorded after the move, or a loaded tensor already written once
    (version 1) would read as edited on any device but the CPU. ``meta`` stands in for CUDA."""
    module = torch.nn.Linear(3, 2)
    tensors = {name: t.detach().clone() for name, t in module.state_dict().items()}
    tensors["weight"].add_(0)  # version 1 before loading
    frozen = FrozenWeights(lambda: torch.nn.Linear(3, 2), tensors, owner="test", device="meta")
    assert frozen.module.weight.device.type == "meta"
    frozen.check_unmodified()
