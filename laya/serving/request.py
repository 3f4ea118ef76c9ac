"""Requests in, predictions out: typed and validated at construction."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from laya.errors import RequestError

DECISIONS = ("act", "escalate")

# A lone surrogate (U+D800..U+DFFF): valid in a JSON string's escapes, in no UTF-8 text, so
# no tokenizer or output line can carry it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise RequestError(f"expected a string, got {type(value).__name__}", field=field)
    require_encodable(value, field)
    if not value or value.isspace():  # blank; isspace copies nothing, strip would
        raise RequestError("must not be empty or blank", field=field)
    return value


def require_encodable(value: str, field: str) -> None:
    """Refuse text holding a lone surrogate, naming where; searched in place (no copy)."""
    found = _SURROGATE.search(value)
    if found is not None:
        raise RequestError(f"holds a lone surrogate U+{ord(found.group()):04X} at character {found.start()}, "
                           "which is not text (not encodable as UTF-8)", field=field)


def printable_name(name: str) -> str:
    """``name`` as an error may carry it: each lone surrogate written as its ``\\uxxxx``
    escape, so the error's field and message encode as UTF-8 whatever the request held."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class Request:
    """One question with its options for one task (and optional state text)."""

    task: str
    question: str
    options: tuple[str, ...]
    state: str | None = None

    def __post_init__(self) -> None:
        _text(self.task, "task")
        _text(self.question, "question")
        if isinstance(self.options, (str, bytes)) or not isinstance(self.options, Sequence):
            raise RequestError(f"expected a list of strings, got {type(self.options).__name__}", field="options")
        options = tuple(_text(o, f"options[{i}]") for i, o in enumerate(self.options))
        if len(options) < 2:
            raise RequestError(f"needs at least 2 options, got {len(options)}", field="options")
        object.__setattr__(self, "options", options)
        if self.state is not None:
            _text(self.state, "state")

    def texts(self) -> tuple[tuple[str, str], ...]:
        """Each text with the field that carries it: question, each option, state (if any)."""
        options = tuple((f"options[{i}]", o) for i, o in enumerate(self.options))
        return (("question", self.question), *options, *((("state", self.state),) if self.state is not None else ()))

    @classmethod
    def from_json(cls, obj: Any) -> "Request":
        """Build from a decoded JSON object, refusing unknown fields by name."""
        if not isinstance(obj, dict):
            raise RequestError(f"expected a JSON object, got {type(obj).__name__}")
        unknown = set(obj) - {"task", "question", "options", "state"}
        if unknown:
            raise RequestError("unknown field", field=printable_name(sorted(unknown)[0]))
        for required in ("task", "question", "options"):
            if required not in obj:
                raise RequestError("missing", field=required)
        if not isinstance(obj["options"], list):
            raise RequestError(f"expected a list of strings, got {type(obj['options']).__name__}", field="options")
        return cls(obj["task"], obj["question"], tuple(obj["options"]), obj.get("state"))


@dataclass(frozen=True)
class Prediction:
    """What one head decided for one request, and which head decided it."""

    task: str
    probabilities: tuple[float, ...]
    decision: str
    head_digest: str
    adapter_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "adapter_id": self.adapter_id,
            "task": self.task,
            "probabilities": list(self.probabilities),
            "decision": self.decision,
            "head_digest": self.head_digest,
        }
