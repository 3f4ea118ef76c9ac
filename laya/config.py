"""Typed views of an artifact's JSON files, parsed strictly.

Every field is checked for presence, type and range; unknown fields are refused,
so a typo never silently falls back to a default. Errors name file and field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from laya.artifact import PinnedFile, parse_json_object
from laya.encoder import EncoderConfig
from laya.errors import ArtifactError

HEAD_KINDS = ("float32", "int8", "transformer")
# Documented limits (docs/artifact-v1.md, "Limits"): checked before anything is built, so
# loading costs what the files really hold, never what a config claims. BERT-large,
# XLM-R (250k pieces) and 8k-context encoders fit with room.
ENCODER_LIMITS = {"vocab_size": 1 << 20, "hidden_size": 8192, "num_hidden_layers": 128, "num_attention_heads": 256,
                  "intermediate_size": 65536, "max_position_embeddings": 16384, "type_vocab_size": 16}
HEAD_LIMITS = {"head_layers": 32, "head_attention_heads": 256, "head_intermediate_size": 65536, "tasks": 1024}
SEQUENCE_FORMAT_NAME = "laya-seq-v1"
STATE_POSITIONS = ("after_options", "after_question")


class _Fields:
    """Pops typed fields off one JSON object, naming file and field on any error."""

    def __init__(self, obj: dict[str, Any], file: str, prefix: str = ""):
        self.obj, self.file, self.prefix = dict(obj), file, prefix

    def _fail(self, key: str, message: str) -> ArtifactError:
        return ArtifactError(message, file=self.file, field=self.prefix + key)

    def take(self, key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in self.obj:
            raise self._fail(key, "missing")
        value = self.obj.pop(key)
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise self._fail(key, f"expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
        return value

    def int(self, key: str, low: int, high: int | None = None) -> int:
        value = self.take(key, int)
        if value < low or (high is not None and value > high):
            raise self._fail(key, f"{value} is outside [{low}, {high if high is not None else 'inf'}]")
        return value

    def float(self, key: str, low: float, high: float, *, open_low: bool = False) -> float:
        number = self.take(key, (int, float))
        try:
            value = float(number)
        except OverflowError:  # an integer literal beyond float's range
            raise self._fail(key, f"an integer of {len(str(abs(number)))} digits is outside float's range") from None
        if not math.isfinite(value) or value < low or value > high or (open_low and value == low):
            raise self._fail(key, f"{value} is outside {'(' if open_low else '['}{low}, {high}]")
        return value

    def str(self, key: str, choices: tuple[str, ...] | None = None) -> str:
        value = self.take(key, str)
        if not value or (choices is not None and value not in choices):
            raise self._fail(key, f"{value!r} is not one of {choices}" if choices else "must be non-empty")
        return value

    def done(self) -> None:
        if self.obj:
            raise self._fail(sorted(self.obj)[0], f"unknown field(s) {sorted(self.obj)}")


def parse_encoder_config(pinned: PinnedFile) -> EncoderConfig:
    f = _Fields(parse_json_object(pinned), pinned.path)
    limit = ENCODER_LIMITS
    cfg = EncoderConfig(
        vocab_size=f.int("vocab_size", 1, limit["vocab_size"]),
        hidden_size=f.int("hidden_size", 1, limit["hidden_size"]),
        num_hidden_layers=f.int("num_hidden_layers", 0, limit["num_hidden_layers"]),
        num_attention_heads=f.int("num_attention_heads", 1, limit["num_attention_heads"]),
        intermediate_size=f.int("intermediate_size", 1, limit["intermediate_size"]),
        max_position_embeddings=f.int("max_position_embeddings", 1, limit["max_position_embeddings"]),
        type_vocab_size=f.int("type_vocab_size", 2, limit["type_vocab_size"]),
        layer_norm_eps=f.float("layer_norm_eps", 0.0, 1.0, open_low=True),
        hidden_act=f.str("hidden_act", ("gelu",)),
    )
    f.done()
    if cfg.hidden_size % cfg.num_attention_heads:
        raise ArtifactError("hidden_size must be divisible by num_attention_heads", file=pinned.path, field="num_attention_heads")
    return cfg


@dataclass(frozen=True)
class SpecialTokens:
    cls: int
    sep: int
    pad: int
    state: int
    option_markers: tuple[int, ...]

    @property
    def reserved(self) -> frozenset[int]:
        return frozenset((self.cls, self.sep, self.pad, self.state, *self.option_markers))


def parse_special_tokens(pinned: PinnedFile, vocab_size: int) -> SpecialTokens:
    f = _Fields(parse_json_object(pinned), pinned.path)
    ids = {key: f.int(key, 0, vocab_size - 1) for key in ("cls", "sep", "pad", "state")}
    markers = f.take("option_markers", list)
    f.done()
    if len(markers) < 2:
        raise ArtifactError("needs at least two option markers", file=pinned.path, field="option_markers")
    for i, marker in enumerate(markers):
        if isinstance(marker, bool) or not isinstance(marker, int) or not 0 <= marker < vocab_size:
            raise ArtifactError(f"{marker!r} is not a token id below {vocab_size}", file=pinned.path, field=f"option_markers[{i}]")
    special = SpecialTokens(option_markers=tuple(markers), **ids)
    if len(special.reserved) != 4 + len(markers):
        raise ArtifactError("special token ids must be distinct", file=pinned.path)
    return special


@dataclass(frozen=True)
class SequenceFormat:
    """How a request becomes one token sequence (docs/artifact-v1.md, "Sequence format")."""

    question_type: int
    option_type: int
    state_position: str


def parse_sequence_format(pinned: PinnedFile, type_vocab_size: int) -> SequenceFormat:
    f = _Fields(parse_json_object(pinned), pinned.path)
    f.str("name", (SEQUENCE_FORMAT_NAME,))
    fmt = SequenceFormat(
        question_type=f.int("question_token_type", 0, type_vocab_size - 1),
        option_type=f.int("option_token_type", 0, type_vocab_size - 1),
        state_position=f.str("state_position", STATE_POSITIONS),
    )
    f.str("padding", ("none",))
    f.done()
    return fmt


@dataclass(frozen=True)
class Calibration:
    """Where a trained task's temperature came from (head.json ``tasks[i].calibration``)."""

    split: str  # always "dev_cal"
    split_sha256: str
    examples: int
    method: str
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float
    # the bounded fit's policy and what it did (method "temperature-nll-bounded"; None for the older lbfgs)
    temperature_min: float | None = None
    temperature_max: float | None = None
    min_examples: int | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class Certification:
    """What a task's act threshold was certified for, on which split (``tasks[i].certification``).

    Holds for this head and task alone: serving several heads never combines them.
    """

    split: str  # always "dev_conf"
    split_sha256: str
    examples: int
    method: str
    target_risk: float
    delta: float
    certified: bool
    acted: int
    errors: int
    coverage: float
    risk_upper_bound: float
    temperature: float  # the temperature the threshold was certified under


