"""train.command: the `laya train` command itself (docs/training.md; its module run as
``python -m laya.train_cli``, as a user's process would), end to end on a small synthetic
task, and its refusal of an output that exists.

Oracle: the dataset's tasks (read from the JSONL written here), the documented default
store path (OUT.features.safetensors, the command's help), the artifact loaded back with
laya.load_artifact, and the parent directory's listing for "nothing written".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

import laya
from laya.train_cli import train as train_command
from laya_qual.synth import synthetic_task, write_task

SIZES = {"train": 40, "dev_cal": 30, "dev_conf": 40}
TIMEOUT_S = 300  # a hang guard, loose enough for a loaded machine


@pytest.fixture(scope="module")
def setup(artifact_factory, tmp_path_factory):
    base_dir = artifact_factory(seed=21, head_kind="float32", base_seed=21)  # test_train.py's base: written once
    base = laya.load_artifact_base(base_dir)
    records = synthetic_task(base, seed=3, sizes=SIZES) + synthetic_task(base, seed=4, task="route", sizes=SIZES)
    return base_dir, write_task(tmp_path_factory.mktemp("train-command") / "data.jsonl", records)


@pytest.mark.laya_claim("train.command")
def test_train_writes_a_loadable_head_for_the_datasets_tasks(setup, tmp_path):
    base_dir, data = setup
    out = tmp_path / "head"
    run = subprocess.run([sys.executable, "-m", "laya.train_cli", "--base", str(base_dir), "--data", str(data),
                          "--out", str(out), "--epochs", "3"], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, run.stderr
    tasks = {json.loads(line)["task"] for line in data.read_text().splitlines()}
    assert sorted(laya.load_artifact(out).tasks) == sorted(tasks)
    assert (tmp_path / "head.features.safetensors").is_file()  # the documented default store path
    assert sorted(os.listdir(tmp_path)) == ["head", "head.features.safetensors"]
    assert run.stdout.splitlines()[-1].startswith(f"artifact       {out} ")
    assert all(f"task {name}" in run.stdout.splitlines() for name in tasks)
    # the progress of both long steps goes to stderr: off a terminal, each bar shows its label once
    assert [line for line in run.stderr.splitlines() if line.strip()] == [
        "encoding frozen features", "training readout"], run.stderr


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
