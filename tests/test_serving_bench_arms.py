"""The serving benchmark's peer arms (laya_qual.bench.serving_bench): a peer is timed only if it
encodes what laya encodes, and one that encodes something else is refused before timing."""

from __future__ import annotations

import pytest
import torch

import laya
from laya_qual.bench.serving_bench import (STATES_TOLERANCE, ArmsDisagree, BatchWorkload, batch_arms, missing_peers,
                                     mixed_length_items, onnxruntime_session, overhead_arms, peer_arms,
                                     require_laya_states)
from laya_qual.synth import copy_with_weights_edit, write_artifact

REQUESTS, BATCH_SIZE = 6, 4  # two batches, the second shorter


@pytest.fixture(scope="module")
def head_dir(tmp_path_factory):
    return write_artifact(tmp_path_factory.mktemp("bench") / "h", seed=5, head_kind="float32", num_heads=4)


@pytest.fixture(scope="module")
def small_arms(head_dir):
    return batch_arms({"h": head_dir}, requests=REQUESTS, batch_size=BATCH_SIZE)


@pytest.mark.slow
@pytest.mark.parametrize("peer", ["onnxruntime", "onnxruntime_sorted", "transformers", "transformers_sorted"])
def test_each_peer_arm_gives_every_item_its_own_states_in_request_order(head_dir, small_arms, peer):
    """Arrival order or length-sorted, each item's states are its own rows (its length, no
    padding row), at its own place in the request order, and laya's within float32 error."""
    if peer.removesuffix("_sorted") in missing_peers("cpu"):
        pytest.skip(missing_peers("cpu")[peer.removesuffix("_sorted")])
    arms, work = small_arms
    base = laya.load_artifact_base(head_dir)
    states = arms[peer]()
    assert len(states) == len(work.items) == REQUESTS
    assert len(set(map(len, work.token_ids))) > 1  # lengths differ, so sorting moves items
    for ids, theirs in zip(work.token_ids, states):
        assert tuple(theirs.shape) == (len(ids), base.hidden_size)
        assert float((torch.as_tensor(theirs) - base.encode(ids)).abs().max()) <= STATES_TOLERANCE


def workload(lengths: list[int], batch_size: int) -> BatchWorkload:
    """Items whose token ids are just their lengths' worth of distinct ids (the requests unused)."""
    return BatchWorkload([("h", None)] * len(lengths), [tuple(range(n)) for n in lengths], batch_size)


def test_sorted_batches_are_longest_first_ties_in_arrival_order_cut_in_batch_size():
    work = workload([3, 17, 5, 17, 1, 40, 5], batch_size=3)
    assert work.sorted_batches() == [[5, 1, 3], [2, 6, 0], [4]]
    assert work.arrival_batches() == [[0, 1, 2], [3, 4, 5], [6]]


def test_rows_count_tokens_laya_blocks_and_each_orders_padding():
    """By hand: laya rounds each length up to whole blocks of the CPU's quantum (oneDNN's 4 rows);
    a padded batch is its count x its longest."""
    work = workload([3, 17, 5, 17, 1, 40, 5], batch_size=3)
    assert work.rows() == {"tokens": 88, "laya_packed": 4 + 20 + 8 + 20 + 4 + 40 + 8,
                           "padded_arrival": 3 * 17 + 3 * 40 + 5, "padded_sorted": 3 * 40 + 3 * 5 + 1}


def padded_laya(base: laya.VerifiedBase, work: BatchWorkload, scramble: bool = False):
    """laya itself as a padded peer: each batch's states padded to its longest; ``scramble``
    hands the batch's rows back in reverse, as a peer that loses the order would."""
    def encode(members: list[int]) -> torch.Tensor:
        states = base.encode_packed([work.token_ids[i] for i in members])
        padded = torch.zeros(len(members), max(map(len, states)), base.hidden_size)
        for row, s in enumerate(states[::-1] if scramble else states):
            padded[row, :len(s)] = s[:padded.shape[1]]
        return padded
    return encode


