"""Forward claims: the runtime computes and renders what docs/artifact-v1.md specifies.

Oracle: ``laya_qual.synth.ReferenceModel``, a float64 forward and renderer written
from the spec that reads the artifact's files itself and shares no code with the
runtime's encoder, heads, rendering or model modules (and, where installed,
``transformers.BertModel``). Comparing standalone with shared proves sharing; this
proves the numbers.

Tolerance (float32 runtime vs float64 reference): ``LAYER_BOUND`` = 1e-5 of absolute
error per traversed layer (the embedding LayerNorm counts as one). Why: float32 rounds
at u = 2^-24 ~ 6e-8; a length-K dot product's rounding grows like sqrt(K)·u
(<= 2.7e-6 for K <= 2048, BERT-base's inner sizes included), and every post-LN block
renormalizes its output to O(1), so errors add per layer instead of compounding.
Measured: <= 4.9e-7 per layer over 30 random synthetic configs, 1.8e-6 over all six
layers of all-MiniLM-L6-v2; GELU's tanh approximation instead of erf moves the states
by >= 9e-5 per layer. Probabilities: an option score h·w + b inherits at most
||w||_1 · (state bound) and softmax is 1/2-Lipschitz in max-norm, so
|dp| <= ||w_t||_1 · bound / (2 T), plus 1e-6 for float32's own rounding of p.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import laya.serving.encoder as laya_encoder
from laya import Request
from laya.errors import RequestError
from laya_qual.synth import reference as reference_module
from laya_qual.synth import ReferenceModel, ReferenceRefusal, artifact_configs, request_texts, requests_for, seeds

LAYER_BOUND = 1e-5
KINDS = ("float32", "int8", "transformer")
HEAD_CLAIMS = [pytest.param(k, marks=pytest.mark.laya_claim(f"forward.reference.{k}"), id=k) for k in KINDS]
EPS_EXAMPLE = {"hidden_size": 32, "num_heads": 4, "num_layers": 2, "intermediate_size": 48, "option_markers": 4,
               "state_position": "after_question", "head_layers": 2, "layer_norm_eps": 0.1}
FULL_REQUEST = Request("answer", "which one fits", ("ab c", "d", "ef", "g 7"), "state 42")


@pytest.fixture(scope="session")
def reference_for():
    """One ReferenceModel per artifact directory per session."""
    cache: dict = {}

    def get(directory) -> ReferenceModel:
        if directory not in cache:
            cache[directory] = ReferenceModel(directory)
        return cache[directory]

    return get


def encoder_bound(reference: ReferenceModel) -> float:
    return LAYER_BOUND * (reference.config["num_hidden_layers"] + 1)


def assert_encoder_matches(model, reference: ReferenceModel, request: Request) -> None:
    rendering = reference.render(request.question, request.options, request.state)
    states = model.base.encode(rendering.token_ids)
    worst = float((states.double() - reference.encode(rendering.token_ids)).abs().max())
    assert worst <= encoder_bound(reference), f"encoder states off by {worst:.3e} (bound {encoder_bound(reference):.1e})"


def assert_probabilities_match(model, reference: ReferenceModel, request: Request) -> None:
    task = [t["name"] for t in reference.head["tasks"]].index(request.task)
    weights = reference.head_weights
    row = (weights["readout.weight_int8"][task].double() * weights["readout.weight_scale"][task].double()
           if reference.head["kind"] == "int8" else weights["readout.weight"][task].double())
    layers = reference.config["num_hidden_layers"] + 1 + reference.head["head_layers"]
    bound = float(row.abs().sum()) * LAYER_BOUND * layers / (2 * reference.head["tasks"][task]["temperature"]) + 1e-6
    served = torch.tensor(model.predict(request).probabilities, dtype=torch.float64)
    expected = reference.probabilities(request)
    worst = float((served - expected).abs().max())
    assert worst <= bound, f"probabilities off by {worst:.3e} (bound {bound:.1e}): {served.tolist()} vs {expected.tolist()}"


def assert_rendering_matches(model, reference: ReferenceModel, request: Request) -> None:
    """Ids, roles and marker positions as the runtime will use them; token types through
    the embedding output (types only enter there)."""
    _, rendered = model.prepare(request)
    spec = reference.render(request.question, request.options, request.state)
    assert rendered.token_ids == spec.token_ids
    assert rendered.marker_positions == spec.marker_positions
    assert rendered.roles == spec.roles
    embedded = model.base.encode_layers(spec.token_ids)[0].double()
    worst = float((embedded - reference.embed(spec.token_ids)).abs().max())
    assert worst <= LAYER_BOUND, f"embedding output (token types) off by {worst:.3e}"


def reachable_reserved(reference: ReferenceModel) -> list[str]:
    """Spellings of reserved ids that text can actually produce with this tokenizer."""
    spellings = []
    for token in sorted(reference.reserved):
        text = reference.tokenizer.id_to_token(token)
        if token in reference.tokenizer.encode(text, add_special_tokens=False).ids:
            spellings.append(text)
    return spellings


def assert_reserved_refused(model, reference: ReferenceModel, request: Request) -> int:
    """Inject every reachable reserved spelling into every free-text field in turn."""
    fields = ["question", *[f"options[{i}]" for i in range(len(request.options))], "state"]
    for spelling in reachable_reserved(reference):
        for field in fields:
            question, options, state = request.question, list(request.options), request.state or "plain state"
            injected = f"{question} {spelling} tail"
            if field == "question":
                question = injected
            elif field == "state":
                state = f"{state} {spelling}"
            else:
                options[int(field[8:-1])] = f"{spelling}{options[int(field[8:-1])]}"
            bad = Request(request.task, question, tuple(options), state)
            with pytest.raises(ReferenceRefusal) as spec:
                reference.render(bad.question, bad.options, bad.state)
            assert spec.value.field == field
            with pytest.raises(RequestError) as refused:
                model.predict(bad)
            assert refused.value.field == field, (spelling, field, refused.value)
    return len(fields)


# --- the artifacts under qualification (synthetic defaults or --laya-artifact) ----------

@pytest.mark.laya_once_per("base")
@pytest.mark.laya_claim("forward.reference.encoder")
@given(data=st.data())
def test_qualified_encoder_matches_reference(qualified_artifact, qualified_model, reference_for, data):
    request = data.draw(requests_for(qualified_model))
    assert_encoder_matches(qualified_model, reference_for(qualified_artifact), request)


@pytest.mark.parametrize("kind", HEAD_CLAIMS)
@given(data=st.data())
def test_qualified_head_matches_reference(qualified_artifact, qualified_model, reference_for, kind, data):
    if qualified_model.kind != kind:
        pytest.skip(f"this artifact's head is {qualified_model.kind}, not {kind}")
    request = data.draw(requests_for(qualified_model))
    assert_probabilities_match(qualified_model, reference_for(qualified_artifact), request)


@pytest.mark.laya_claim("forward.rendering")
@given(data=st.data())
def test_qualified_rendering_matches_spec(qualified_artifact, qualified_model, reference_for, data):
    request = data.draw(requests_for(qualified_model, with_state=data.draw(st.booleans())))
    assert_rendering_matches(qualified_model, reference_for(qualified_artifact), request)


@pytest.mark.laya_claim("forward.rendering.reserved")
@given(data=st.data())
def test_qualified_reserved_text_is_refused(qualified_artifact, qualified_model, reference_for, data):
    request = data.draw(requests_for(qualified_model))
    assert_reserved_refused(qualified_model, reference_for(qualified_artifact), request)


# --- synthetic artifacts over Hypothesis-drawn configurations --------------------------

def synthetic(artifact_factory, load_model, reference_for, kind: str, seed: int, config: dict):
    directory = artifact_factory(seed=seed, head_kind=kind, **config)
    return load_model(directory), reference_for(directory)


@pytest.mark.laya_claim("forward.reference.encoder")
@given(seed=seeds(), config=artifact_configs(), request=request_texts())
@example(seed=3, config=EPS_EXAMPLE, request=FULL_REQUEST)
def test_synthetic_encoder_matches_reference(artifact_factory, load_model, reference_for, seed, config, request):
    model, reference = synthetic(artifact_factory, load_model, reference_for, "float32", seed, config)
    assert_encoder_matches(model, reference, request)


@pytest.mark.laya_claim("forward.reference.encoder")
@given(seed=seeds(), config=artifact_configs(), request=request_texts())
@example(seed=3, config=EPS_EXAMPLE, request=FULL_REQUEST)
def test_torchs_own_linear_kernels_match_the_reference_too(artifact_factory, load_model, reference_for, seed,
                                                            config, request):
    """The packed forward's other kernel set (torch's own ops: what a GPU, or a CPU build
    without oneDNN, runs) on this CPU: the same bound against the same reference."""
    model, reference = synthetic(artifact_factory, load_model, reference_for, "float32", seed, config)
    with pytest.MonkeyPatch.context() as patch:  # the choice alone, per forward; the kernels are the real ones
        patch.setattr(laya_encoder, "linear_kernels", lambda device: laya_encoder.AtenLinear)
        assert_encoder_matches(model, reference, request)


@pytest.mark.parametrize("kind", HEAD_CLAIMS)
@given(seed=seeds(), config=artifact_configs(), request=request_texts())
@example(seed=3, config=EPS_EXAMPLE, request=FULL_REQUEST)
@example(seed=4, config=dict(EPS_EXAMPLE, state_position="after_options"), request=FULL_REQUEST)
def test_synthetic_head_matches_reference(artifact_factory, load_model, reference_for, kind, seed, config, request):
    model, reference = synthetic(artifact_factory, load_model, reference_for, kind, seed, config)
    assert_probabilities_match(model, reference, request)


@pytest.mark.laya_claim("forward.rendering")
@given(seed=seeds(), config=artifact_configs(), request=request_texts())
@example(seed=3, config=EPS_EXAMPLE, request=FULL_REQUEST)
@example(seed=4, config=dict(EPS_EXAMPLE, state_position="after_options"), request=FULL_REQUEST)
def test_synthetic_rendering_matches_spec(artifact_factory, load_model, reference_for, seed, config, request):
    model, reference = synthetic(artifact_factory, load_model, reference_for, "transformer", seed, config)
    assert_rendering_matches(model, reference, request)


@pytest.mark.laya_claim("forward.rendering.reserved")
@given(seed=seeds(), config=artifact_configs(), request=request_texts())
@example(seed=3, config=EPS_EXAMPLE, request=FULL_REQUEST)
def test_synthetic_reserved_text_is_refused(artifact_factory, load_model, reference_for, seed, config, request):
    model, reference = synthetic(artifact_factory, load_model, reference_for, "float32", seed, config)
    assert len(reachable_reserved(reference)) == len(reference.reserved)  # synthetic specials are added tokens
    assert_reserved_refused(model, reference, request)


@pytest.mark.laya_claim("forward.reference.encoder", "forward.rendering")
def test_reference_shares_no_code_with_the_runtime():
    """The oracle is only independent while it imports nothing from laya."""
    tree = ast.parse(Path(reference_module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m == "laya" or m.startswith(("laya.", "laya_qual"))], imported
