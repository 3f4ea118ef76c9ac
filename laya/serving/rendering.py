"""Rendering a request into one token sequence with contextualized option markers.

Layout (sequence format laya-seq-v1, state after the options):

    [CLS] question [SEP] [OPT0] option0 [OPT1] option1 ... [SEP] ([STATE] state [SEP])

With ``state_position = after_question`` the state block follows the first [SEP]
instead. Each option gets its own marker token; the head reads the encoder states
at the marker positions. Token types are a function of the ids (see
``token_types``), so the ids alone identify a sequence, which is what the cache keys on.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer

from laya.serving.config import SequenceFormat, SpecialTokens
from laya.errors import RequestError
from laya.serving.request import Request

# Roles a head's type embeddings distinguish.
ROLE_FRAME, ROLE_MARKER, ROLE_OPTION, ROLE_STATE = 0, 1, 2, 3
N_ROLES = 4


@dataclass(frozen=True)
class Rendered:
    token_ids: tuple[int, ...]
    roles: tuple[int, ...]
    marker_positions: tuple[int, ...]


def _encode(tokenizer: Tokenizer, text: str, field: str, reserved: frozenset[int]) -> list[int]:
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    if not ids:
        raise RequestError("renders to no tokens", field=field)
    if reserved.intersection(ids):
        raise RequestError("text renders to a reserved special token (marker, [CLS], [SEP], ...)", field=field)
    return ids


def render(request: Request, tokenizer: Tokenizer, special: SpecialTokens, fmt: SequenceFormat) -> Rendered:
    """The full sequence for ``request``; never clipped (budgets are the caller's check)."""
    reserved = special.reserved
    if len(request.options) > len(special.option_markers):
        raise RequestError(f"more options than the base has markers ({len(special.option_markers)})", field="options")
    ids: list[int] = []
    roles: list[int] = []
    markers: list[int] = []

    def put(tokens: list[int], role: int) -> None:
        ids.extend(tokens)
        roles.extend([role] * len(tokens))

    state = [] if request.state is None else _encode(tokenizer, request.state, "state", reserved)

    def put_state() -> None:
        if state:
            put([special.state], ROLE_MARKER)
            put(state, ROLE_STATE)
            put([special.sep], ROLE_FRAME)

    put([special.cls], ROLE_FRAME)
    put(_encode(tokenizer, request.question, "question", reserved), ROLE_FRAME)
    put([special.sep], ROLE_FRAME)
    if fmt.state_position == "after_question":
        put_state()
    for i, option in enumerate(request.options):
        markers.append(len(ids))
        put([special.option_markers[i]], ROLE_MARKER)
        put(_encode(tokenizer, option, f"options[{i}]", reserved), ROLE_OPTION)
    put([special.sep], ROLE_FRAME)
    if fmt.state_position == "after_options":
        put_state()
    return Rendered(tuple(ids), tuple(roles), tuple(markers))


def token_types(token_ids: tuple[int, ...] | list[int], special: SpecialTokens, fmt: SequenceFormat) -> list[int]:
    """Question type up to and including the first [SEP], option type after it."""
    types = []
    current = fmt.question_type
    for token in token_ids:
        types.append(current)
        if token == special.sep:
            current = fmt.option_type
    return types
