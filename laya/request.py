"""Requests in, predictions out: typed and validated at construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from laya.errors import RequestError

DECISIONS = ("act", "escalate")


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise RequestError(f"expected a string, got {type(value).__name__}", field=field)
    if not value.strip():
        raise RequestError("must not be empty or blank", field=field)
    return value


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

    @classmethod
    def from_json(cls, obj: Any) -> "Request":
        """Build from a decoded JSON object, refusing unknown fields by name."""
        if not isinstance(obj, dict):
            raise RequestError(f"expected a JSON object, got {type(obj).__name__}")
        unknown = set(obj) - {"task", "question", "options", "state"}
        if unknown:
            raise RequestError("unknown field", field=sorted(unknown)[0])
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
