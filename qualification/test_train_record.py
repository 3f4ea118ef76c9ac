"""What `laya train` records for a reader to see: dev_cal's reliability diagrams before and
after the temperature (train.record.reliability), every threshold the certification tested
(train.record.path), and the strict parsing of both (train.record.parse).

The references are calibration_oracle's: bins in plain Python over float64 probabilities
recomputed from the head's bytes, and the fixed-sequence path with scipy. The parsing rules
are checked through the wire form: head.json edited as text, the manifest re-pinned.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import laya
from laya.errors import ArtifactError
from laya.training.thresholds import certify
from laya_qual.suite.calibration_oracle import (ECE_BINS, REFERENCE_GRID, cp_upper, pinned_bytes, readout_row,
                                               reference_ece, reference_path, reference_reliability)
from laya_qual.suite.test_train import DELTA, TARGET_RISK, trained  # noqa: F401 (the session's trained heads)
from laya_qual.suite.test_train_certify import reference_start
from laya_qual.synth import replace_pinned_file, selective_outcomes

EDGE = 1e-6  # float64 and the served float32 probabilities agree far closer than this


def head_tasks(directory: Path) -> list[dict]:
    return json.loads(pinned_bytes(directory, "head_config"))["tasks"]


def dev_split(trained, split: str, task: str) -> list[int]:
    return [i for i in trained.splits[split] if trained.examples[i].request.task == task]


def float64_judged(trained, directory: Path, index: int, indices: list[int],
                   temperature: float) -> tuple[list[float], list[bool]]:
    """Top probability and top-1 correctness of softmax(scores / T), scores in float64 from the
    head's bytes; refuses an example too close to a bin edge or a top-two tie to decide."""
    weight, bias = readout_row(directory, index)
    confidences, correct = [], []
    for i in indices:
        p = sorted(((float(v), k) for k, v in enumerate(
            ((trained.store.markers[i].double() @ weight + bias) / temperature).softmax(0))), reverse=True)
        assert p[0][0] - p[1][0] > EDGE, f"{trained.examples[i].id}: a top-two tie; pick another dataset seed"
        assert abs(p[0][0] * ECE_BINS - round(p[0][0] * ECE_BINS)) > EDGE * ECE_BINS, \
            f"{trained.examples[i].id}: on a bin edge; pick another dataset seed"
        confidences.append(p[0][0])
        correct.append(p[0][1] == trained.examples[i].label)
    return confidences, correct


# --- reliability ----------------------------------------------------------------------


@pytest.mark.laya_claim("train.record.reliability")
@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_recorded_reliability_is_dev_cal_before_and_after(trained, kind):
    """Both tasks' diagrams at T = 1 and at the served T, bin by bin, against the reference;
    the two differ where the temperature moved (so neither can stand in for the other)."""
    directory = Path(trained.runs[kind].head.source)
    moved = 0
    for index, entry in enumerate(head_tasks(directory)):
        calibration, cal = entry["calibration"], dev_split(trained, "dev_cal", entry["name"])
        for when, temperature in (("before", 1.0), ("after", entry["temperature"])):
            expected = reference_reliability(*float64_judged(trained, directory, index, cal, temperature))
            recorded = calibration[f"reliability_{when}"]
            assert [(b["lower"], b["upper"], b["count"], b["accuracy"]) for b in recorded] == [
                (b["lower"], b["upper"], b["count"], b["accuracy"]) for b in expected], (entry["name"], when)
            for got, want in zip(recorded, expected):
                assert (got["confidence"] is None) == (want["confidence"] is None), (got, want)
                assert got["confidence"] is None or abs(got["confidence"] - want["confidence"]) < EDGE, (got, want)
            assert math.isclose(reference_ece(recorded), calibration[f"ece_{when}"], rel_tol=0, abs_tol=1e-12)
            assert sum(b["count"] for b in recorded) == calibration["examples"] == len(cal)
        moved += calibration["reliability_before"] != calibration["reliability_after"]
    assert moved, "no task's temperature changed its diagram: the comparison cannot tell before from after"


# --- certification path ---------------------------------------------------------------


