"""Training datasets: JSONL examples with a split, a request and a hard label or a
train-only soft target, and the check that keeps the three splits apart.

Calibration (``dev_cal``) and certification (``dev_conf``) are only honest on
examples the head never trained on and on each other's complement, so the splits
must be disjoint by id *and* by exact token sequence (two ids that render to the
same tokens are the same example to the encoder).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Sequence

from laya.artifact.binding import sha256
from laya.errors import DatasetError, RequestError
from laya.serving.request import Request

SPLITS = ("train", "dev_cal", "dev_conf")
_FIELDS = {"id", "split", "task", "question", "options", "state", "label", "target"}


@dataclass(frozen=True)
class Example:
    id: str
    split: str
    request: Request
    label: int | None  # index of the correct option (required outside train)
    target: tuple[float, ...] | None  # soft target over the options (train only)


def read_dataset(path: str | os.PathLike) -> list[Example]:
    """Every example of a JSONL file, in file order; blank lines are skipped."""
    examples = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if raw.strip():
                examples.append(parse_example(raw, number))
    if not examples:
        raise DatasetError("dataset has no examples")
    return examples


def parse_example(raw: bytes, line: int) -> Example:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"not a UTF-8 JSON object ({exc})", line=line) from None
    except RecursionError:
        raise DatasetError("JSON nested deeper than the parser's recursion limit", line=line) from None
    except ValueError as exc:  # e.g. an integer literal past Python's digit limit
        raise DatasetError(f"not a UTF-8 JSON object ({exc})", line=line) from None
    if not isinstance(obj, dict):
        raise DatasetError("expected a JSON object", line=line)
    unknown = set(obj) - _FIELDS
    if unknown:
        raise DatasetError("unknown field", line=line, field=sorted(unknown)[0])
    for key in ("id", "split"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise DatasetError("missing or not a non-empty string", line=line, field=key)
    if obj["split"] not in SPLITS:
        raise DatasetError(f"{obj['split']!r} is not one of {SPLITS}", line=line, field="split")
    try:
        request = Request.from_json({k: obj[k] for k in ("task", "question", "options", "state") if k in obj})
    except RequestError as exc:
        raise DatasetError(str(exc), line=line, field=exc.field) from None
    label, target = obj.get("label"), obj.get("target")
    n = len(request.options)
    if (label is None) == (target is None):
        raise DatasetError("needs exactly one of label (hard) or target (soft)", line=line, field="label")
    if target is not None:
        if obj["split"] != "train":
            raise DatasetError("soft targets are train-only; dev splits need a hard label", line=line, field="target")
        if (not isinstance(target, list) or len(target) != n
                or any(isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1 for p in target)
                or not math.isclose(sum(target), 1.0, abs_tol=1e-6)):
            raise DatasetError(f"must be {n} probabilities summing to 1", line=line, field="target")
        target = tuple(float(p) for p in target)
    elif isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < n:
        raise DatasetError(f"must be an option index in [0, {n - 1}]", line=line, field="label")
    return Example(obj["id"], obj["split"], request, label, target)


def split_indices(examples: Sequence[Example], sequences: Sequence[Sequence[int]]) -> dict[str, list[int]]:
    """Indices per split; refuses a duplicate id, an empty split, or one token
    sequence appearing in two splits."""
    by_split: dict[str, list[int]] = {s: [] for s in SPLITS}
    seen_ids: dict[str, int] = {}
    seen_sequences: dict[tuple[int, ...], str] = {}
    for i, (example, sequence) in enumerate(zip(examples, sequences, strict=True)):
        if example.id in seen_ids:
            raise DatasetError(f"id {example.id!r} also used by example {seen_ids[example.id]}", field="id")
        seen_ids[example.id] = i
        other = seen_sequences.setdefault(tuple(sequence), example.split)
        if other != example.split:
            raise DatasetError(f"example {example.id!r} ({example.split}) renders to the same tokens as an "
                               f"example in {other}: splits must be disjoint", field="split")
        by_split[example.split].append(i)
    for split, indices in by_split.items():
        if not indices:
            raise DatasetError(f"split {split!r} has no examples", field="split")
    return by_split


def split_digest(examples: Sequence[Example], sequences: Sequence[Sequence[int]], indices: Sequence[int]) -> str:
    """sha256 naming exactly which examples (id, tokens, label) a split held. Its JSON is the
    compact spelling docs/training.md specifies for ``split_sha256`` (a recorded artifact
    field anyone may recompute), not laya.artifact.binding's canonical JSON."""
    rows = [[examples[i].id, list(sequences[i]), examples[i].label] for i in indices]
    return sha256(json.dumps(rows, separators=(",", ":")).encode())
