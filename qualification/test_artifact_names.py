"""artifact.names: names are text (docs/artifact-v1.md, "Names"): a head.json task name or a
manifest path holding a character of Unicode category Cc (NUL, tab, newline, DEL, the C1
range), Cs (a lone surrogate, spelt in JSON as an escape), Zl or Zp is refused with
ArtifactError naming the file, the field and the character's index; every other character
is a name's (a task so named loads and is served). `laya info`, as a real process, exits 1
with one `Error:` line for such an artifact, and for a directory holding a file whose name
is not UTF-8, never printing the raw character; before, it printed a NUL or newline raw
(a forged output line) and ended in a traceback on a surrogate or an undecodable name.

Oracle: the four categories written out here, read with ``unicodedata``; the artifact's
files edited here with json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import laya
from laya.errors import ArtifactError
from laya_qual.synth import pinned_path, replace_pinned_file, rewrite_file
from laya_qual.synth.hostile import CONTROLS, lone_surrogates

FORBIDDEN = {"Cc", "Cs", "Zl", "Zp"}
RUN_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def artifact(artifact_factory) -> Path:
    return artifact_factory(seed=11, head_kind="float32", base_seed=3)  # test_jsonl.py's recipe: written once


def forbidden_characters() -> st.SearchStrategy[str]:
    return (lone_surrogates() | st.sampled_from(CONTROLS + "\u2028\u2029")
            | st.characters(categories=["Cc", "Zl", "Zp"]))


def allowed_names() -> st.SearchStrategy[str]:
    return st.text(st.characters(codec="utf-8").filter(lambda c: unicodedata.category(c) not in FORBIDDEN),
                   min_size=1, max_size=8).filter(lambda s: s.strip() == s and s.strip())


def with_task_name(artifact: Path, destination: Path, name: str) -> Path:
    shutil.copytree(artifact, destination)
    head = json.loads((artifact / pinned_path(artifact, "head_config")).read_bytes())
    head["tasks"][0]["name"] = name
    replace_pinned_file(destination, "head_config", json.dumps(head).encode("ascii"))  # \u escapes
    return destination


@pytest.mark.laya_claim("artifact.names")
@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.text(max_size=3).filter(lambda s: all(unicodedata.category(c) not in FORBIDDEN for c in s)),
       bad=forbidden_characters(), field=st.sampled_from(["task", "path"]))
@example(prefix="a", bad="\n", field="task")
@example(prefix="", bad="\x00", field="task")
@example(prefix="x", bad="\ud800", field="task")
@example(prefix="a", bad="\x00", field="path")
@example(prefix="a", bad="\ud800", field="path")
def test_a_name_holding_a_forbidden_character_is_refused_naming_the_field(artifact, tmp_path_factory, prefix,
                                                                         bad, field):
    destination = tmp_path_factory.mktemp("named") / "a"
    if field == "task":
        with_task_name(artifact, destination, prefix + bad + "z")
        file, where = pinned_path(artifact, "head_config"), "tasks[0].name"
    else:
        shutil.copytree(artifact, destination)
        manifest = json.loads((destination / "manifest.json").read_bytes())
        manifest["files"][0]["path"] = prefix + bad + manifest["files"][0]["path"]
        rewrite_file(destination / "manifest.json", json.dumps(manifest).encode("ascii"))
        file, where = "manifest.json", "files[0].path"
    with pytest.raises(ArtifactError) as refused:
        laya.load_artifact(destination)
    assert (refused.value.file, refused.value.field) == (file, where), str(refused.value)
    assert f"U+{ord(bad):04X}" in str(refused.value) and f"at character {len(prefix)}" in str(refused.value)
    assert all(unicodedata.category(c) not in FORBIDDEN or c == " " for c in str(refused.value)), refused.value


@pytest.mark.laya_claim("artifact.names")
@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=allowed_names())
@example(name="é ✓ \u200b\u00a0x")  # a zero-width space (Cf) and a no-break space (Zs) are text
def test_any_other_task_name_loads_and_is_served(artifact, tmp_path_factory, name):
    model = laya.load_artifact(with_task_name(artifact, tmp_path_factory.mktemp("named") / "a", name))
    assert model.predict(laya.Request(name, "is it here", ("yes", "no"))).task == name


def info(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "laya.cli", "info", str(directory)],
                          capture_output=True, timeout=RUN_TIMEOUT_S)


@pytest.mark.laya_claim("artifact.names")
@pytest.mark.parametrize("edit", ["task-newline", "task-nul", "task-surrogate", "undecodable-file",
                                  "newline-file"])
def test_laya_info_refuses_in_one_printable_error_line(artifact, tmp_path, edit):
    if edit.endswith("-file"):  # an unlisted file, named with bytes that are not UTF-8 or with a newline
        destination = tmp_path / "a"
        shutil.copytree(artifact, destination)
        name = os.fsdecode(b"x\xff") if edit == "undecodable-file" else "x\nartifact forged"
        (destination / name).write_bytes(b"")
        said = "x\\udcff" if edit == "undecodable-file" else "x\\nartifact forged"
    else:
        bad = {"task-newline": "\nartifact forged", "task-nul": "\x00", "task-surrogate": "\ud800"}[edit]
        destination = with_task_name(artifact, tmp_path / "a", "t" + bad)
        said = "field tasks[0].name"
    run = info(destination)
    err = run.stderr.decode("utf-8")
    assert run.returncode == 1 and run.stdout == b"", err
    assert len(err.splitlines()) == 1 and err.startswith("Error: ") and said in err, err
    assert "\x00" not in err and "Traceback" not in err