@dataclass(frozen=True)
class TaskInfo:
    """One task of a head, with the head's private calibration for it."""

    name: str
    index: int  # the task's row in the head's readout
    max_options: int
    temperature: float
    act_threshold: float
    escalate_threshold: float
    calibration: Calibration | None = None
    certification: Certification | None = None


@dataclass(frozen=True)
class HeadConfig:
    kind: str
    sequence_budget: int
    option_budget: int
    head_layers: int
    head_attention_heads: int
    head_intermediate_size: int
    tasks: dict[str, TaskInfo]


def parse_head_config(pinned: PinnedFile, *, option_markers: int, max_positions: int, hidden_size: int) -> HeadConfig:
    f = _Fields(parse_json_object(pinned), pinned.path)
    kind = f.str("kind", HEAD_KINDS)
    sequence_budget = f.int("sequence_budget", 4, max_positions)
    option_budget = f.int("option_budget", 2, option_markers)
    transformer = kind == "transformer"
    head_layers, head_heads, head_intermediate = (
        f.int(key, 1 if transformer else 0, HEAD_LIMITS[key] if transformer else 0)
        for key in ("head_layers", "head_attention_heads", "head_intermediate_size"))
    if transformer and hidden_size % head_heads:
        raise ArtifactError(f"must divide the base's hidden_size {hidden_size}", file=pinned.path,
                            field="head_attention_heads")
    raw_tasks = f.take("tasks", list)
    f.done()
    if not raw_tasks or len(raw_tasks) > HEAD_LIMITS["tasks"]:
        raise ArtifactError(f"a head has 1 to {HEAD_LIMITS['tasks']} tasks, this one {len(raw_tasks)}",
                            file=pinned.path, field="tasks")
    tasks: dict[str, TaskInfo] = {}
    for i, raw in enumerate(raw_tasks):
        if not isinstance(raw, dict):
            raise ArtifactError("must be an object", file=pinned.path, field=f"tasks[{i}]")
        t = _Fields(raw, pinned.path, prefix=f"tasks[{i}].")
        task = TaskInfo(
            name=t.str("name"),
            index=i,
            max_options=t.int("max_options", 2, option_budget),
            temperature=t.float("temperature", 0.0, 1e6, open_low=True),
            act_threshold=t.float("act_threshold", 0.0, 1.0),
            escalate_threshold=t.float("escalate_threshold", 0.0, 1.0, open_low=True),
            calibration=_calibration(t, pinned.path, f"tasks[{i}].calibration."),
            certification=_certification(t, pinned.path, f"tasks[{i}].certification."),
        )
        t.done()
        task = _check_certified(task, pinned.path, f"tasks[{i}].")
        if task.name in tasks:
            raise ArtifactError(f"task {task.name!r} defined twice", file=pinned.path, field=f"tasks[{i}].name")
        tasks[task.name] = task
    return HeadConfig(kind, sequence_budget, option_budget, head_layers, head_heads, head_intermediate, tasks)


