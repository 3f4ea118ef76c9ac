"""artifact.info: `laya info` prints what the artifact's own files say, as text and with
--json (docs/decisions.md, "Machine-readable output"), and exits 1 naming the file of an
artifact it refuses.

Oracle: head.json and manifest.json read here with json, the head digest by
docs/artifact-v1.md's formula (sha256 of the two pins, newline-terminated) with hashlib.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laya.cli import main as laya_cli
from laya_qual.synth import pinned_path


@pytest.fixture(scope="module")
def artifact(artifact_factory) -> Path:
    return artifact_factory(seed=11, head_kind="float32", base_seed=3)  # test_jsonl.py's recipe: written once


def manifest_files(directory: Path) -> list[dict]:
    return json.loads((directory / "manifest.json").read_bytes())["files"]


def head_json(directory: Path) -> dict:
    return json.loads((directory / pinned_path(directory, "head_config")).read_bytes())


def expected_info(directory: Path) -> dict:
    head = head_json(directory)
    files = manifest_files(directory)
    pins = {e["role"]: e["sha256"] for e in files}
    digest = hashlib.sha256(f"{pins['head_config']}\n{pins['head_weights']}\n".encode()).hexdigest()
    return {"artifact": str(directory), "head": head["kind"], "digest": digest,
            "budgets": {"sequence": head["sequence_budget"], "options": head["option_budget"]},
            "tasks": [{"name": t["name"], "maxOptions": t["max_options"], "temperature": t["temperature"],
                       "actThreshold": t["act_threshold"], "escalateThreshold": t["escalate_threshold"]}
                      for t in head["tasks"]],
            "files": sorted(({"role": e["role"], "path": e["path"], "sha256": e["sha256"]} for e in files),
                            key=lambda e: e["role"])}


@pytest.mark.laya_claim("artifact.info")
def test_info_prints_the_artifacts_own_fields(artifact):
    expected = expected_info(artifact)
    as_json = CliRunner().invoke(laya_cli, ["info", str(artifact), "--json"])
    assert as_json.exit_code == 0, as_json.output
    got = json.loads(as_json.stdout)
    assert {**got, "files": sorted(got["files"], key=lambda e: e["role"])} == expected
    assert as_json.stdout == json.dumps(got, indent=2) + "\n"  # as --help says: two-space indents
    text = CliRunner().invoke(laya_cli, ["info", str(artifact)])
    assert text.exit_code == 0, text.output
    rows = text.stdout.splitlines()
    tasks = [f"  task {t['name']}: up to {t['maxOptions']} options, T={t['temperature']:g}, "
             f"act>={t['actThreshold']:g}, escalate if runner-up>={t['escalateThreshold']:g}"
             for t in expected["tasks"]]
    assert rows[:2 + len(tasks)] == [
        f"artifact {artifact}: head {expected['head']}, digest {expected['digest']}",
        f"  budgets: {expected['budgets']['sequence']} tokens, {expected['budgets']['options']} options", *tasks]
    assert sorted(rows[2 + len(tasks):]) == sorted(f"  {pin['role']:16s} {pin['sha256']}  {pin['path']}"
                                                   for pin in expected["files"])


@pytest.mark.laya_claim("artifact.info")
def test_info_on_a_refused_artifact_exits_1_naming_the_file(artifact, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for entry in manifest_files(artifact):
        target = broken / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((artifact / entry["path"]).read_bytes())
    (broken / "manifest.json").write_bytes((artifact / "manifest.json").read_bytes())
    tokenizer = broken / pinned_path(broken, "tokenizer")
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b"{", b"[", 1))  # same size, other sha256
    run = CliRunner().invoke(laya_cli, ["info", str(broken)])
    assert run.exit_code == 1 and pinned_path(broken, "tokenizer") in run.stderr, run.output
    assert run.stdout == ""


@pytest.mark.laya_claim("artifact.info")
def test_info_json_of_an_uncertified_task_is_json_and_says_what_head_json_says(artifact_factory, tmp_path):
    """An uncertified task is written with act_threshold 1.0 and served with +inf
    (docs/artifact-v1.md): --json prints head.json's 1.0, and strict JSON (no Infinity)."""
    from laya_qual.suite.test_train_certification_rules import UNCERTIFIED, with_first_task

    directory = with_first_task(artifact_factory(seed=5, head_kind="float32"), tmp_path / "uncertified", UNCERTIFIED)
    as_json = CliRunner().invoke(laya_cli, ["info", str(directory), "--json"])
    assert as_json.exit_code == 0, as_json.output

    def no_constant(name):
        raise AssertionError(f"{name} is not JSON")

    got = json.loads(as_json.stdout, parse_constant=no_constant)
    assert {**got, "files": sorted(got["files"], key=lambda e: e["role"])} == expected_info(directory)