def assert_path_equals(recorded: list[dict], expected: list, where) -> None:
    assert [(s["threshold"], s["acted"], s["errors"]) for s in recorded] == [
        (s.threshold, s.acted, s.errors) for s in expected], where
    for got, want in zip(recorded, expected):
        assert -1e-12 <= got["risk_upper_bound"] - want.risk_upper_bound <= 1e-10, (where, got, want)


@pytest.mark.laya_claim("train.record.path")
@given(outcomes=selective_outcomes(REFERENCE_GRID), target=st.sampled_from([0.05, 0.1, 0.2, 0.3]),
       delta=st.sampled_from([0.01, 0.05, 0.1, 0.2]), start=st.integers(0, len(REFERENCE_GRID) - 1))
@example(outcomes=([0.9] * 100, [True] * 100), target=0.1, delta=0.1, start=0)  # the first test fails
@example(outcomes=([0.9] * 60 + [0.5] * 40, [True] * 60 + [False] * 40), target=0.1, delta=0.1, start=20)
@example(outcomes=([0.95] * 200, [True] * 200), target=0.1, delta=0.05, start=150)  # every test passes: ends at 0
def test_path_is_every_tested_threshold(outcomes, target, delta, start):
    """On random (confidence, correct) sets from a random start: the path is the reference's,
    threshold by threshold, ending at the first failure or at the grid's end."""
    confidences, correct = outcomes
    expected, tie = reference_path(confidences, correct, target, delta, start)
    assume(not tie)
    cert = certify(confidences, correct, target_risk=target, delta=delta, start=start)
    assert_path_equals([vars(s) for s in cert.path], expected, (target, delta, start))
    assert expected[-1].threshold == REFERENCE_GRID[-1] or not expected[-1].passed
    passed = [s for s in expected if s.passed]
    assert cert.threshold == (passed[-1].threshold if passed else None)


@pytest.mark.laya_claim("train.record.path")
@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_recorded_path_is_the_trained_heads(trained, kind):
    """Each task's recorded path equals the reference procedure on the served dev_conf
    probabilities, started where the reference chooses on dev_cal; its last pass is the act
    threshold and the certificate's counts and bound."""
    directory = Path(trained.runs[kind].head.source)
    model = laya.load_artifact(directory)
    lengths = []
    for entry in head_tasks(directory):
        name, cert = entry["name"], entry["certification"]

        def judged(indices):
            served = [model.predict(trained.examples[i].request).probabilities for i in indices]
            return ([max(p) for p in served],
                    [p.index(max(p)) == trained.examples[i].label for p, i in zip(served, indices)])

        cal, conf = dev_split(trained, "dev_cal", name), dev_split(trained, "dev_conf", name)
        start = reference_start(*judged(cal), len(conf), TARGET_RISK, DELTA)
        expected, tie = reference_path(*judged(conf), TARGET_RISK, DELTA, start)
        assert not tie, "a p-value sits on delta: pick another dataset seed"
        assert_path_equals(cert["path"], expected, name)
        lengths.append(len(expected))
        passed = [s for s in expected if s.passed]
        if not passed:
            assert (cert["certified"], entry["act_threshold"], len(cert["path"])) == (False, 1.0, 1), entry
            continue
        last = passed[-1]
        assert (entry["act_threshold"], cert["acted"], cert["errors"]) == (last.threshold, last.acted, last.errors)
        assert math.isclose(cert["risk_upper_bound"], cp_upper(last.errors, last.acted, DELTA), abs_tol=1e-10)
    assert max(lengths) > 2, f"paths of {lengths} thresholds are too short to tell an order"


# --- strict parsing, through the wire form ----------------------------------------------


def first_nonempty(bins: list[dict]) -> int:
    return next(i for i, b in enumerate(bins) if b["count"])


def first_empty(bins: list[dict]) -> int:
    return next(i for i, b in enumerate(bins) if not b["count"])


def _shift_accuracy(c: dict) -> str:
    b = c["reliability_before"][first_nonempty(c["reliability_before"])]
    b["accuracy"] = 1.0 - b["accuracy"] if b["accuracy"] != 0.5 else 0.0
    return "calibration.ece_before"


