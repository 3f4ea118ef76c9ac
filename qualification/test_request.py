"""Request claims: typed validation and per-head budgets, refused and never clipped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laya import Request
from laya.errors import BudgetExceeded, RequestError
from laya_qual.synth import ReferenceModel, over_budget_requests, requests_for, texts


@pytest.mark.laya_claim("request.budget")
@given(data=st.data())
def test_over_budget_sequence_is_refused(qualified_model, data):
    request = data.draw(over_budget_requests(qualified_model))
    with pytest.raises(BudgetExceeded) as refused:
        qualified_model.predict(request)
    assert refused.value.field == "sequence"
    assert str(qualified_model.config.sequence_budget) in str(refused.value)


@pytest.mark.laya_claim("request.budget")
@given(data=st.data())
def test_predict_succeeds_exactly_within_budget(qualified_model, data):
    """Whatever the length, a request either fits and is served or is refused whole."""
    request = data.draw(requests_for(qualified_model, max_words=12))
    extra = data.draw(texts(qualified_model, max_words=30))
    longer = Request(request.task, f"{request.question} {extra}", request.options, request.state)
    length = len(qualified_model.base.render(longer).token_ids)
    if length <= qualified_model.config.sequence_budget:
        assert len(qualified_model.predict(longer).probabilities) == len(longer.options)
    else:
        with pytest.raises(BudgetExceeded):
            qualified_model.predict(longer)


@pytest.mark.laya_claim("request.budget")
def test_the_budget_boundary_itself(qualified_artifact, qualified_model):
    """A request rendering to exactly the sequence budget is served; one token more is
    refused. Lengths come from the independent reference renderer, not the runtime's."""
    reference = ReferenceModel(qualified_artifact)
    budget = qualified_model.config.sequence_budget
    task, options = sorted(qualified_model.tasks)[0], ("a", "b")

    def length(question: str) -> int:
        return len(reference.render(question, options).token_ids)

    filler = next(w for w in ("a", "x", "1", "the") if length(f"q {w}") == length("q") + 1)
    question = " ".join(["q"] + [filler] * (budget - length("q")))
    assert length(question) == budget
    assert len(qualified_model.predict(Request(task, question, options)).probabilities) == len(options)
    with pytest.raises(BudgetExceeded):
        qualified_model.predict(Request(task, f"{question} {filler}", options))


@pytest.mark.laya_claim("request.budget")
@given(data=st.data())
def test_too_many_options_is_refused(qualified_model, data):
    task = data.draw(st.sampled_from(sorted(qualified_model.tasks)))
    limit = qualified_model.tasks[task].max_options
    options = tuple(f"option {chr(97 + i)}" for i in range(limit + data.draw(st.integers(1, 3))))
    with pytest.raises(BudgetExceeded) as refused:
        qualified_model.predict(Request(task, "which one", options))
    assert refused.value.field == "options"


@pytest.mark.laya_claim("request.validation")
@pytest.mark.parametrize("fields, field", [
    (dict(task=3, question="q", options=("a", "b")), "task"),
    (dict(task="answer", question="", options=("a", "b")), "question"),
    (dict(task="answer", question="q", options="ab"), "options"),
    (dict(task="answer", question="q", options=("a",)), "options"),
    (dict(task="answer", question="q", options=("a", 2)), "options[1]"),
    (dict(task="answer", question="q", options=("a", "  ")), "options[1]"),
    (dict(task="answer", question="q", options=("a", "b"), state=b"x"), "state"),
])
def test_malformed_request_names_its_field(fields, field):
    with pytest.raises(RequestError) as refused:
        Request(**fields)
    assert refused.value.field == field


@pytest.mark.laya_claim("request.validation")
@given(data=st.data())
def test_unknown_task_and_reserved_tokens_are_refused(qualified_model, data):
    request = data.draw(requests_for(qualified_model))
    with pytest.raises(RequestError) as unknown:
        qualified_model.predict(Request(request.task + "-unknown", request.question, request.options))
    assert unknown.value.field == "task"
    base = qualified_model.base
    marker_id = base.special.option_markers[0]
    marker = base.tokenizer.id_to_token(marker_id)
    injected_request = Request(request.task, f"{request.question} {marker}", request.options)
    if marker_id in base.tokenizer.encode(marker, add_special_tokens=False).ids:
        with pytest.raises(RequestError) as injected:
            qualified_model.predict(injected_request)
        assert injected.value.field == "question"
    else:  # the marker's spelling does not tokenize to the marker: text cannot inject it
        rendered = base.render(injected_request)
        assert [rendered.token_ids[p] for p in rendered.marker_positions] == list(
            base.special.option_markers[: len(request.options)])
        assert rendered.token_ids.count(marker_id) == 1
