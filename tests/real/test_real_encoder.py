"""The imported all-MiniLM-L6-v2 computes what the checkpoint defines.

The reference is written here from the raw checkpoint tensors under their HF
names, in float64, without laya's encoder: if laya renamed, transposed or
mis-scaled anything, or used another GELU or LayerNorm, the states would differ.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

MAX_ABS_BOUND = 1e-5

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on stage.",
    "Where is the nearest train station?",
    "In 1969, Neil Armstrong became the first person to walk on the Moon, an event watched by roughly "
    "600 million people around the world.",
    "Café au lait costs €3.50 in Zürich — unbelievable!",
)
PAIR = ("Is the server down?", "The monitoring dashboard shows errors on every node.")

# (anchor, closer, farther): sentence-level meaning the model was trained to capture.
RANKINGS = (
    ("How do I reset my password?", "I forgot my password and need to change it.", "The weather is sunny today."),
    ("A man is playing a guitar.", "Someone is playing an instrument.", "A chef is cooking pasta in the kitchen."),
    ("The cat sits on the mat.", "A kitten is resting on a rug.", "Stock markets fell sharply on Monday."),
    ("The new movie is awesome.", "The new film is great.", "The new movie is about a shark."),
)


def reference_states(w: dict[str, torch.Tensor], config: dict, ids: list[int], types: list[int]) -> torch.Tensor:
    """BERT's encoder as its paper and config.json define it: float64, exact erf GELU, post-LN."""
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]

    def norm(x, prefix):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def linear(x, prefix):
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    n = len(ids)
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][types])
    x = norm(x, "embeddings.LayerNorm")
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        d = x.shape[1] // heads
        q, k, v = (linear(x, p + f"attention.self.{m}").reshape(n, heads, d).permute(1, 0, 2)
                   for m in ("query", "key", "value"))
        attention = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
        context = (attention @ v).permute(1, 0, 2).reshape(n, heads * d)
        x = norm(linear(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
        x = norm(linear(h, p + "output.dense") + x, p + "output.LayerNorm")
    return x


@pytest.fixture(scope="module")
def hf_config(checkpoint_dir):
    return json.loads((checkpoint_dir / "config.json").read_text())


@pytest.fixture(scope="module")
def float64_weights(checkpoint_tensors):
    return {name: t.double() for name, t in checkpoint_tensors.items() if t.is_floating_point()}


def test_final_states_match_an_independent_float64_reference(real_base, float64_weights, checkpoint_tokenizer,
                                                             hf_config, record_property):
    """Ids and token types come from the checkpoint's own tokenizer template ([CLS] a [SEP] (b [SEP]))."""
    encodings = [checkpoint_tokenizer.encode(s) for s in SENTENCES] + [checkpoint_tokenizer.encode(*PAIR)]
    worst = 0.0
    for encoding in encodings:
        laya_states = real_base.encode(encoding.ids)
        assert laya_states.dtype == torch.float32 and laya_states.shape == (len(encoding.ids), 384)
        reference = reference_states(float64_weights, hf_config, encoding.ids, encoding.type_ids)
        worst = max(worst, float((laya_states.double() - reference).abs().max()))
    record_property("max_abs_difference", worst)
    print(f"\nmax abs difference, laya float32 vs float64 reference, {len(encodings)} sequences: {worst:.3e}")
    assert worst <= MAX_ABS_BOUND


def sentence_embedding(base, tokenizer, text: str) -> torch.Tensor:
    """sentence-transformers' recipe for this model: mean over all tokens, L2-normalized."""
    states = base.encode(tokenizer.encode(text).ids).double()
    return torch.nn.functional.normalize(states.mean(0), dim=0)


@pytest.mark.parametrize(("anchor", "closer", "farther"), RANKINGS, ids=[r[0] for r in RANKINGS])
def test_mean_pooled_embeddings_rank_obvious_pairs(real_base, checkpoint_tokenizer, anchor, closer, farther):
    a, c, f = (sentence_embedding(real_base, checkpoint_tokenizer, t) for t in (anchor, closer, farther))
    assert float(a @ c) > float(a @ f) + 0.1, (float(a @ c), float(a @ f))


def test_final_states_match_transformers_bert_model(real_base, imported_dir, checkpoint_tokenizer):
    """The suite's forward.transformers.bert oracle on the imported checkpoint, so CI runs it
    (the suite itself runs it only for bases given with --laya-base / --laya-artifact)."""
    pytest.importorskip("transformers")
    from laya_qual.synth import ReferenceModel
    from laya_qual.synth.reference import transformers_bert, transformers_states

    reference = ReferenceModel(imported_dir)
    bert = transformers_bert(reference)
    rendering = reference.render(PAIR[0], SENTENCES[:3], PAIR[1])
    worst = float((real_base.encode(rendering.token_ids).double()
                   - transformers_states(bert, reference, rendering.token_ids)).abs().max())
    assert worst <= MAX_ABS_BOUND, worst
