"""train.command: the `laya train` command itself (docs/training.md; its module run as
``python -m laya.training.train_cli``, as a user's process would), end to end on a small synthetic
task, and its refusal of an output that exists.

Oracle: the dataset's tasks (read from the JSONL written here), the documented default
store path (OUT.features.safetensors, the command's help), the artifact loaded back with
laya.load_artifact, the summary rebuilt from head.json and the manifest (docs/training.md),
and the parent directory's listing for "nothing written".
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

import laya
from laya.training.train_cli import train as train_command
from laya_qual.synth import synthetic_task, write_task

SIZES = {"train": 40, "dev_cal": 30, "dev_conf": 40}
TIMEOUT_S = 300  # a hang guard, loose enough for a loaded machine
WARNING = "  WARNING      "  # a fit's warning line starts so; its words are train.temperature.separable's


@pytest.fixture(scope="module")
def setup(artifact_factory, tmp_path_factory):
    base_dir = artifact_factory(seed=21, head_kind="float32", base_seed=21)  # test_train.py's base: written once
    base = laya.load_artifact_base(base_dir)
    # a clean task certifies at --target-risk 0.4; one with most labels drawn at random cannot
    records = (synthetic_task(base, seed=3, sizes=SIZES)
               + synthetic_task(base, seed=4, task="route", sizes=SIZES, label_noise=0.9))
    return base_dir, write_task(tmp_path_factory.mktemp("train-command") / "data.jsonl", records)


@pytest.mark.laya_claim("train.command")
def test_train_writes_a_loadable_head_for_the_datasets_tasks(setup, tmp_path):
    base_dir, data = setup
    out = tmp_path / "head"
    run = subprocess.run([sys.executable, "-m", "laya.training.train_cli", "--base", str(base_dir), "--data", str(data),
                          "--out", str(out), "--epochs", "20", "--target-risk", "0.4"],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in data.read_text().splitlines()]
    head = laya.load_artifact(out)
    assert sorted(head.tasks) == sorted({r["task"] for r in lines})
    assert (tmp_path / "head.features.safetensors").is_file()  # the documented default store path
    assert sorted(os.listdir(tmp_path)) == ["head", "head.features.safetensors"]
    assert [head.tasks[name].act_threshold < 1 for name in ("answer", "route")] == [True, False]  # both branches
    summary = [WARNING if line.startswith(WARNING) else line for line in run.stdout.splitlines()]
    assert summary == expected_summary(out, train_examples=sum(r["split"] == "train" for r in lines)), run.stdout
    # the progress of both long steps goes to stderr: off a terminal, each bar shows its label once
    assert [line for line in run.stderr.splitlines() if line.strip()] == [
        "encoding frozen features", "training readout"], run.stderr


def expected_summary(out, *, train_examples: int) -> list[str]:
    """docs/training.md's summary of a fresh run (the store built), every value as head.json and
    the manifest record it."""
    files = {entry["role"]: entry for entry in json.loads((out / "manifest.json").read_text())["files"]}
    head = json.loads((out / files["head_config"]["path"]).read_text())
    digest = hashlib.sha256(f"{files['head_config']['sha256']}\n{files['head_weights']['sha256']}\n".encode())
    lines = [f"feature store  built {out}.features.safetensors",
             f"head           {head['kind']}, {len(head['tasks'])} task(s), trained on {train_examples} train "
             f"examples, digest {digest.hexdigest()}"]
    for task in head["tasks"]:
        cal, cert = task["calibration"], task["certification"]
        lines += [f"task {task['name']}",
                  f"  temperature  {task['temperature']:.4f}  (dev_cal, {cal['examples']} examples: "
                  f"{cal['outcome'].replace('_', ' ')}; bounds [{cal['temperature_min']:g}, "
                  f"{cal['temperature_max']:g}], fitted from {cal['min_examples']} examples)"]
        if cal["outcome"] not in ("fitted", "not_better"):
            lines.append(WARNING)
        lines += [f"  NLL          {cal['nll_before']:.4f} -> {cal['nll_after']:.4f}",
                  f"  ECE          {cal['ece_before']:.4f} -> {cal['ece_after']:.4f}"]
        confidence = f"{1 - cert['delta']:g}"
        lines += [f"  threshold    act when top probability >= {task['act_threshold']:g}  (certified on dev_conf, "
                  f"{cert['examples']} examples)",
                  f"  coverage     {cert['coverage']:.1%} ({cert['acted']} acted, {cert['errors']} errors)",
                  f"  bound        error rate among acted <= {cert['risk_upper_bound']:.4f} with confidence "
                  f"{confidence} (target {cert['target_risk']:g}; Clopper-Pearson, fixed sequence)"
                  ] if cert["certified"] else [
                  f"  threshold    NONE certified for target {cert['target_risk']:g} at confidence {confidence} "
                  f"on dev_conf ({cert['examples']} examples): this task escalates everything"]
    return lines + [f"artifact       {out} (attaches to the base; guarantees hold for this head alone)"]


@pytest.mark.laya_claim("train.command")
def test_train_refuses_an_existing_output_naming_it_and_writes_nothing(setup, tmp_path):
    base_dir, data = setup
    out = tmp_path / "head"
    out.mkdir()
    (out / "mine.txt").write_bytes(b"someone else's")
    threads = torch.get_num_threads()  # the command pins one thread for the process it runs in
    try:
        run = CliRunner().invoke(train_command, ["--base", str(base_dir), "--data", str(data), "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert run.exit_code == 1 and str(out) in run.stderr, run.output
    assert sorted(os.listdir(tmp_path)) == ["head"] and os.listdir(out) == ["mine.txt"]
