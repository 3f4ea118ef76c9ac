"""forward.transformers.bert: a real base computes what transformers.BertModel computes.

A second oracle for the encoder, written by others: Hugging Face's BertModel (float64,
eager attention) loaded with the base's own config and tensors. It runs on the bases
of every qualified artifact (the synthetic defaults, or ``--laya-artifact`` heads) and
on ``--laya-base``. transformers is a dependency for this oracle; should it not be
importable the tests skip, and the claim is then not evaluated. Tolerance: the
per-layer bound of test_forward.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import laya
from laya_qual.synth import ReferenceModel, plain_texts, requests_for
from laya_qual.synth.reference import transformers_bert, transformers_states

LAYER_BOUND = 1e-5


@pytest.fixture(scope="session")
def bert_oracle():
    """(ReferenceModel, BertModel) per base directory, built once per session."""
    cache: dict = {}

    def get(directory):
        if directory not in cache:
            pytest.importorskip("transformers", reason="forward.transformers.bert needs transformers installed")
            reference = ReferenceModel(directory)
            cache[directory] = reference, transformers_bert(reference)
        return cache[directory]

    return get


def assert_matches_bert(base, reference: ReferenceModel, bert, ids) -> None:
    worst = float((base.encode(ids).double() - transformers_states(bert, reference, ids)).abs().max())
    bound = LAYER_BOUND * (reference.config["num_hidden_layers"] + 1)
    assert worst <= bound, f"encoder states differ from transformers.BertModel by {worst:.3e} (bound {bound:.1e})"


@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("forward.transformers.bert")
@given(data=st.data())
def test_qualified_base_matches_transformers(qualified_artifact, qualified_model, bert_oracle, data):
    reference, bert = bert_oracle(qualified_artifact)
    r = data.draw(requests_for(qualified_model))
    ids = reference.render(r.question, r.options, r.state).token_ids
    assert_matches_bert(qualified_model.base, reference, bert, ids)


@pytest.fixture(scope="session")
def laya_base(qualified_base_dir):
    """The ``--laya-base`` base, loaded once; skips when none was given."""
    if qualified_base_dir is None:
        pytest.skip("no --laya-base given")
    return laya.load_artifact_base(qualified_base_dir)


@pytest.mark.laya_claim("forward.transformers.bert")
@given(question=plain_texts(12), options=st.lists(plain_texts(4), min_size=2, max_size=2),
       state=st.none() | plain_texts(6))
def test_laya_base_matches_transformers(qualified_base_dir, laya_base, bert_oracle, question, options, state):
    reference, bert = bert_oracle(qualified_base_dir)
    assert_matches_bert(laya_base, reference, bert, reference.render(question, options, state).token_ids)