_SHA256_HEX = frozenset("0123456789abcdef")
CALIBRATION_METHODS = ("temperature-nll-bounded", "temperature-nll-lbfgs")
CALIBRATION_OUTCOMES = ("fitted", "at_lower_bound", "at_upper_bound", "separable", "too_few_examples",
                        "not_better")
CERTIFICATION_METHODS = ("clopper-pearson-fixed-sequence",)


def _optional_object(t: _Fields, key: str, file: str, prefix: str) -> _Fields | None:
    if key not in t.obj:
        return None
    return _Fields(t.take(key, dict), file, prefix)


def _split_digest(f: _Fields) -> str:
    value = f.str("split_sha256")
    if len(value) != 64 or not set(value) <= _SHA256_HEX:
        raise f._fail("split_sha256", "must be 64 lowercase hex digits")
    return value


def _calibration(t: _Fields, file: str, prefix: str) -> Calibration | None:
    f = _optional_object(t, "calibration", file, prefix)
    if f is None:
        return None
    split, split_sha256, examples = f.str("split", ("dev_cal",)), _split_digest(f), f.int("examples", 1)
    method = f.str("method", CALIBRATION_METHODS)
    bounded = method == "temperature-nll-bounded"  # the older lbfgs fit recorded no bounds or outcome
    calibration = Calibration(
        split=split, split_sha256=split_sha256, examples=examples, method=method,
        nll_before=f.float("nll_before", 0.0, 1e6), nll_after=f.float("nll_after", 0.0, 1e6),
        ece_before=f.float("ece_before", 0.0, 1.0), ece_after=f.float("ece_after", 0.0, 1.0),
        temperature_min=f.float("temperature_min", 0.0, 1e6, open_low=True) if bounded else None,
        temperature_max=f.float("temperature_max", 0.0, 1e6, open_low=True) if bounded else None,
        min_examples=f.int("min_examples", 1) if bounded else None,
        outcome=f.str("outcome", CALIBRATION_OUTCOMES) if bounded else None)
    f.done()
    return calibration


def _certification(t: _Fields, file: str, prefix: str) -> Certification | None:
    f = _optional_object(t, "certification", file, prefix)
    if f is None:
        return None
    examples = f.int("examples", 1)
    acted = f.int("acted", 0, examples)
    certification = Certification(
        split=f.str("split", ("dev_conf",)), split_sha256=_split_digest(f), examples=examples,
        method=f.str("method", CERTIFICATION_METHODS),
        target_risk=f.float("target_risk", 0.0, 1.0, open_low=True), delta=f.float("delta", 0.0, 1.0, open_low=True),
        certified=f.take("certified", bool), acted=acted, errors=f.int("errors", 0, acted),
        coverage=f.float("coverage", 0.0, 1.0), risk_upper_bound=f.float("risk_upper_bound", 0.0, 1.0),
        temperature=f.float("temperature", 0.0, 1e6, open_low=True))
    f.done()
    if not math.isclose(certification.coverage, acted / examples, rel_tol=1e-9, abs_tol=1e-12):
        raise f._fail("coverage", f"must equal acted / examples = {acted / examples}")
    return certification


def _check_certified(task: TaskInfo, file: str, prefix: str) -> TaskInfo:
    """Tie a certification to the calibration it was made under. A certified task acts
    on its top probability alone; an uncertified one escalates everything (parsed as
    an act threshold of +inf, since a float32 probability can round up to 1.0)."""
    cert = task.certification
    if cert is None:
        return task

    def fail(field: str, message: str) -> ArtifactError:
        return ArtifactError(message, file=file, field=prefix + field)

    if cert.temperature != task.temperature:
        raise fail("certification.temperature", f"{cert.temperature} was certified, the task serves {task.temperature}")
    if task.escalate_threshold != 1.0:
        raise fail("escalate_threshold", "a certified threshold acts on the top probability alone: must be 1.0")
    if cert.certified:
        if cert.acted == 0 or cert.risk_upper_bound > cert.target_risk:
            raise fail("certification.risk_upper_bound",
                       f"{cert.risk_upper_bound} on {cert.acted} acted examples does not certify {cert.target_risk}")
        return task
    if cert.acted or task.act_threshold != 1.0:
        raise fail("act_threshold", "an uncertified task must have act_threshold 1.0 and acted 0")
    return replace(task, act_threshold=math.inf)
