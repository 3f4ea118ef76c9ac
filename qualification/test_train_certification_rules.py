"""train.certification.rules: the rules docs/artifact-v1.md ("Trained heads: calibration and
certification") sets on a task's certification, checked through the wire form: head.json's
first task replaced, as JSON text, by a consistent certified or uncertified task and by
each single edit that breaks one rule, the manifest re-pinned (laya_qual.synth).

Oracle: the doc's rules, stated here as the field each broken copy must be refused for; the
consistent copies load, and the uncertified task escalates every request (its top
probability, even 1.0, never acts).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import laya
from laya.errors import ArtifactError
from laya_qual.synth import pinned_path, replace_pinned_file

CERTIFIED = {"name": "answer", "max_options": 4, "temperature": 1.0, "act_threshold": 0.5,
             "escalate_threshold": 1.0,
             "certification": {"split": "dev_conf", "split_sha256": "0123456789abcdef" * 4, "examples": 100,
                               "method": "clopper-pearson-fixed-sequence", "target_risk": 0.1, "delta": 0.05,
                               "certified": True, "acted": 50, "errors": 1, "coverage": 0.5,
                               "risk_upper_bound": 0.08, "temperature": 1.0}}
UNCERTIFIED = {**CERTIFIED, "act_threshold": 1.0,
               "certification": {**CERTIFIED["certification"], "certified": False, "acted": 0, "errors": 0,
                                 "coverage": 0.0, "risk_upper_bound": 1.0}}


def certification(task: dict, **changes) -> dict:
    return {**task, "certification": {**task["certification"], **changes}}


BROKEN = [  # (first task, the field docs/artifact-v1.md's broken rule names)
    pytest.param(certification(CERTIFIED, temperature=2.0), "certification.temperature", id="other-temperature"),
    pytest.param({**CERTIFIED, "escalate_threshold": 0.9}, "escalate_threshold", id="escalate-below-one"),
    pytest.param(certification(CERTIFIED, acted=0, errors=0, coverage=0.0), "certification.risk_upper_bound",
                 id="certified-acting-on-nothing"),
    pytest.param(certification(CERTIFIED, risk_upper_bound=0.10000000000000002), "certification.risk_upper_bound",
                 id="certified-bound-above-target"),
    pytest.param(certification(UNCERTIFIED, acted=5, coverage=0.05), "act_threshold", id="uncertified-acting"),
    pytest.param({**UNCERTIFIED, "act_threshold": 0.5}, "act_threshold", id="uncertified-threshold-below-one"),
    pytest.param(certification(CERTIFIED, coverage=0.49), "certification.coverage", id="coverage-not-acted-share"),
    pytest.param(certification(CERTIFIED, split_sha256="0" * 63), "certification.split_sha256", id="sha256-63"),
    pytest.param(certification(CERTIFIED, split_sha256="0" * 65), "certification.split_sha256", id="sha256-65"),
    pytest.param(certification(CERTIFIED, split_sha256="A" * 64), "certification.split_sha256", id="sha256-upper"),
    pytest.param(certification(CERTIFIED, split_sha256="g" * 64), "certification.split_sha256", id="sha256-not-hex"),
    pytest.param("answer", "", id="task-not-an-object"),
    pytest.param(["answer"], "", id="task-a-list"),
]


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=5, head_kind="float32")


def with_first_task(pristine: Path, directory: Path, task) -> Path:
    shutil.copytree(pristine, directory)
    head = json.loads((directory / pinned_path(directory, "head_config")).read_bytes())
    head["tasks"][0] = task
    replace_pinned_file(directory, "head_config", json.dumps(head).encode())
    return directory


@pytest.mark.laya_claim("train.certification.rules")
@pytest.mark.parametrize("task, field", BROKEN)
def test_a_broken_certification_rule_is_refused_naming_the_field(pristine, tmp_path, task, field):
    directory = with_first_task(pristine, tmp_path / "broken", task)
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    expected = "tasks[0]" + (f".{field}" if field else "")
    assert (refused.value.file, refused.value.field) == (pinned_path(directory, "head_config"), expected), \
        str(refused.value)


@pytest.mark.laya_claim("train.certification.rules")
def test_consistent_certifications_load_and_the_uncertified_task_never_acts(pristine, tmp_path):
    for name, task in (("certified", CERTIFIED), ("at-target", certification(CERTIFIED, risk_upper_bound=0.1))):
        certified = laya.load_artifact(with_first_task(pristine, tmp_path / name, task))  # bound <= target_risk
        assert certified.tasks["answer"].act_threshold == 0.5
    directory = with_first_task(pristine, tmp_path / "uncertified", UNCERTIFIED)
    uncertified = laya.load_artifact(directory)
    for options in (["a", "b"], ["yes", "no", "maybe", "never"]):
        prediction = uncertified.predict(laya.Request("answer", "is it", options))
        assert prediction.decision == "escalate", prediction
