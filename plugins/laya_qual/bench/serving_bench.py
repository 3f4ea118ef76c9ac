"""The serving benchmarks' arms, implemented once for the suite's ``bench.*`` claims
(qualification/test_bench_serving.py) and for scripts/bench_serving.py.

Each builder loads what its arms need through laya's public API, checks that the
arms compute the same thing (timing arms that disagree measures nothing), and
returns them as named calls for ``benchmarking.side_by_side``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

import laya
from laya.serving.encoder import Encoder, row_quantum
from laya.errors import LayaError
from laya_qual.bench.benchmarking import unique_tensor_bytes
from laya_qual.synth.tokenizer import vocabulary_words

Call = Callable[[], object]
Directory = str | os.PathLike
CACHE_BYTES = 1 << 26  # holds every request the benchmarks send
STATES_TOLERANCE = 1e-4  # float32 kernels (sdpa, padded batches) vs laya's: rounding, not another computation
ONNX_PACKAGES = ("onnxruntime", "onnx", "onnxscript")  # the runtime and what torch.onnx.export(dynamo=True) needs


class ArmsDisagree(AssertionError):
    """Two arms of one benchmark compute different results."""


def load_base(directory: Directory, device: str = "cpu") -> laya.VerifiedBase:
    return laya.load_artifact_base(directory, options=laya.BaseOptions(device=device))


def cache_arms(head_dir: Directory, request: laya.Request,
               device: str = "cpu") -> tuple[dict[str, Call], laya.Adapters]:
    """``miss``: Adapters.predict without a cache; ``hit``: with a cache warmed by the
    agreement check. Also the warm adapters, whose cache stats show the hit arm hit."""
    cold = laya.open_adapters({"h": head_dir}, base=load_base(head_dir, device))
    warm = laya.open_adapters({"h": head_dir}, base=load_base(head_dir, device), cache_bytes=CACHE_BYTES)
    if warm.predict("h", request).probabilities != cold.predict("h", request).probabilities:
        raise ArmsDisagree("a cache hit and a cache miss predict differently")
    return {"miss": lambda: cold.predict("h", request), "hit": lambda: warm.predict("h", request)}, warm


def overhead_arms(head_dir: Directory, request: laya.Request, device: str = "cpu") -> tuple[dict[str, Call], int]:
    """``laya``: Adapters.predict without a cache; ``bare``: the same encoder and float32
    readout as a bare torch forward, built from an independent copy of the weights.
    Bitwise equal. Also the number of tokens the request renders to."""
    adapters = laya.open_adapters({"h": head_dir}, base=load_base(head_dir, device))
    head = adapters.heads["h"]
    task, rendered = head.prepare(request)
    encoder = laya.load_artifact(head_dir).base  # an independent copy of the same weights
    weight, bias = head.weight_tensors()["readout.weight"], head.weight_tensors()["readout.bias"]
    sep = rendered.token_ids.index(adapters.base.special.sep)
    ids = torch.tensor(rendered.token_ids, device=device)
    types = torch.tensor([0 if i <= sep else 1 for i in range(len(ids))], device=device)
    markers = list(rendered.marker_positions)
    module = Encoder(encoder.config)
    module.load_state_dict(encoder.weight_tensors())
    module.to(device)

    def bare() -> torch.Tensor:
        with torch.inference_mode():
            states = module(ids, types, [len(ids)])
            return torch.softmax((states[markers] @ weight[task.index] + bias[task.index]) / task.temperature, 0)

    if not torch.equal(bare().cpu(), torch.tensor(adapters.predict("h", request).probabilities)):
        raise ArmsDisagree("Adapters.predict and the bare torch forward differ")
    return {"laya": lambda: adapters.predict("h", request), "bare": bare}, len(ids)


def head_arms(dirs: Mapping[str, Directory], request: laya.Request, device: str = "cpu") -> dict[str, Call]:
    """Adapters.predict through each named head, all on the first head's base with a
    warm cache, so the arms differ only in the head's own cost."""
    adapters = laya.open_adapters(dirs, base=load_base(next(iter(dirs.values())), device), cache_bytes=CACHE_BYTES)
    adapters.predict(next(iter(dirs)), request)  # every arm reuses these encoder states
    return {name: (lambda n=name: adapters.predict(n, request)) for name in dirs}


def load_heads(how: str, dirs: Mapping[str, Directory]) -> list[laya.Head]:
    """The heads ``shared`` on the first one's base, or ``standalone`` (a base each)."""
    if how == "shared":
        return list(laya.open_adapters(dirs, base=next(iter(dirs.values()))).heads.values())
    if how == "standalone":
        return [laya.load_artifact(d) for d in dirs.values()]
    raise ValueError(f"load_heads: {how!r} is neither 'shared' nor 'standalone'")


