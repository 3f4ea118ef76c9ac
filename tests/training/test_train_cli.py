"""`laya train` end to end on a small synthetic task, the dataset format's refusals,
and the strict parsing of head.json's calibration/certification objects."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from click.testing import CliRunner

import laya
from laya.artifact.manifest import read_artifact_files
from laya.artifact.binding import canonical_json
from laya.errors import ArtifactError
from laya.training.train_cli import train
from laya_qual.synth import replace_pinned_file, write_artifact
from laya_qual.synth.tasks import synthetic_task, write_task

SIZES = {"train": 80, "dev_cal": 60, "dev_conf": 120}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    base_dir = write_artifact(root / "base", seed=2, head_kind="float32", base_seed=31)
    data = write_task(root / "data.jsonl", synthetic_task(laya.load_artifact_base(base_dir), seed=4, sizes=SIZES))
    args = ["--base", str(base_dir), "--data", str(data), "--epochs", "30", "--target-risk", "0.25"]
    first = CliRunner().invoke(train, [*args, "--out", str(root / "head")], catch_exceptions=False)
    second = CliRunner().invoke(train, [*args, "--out", str(root / "head8"), "--kind", "int8",
                                        "--store", str(root / "head.features.safetensors")], catch_exceptions=False)
    return root, base_dir, data, first, second


def test_train_summary_and_export(cli_run):
    root, base_dir, _, first, second = cli_run
    assert first.exit_code == 0, first.output
    for line in ("feature store  built", "temperature", "NLL", "ECE", "threshold", "coverage", "bound"):
        assert line in first.output, first.output
    assert "feature store  reused" in second.output, second.output
    base = laya.load_artifact_base(base_dir)
    for name, kind in (("head", "float32"), ("head8", "int8")):
        head = laya.load_artifact_with_base(root / name, base)
        task = head.tasks["answer"]
        assert head.kind == kind and task.calibration.split == "dev_cal" and task.certification.split == "dev_conf"


def test_train_refuses_an_existing_output_and_another_bases_store(cli_run, tmp_path):
    root, base_dir, data, _, _ = cli_run
    again = CliRunner().invoke(train, ["--base", str(base_dir), "--data", str(data), "--out", str(root / "head"),
                                       "--store", str(root / "head.features.safetensors")])
    assert again.exit_code != 0 and "non-empty" in again.output
    other_base = write_artifact(tmp_path / "other", seed=2, head_kind="float32", base_seed=32)
    refused = CliRunner().invoke(train, ["--base", str(other_base), "--data", str(data), "--out", str(tmp_path / "h"),
                                         "--store", str(root / "head.features.safetensors")])
    assert refused.exit_code != 0 and "feature store" in refused.output and "field encoder_weights" in refused.output


@pytest.mark.parametrize("change, field", [
    (lambda t: t["certification"].update(temperature=t["temperature"] * 2), "certification.temperature"),
    (lambda t: t["certification"].update(split="dev_cal"), "certification.split"),
    (lambda t: t["certification"].update(coverage=0.01), "certification.coverage"),
    (lambda t: t["certification"].update(risk_upper_bound=0.99), "certification.risk_upper_bound"),
    (lambda t: t["certification"].update(surprise=True), "certification.surprise"),
    (lambda t: t["calibration"].update(split_sha256="00"), "calibration.split_sha256"),
    (lambda t: t["calibration"].update(outcome="collapsed"), "calibration.outcome"),
    (lambda t: t["calibration"].update(temperature_min=0), "calibration.temperature_min"),
    (lambda t: t["calibration"].pop("min_examples"), "calibration.min_examples"),
    (lambda t: t["calibration"].update(method="temperature-nll-lbfgs"), "calibration.min_examples"),
    (lambda t: t.update(escalate_threshold=0.5), "escalate_threshold"),
])
def test_certification_metadata_is_parsed_strictly(cli_run, tmp_path, change, field):
    root = cli_run[0]
    directory = tmp_path / "edited"
    shutil.copytree(root / "head", directory)
    config = json.loads(read_artifact_files(directory)["head_config"].data)
    change(config["tasks"][0])
    replace_pinned_file(directory, "head_config", canonical_json(config))
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(directory)
    assert refused.value.field == f"tasks[0].{field}", str(refused.value)


def test_uncertified_task_loads_as_never_act(cli_run, tmp_path):
    root = cli_run[0]
    directory = tmp_path / "uncertified"
    shutil.copytree(root / "head", directory)
    config = json.loads(read_artifact_files(directory)["head_config"].data)
    task = config["tasks"][0]
    task["act_threshold"] = 1.0
    task["certification"].update(certified=False, acted=0, errors=0, coverage=0.0, risk_upper_bound=1.0)
    del task["certification"]["path"]  # the recorded path would contradict the edit
    replace_pinned_file(directory, "head_config", canonical_json(config))
    assert laya.load_artifact(directory).tasks["answer"].act_threshold == math.inf


def test_older_lbfgs_calibration_still_loads(cli_run, tmp_path):
    """A head.json written before the bounded fit (method temperature-nll-lbfgs, no bounds or
    outcome) still loads, with those fields None."""
    directory = tmp_path / "older"
    shutil.copytree(cli_run[0] / "head", directory)
    config = json.loads(read_artifact_files(directory)["head_config"].data)
    calibration = config["tasks"][0]["calibration"]
    for key in ("temperature_min", "temperature_max", "min_examples", "outcome"):
        del calibration[key]
    calibration["method"] = "temperature-nll-lbfgs"
    replace_pinned_file(directory, "head_config", canonical_json(config))
    loaded = laya.load_artifact(directory).tasks["answer"].calibration
    assert loaded.method == "temperature-nll-lbfgs" and loaded.outcome is None and loaded.temperature_min is None


def test_an_existing_output_is_refused_before_any_work(cli_run, tmp_path):
    """Refused up front, not after feature extraction and training: no store is written."""
    _, base_dir, data, _, _ = cli_run
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("someone else's")
    result = CliRunner().invoke(train, ["--base", str(base_dir), "--data", str(data), "--out", str(out)])
    assert result.exit_code != 0 and "non-empty" in result.output, result.output
    assert "feature store" not in result.output
    assert not (tmp_path / "taken.features.safetensors").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
