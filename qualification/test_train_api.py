"""train.api: the training library's own argument ranges (certify's target_risk and delta in
(0, 1), at least one example to fit a temperature, export kinds float32 and int8), and a
task exported without calibration or certification, which docs/artifact-v1.md makes
optional.

Oracle: each rule as stated, on explicit examples next to an accepted neighbour; the task
entry compared with the literal head.json object the doc describes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import laya
from laya.training.calibration import fit_temperature
from laya.training.export import head_tensors, task_entry
from laya.training.head_training import TrainConfig, initial_head
from laya.training.thresholds import certify
from laya_qual.synth import pinned_path, replace_pinned_file


@pytest.fixture(scope="module")
def pristine(artifact_factory) -> Path:
    return artifact_factory(seed=6, head_kind="int8")


@pytest.mark.laya_claim("train.api")
@pytest.mark.parametrize("target_risk, delta", [(0.0, 0.05), (1.0, 0.05), (0.1, 0.0), (0.1, 1.0), (-0.1, 0.05),
                                                (0.1, 1.5)])
def test_certify_takes_risk_and_delta_in_the_open_unit_interval(target_risk, delta):
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        certify([0.9, 0.8], [True, False], target_risk=target_risk, delta=delta, start=0)
    assert certify([0.9, 0.8], [True, False], target_risk=0.5, delta=0.5, start=0) is not None


@pytest.mark.laya_claim("train.api")
def test_temperature_fitting_needs_an_example_and_export_a_known_kind():
    with pytest.raises(ValueError, match="at least one example"):
        fit_temperature([], [])
    head = initial_head(["t"], 4, 0)
    for kind in ("float16", "transformer", ""):
        with pytest.raises(ValueError, match="export kind"):
            head_tensors(head, kind)
    assert sorted(head_tensors(head, "int8")) != sorted(head_tensors(head, "float32"))


@pytest.mark.laya_claim("train.api")
def test_a_task_entry_without_records_writes_neither_and_loads(pristine, tmp_path):
    """docs/artifact-v1.md: calibration and certification are optional per task."""
    entry = task_entry("plain", 2, 1.5, 0.7, None, None)
    assert entry == {"name": "plain", "max_options": 2, "temperature": 1.5, "act_threshold": 0.7,
                     "escalate_threshold": 1.0}
    directory = Path(shutil.copytree(pristine, tmp_path / "head"))
    head = json.loads((directory / pinned_path(directory, "head_config")).read_bytes())
    head["tasks"][0] = {**entry, "name": head["tasks"][0]["name"]}
    replace_pinned_file(directory, "head_config", json.dumps(head).encode())
    task = laya.load_artifact(directory).tasks[head["tasks"][0]["name"]]
    assert (task.calibration, task.certification, task.act_threshold) == (None, None, 0.7)


@pytest.mark.laya_claim("train.api")
@pytest.mark.parametrize("field, value, says", [
    ("epochs", 0, "at least 1"), ("batch_size", 0, "at least 1"), ("batch_size", -2, "at least 1"),
    ("learning_rate", 0.0, "a positive finite number"), ("learning_rate", -0.1, "a positive finite number"),
    ("learning_rate", float("nan"), "a positive finite number"),
    ("learning_rate", float("inf"), "a positive finite number")])
def test_a_train_config_outside_its_range_is_refused_naming_the_field(field, value, says):
    """No epoch or no batch would train nothing (a batch of 0 failed inside torch); a rate that is
    not a positive finite number would train nothing or only NaN."""
    with pytest.raises(ValueError, match=f"TrainConfig.{field} must be {says}, not {value}"):
        TrainConfig(**{field: value})
    TrainConfig(**{field: 1})  # 1 is in range for each


@pytest.mark.laya_claim("train.api")
def test_an_infinite_learning_rate_is_a_usage_error_of_laya_train(tmp_path):
    from click.testing import CliRunner

    from laya.training.train_cli import train

    (tmp_path / "base").mkdir()
    (tmp_path / "data.jsonl").write_text("")
    done = CliRunner().invoke(train, ["--base", str(tmp_path / "base"), "--data", str(tmp_path / "data.jsonl"),
                                      "--out", str(tmp_path / "out"), "--learning-rate", "inf"])
    assert done.exit_code == 2 and "Invalid value for '--learning-rate'" in done.output, done.output
    assert "TrainConfig.learning_rate must be a positive finite number, not inf" in done.output
    assert not (tmp_path / "out").exists()