def weight_bytes(heads: list[laya.Head]) -> int:
    """Distinct weight bytes the heads and their bases hold (a shared base counts once)."""
    return unique_tensor_bytes([t for h in heads for t in (*h.base.weight_tensors().values(),
                                                           *h.weight_tensors().values())])


@dataclass(frozen=True)
class BatchWorkload:
    """The fixed request set the batch arms serve: (adapter id, request) items, each one's
    rendered token ids, and the batch size (the last batch may be shorter)."""
    items: list[tuple[str, laya.Request]]
    token_ids: list[tuple[int, ...]]
    batch_size: int

    def batches(self) -> list[slice]:
        return [slice(i, i + self.batch_size) for i in range(0, len(self.items), self.batch_size)]

    def arrival_batches(self) -> list[list[int]]:
        """Item indices, batch by batch, in arrival order (``batches``)."""
        return [list(range(len(self.items)))[part] for part in self.batches()]

    def sorted_batches(self) -> list[list[int]]:
        """Item indices as sentence-transformers batches them: longest first (ties in arrival
        order), then cut into batches of ``batch_size``, so a batch pads to little."""
        order = sorted(range(len(self.items)), key=lambda i: -len(self.token_ids[i]))
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def rows(self) -> dict[str, int]:
        """Rows one pass computes: the requests' tokens; laya's packed rows (each request
        rounded up to whole blocks of the CPU's row quantum); a padded peer's (each batch's count
        times its longest) in arrival and in sorted order."""
        def padded(batches: list[list[int]]) -> int:
            return sum(len(b) * max(len(self.token_ids[i]) for i in b) for b in batches)

        quantum = row_quantum("cpu")

        return {"tokens": sum(map(len, self.token_ids)),
                "laya_packed": sum(-(-len(ids) // quantum) * quantum for ids in self.token_ids),
                "padded_arrival": padded(self.arrival_batches()), "padded_sorted": padded(self.sorted_batches())}


MIXES = {"short": (1, 64), "long": (64, 216)}  # drawn rendered lengths: means of about 33 and 140 tokens


def mixed_length_items(heads: Mapping[str, laya.Head], count: int, seed: int,
                       targets: tuple[int, int] | None = None) -> list[tuple[str, laya.Request]]:
    """``count`` valid items drawn from ``seed`` alone: a head each, in turn drawn at random
    (so heads mix within every batch), a task, 2..max options of 1-3 words and a question
    grown to a target length drawn uniformly from ``targets`` (low, high; by default 1 to the
    head's sequence budget), so the rendered lengths spread from the shortest request (or
    ``low``) to the budget (or ``high``). Refuses (ValueError) a ``high`` over a head's budget."""
    budgets = {name: head.config.sequence_budget for name, head in heads.items()}
    if targets is not None and not 1 <= targets[0] <= targets[1] <= min(budgets.values()):
        raise ValueError(f"mixed_length_items: targets {targets} must be 1 <= low <= high <= the heads' smallest "
                         f"sequence budget ({min(budgets.values())})")
    rng = random.Random(seed)
    names = sorted(heads)
    tokenizer = heads[names[0]].base.tokenizer  # every head is on one base
    words = [w for w in vocabulary_words(tokenizer) if w.isascii()] or list("abcdefgh")
    items = []
    for _ in range(count):
        name = rng.choice(names)
        head = heads[name]
        task = rng.choice(sorted(head.tasks))
        options = tuple(" ".join(rng.choices(words, k=rng.randint(1, 3)))
                        for _ in range(rng.randint(2, head.tasks[task].max_options)))
        filler = rng.choices(words, k=head.config.sequence_budget)
        target = rng.randint(*(targets or (1, budgets[name])))

        def request(k: int) -> laya.Request:
            return laya.Request(task, " ".join(filler[:k]), options)

        low, high = 1, len(filler)  # the most question words whose rendering fits the target
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if len(head.base.render(request(mid)).token_ids) <= target else (low, mid - 1)
        head.prepare(request(low))  # refuses (LayaError) an item that would not be served
        items.append((name, request(low)))
    return items


def batch_arms(dirs: Mapping[str, Directory], *, base_dir: Directory | None = None, requests: int = 256,
               batch_size: int = 32, seed: int = 0, device: str = "cpu",
               targets: tuple[int, int] | None = None) -> tuple[dict[str, Call], BatchWorkload]:
    """``one_by_one``: Adapters.predict per item; ``batched``: Adapters.predict_many per batch
    of ``batch_size`` items in arrival order; ``transformers`` (where it is installed):
    BertModel (float32, sdpa) on the same base encoding the same token ids in the same
    batches, each padded to its longest sequence; ``onnxruntime`` (where it and the exporter
    are installed, the ``onnx`` extra): that BertModel exported with
    ``torch.onnx.export(dynamo=True)`` and run by ONNX Runtime on the same padded batches;
    ``transformers_sorted`` and ``onnxruntime_sorted``: each peer batching as
    sentence-transformers does (``BatchWorkload.sorted_batches``), every item's states put
    back in request order. Each peer arm returns every item's states, in request order. The
    items' rendered lengths are drawn from ``targets`` (``mixed_length_items``; ``MIXES``).
    All on the heads ``dirs`` (one base), no cache anywhere (a hit would time the cache);
    every arm uses torch's intra-op thread count. Refuses (ArmsDisagree) any batched
    prediction not bitwise the one-by-one one, and a peer arm whose states for the first
    arrival batch's items are not laya's within float32 error."""
    if requests < 1 or batch_size < 1:
        raise ValueError(f"batch_arms: requests ({requests}) and batch_size ({batch_size}) must be at least 1")
    first = next(iter(dirs.values()))
    base = laya.load_artifact_base(first, base_dir, options=laya.BaseOptions(device=device))
    adapters = laya.open_adapters(dirs, base=base)
    items = mixed_length_items(adapters.heads, requests, seed, targets)
    work = BatchWorkload(items, [base.render(r).token_ids for _, r in items], batch_size)

    def one_by_one() -> list[laya.Prediction]:
        return [adapters.predict(a, r) for a, r in items]

    def batched() -> list[laya.Prediction]:
        return [_served(p) for part in work.batches() for p in adapters.predict_many(items[part])]

    alone, together = one_by_one(), batched()
    if len(together) != len(alone):
        raise ArmsDisagree(f"predict_many gave {len(together)} predictions for {len(alone)} items")
    for i, (a, b) in enumerate(zip(alone, together)):
        if _bits(a) != _bits(b):
            raise ArmsDisagree(f"item {i} ({len(work.token_ids[i])} tokens, batch {i // batch_size}): predict_many "
                               f"gave {b}, predict gave {a}")
    arms: dict[str, Call] = {"one_by_one": one_by_one, "batched": batched}
    missing = missing_peers(device)
    if "transformers" not in missing:
        arms.update(peer_arms("transformers", _transformers_encoder(base, work, device), base, work))
    if "onnxruntime" not in missing:
        arms.update(peer_arms("onnxruntime", _onnxruntime_encoder(base, work), base, work))
    return arms, work


def missing_peers(device: str) -> dict[str, str]:
    """Each peer arm ``batch_arms`` leaves out on ``device``, with the reason: its figures are
    "not measured", never passed."""
    missing = {}
    if importlib.util.find_spec("transformers") is None:
        missing["transformers"] = "transformers is not installed"
    if not all(importlib.util.find_spec(name) is not None for name in ONNX_PACKAGES):
        missing["onnxruntime"] = f"the onnx extra ({', '.join(ONNX_PACKAGES)}) is not installed"
    elif device != "cpu":
        missing["onnxruntime"] = "the arm runs ONNX Runtime's CPU provider only"
    return missing


def _served(result: laya.Prediction | LayaError) -> laya.Prediction:
    if isinstance(result, LayaError):
        raise result
    return result


def _bits(prediction: laya.Prediction) -> tuple:
    """Every field, floats by their exact bits (``==`` would take -0.0 for 0.0)."""
    return (prediction.task, tuple(p.hex() for p in prediction.probabilities), prediction.decision,
            prediction.head_digest, prediction.adapter_id)


Encode = Callable[[list[int]], object]  # item indices -> their padded states [count, longest, hidden]


def peer_arms(name: str, encode: Encode, base: laya.VerifiedBase, work: BatchWorkload) -> dict[str, Call]:
    """``name``: ``encode`` over the workload's batches in arrival order; ``name_sorted``: over
    its length-sorted batches. Each returns every item's states (its own rows of its padded
    batch) in request order, and is refused (``require_laya_states``) unless the first
    arrival batch's items get laya's states: the sorted arm's after a whole pass, so its
    putting back in order is checked too."""
    def collect(batches: list[list[int]]) -> list:
        states: list = [None] * len(work.items)
        for members in batches:
            padded = encode(members)
            for row, i in enumerate(members):
                states[i] = padded[row, :len(work.token_ids[i])]
        return states

    first = work.batches()[0]
    require_laya_states(base, work, collect(work.arrival_batches()[:1])[first], name)
    require_laya_states(base, work, collect(work.sorted_batches())[first], f"{name}_sorted")
    return {name: lambda: collect(work.arrival_batches()), f"{name}_sorted": lambda: collect(work.sorted_batches())}


def _transformers_encoder(base: laya.VerifiedBase, work: BatchWorkload, device: str) -> Encode:
    """BertModel (float32, sdpa, no pooler) over the given items, dynamically padded."""
    from laya_qual.synth.reference import ReferenceModel, transformers_bert_sdpa

    reference = ReferenceModel(base.source)
    model = transformers_bert_sdpa(reference).to(device)
    batch = PaddedBatches(reference, work)

    def encode(members: list[int]) -> torch.Tensor:
        with torch.inference_mode():
            inputs = {k: torch.tensor(v, device=device) for k, v in batch.padded(members).items()}
            return model(**inputs).last_hidden_state

    return encode


class PaddedBatches:
    """The workload's batches as a BERT-family encoder takes them: ids, token types and an
    attention mask, each padded to the batch's longest sequence (what a tokenizer hands over)."""

    def __init__(self, reference, work: BatchWorkload):
        self.pad = reference.special["pad"]
        self.work = work
        self.types = [reference.token_types(ids) for ids in work.token_ids]

    def padded(self, members: Sequence[int]) -> dict[str, list[list[int]]]:
        ids, kinds = [self.work.token_ids[i] for i in members], [self.types[i] for i in members]
        n = max(map(len, ids))
        return {"input_ids": [[*s, *[self.pad] * (n - len(s))] for s in ids],
                "token_type_ids": [[*t, *[0] * (n - len(t))] for t in kinds],
                "attention_mask": [[1] * len(s) + [0] * (n - len(s)) for s in ids]}


def require_laya_states(base: laya.VerifiedBase, work: BatchWorkload, theirs, arm: str) -> None:
    """Refuse a peer arm whose states for the first batch's items (``theirs[i]``: item i's
    rows, padded or not) are not laya's within float32 error."""
    for i, ours in enumerate(base.encode_packed(work.token_ids[work.batches()[0]])):
        worst = float((torch.as_tensor(theirs[i][:len(ours)], device=ours.device) - ours).abs().max())
        if not worst <= STATES_TOLERANCE:
            raise ArmsDisagree(f"item {i}: {arm}'s states differ from laya's by {worst:.3g} "
                               f"(> {STATES_TOLERANCE}): it would encode something else")


class _LastHiddenState(torch.nn.Module):
    """BertModel with positional inputs and one output: the graph the ONNX export traces."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, token_type_ids, attention_mask):
        return self.model(input_ids=input_ids, token_type_ids=token_type_ids,
                          attention_mask=attention_mask).last_hidden_state


def onnxruntime_session(model: bytes):
    """An ONNX Runtime session as the benchmark runs its peer: CPUExecutionProvider, every
    graph optimization on, torch's intra-op thread count now and one inter-op thread."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _onnxruntime_encoder(base: laya.VerifiedBase, work: BatchWorkload) -> Encode:
    """The transformers arm's BertModel, exported to ONNX (dynamo, batch and sequence
    dimensions dynamic) and run by ONNX Runtime's CPUExecutionProvider with every graph
    optimization on, torch's intra-op thread count and one inter-op thread
    (``onnxruntime_session``), over the given items, dynamically padded."""
    import numpy as np

    from laya_qual.synth.reference import ReferenceModel, transformers_bert_sdpa

    reference = ReferenceModel(base.source)
    batch = PaddedBatches(reference, work)
    example = {k: torch.tensor(v) for k, v in batch.padded(work.arrival_batches()[0]).items()}
    dims = {name: {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")} for name in example}
    with _exporter_quiet():
        program = torch.onnx.export(_LastHiddenState(transformers_bert_sdpa(reference)), tuple(example.values()),
                                    dynamo=True, dynamic_shapes=dims, input_names=list(example),
                                    output_names=["last_hidden_state"], verbose=False)
    session = onnxruntime_session(program.model_proto.SerializeToString())

    def encode(members: list[int]):
        return session.run(None, {k: np.array(v, dtype=np.int64) for k, v in batch.padded(members).items()})[0]

    return encode


@contextlib.contextmanager
def _exporter_quiet():
    """The exporter's progress lines, warnings and log records are not benchmark output."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)