def _swap_bins(c: dict) -> str:
    bins, i = c["reliability_after"], first_nonempty(c["reliability_after"])
    bins[i], bins[i + 1] = bins[i + 1], bins[i]
    return f"calibration.reliability_after[{i}].lower"


def _one_count_more(c: dict) -> str:
    c["reliability_before"][first_nonempty(c["reliability_before"])]["count"] += 1
    return "calibration.reliability_before"


def _gap(c: dict) -> str:
    c["reliability_before"][3]["lower"] += 0.01
    return "calibration.reliability_before[3].lower"


def _short_of_one(c: dict) -> str:
    last = c["reliability_after"][-1]
    last["upper"] = (last["lower"] + 1.0) / 2
    return "calibration.reliability_after"


def _zero_for_empty(c: dict) -> str:
    i = first_empty(c["reliability_before"])
    c["reliability_before"][i]["confidence"] = 0.0
    return f"calibration.reliability_before[{i}].confidence"


def _null_for_filled(c: dict) -> str:
    i = first_nonempty(c["reliability_after"])
    c["reliability_after"][i]["accuracy"] = None
    return f"calibration.reliability_after[{i}].accuracy"


def _string_confidence(c: dict) -> str:
    i = first_nonempty(c["reliability_after"])
    c["reliability_after"][i]["confidence"] = str(c["reliability_after"][i]["confidence"])
    return f"calibration.reliability_after[{i}].confidence"


def _unknown_bin_field(c: dict) -> str:
    c["reliability_before"][0]["weight"] = 1
    return "calibration.reliability_before[0].weight"


def _only_before(c: dict) -> str:
    del c["reliability_after"]
    return "calibration.reliability_after"


def _no_bins(c: dict) -> str:
    c["reliability_before"] = []
    return "calibration.reliability_before"


def _bin_not_an_object(c: dict) -> str:
    b = c["reliability_before"][2]
    c["reliability_before"][2] = [b["lower"], b["upper"], b["count"], b["confidence"], b["accuracy"]]
    return "calibration.reliability_before[2]"


def _bin_without_width(c: dict) -> str:
    c["reliability_after"][5]["upper"] = c["reliability_after"][5]["lower"]  # upper must exceed lower
    return "calibration.reliability_after[5].upper"


CALIBRATION_EDITS = [_shift_accuracy, _swap_bins, _one_count_more, _gap, _short_of_one, _zero_for_empty,
                     _null_for_filled, _string_confidence, _unknown_bin_field, _only_before, _no_bins,
                     _bin_not_an_object, _bin_without_width]


def _ascending(t: dict) -> str:
    t["certification"]["path"].reverse()
    return "certification.path[1].threshold"


def _acted_falls(t: dict) -> str:
    path = t["certification"]["path"]
    path[1]["acted"] = path[0]["acted"] - 1
    return "certification.path[1].acted"


def _stops_at_a_pass(t: dict) -> str:
    path = t["certification"]["path"]
    del path[-1]  # the failure that ended it
    return f"certification.path[{len(path) - 1}]"


def _goes_on_after_a_failure(t: dict) -> str:
    path = t["certification"]["path"]
    path[0]["risk_upper_bound"] = 1.0
    return "certification.path[0]"


def _disagrees_with_the_certificate(t: dict) -> str:
    t["certification"]["path"][-2]["risk_upper_bound"] /= 2
    return "certification.risk_upper_bound"


def _threshold_off_the_path(t: dict) -> str:
    t["act_threshold"] = t["certification"]["path"][0]["threshold"]
    return "act_threshold"


def _threshold_above_one(t: dict) -> str:
    t["certification"]["path"][0]["threshold"] = 1.5
    return "certification.path[0].threshold"


def _unknown_step_field(t: dict) -> str:
    t["certification"]["path"][0]["p_value"] = 0.01
    return "certification.path[0].p_value"


def _empty_path(t: dict) -> str:
    t["certification"]["path"] = []
    return "certification.path"