def test_a_peer_that_puts_sorted_states_back_out_of_order_is_refused(head_dir):
    """Reversing the rows of a batch keeps arrival batch 0 of one item right only by chance;
    here the first arrival batch's items fall into sorted batches of mixed members."""
    base = laya.load_artifact_base(head_dir)
    items = mixed_length_items(laya.open_adapters({"h": head_dir}, base=base).heads, REQUESTS, seed=1)
    work = BatchWorkload(items, [base.render(r).token_ids for _, r in items], BATCH_SIZE)
    arms = peer_arms("peer", padded_laya(base, work), base, work)  # laya's own states pass, both orders
    assert set(arms) == {"peer", "peer_sorted"}
    with pytest.raises(ArmsDisagree, match="peer's states differ from laya's"):
        peer_arms("peer", padded_laya(base, work, scramble=True), base, work)


def test_mixed_lengths_drawn_from_a_target_range_stay_in_it(head_dir):
    base = laya.load_artifact_base(head_dir)
    heads = laya.open_adapters({"h": head_dir}, base=base).heads
    lengths = [len(base.render(r).token_ids) for _, r in mixed_length_items(heads, 60, seed=3, targets=(40, 60))]
    assert min(lengths) >= 40 - 2 and max(lengths) <= 60  # a question word renders to one or two tokens
    with pytest.raises(ValueError, match=r"targets \(40, 97\) must be 1 <= low <= high <= .*\(96\)"):
        mixed_length_items(heads, 1, seed=3, targets=(40, 97))


@pytest.mark.parametrize("threads", [1, 3])
def test_the_onnxruntime_session_is_configured_as_documented(threads):
    """Read back from ONNX Runtime itself (docs/benchmarks.md): CPUExecutionProvider, every graph
    optimization, torch's intra-op thread count at the time and one inter-op thread."""
    if "onnxruntime" in missing_peers("cpu"):
        pytest.skip(missing_peers("cpu")["onnxruntime"])
    import onnxruntime
    from onnx import TensorProto, helper

    x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in ("x", "y"))
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y]))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        session = onnxruntime_session(model.SerializeToString())
    finally:
        torch.set_num_threads(before)
    options = session.get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (threads, 1)
    assert options.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert session.get_providers() == ["CPUExecutionProvider"]


def test_a_peer_whose_states_differ_is_refused(head_dir):
    base = laya.load_artifact_base(head_dir)
    heads = laya.open_adapters({"h": head_dir}, base=base).heads
    items = mixed_length_items(heads, BATCH_SIZE, seed=1)
    work = BatchWorkload(items, [base.render(r).token_ids for _, r in items], BATCH_SIZE)
    longest = max(map(len, work.token_ids))
    padded = torch.zeros(BATCH_SIZE, longest, base.hidden_size)
    for i, states in enumerate(base.encode_packed(work.token_ids)):
        padded[i, :len(states)] = states
    require_laya_states(base, work, padded, "peer")  # laya's own states pass
    padded[BATCH_SIZE - 1, 0, 0] += 10 * STATES_TOLERANCE
    with pytest.raises(ArmsDisagree, match=f"item {BATCH_SIZE - 1}: peer's states differ from laya's"):
        require_laya_states(base, work, padded, "peer")


def test_mixed_lengths_reach_from_a_one_word_question_to_the_budget(head_dir):
    """The batch workload spreads rendered lengths from the shortest request (a question of
    one word, where the drawn target is shorter than two words' rendering) up to the
    head's sequence budget, every item within it."""
    base = laya.load_artifact_base(head_dir)
    heads = laya.open_adapters({"h": head_dir}, base=base).heads
    items = mixed_length_items(heads, 200, seed=3)
    words = [len(request.question.split()) for _, request in items]
    lengths = [len(base.render(request).token_ids) for _, request in items]
    budget = max(head.config.sequence_budget for head in heads.values())
    assert min(words) == 1 and max(lengths) <= budget
    assert max(lengths) >= budget - 8, (max(lengths), budget)  # a target near the budget is drawn too


