"""Typed views of an artifact's JSON files, parsed strictly.

Every field is checked for presence, type and range; unknown fields are refused,
so a typo never silently falls back to a default. Errors name file and field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from laya.artifact.manifest import PinnedFile, parse_json_object
from laya.serving.encoder import EncoderConfig
from laya.errors import ArtifactError
from laya.artifact.text import unprintable_reason

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

    def nullable_float(self, key: str, low: float, high: float) -> float | None:
        if key in self.obj and self.obj[key] is None:
            del self.obj[key]
            return None
        return self.float(key, low, high)

    def str(self, key: str, choices: tuple[str, ...] | None = None) -> str:
        value = self.take(key, str)
        if not value or (choices is not None and value not in choices):
            raise self._fail(key, f"{value!r} is not one of {choices}" if choices else "must be non-empty")
        return value

    def name(self, key: str) -> str:
        """A non-empty string that is a name (laya.artifact.text): it is printed and matched as text."""
        value = self.str(key)
        reason = unprintable_reason(value)
        if reason is not None:
            raise self._fail(key, reason)
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
class ReliabilityBin:
    """One confidence bin of a reliability diagram: the examples whose top probability
    falls in [lower, upper), their mean top probability and their top-1 accuracy (both
    None for an empty bin)."""

    lower: float
    upper: float
    count: int
    confidence: float | None
    accuracy: float | None


@dataclass(frozen=True)
class ThresholdTest:
    """One threshold the fixed-sequence procedure tested, in the order it tested them."""

    threshold: float
    acted: int
    errors: int
    risk_upper_bound: float


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
    # dev_cal's reliability diagrams at T = 1 and at the served T (the ECE's bins; None when not recorded)
    reliability_before: tuple[ReliabilityBin, ...] | None = None
    reliability_after: tuple[ReliabilityBin, ...] | None = None


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
    path: tuple[ThresholdTest, ...] | None = None  # every threshold tested, in order (None when not recorded)


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
    tasks: Mapping[str, TaskInfo]  # read-only: what a caller gets of a head cannot change what it serves


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
            name=t.name("name"),
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
    return HeadConfig(kind, sequence_budget, option_budget, head_layers, head_heads, head_intermediate,
                      MappingProxyType(tasks))


_SHA256_HEX = frozenset("0123456789abcdef")
CALIBRATION_METHODS = ("temperature-nll-bounded", "temperature-nll-lbfgs")
CALIBRATION_OUTCOMES = ("fitted", "at_lower_bound", "at_upper_bound", "separable", "too_few_examples",
                        "not_better")
CERTIFICATION_METHODS = ("clopper-pearson-fixed-sequence",)
# The recorded bins' ECE and ece_before/ece_after are the same sum added in another order.
ECE_TOLERANCE = 1e-9


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
        outcome=f.str("outcome", CALIBRATION_OUTCOMES) if bounded else None,
        reliability_before=_reliability(f, "reliability_before", examples, file, prefix),
        reliability_after=_reliability(f, "reliability_after", examples, file, prefix))
    f.done()
    recorded = [key for key in ("reliability_before", "reliability_after") if getattr(calibration, key) is not None]
    if len(recorded) == 1:
        missing = {"reliability_before", "reliability_after"} - set(recorded)
        raise f._fail(missing.pop(), f"{recorded[0]} is recorded, so this one must be too")
    for when in ("before", "after") if recorded else ():
        bins, ece = getattr(calibration, f"reliability_{when}"), getattr(calibration, f"ece_{when}")
        binned = sum(b.count / examples * abs(b.accuracy - b.confidence) for b in bins if b.count)
        if not math.isclose(binned, ece, rel_tol=0.0, abs_tol=ECE_TOLERANCE):
            raise f._fail(f"ece_{when}", f"{ece} is not the ECE of reliability_{when} ({binned})")
    return calibration


def _reliability(f: _Fields, key: str, examples: int, file: str, prefix: str) -> tuple[ReliabilityBin, ...] | None:
    """A reliability diagram: contiguous bins from 0 to 1 whose counts sum to ``examples``."""
    if key not in f.obj:
        return None
    raw = f.take(key, list)
    if not raw:
        raise f._fail(key, "needs at least one bin")
    bins = []
    for i, item in enumerate(raw):
        where = f"{prefix}{key}[{i}]."
        if not isinstance(item, dict):
            raise ArtifactError("must be an object", file=file, field=where[:-1])
        b = _Fields(item, file, where)
        lower, upper = b.float("lower", 0.0, 1.0), b.float("upper", 0.0, 1.0)
        count = b.int("count", 0, examples)
        found = ReliabilityBin(lower, upper, count, b.nullable_float("confidence", 0.0, 1.0),
                               b.nullable_float("accuracy", 0.0, 1.0))
        b.done()
        if upper <= lower:
            raise b._fail("upper", f"{upper} must exceed lower {lower}")
        if lower != (bins[-1].upper if bins else 0.0):
            raise b._fail("lower", f"{lower} must be {bins[-1].upper if bins else 0.0}: bins are ordered and "
                                   "cover [0, 1] without gaps")
        for value in ("confidence", "accuracy"):
            if (getattr(found, value) is None) != (count == 0):
                raise b._fail(value, "must be null exactly when count is 0")
        bins.append(found)
    if bins[-1].upper != 1.0:
        raise f._fail(key, f"the last bin ends at {bins[-1].upper}: bins must cover [0, 1]")
    if sum(b.count for b in bins) != examples:
        raise f._fail(key, f"counts sum to {sum(b.count for b in bins)}, not to examples {examples}")
    return tuple(bins)


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
        temperature=f.float("temperature", 0.0, 1e6, open_low=True),
        path=_path(f, examples, file, prefix))
    f.done()
    if not math.isclose(certification.coverage, acted / examples, rel_tol=1e-9, abs_tol=1e-12):
        raise f._fail("coverage", f"must equal acted / examples = {acted / examples}")
    if certification.path is not None:
        _check_path(certification, f)
    return certification


def _path(f: _Fields, examples: int, file: str, prefix: str) -> tuple[ThresholdTest, ...] | None:
    """The tested thresholds, highest first; a lower threshold acts on a superset."""
    if "path" not in f.obj:
        return None
    raw = f.take("path", list)
    if not raw:
        raise f._fail("path", "needs at least one tested threshold")
    path: list[ThresholdTest] = []
    for i, item in enumerate(raw):
        where = f"{prefix}path[{i}]."
        if not isinstance(item, dict):
            raise ArtifactError("must be an object", file=file, field=where[:-1])
        t = _Fields(item, file, where)
        threshold, acted = t.float("threshold", 0.0, 1.0), t.int("acted", 0, examples)
        step = ThresholdTest(threshold, acted, t.int("errors", 0, acted), t.float("risk_upper_bound", 0.0, 1.0))
        t.done()
        if path and threshold >= path[-1].threshold:
            raise t._fail("threshold", f"{threshold} must be below the previous {path[-1].threshold}: "
                                       "thresholds are tested downwards")
        if path and (step.acted < path[-1].acted or step.errors < path[-1].errors):
            raise t._fail("acted" if step.acted < path[-1].acted else "errors",
                          "a lower threshold acts on a superset: acted and errors cannot fall")
        path.append(step)
    return tuple(path)


def _passes(step: ThresholdTest, target_risk: float) -> bool:
    return step.acted > 0 and step.risk_upper_bound <= target_risk


def _check_path(cert: Certification, f: _Fields) -> None:
    """The path ends at the first failure (or the grid's last threshold, 0), and its last
    passing threshold is the certified one."""
    path = cert.path
    passes = [_passes(step, cert.target_risk) for step in path]
    for i, ok in enumerate(passes[:-1]):
        if not ok:
            raise f._fail(f"path[{i}]", "failed, so the sequence must stop here")
    if passes[-1] and path[-1].threshold != 0.0:
        raise f._fail(f"path[{len(path) - 1}]", "passed, so the sequence must go on (it ends at a failure "
                                                 "or at threshold 0)")
    if cert.certified != passes[0]:
        raise f._fail("certified", f"{cert.certified}, but the path's first test {'passed' if passes[0] else 'failed'}")
    if cert.certified:
        chosen = path[-1] if passes[-1] else path[-2]
        for key in ("acted", "errors", "risk_upper_bound"):
            if getattr(chosen, key) != getattr(cert, key):
                raise f._fail(key, f"{getattr(cert, key)}, but the path's last pass has {getattr(chosen, key)}")


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
        chosen = [step for step in cert.path or () if _passes(step, cert.target_risk)]
        if chosen and chosen[-1].threshold != task.act_threshold:
            raise fail("act_threshold", f"{task.act_threshold}, but the path's last pass is {chosen[-1].threshold}")
        return task
    if cert.acted or task.act_threshold != 1.0:
        raise fail("act_threshold", "an uncertified task must have act_threshold 1.0 and acted 0")
    return replace(task, act_threshold=math.inf)