def _path_not_a_list(t: dict) -> str:
    t["certification"]["path"] = {"threshold": 0.5}
    return "certification.path"


def _step_not_an_object(t: dict) -> str:
    step = t["certification"]["path"][1]
    t["certification"]["path"][1] = [step["threshold"], step["acted"], step["errors"], step["risk_upper_bound"]]
    return "certification.path[1]"


def _certified_flag_contradicts_the_first_step(t: dict) -> str:
    t["certification"]["certified"] = False  # its first step passes: certified is true exactly then
    return "certification.certified"


TASK_EDITS = [_ascending, _acted_falls, _stops_at_a_pass, _goes_on_after_a_failure, _disagrees_with_the_certificate,
              _threshold_off_the_path, _threshold_above_one, _unknown_step_field, _empty_path, _path_not_a_list,
              _step_not_an_object, _certified_flag_contradicts_the_first_step]


def edited_copy(trained, tmp_path: Path, change) -> tuple[Path, str]:
    """The float32 head with its first task edited in head.json and the manifest re-pinned."""
    directory = tmp_path / "edited"
    shutil.copytree(Path(trained.runs["float32"].head.source), directory)
    config = json.loads(pinned_bytes(directory, "head_config"))
    field = change(config["tasks"][0])
    replace_pinned_file(directory, "head_config", json.dumps(config, indent=2).encode())
    return directory, field


@pytest.mark.laya_claim("train.record.parse")
@pytest.mark.parametrize("change", CALIBRATION_EDITS + TASK_EDITS, ids=lambda f: f.__name__.strip("_"))
def test_recorded_pictures_are_parsed_strictly(trained, tmp_path, change):
    """Each edit breaks one rule of docs/artifact-v1.md and is refused naming head.json and
    the field; the unedited copy loads (so the refusal is the edit's)."""
    task = head_tasks(Path(trained.runs["float32"].head.source))[0]
    assert len(task["certification"]["path"]) > 2 and task["certification"]["certified"], task["certification"]
    edit = (lambda t: change(t["calibration"])) if change in CALIBRATION_EDITS else change
    directory, field = edited_copy(trained, tmp_path, edit)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.field, Path(refused.value.file).name) == (f"tasks[0].{field}", "head.json"), \
        str(refused.value)
    assert len(str(refused.value).splitlines()) == 1


@pytest.mark.laya_claim("train.record.parse")
@pytest.mark.parametrize("field, value", [("ece_before", -0.25), ("ece_after", 1.5), ("nll_before", -1.0),
                                          ("nll_after", -0.5)])
def test_a_calibration_figure_outside_its_documented_range_is_refused_by_its_range(trained, tmp_path, field, value):
    """docs/artifact-v1.md: nll_before, nll_after >= 0; ece_before, ece_after in [0, 1]. A
    value outside is refused for its range, naming the field (not only because it no
    longer matches the reliability bins it is computed from)."""
    def change(task: dict) -> str:
        task["calibration"][field] = value
        return f"calibration.{field}"

    directory, named = edited_copy(trained, tmp_path, change)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert (refused.value.field, Path(refused.value.file).name) == (f"tasks[0].{named}", "head.json")
    assert f"{value} is outside" in str(refused.value), str(refused.value)


@pytest.mark.laya_claim("train.record.parse")
def test_a_head_without_the_pictures_loads(trained, tmp_path):
    """A head.json written before the pictures were recorded loads, with them None; the
    same copy with them loads them as recorded."""
    keys = ("reliability_before", "reliability_after")

    def drop(task: dict) -> str:
        for key in keys:
            del task["calibration"][key]
        del task["certification"]["path"]
        return ""

    directory, _ = edited_copy(trained, tmp_path, drop)
    loaded = laya.load_artifact(directory).tasks[head_tasks(directory)[0]["name"]]
    assert (loaded.calibration.reliability_before, loaded.calibration.reliability_after,
            loaded.certification.path) == (None, None, None)
    original = laya.load_artifact(Path(trained.runs["float32"].head.source)).tasks[loaded.name]
    assert len(original.calibration.reliability_before) == ECE_BINS and original.certification.path