def test_a_batched_arm_that_loses_a_prediction_is_refused(head_dir, monkeypatch):
    """Batched and one-by-one are compared item by item only once they answer as many items
    (predict is predict_many of one item, so only a batch of several loses its last)."""
    predict_many = laya.Adapters.predict_many

    def losing(self, items, **kw):
        return predict_many(self, items, **kw)[:len(items) - (len(items) > 1)]
    monkeypatch.setattr(laya.Adapters, "predict_many", losing)
    with pytest.raises(ArmsDisagree, match=f"predict_many gave {REQUESTS - 2} predictions for {REQUESTS} items"):
        batch_arms({"h": head_dir}, requests=REQUESTS, batch_size=BATCH_SIZE)


@pytest.mark.parametrize("requests, batch_size", [(0, 4), (6, 0), (0, 0)])
def test_an_empty_workload_or_batch_is_refused(head_dir, requests, batch_size):
    refused = f"requests \\({requests}\\) and batch_size \\({batch_size}\\) must be at least 1"
    with pytest.raises(ValueError, match=refused):
        batch_arms({"h": head_dir}, requests=requests, batch_size=batch_size)


def test_a_bare_forward_that_predicts_differently_is_refused_before_timing(head_dir, monkeypatch):
    """The overhead benchmark's bare arm must predict bitwise what Adapters.predict does;
    an encoder off by 1e-3 times each row's index is refused by name, not timed (a shift
    alike for every row would move the options' logits alike, which the softmax undoes)."""
    from laya_qual.bench import serving_bench

    base = laya.load_artifact_base(head_dir)
    [(_, request)] = mixed_length_items(laya.open_adapters({"h": head_dir}, base=base).heads, 1, seed=2)
    arms, tokens = serving_bench.overhead_arms(head_dir, request)  # agreeing arms pass
    assert torch.equal(arms["bare"](), torch.tensor(arms["laya"]().probabilities)) and tokens > 0

    class OffEncoder(serving_bench.Encoder):
        def forward(self, *args):
            states = super().forward(*args)
            return states + 1e-3 * torch.arange(len(states))[:, None]

    monkeypatch.setattr(serving_bench, "Encoder", OffEncoder)
    with pytest.raises(ArmsDisagree, match="Adapters.predict and the bare torch forward differ"):
        serving_bench.overhead_arms(head_dir, request)


def test_the_bare_arm_adds_each_tasks_readout_bias(head_dir, tmp_path):
    """A task's bias shifts all its option logits alike, which the softmax undoes up to
    rounding. Biases of the logits' own size make that rounding show (a large one such as 1000
    would not: x + b and x - b then round on the same grid), so a bare arm that subtracted the
    bias or left it out is refused, and this one agrees with Adapters.predict bitwise."""
    def biases_of_the_logits_size(tensors: dict[str, torch.Tensor]) -> None:
        tasks = len(tensors["readout.bias"])
        tensors["readout.bias"] = torch.tensor([0.75, -1.3]).repeat(tasks)[:tasks]

    biased = copy_with_weights_edit(head_dir, tmp_path / "biased", "head_weights", biases_of_the_logits_size)
    base = laya.load_artifact_base(biased)
    for _, request in mixed_length_items(laya.open_adapters({"h": biased}, base=base).heads, 3, seed=4):
        arms, _ = overhead_arms(biased, request)
        assert torch.equal(arms["bare"](), torch.tensor(arms["laya"]().probabilities))


def test_side_by_side_gives_each_arms_median_of_its_own_durations(monkeypatch):
    """Each sample is the clock after the arm minus the clock before it: on a clock that
    advances by a fixed step per reading and per arm call, every arm's median is its own."""
    from laya_qual.bench import benchmarking

    now = [1000.0]  # far from 0, so a sum in place of a difference shows
    monkeypatch.setattr(benchmarking.time, "perf_counter", lambda: now[0])

    def arm(seconds: float):
        def run():
            now[0] += seconds
        return run

    assert benchmarking.side_by_side({"fast": arm(0.25), "slow": arm(2.0)}, rounds=5) == {"fast": 0.25, "slow": 2.0}
